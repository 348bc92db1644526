"""The regression sets: fixed, seeded inputs of each workload for numerical drift checks.

The MLP sets use the size :data:`SIZE` (``tiny``: 32 -> 64 x 2 (tanh) -> 8, batch 32) with the
workload's own seeded params (``train_step``: :meth:`TrainStep.build`; ``forward``:
:meth:`ForwardMode.build`, ``wrt="input"``), in float32 and bfloat16. Sets, per workload and
dtype (B = 32 rows, d_in = 32, d_out = 8, K = :data:`K_TANGENTS`):

- ``standard``: the workload's own synthetic batch, ``x`` ``(B, d_in)`` (and for ``train_step``
  the targets ``y`` ``(B, d_out)``);
- ``single``: its first row only (``(1, d_in)``; tangents ``(K, 1, d_in)``);
- ``zeros``: ``x`` all zeros (``train_step`` keeps the standard targets ``y``, so the loss and the
  bias gradients are not zero);
- ``boundary``: the standard batch with its first 8 rows replaced by :func:`boundary_rows`:
  magnitudes that saturate tanh (2^100 and 1e4, both signs), the dtype's smallest normal
  (both signs), +0.0 and -0.0, and a row mixing them all; every output stays finite;
- ``invalid_shape``: the standard inputs with the last feature dropped from ``x``
  (``train_step``, must raise :class:`~jaxbench.workloads.mlp.BatchShapeError`) or from the
  tangents (``forward``, must raise :class:`~jaxbench.workloads.forward_mode.TangentShapeError`).

``forward`` sets carry K tangents ``(K, B, d_in)``: the workload's own seeded tangents.

The ``loop`` sets (float32 only, the family's one dtype) are its seeded inputs at
:data:`LOOP_TRIP` steps (:func:`jaxbench.workloads.loops.inputs`): ``x`` ``(LOOP_TRIP, 64)``, the
primal ``w`` and a tangent ``v`` ``(64,)``; ``single`` is one step, ``zeros`` a zero ``x``,
``boundary`` the boundary rows as the first 8 steps (tanh saturates: its derivative is exactly 0
there), and ``invalid_shape`` drops the last element of ``w`` (must raise
:class:`~jaxbench.workloads.loops.LoopShapeError`).

The ``scatter`` sets (float32) are a ``(SCATTER_ROWS, 64)`` table, :data:`SCATTER_N` Zipf
indices into it and ``(SCATTER_N, 64)`` updates (:meth:`Scatter.build`): at most
:data:`SCATTER_N` terms are summed into one row. ``single`` is one update, ``zeros`` zero
updates, ``boundary`` the boundary rows as the first 8 updates (a row that receives +2^100 and
-2^100 cancels, so its scale is 2^100 and the tolerance with it), and ``invalid_shape`` drops
the last feature of the updates (must raise
:class:`~jaxbench.workloads.scatter.ScatterShapeError`).

The ``transformer`` sets (float32 and bfloat16 compute, float32 master weights) are the
workload's own seeded ``tiny`` params (``params.<path>``: ``params.embed`` ``(V, d)``,
``params.layers.<i>.qkv`` ``(d, 3d)``, ...) and its token batch ``tokens`` ``(B, T + 1)`` int32
(:meth:`Transformer.build`); ``single`` is its first sequence, ``zeros`` every token 0 (every
key alike: uniform attention), ``boundary`` the edges of the vocabulary as the first two
sequences (all ``V - 1``; ``0`` and ``V - 1`` alternating), and ``invalid_shape`` one position
more than the position table holds (must raise :class:`~jaxbench.workloads.lm.TokenShapeError`).

Each workload's sets have a reduction length (:data:`REDUCTION_LENGTH`), the most terms summed
into one element of any output, from which the drift tolerance is derived
(:func:`jaxbench.drift.tolerance.tolerance`).

Inputs are returned as numpy arrays in the workload dtype and saved with the reference, so a
check recomputes from exactly the saved inputs: a change in JAX's random number generation
between versions is not mistaken for drift of the computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from jaxbench.drift.trees import flatten_tree
from jaxbench.workloads import forward_mode, lm, loops, mlp, scatter
from jaxbench.workloads.forward_mode import ForwardMode
from jaxbench.workloads.scatter import Scatter
from jaxbench.workloads.sizes import DTYPES, get_size
from jaxbench.workloads.train_step import TrainStep
from jaxbench.workloads.transformer import Transformer, get_lm_size

SIZE = "tiny"
WORKLOADS = ("train_step", "forward", "loop", "scatter", "transformer")
#: The dtypes each workload's sets are computed in.
WORKLOAD_DTYPES: dict[str, tuple[str, ...]] = {
    "train_step": DTYPES,
    "forward": DTYPES,
    "loop": ("float32",),
    "scatter": ("float32",),
    "transformer": DTYPES,
}
#: Steps of the loop sets: a recurrence of 64 steps and a gradient summed over 64 terms, the
#: reduction length the float32 drift tolerance is derived for (:mod:`jaxbench.drift.tolerance`).
LOOP_TRIP = 64
#: Table rows and updates of the scatter sets (no more terms in one row's sum than the loop's).
SCATTER_ROWS, SCATTER_N = 16, 64
#: The transformer size of its sets.
LM_SIZE = "tiny"
#: The most terms summed into one element of any output of a workload's sets: what its drift
#: tolerance is derived for (the MLP's widest layer; the loop's steps; the most updates into
#: one scatter row; the transformer's :attr:`~jaxbench.workloads.lm.LMSize.longest_reduction`).
REDUCTION_LENGTH: dict[str, int] = {
    "train_step": 64,
    "forward": 64,
    "loop": LOOP_TRIP,
    "scatter": SCATTER_N,
    "transformer": get_lm_size(LM_SIZE).longest_reduction,
}
#: A wider bfloat16 floor where the measured rounding error needs it (default
#: :data:`jaxbench.drift.tolerance.BFLOAT16_FLOOR`; the reason is in that module's docstring).
BFLOAT16_FLOORS: dict[str, float] = {"transformer": 2.0**-3}
SET_NAMES = ("standard", "single", "zeros", "boundary", "invalid_shape")
K_TANGENTS = 3
#: The workload's own error that a wrong-shape input must raise.
EXPECTED_ERRORS: dict[str, type[Exception]] = {
    "train_step": mlp.BatchShapeError,
    "forward": forward_mode.TangentShapeError,
    "loop": loops.LoopShapeError,
    "scatter": scatter.ScatterShapeError,
    "transformer": lm.TokenShapeError,
}
#: Finite magnitudes that saturate tanh after the first layer (|w x| >> 9 for any row).
HUGE = 2.0**100
LARGE = 1.0e4


@dataclass(frozen=True)
class RegressionSet:
    """One set's inputs.

    Attributes:
        workload: One of :data:`WORKLOADS`.
        dtype: One of its :data:`WORKLOAD_DTYPES`.
        name: One of :data:`SET_NAMES`.
        inputs: Arrays by name, in ``dtype``: ``params.<layer>.w`` ``(m, n)``,
            ``params.<layer>.b`` ``(n,)``, ``x`` ``(B, d_in)``, and ``y`` ``(B, d_out)``
            (``train_step``) or ``tangents`` ``(K, B, d_in)`` (``forward``); ``x``, ``w`` and
            ``v`` for ``loop``; ``table``, ``idx`` (int32) and ``updates`` for ``scatter``;
            float32 ``params.<path>`` and int32 ``tokens`` ``(B, T + 1)`` for ``transformer``.
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


