"""Workload: a warmed ``jax.jit`` MLP train step (``value_and_grad`` inside ``jit``)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads import meshes, mlp
from jaxbench.workloads.base import (
    UPDATE_RTOL_BFLOAT16,
    AsvSuite,
    GateFailure,
    Workload,
    check_choice,
    check_close,
    check_loss_lowered,
    check_update,
    copy_tree,
)
from jaxbench.workloads.regression import (
    SIZE,
    DriftSets,
    Inputs,
    host,
    on_device,
    row_variant,
    unflatten_params,
)
from jaxbench.workloads.sizes import DTYPES, SIZES, check_dtype, get_size
from jaxbench.workloads.step import Step, gate_tolerance
from jaxbench.workloads.trees import flatten_tree

OPTIMIZERS = ("sgd", "adam")
_STEPS = {"sgd": mlp.sgd_step, "adam": mlp.adam_step}


@functools.cache
def jitted_step(optimizer: str, donate: bool) -> Any:
    """The jitted train step, built once per process: ``(state, batch) -> (state, loss)``.

    With ``donate`` the state's buffers are donated (``donate_argnums=0``): callers must pass the
    returned state to the next call and never touch the old one.
    """
    return jax.jit(_STEPS[optimizer], donate_argnums=(0,) if donate else ())


def check_mesh_fits(text: str, size: Any) -> None:
    """Raise ``ValueError`` naming ``mesh`` unless its axes divide what they split.

    The MLP's weights ``(m, n)`` and biases ``(n,)`` (its ``layer_sizes``; Adam's moments have
    the same shapes) and the batch's rows (:func:`jaxbench.workloads.meshes.check_fits`).
    """
    dims = size.layer_sizes
    shapes = {}
    for i, (m, n) in enumerate(itertools.pairwise(dims)):
        shapes |= {f"params/{i}/w": (m, n), f"params/{i}/b": (n,)}
    meshes.check_fits(text, shapes, size.batch, f"{size.name} MLP")


def _initial_state(optimizer: str, params: mlp.Params) -> Any:
    return mlp.adam_init(params) if optimizer == "adam" else params


def drift_standard(dtype: str) -> Inputs:
    """The drift sets' standard inputs: the workload's own seeded ``tiny`` params and batch.

    ``params.<layer>.<w|b>``, ``x`` ``(32, 32)`` and ``y`` ``(32, 8)``, in ``dtype``.
    """
    step = train_step(size=SIZE, dtype=dtype, optimizer="sgd", donate=False)
    params, (x, y) = step.first_args()
    return flatten_tree(params, "params") | {"x": np.asarray(x), "y": np.asarray(y)}


def drift_variant(name: str, std: Inputs) -> Inputs:
    """A drift set from the standard inputs: the rows of ``x`` varied.

    :func:`~jaxbench.workloads.regression.row_variant`; ``single`` also cuts ``y`` (``zeros``
    keeps it, so the loss and the bias gradients are not zero); ``invalid_shape`` drops the last
    feature of ``x``.
    """
    out = row_variant(name, std)
    if name == "single":
        out["y"] = std["y"][:1]
    elif name == "invalid_shape":
        out["x"] = std["x"][:, :-1]
    return out


@functools.cache
def _value_and_grad() -> Any:
    return jax.jit(jax.value_and_grad(mlp.loss))


def drift_outputs(inputs: Inputs, dtype: str, device: Any | None = None) -> Inputs:
    """Loss, gradients and params after one SGD step (:func:`jitted_step`, not donated).

    Args:
        inputs: ``params.<layer>.<w|b>``, ``x`` ``(B, d_in)`` and ``y`` ``(B, d_out)``.
        dtype: The set's dtype, the inputs' (the computation's).
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``loss`` ``()`` float32, ``grad.<layer>.<w|b>`` and ``params_after.<layer>.<w|b>``
        shaped and typed like the params; host numpy arrays.

    Raises:
        jaxbench.workloads.mlp.BatchShapeError: ``x`` or ``y`` has the wrong shape or dtype.
    """
    params = on_device(unflatten_params(inputs), device)
    batch = on_device((inputs["x"], inputs["y"]), device)
    loss, grads = _value_and_grad()(params, batch)
    after, _ = jitted_step("sgd", False)(params, batch)
    out = {"loss": host(loss)}
    return out | flatten_tree(grads, "grad") | flatten_tree(after, "params_after")


def train_step(
    size: str = "tiny",
    dtype: str = "float32",
    optimizer: str = "sgd",
    donate: bool = True,
    mesh: str = meshes.NONE,
) -> Step:
    """The family's factory: params, a synthetic batch, the jitted step, the issue's gate.

    Args:
        size: A name of :data:`jaxbench.workloads.sizes.SIZES`.
        dtype: ``float32`` or ``bfloat16`` (params and batch).
        optimizer: ``sgd`` or ``adam`` (optax).
        donate: Donate the state's buffers to the step.
        mesh: ``none``, or ``axis:size`` pairs (:mod:`jaxbench.workloads.meshes`); records
            made before it existed lack it, hence the default.

    Returns:
        A :class:`~jaxbench.workloads.step.Step` whose call is ``(state, batch) -> (state,
        loss)``; the new state feeds the next call.
    """
    spec = get_size(size)
    np_dtype = jnp.dtype(dtype)
    # Drawn on the host: a jitted init, a PRNG key and its split would each be a compile
    # in every fresh process (a live comparison starts two per pair).
    weights = mlp.init_host(0, spec.layer_sizes, np_dtype)
    batch = mlp.make_batch_host(1, spec.batch, spec.d_in, spec.d_out, np_dtype)
    state0 = _initial_state(optimizer, weights)
    target_key = ("train_step", optimizer, donate, spec.name, dtype, mesh)
    metrics = {
        "params_count": spec.params_count,
        "params_bytes": spec.params_count * np_dtype.itemsize,
        "batch": spec.batch,
    }
    if mesh == meshes.NONE:
        step, state, timed_batch, shardings = jitted_step(optimizer, donate), state0, batch, None
    else:
        step, state, timed_batch, shardings, facts = meshes.place_step(
            _STEPS[optimizer], ("train_step", optimizer, spec.name, dtype),
            state0, batch, mesh, donate,
        )  # fmt: skip
        metrics |= facts

    def gate() -> dict[str, Any]:
        return _gate(optimizer, step, state, timed_batch, dtype,
                     reference=(state0, batch), shardings=shardings)  # fmt: skip

    return Step(
        fn=step,
        args=(state, timed_batch),
        next_args=lambda s, out: (out[0], s[1]),
        flops=spec.train_step_flops(),
        programs=(CompileTarget("train_step", target_key, step, (state, timed_batch)),),
        make_args=lambda: (state, timed_batch),
        gate=gate,
        metrics=metrics,
    )


def _gate(
    optimizer: str,
    step: Any,
    state0: Any,
    batch: mlp.Batch,
    dtype: str,
    reference: tuple[Any, mlp.Batch] | None = None,
    shardings: Any = None,
) -> dict[str, Any]:
    """Prove the step before timing it; raises :class:`GateFailure` with the reason.

    The jitted step from ``(state0, batch)`` is compared with the plain (op-by-op) step from
    ``reference`` (default the same arguments; a sharded step's are its unsharded state and
    batch on one device), within the tolerance of the longest sum behind an output
    (:func:`jaxbench.workloads.step.gate_tolerance`: the batch rows or a matmul's inner
    dimension; never below the dtype's own); in bfloat16, Adam's moments also in norm
    (:func:`jaxbench.workloads.base.check_update`). With ``shardings`` (the state's), every leaf
    of the stepped state must still be on its sharding.
    """
    x, y = batch
    other = jnp.bfloat16 if dtype == "float32" else jnp.float32
    for label, bad in (("shape", (x[:, :-1], y)), ("dtype", (x.astype(other), y))):
        try:
            step(copy_tree(state0), bad)
        except mlp.BatchShapeError:
            continue
        raise GateFailure(f"a batch with the wrong {label} did not raise BatchShapeError")

    start = (reference or (state0, batch))[0]
    plain_state, plain_loss = _STEPS[optimizer](*(reference or (state0, batch)))
    jit_state, jit_loss = step(copy_tree(state0), batch)
    # The jitted (or sharded) step sums in another order than the plain one: the longest sum
    # behind an output is a matmul's inner dimension or a gradient's sum over the batch rows.
    longest = max([x.shape[0], *(w.shape[0] for w in jax.tree.leaves(state0) if w.ndim == 2)])
    tol = gate_tolerance(dtype, longest)
    loss_check = check_close("loss (plain vs jit)", jit_loss, plain_loss, dtype, tol)
    state_check = check_close("state (plain vs jit)", jit_state, plain_state, dtype, tol)
    update = 0.0
    if dtype == "bfloat16" and optimizer == "adam":  # the moments in norm: see check_update
        update = check_update("Adam moments (plain vs jit)", jit_state.opt_state,
                              plain_state.opt_state, start.opt_state,
                              UPDATE_RTOL_BFLOAT16)  # fmt: skip
    if shardings is not None:
        meshes.check_kept(jit_state, shardings)

    # The stepped state is finite (check_close), so are the gradients it was made of.
    before = float(plain_loss)
    after = check_loss_lowered(step, jit_state, batch, before)
    return {
        "rtol": loss_check["rtol"],
        "atol": loss_check["atol"],
        "max_abs_err_loss": loss_check["max_abs_err"],
        "max_abs_err_state": state_check["max_abs_err"],
        **(
            {"update_rtol": UPDATE_RTOL_BFLOAT16, "max_update_err": update}
            if dtype == "bfloat16" and optimizer == "adam"
            else {}
        ),
        "loss_before": before,
        "loss_after": after,
    }


class TrainStep(Workload):
    """MLP train step over the size registry, dtypes, and SGD or optax Adam.

    Parameters: ``size`` (see :data:`jaxbench.workloads.sizes.SIZES`), ``dtype``
    (``float32``/``bfloat16``), ``optimizer`` (``sgd``/``adam``), ``donate`` (bool), ``mesh``
    (``none``, or ``axis:size`` pairs of ``data``, ``fsdp``, ``tensor``:
    :mod:`jaxbench.workloads.meshes`; records made before it existed are ``none``).
    """

    name = "train_step"
    param_names = ("size", "dtype", "optimizer", "donate", "mesh")
    factory = staticmethod(train_step)
    spellings: Mapping[str, Callable[[str], str]] = {"mesh": meshes.spelled}
    #: The MLP's widest layer is 64 wide.
    drift = DriftSets(DTYPES, 64, mlp.BatchShapeError, drift_standard, drift_variant, drift_outputs)
    asv = (
        AsvSuite("TrainStep", {"size": ["tiny", "small", "medium"], "dtype": list(DTYPES)},
                 {"optimizer": "sgd", "donate": True, "mesh": "none"}, method="time_step",
                 module="bench_train_step"),
        AsvSuite("TrainStepMemory", {"size": ["small", "medium"], "dtype": ["float32"]},
                 {"optimizer": "sgd", "donate": True, "mesh": "none"}, kind="peakmem",
                 method="peakmem_step",
                 module="bench_train_step"),
        AsvSuite("TrainStepCosts", {"size": ["small", "medium"], "dtype": list(DTYPES)},
                 {"optimizer": "sgd", "donate": True, "mesh": "none"}, kind="costs", timeout=120,
                 module="bench_train_step"),
    )  # fmt: skip

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: tiny and small, both dtypes, SGD, donated. Full: every size and optimizer.

        Both on one device (``mesh=none``); a mesh is chosen with ``--param mesh=data:4``.
        """
        if quick:
            return {
                "size": ["tiny", "small"],
                "dtype": list(DTYPES),
                "optimizer": ["sgd"],
                "donate": [True],
                "mesh": [meshes.NONE],
            }
        return {
            "size": list(SIZES),
            "dtype": list(DTYPES),
            "optimizer": list(OPTIMIZERS),
            "donate": [True],
            "mesh": [meshes.NONE],
        }

    def meant_for(self, params: Mapping[str, Any]) -> str:
        """``"cpu"`` or ``"gpu"``: where the case's size is meant to run."""
        return get_size(params["size"]).device

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad parameter (``size`` ... ``mesh``).

        A mesh is bad where its axes do not divide what they split (:func:`check_mesh_fits`).
        """
        size = get_size(params["size"])
        check_dtype(params["dtype"])
        check_choice("optimizer", params["optimizer"], OPTIMIZERS)
        if not isinstance(params["donate"], bool):
            raise ValueError(f"donate must be true or false, got {params['donate']!r}")
        check_mesh_fits(params.get("mesh", meshes.NONE), size)  # older callers give none

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """Always ``train_step``."""
        return self.name
