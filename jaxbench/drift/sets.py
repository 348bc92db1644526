"""The regression sets: fixed, seeded inputs of each family for numerical drift checks.

Each built-in family declares its own sets with the family (its
:class:`~jaxbench.workloads.regression.DriftSets`: dtypes, standard inputs, the variants of
:data:`~jaxbench.workloads.regression.SET_NAMES`, the outputs function, its own error and its
reduction length); this module reads them from the registration
(:data:`jaxbench.workloads.WORKLOADS`) and keeps no list of its own. A user workload's sets are
:mod:`jaxbench.drift.user`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jaxbench.workloads import WORKLOADS
from jaxbench.workloads.regression import SET_NAMES, DriftSets
from jaxbench.workloads.sizes import DTYPES


def families() -> dict[str, DriftSets]:
    """The drift sets of every registered family that has them, by family name, in order."""
    return {w.name: w.drift for w in WORKLOADS.values() if w.drift is not None}


@dataclass(frozen=True)
class RegressionSet:
    """One set's inputs.

    Attributes:
        workload: A family of :func:`families`, or a user workload's name.
        dtype: One of its dtypes.
        name: One of :data:`~jaxbench.workloads.regression.SET_NAMES` (a user workload's:
            :func:`jaxbench.drift.user.set_name`).
        inputs: Arrays by name, in ``dtype`` (the family's ``standard`` and ``variant`` say
            which).
        expect_error: The error class that must be raised (``invalid_shape`` only).
        params: A user workload's factory parameters (:mod:`jaxbench.drift.user`); empty for
            the built-in families.
    """

    workload: str
    dtype: str
    name: str
    inputs: dict[str, np.ndarray]
    expect_error: type[Exception] | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``<workload> <dtype> <set>``, e.g. ``train_step float32 zeros``."""
        return f"{self.workload} {self.dtype} {self.name}"


def qualified_name(cls: type) -> str:
    """``module.QualName`` of a class, e.g. ``jaxbench.workloads.mlp.BatchShapeError``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def regression_sets(
    workloads: tuple[str, ...] | None = None, dtypes: tuple[str, ...] = DTYPES
) -> list[RegressionSet]:
    """Every regression set, in order: family, dtype, then ``SET_NAMES``.

    A family's sets are made only in its own dtypes among ``dtypes``. Builds the families'
    params and batches with JAX on the default device (a few small compiles); the returned
    inputs are host numpy arrays.

    Args:
        workloads: Family names; ``None`` for every family of :func:`families`.
        dtypes: The dtypes to make sets in.

    Raises:
        ValueError: An unknown family or dtype (named).
    """
    known = families()
    sets = []
    for workload in known if workloads is None else workloads:
        if workload not in known:
            raise ValueError(f"unknown workload {workload!r}; choose from {', '.join(known)}")
        declared = known[workload]
        for dtype in dtypes:
            if dtype not in DTYPES:
                raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
            if dtype not in declared.dtypes:
                continue
            std = declared.standard(dtype)
            for name in SET_NAMES:
                expect = declared.expected_error if name == "invalid_shape" else None
                inputs = declared.variant(name, std)
                sets.append(RegressionSet(workload, dtype, name, inputs, expect))
    return sets