def unflatten_params(flat: dict[str, np.ndarray], prefix: str = "params") -> list[dict]:
    """Inverse of :func:`flatten_params`: the layers' ``{"w", "b"}`` dicts in layer order.

    Raises:
        ValueError: A layer lacks ``w`` or ``b``, or layers are not numbered 0, 1, ...
    """
    layers: dict[int, dict[str, np.ndarray]] = {}
    for name, arr in flat.items():
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == prefix and parts[1].isdigit():
            layers.setdefault(int(parts[1]), {})[parts[2]] = arr
    if sorted(layers) != list(range(len(layers))) or not layers:
        raise ValueError(f"{prefix}: layers must be numbered 0..n-1, got {sorted(layers)}")
    for i, layer in layers.items():
        if set(layer) != {"w", "b"}:
            raise ValueError(f"{prefix}.{i}: expected arrays w and b, got {sorted(layer)}")
    return [layers[i] for i in range(len(layers))]


def boundary_rows(d_in: int, dtype: str) -> np.ndarray:
    """Eight rows of boundary values, ``(8, d_in)`` in ``dtype``.

    Rows: +2^100; -2^100; +1e4 and -1e4 alternating; the dtype's smallest normal
    (``ml_dtypes.finfo(dtype).tiny``, 2^-126 for both dtypes); its negative; +0.0; -0.0; and all of
    those cycled along the features. 2^100 times a weight row stays far below the largest
    finite value (about 3.4e38 in both dtypes), so every output is finite.
    """
    np_dtype = np.dtype(dtype)
    tiny = float(ml_dtypes.finfo(np_dtype).tiny)
    cycle = [HUGE, -HUGE, LARGE, -LARGE, tiny, -tiny, 0.0, -0.0]
    rows = [
        [HUGE] * d_in,
        [-HUGE] * d_in,
        [LARGE if j % 2 == 0 else -LARGE for j in range(d_in)],
        [tiny] * d_in,
        [-tiny] * d_in,
        [0.0] * d_in,
        [-0.0] * d_in,
        [cycle[j % len(cycle)] for j in range(d_in)],
    ]
    return np.array(rows, dtype=np.float64).astype(np_dtype)


