"""Drift sets of a user workload (``jaxbench drift --workload NAME``): its own step, saved once.

A user workload (:mod:`jaxbench.workloads.user`) has one set per case: the ``standard`` set of
its factory's arguments (:func:`~jaxbench.workloads.step.materialize`d with the step's seed),
saved as ``arg.<path>`` arrays, and its outputs, ``fn(*args)``, as ``out.<path>`` arrays (the
key paths of :mod:`jaxbench.workloads.trees`). A check rebuilds the step from the factory with the
saved parameters, puts the saved arrays in its argument structure and calls ``fn`` again, so
what is compared is the user's own jitted program on exactly the saved inputs.

The set's dtype is the lowest floating precision of the outputs
(:func:`~jaxbench.workloads.step.tolerance_dtype`, the gate's rule) and its tolerance is derived
from :attr:`Step.reduction_length <jaxbench.workloads.step.Step.reduction_length>` (64 where the
factory gives none: :func:`jaxbench.drift.tolerance.tolerance`). There is no ``invalid_shape``
set: which error a wrong input must raise is the user's to say, in their own tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from jaxbench.drift.sets import RegressionSet
from jaxbench.drift.tolerance import BASE_REDUCTION
from jaxbench.workloads.step import Step, materialize, tolerance_dtype
from jaxbench.workloads.trees import flatten_tree, unflatten_like
from jaxbench.workloads.user import UserWorkload

#: The one set of a user workload's case.
USER_SET = "standard"


def reference_folder(name: str) -> Path:
    """The default reference folder of a user workload: ``results/drift/<name, made safe>``."""
    return Path("results/drift") / re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")


def set_name(params: Mapping[str, Any]) -> str:
    """``standard``, then the case's parameters: ``standard n=64 dtype=float32``."""
    return " ".join([USER_SET, *(f"{k}={v}" for k, v in sorted(params.items()))])


def user_sets(workload: UserWorkload, cases: list[Mapping[str, Any]]) -> list[RegressionSet]:
    """One ``standard`` set per case of a user workload.

    Args:
        workload: The user workload (:func:`jaxbench.workloads.user.find`).
        cases: Factory parameters of each case (``--param`` values, else its defaults).

    Returns:
        Sets whose inputs are the materialized arguments (``arg.<path>``, host numpy arrays)
        and whose dtype is the outputs' tolerance dtype.

    Raises:
        ValueError: The factory refuses the parameters (its message).
    """
    import jax

    sets = []
    for params in cases:
        step = workload.build(params)
        args = materialize(step.args, step.seed)
        dtype = tolerance_dtype(jax.eval_shape(step.fn, *args))
        inputs = flatten_tree(args, "arg")
        sets.append(RegressionSet(workload.name, dtype, set_name(params), inputs, None,
                                  dict(params)))  # fmt: skip
    return sets


def reduction_length(step: Step) -> int:
    """The step's reduction length, or :data:`~jaxbench.drift.tolerance.BASE_REDUCTION`."""
    return step.reduction_length or BASE_REDUCTION


def user_compute(
    workload: UserWorkload, params: Mapping[str, Any]
) -> Callable[[dict[str, np.ndarray], str, Any], dict[str, np.ndarray]]:
    """The output function of one user case: ``(inputs, dtype, device) -> {"out.<path>": array}``.

    The signature of a family's :attr:`DriftSets.outputs
    <jaxbench.workloads.regression.DriftSets.outputs>`; ``dtype`` is unused
    (the step computes in its own dtypes).

    Raises:
        ValueError: The factory refuses the parameters (its message); from the returned
            function, a saved argument missing (named).
    """
    step = workload.build(params)

    def compute(inputs: dict[str, np.ndarray], dtype: str, device: Any = None) -> dict:
        import jax

        args = unflatten_like(step.args, inputs, "arg")
        args = jax.tree.map(lambda a: jax.device_put(a, device), args)
        return flatten_tree(step.fn(*args), "out")

    return compute