def _standard_inputs(workload: str, dtype: str) -> dict[str, np.ndarray]:
    if workload == "transformer":
        state, tokens = Transformer().build({"size": LM_SIZE, "dtype": dtype}).make_state()
        return flatten_tree(state.params, "params") | {"tokens": np.asarray(tokens)}
    if workload == "scatter":
        params = {"rows": SCATTER_ROWS, "n": SCATTER_N, "contention": "zipf",
                  "op": "scatter_add", "dtype": dtype}  # fmt: skip
        table, idx, updates = Scatter().build(params).make_state()
        return {"table": np.asarray(table), "idx": np.asarray(idx), "updates": np.asarray(updates)}
    if workload == "loop":
        x, w, v = loops.inputs(LOOP_TRIP)
        return {"x": np.asarray(x), "w": np.asarray(w), "v": np.asarray(v)}
    if workload == "train_step":
        built = TrainStep().build(
            {"size": SIZE, "dtype": dtype, "optimizer": "sgd", "donate": False}
        )
        params, (x, y) = built.make_state()
        return flatten_tree(params, "params") | {"x": np.asarray(x), "y": np.asarray(y)}
    built = ForwardMode().build(
        {"size": SIZE, "dtype": dtype, "k": K_TANGENTS, "strategy": "vmap_jvp", "wrt": "input"}
    )
    params, x, tangents = built.make_state()
    return flatten_tree(params, "params") | {"x": np.asarray(x), "tangents": np.asarray(tangents)}


def _scatter_variant(name: str, std: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    updates = std["updates"]
    out = dict(std)
    if name == "single":
        out["idx"], out["updates"] = std["idx"][:1], updates[:1]
    elif name == "zeros":
        out["updates"] = np.zeros_like(updates)
    elif name == "boundary":
        rows = boundary_rows(updates.shape[1], str(updates.dtype))
        out["updates"] = np.concatenate([rows, updates[len(rows) :]])
    elif name == "invalid_shape":
        out["updates"] = updates[:, :-1]
    return out


def _transformer_variant(name: str, std: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    tokens = std["tokens"]
    out = dict(std)
    if name == "single":
        out["tokens"] = tokens[:1]
    elif name == "zeros":
        out["tokens"] = np.zeros_like(tokens)
    elif name == "boundary":
        last = std["params.embed"].shape[0] - 1
        edges = np.stack([np.full(tokens.shape[1], last), np.arange(tokens.shape[1]) % 2 * last])
        out["tokens"] = np.concatenate([edges.astype(tokens.dtype), tokens[len(edges) :]])
    elif name == "invalid_shape":
        out["tokens"] = np.concatenate([tokens, tokens[:, :1]], axis=1)
    return out


def _variant(workload: str, name: str, std: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if workload == "scatter":
        return _scatter_variant(name, std)
    if workload == "transformer":
        return _transformer_variant(name, std)
    x = std["x"]
    out = dict(std)
    if name == "single":
        out["x"] = x[:1]
        if workload == "train_step":
            out["y"] = std["y"][:1]
        elif workload == "forward":
            out["tangents"] = std["tangents"][:, :1]
    elif name == "zeros":
        out["x"] = np.zeros_like(x)
    elif name == "boundary":
        rows = boundary_rows(x.shape[1], str(x.dtype))
        out["x"] = np.concatenate([rows, x[len(rows) :]])
    elif name == "invalid_shape":
        if workload == "loop":
            out["w"] = std["w"][:-1]
        elif workload == "train_step":
            out["x"] = x[:, :-1]
        else:
            out["tangents"] = std["tangents"][..., :-1]
    return out


def regression_sets(
    workloads: tuple[str, ...] = WORKLOADS, dtypes: tuple[str, ...] = DTYPES
) -> list[RegressionSet]:
    """Every regression set, in order: workload, dtype, then :data:`SET_NAMES`.

    A workload's sets are made only in its :data:`WORKLOAD_DTYPES` among ``dtypes``.

    Builds the workloads' params and batches with JAX on the default device (a few small
    compiles); the returned inputs are host numpy arrays.

    Raises:
        ValueError: An unknown workload or dtype (named).
    """
    sets = []
    get_size(SIZE)
    for workload in workloads:
        if workload not in WORKLOADS:
            raise ValueError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
        for dtype in dtypes:
            if dtype not in DTYPES:
                raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
            if dtype not in WORKLOAD_DTYPES[workload]:
                continue
            std = _standard_inputs(workload, dtype)
            for name in SET_NAMES:
                expect = EXPECTED_ERRORS[workload] if name == "invalid_shape" else None
                inputs = _variant(workload, name, std)
                sets.append(RegressionSet(workload, dtype, name, inputs, expect))
    return sets
