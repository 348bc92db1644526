"""Workload: scatter-add, ``segment_sum``, gather and the embedding gradient; contended indices.

A table of ``rows`` x :data:`WIDTH` float32 and ``n`` indices into it, drawn by ``contention``:

- ``uniform``: each index uniform over the rows;
- ``zipf``: Zipf-distributed (exponent :data:`ZIPF_A`, as token frequencies are): a few rows get
  most of the updates;
- ``one``: every index is row 0, the most contended case.

``op`` is what is timed:

- ``scatter_add``: ``zeros.at[idx].add(updates)``;
- ``segment_sum``: ``jax.ops.segment_sum(updates, idx, num_segments=rows)``;
- ``gather``: ``table[idx]``;
- ``embedding_grad``: ``jax.grad`` of ``sum(table[idx] * updates)`` with respect to the table,
  the backward pass of an embedding lookup (a scatter-add of the updates).

The gate compares each with a float64 NumPy reference (``np.add.at``, fancy indexing) and checks
that ``updates`` of the wrong shape raise :class:`ScatterShapeError`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads.base import (
    TOLERANCES,
    AsvSuite,
    GateFailure,
    Workload,
    check_choice,
    check_close,
    check_int,
)
from jaxbench.workloads.regression import DriftSets, Inputs, host, on_device, row_variant
from jaxbench.workloads.step import Step

OPS = ("scatter_add", "segment_sum", "gather", "embedding_grad")
CONTENTION = ("uniform", "zipf", "one")
#: Width of one table row (float32 elements).
WIDTH = 64
#: Exponent of the Zipf draw of ``contention="zipf"``.
ZIPF_A = 1.2
N_MAX = 1 << 24
#: The gate's ``atol`` is at least this many times the error of a float32 sum in index order
#: (against float64): an update summed into many others carries their rounding, and XLA's
#: order of summation is its own. A dropped or doubled update is still far outside it.
SUM_MARGIN = 4.0
#: Table rows and updates of the drift sets: at most ``DRIFT_N`` terms summed into one row.
DRIFT_ROWS, DRIFT_N = 16, 64


class ScatterShapeError(ValueError):
    """``updates`` or ``idx`` do not match; the message gives the expected shapes."""


def _check(idx: jax.Array, updates: jax.Array) -> None:
    if idx.ndim != 1 or updates.shape != (idx.shape[0], WIDTH):
        raise ScatterShapeError(
            f"updates have shape {tuple(updates.shape)} and idx {tuple(idx.shape)}; expected "
            f"updates (n, {WIDTH}) for idx (n,)"
        )


def apply(op: str, table: jax.Array, idx: jax.Array, updates: jax.Array) -> jax.Array:
    """The output of ``op`` (see the module docstring); ``table`` is ``(rows, WIDTH)``.

    Raises:
        ScatterShapeError: ``updates`` is not ``(len(idx), WIDTH)`` (at trace time).
        ValueError: Unknown ``op``.
    """
    check_choice("op", op, OPS)
    _check(idx, updates)
    if op == "scatter_add":
        return jnp.zeros_like(table).at[idx].add(updates)
    if op == "segment_sum":
        return jax.ops.segment_sum(updates, idx, num_segments=table.shape[0])
    if op == "gather":
        return table[idx]
    return jax.grad(lambda t: jnp.sum(t[idx] * updates))(table)


@functools.cache
def jitted(op: str) -> Any:
    """The jitted ``op`` (cached, so a rebuilt case reuses its program)."""
    return jax.jit(functools.partial(apply, op))


def indices(contention: str, rows: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` int32 row indices in ``[0, rows)`` drawn by ``contention``."""
    rng = np.random.default_rng(seed)
    if contention == "uniform":
        return rng.integers(0, rows, n).astype(np.int32)
    if contention == "zipf":
        return ((rng.zipf(ZIPF_A, n) - 1) % rows).astype(np.int32)
    return np.zeros(n, np.int32)


def reference(
    op: str, table: np.ndarray, idx: np.ndarray, updates: np.ndarray, dtype: Any = np.float64
) -> np.ndarray:
    """The output of ``op`` in NumPy, summing in ``dtype`` in index order (``np.add.at``)."""
    table, updates = np.asarray(table, dtype), np.asarray(updates, dtype)
    if op == "gather":
        return table[idx]
    out = np.zeros_like(table)
    np.add.at(out, idx, updates)
    return out


def drift_standard(dtype: str) -> Inputs:
    """The drift sets' standard inputs: a small table, Zipf indices and updates.

    A ``(DRIFT_ROWS, 64)`` table, :data:`DRIFT_N` Zipf indices (int32) into it and
    ``(DRIFT_N, 64)`` updates (:func:`scatter`), in ``dtype``.
    """
    step = scatter(rows=DRIFT_ROWS, n=DRIFT_N, contention="zipf", op="scatter_add", dtype=dtype)
    table, idx, updates = step.first_args()
    return {"table": np.asarray(table), "idx": np.asarray(idx), "updates": np.asarray(updates)}


def drift_variant(name: str, std: Inputs) -> Inputs:
    """A drift set from the standard inputs: the rows of ``updates`` varied.

    :func:`~jaxbench.workloads.regression.row_variant`; ``single`` keeps one index too; on the
    boundary a row that receives +2^100 and -2^100 cancels, so its scale is 2^100 and the
    tolerance with it; ``invalid_shape`` drops their last feature.
    """
    out = row_variant(name, std, "updates")
    if name == "single":
        out["idx"] = std["idx"][:1]
    elif name == "invalid_shape":
        out["updates"] = std["updates"][:, :-1]
    return out


def drift_outputs(inputs: Inputs, dtype: str, device: Any | None = None) -> Inputs:
    """The output of every op of :data:`OPS` (the jitted ops) on the set's inputs.

    Args:
        inputs: ``table`` ``(rows, 64)``, ``idx`` ``(n,)`` int32 and ``updates`` ``(n, 64)``.
        dtype: The set's dtype, the inputs' (the computation's).
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        One array per op, in ``table``'s dtype; host numpy arrays.

    Raises:
        ScatterShapeError: ``updates`` is not ``(n, 64)``.
    """
    args = [on_device(inputs[k], device) for k in ("table", "idx", "updates")]
    return {op: host(jitted(op)(*args)) for op in OPS}


def scatter(
    rows: int = 4096,
    n: int = 16384,
    contention: str = "zipf",
    op: str = "embedding_grad",
    dtype: str = "float32",
) -> Step:
    """The family's factory: the table, the indices, the updates, the jitted op and its gate.

    Args:
        rows: Table rows, 1 to :data:`N_MAX`.
        n: Indices (and update rows), 1 to :data:`N_MAX`.
        contention: How the indices collide, one of :data:`CONTENTION`.
        op: One of :data:`OPS`.
        dtype: ``float32`` only.

    Returns:
        A :class:`~jaxbench.workloads.step.Step` gated against a float64 NumPy reference
        (:func:`reference`), with ``distinct_rows`` and ``updates_per_row``.
    """
    key_t, key_u = jax.random.split(jax.random.key(3))
    table = jax.random.normal(key_t, (rows, WIDTH), jnp.float32)
    updates = jax.random.normal(key_u, (n, WIDTH), jnp.float32)
    idx = jnp.asarray(indices(contention, rows, n))
    fn = jitted(op)
    distinct = int(np.unique(np.asarray(idx)).size)

    def gate() -> dict[str, Any]:
        try:
            fn(table, idx, updates[:, :-1])
        except ScatterShapeError:
            pass
        else:
            raise GateFailure("updates of the wrong shape did not raise ScatterShapeError")
        args = (np.asarray(table), np.asarray(idx), np.asarray(updates))
        want = reference(op, *args)
        tol = dict(TOLERANCES["float32"])
        spread = float(np.max(np.abs(reference(op, *args, np.float32) - want)))
        scale = max(1.0, float(np.max(np.abs(want))))
        tol["atol"] = max(tol["atol"], SUM_MARGIN * spread / scale)
        facts = check_close(f"scatter/{op} (jit vs float64 NumPy)", fn(table, idx, updates),
                            want, "float32", tol)  # fmt: skip
        return facts | {"float32_sum_spread": spread}

    args = (table, idx, updates)
    return Step(
        fn=fn,
        args=args,
        programs=(CompileTarget(op, (op, rows, n), fn, args),),
        make_args=lambda: args,
        gate=gate,
        metrics={"distinct_rows": distinct, "updates_per_row": n / distinct},
    )


class Scatter(Workload):
    """Scatter-add, segment_sum, gather and the embedding gradient over contended indices.

    Parameters: ``rows`` (table rows), ``n`` (indices), ``contention`` (:data:`CONTENTION`),
    ``op`` (:data:`OPS`), ``dtype`` (``float32``).
    """

    name = "scatter"
    factory = staticmethod(scatter)
    param_names = ("rows", "n", "contention", "op", "dtype")
    drift = DriftSets(
        ("float32",), DRIFT_N, ScatterShapeError, drift_standard, drift_variant, drift_outputs
    )
    asv = (
        AsvSuite("Scatter", {"op": list(OPS), "contention": list(CONTENTION)},
                 {"rows": 32768, "n": 65536, "dtype": "float32"}, method="time_op",
                 module="bench_scatter"),
    )  # fmt: skip

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: the embedding gradient, 4096 rows, 16384 Zipf indices. Full: every op."""
        if quick:
            return {"rows": [4096], "n": [16384], "contention": ["zipf"],
                    "op": ["embedding_grad"], "dtype": ["float32"]}  # fmt: skip
        return {"rows": [32768], "n": [4096, 65536, 1 << 20], "contention": list(CONTENTION),
                "op": list(OPS), "dtype": ["float32"]}  # fmt: skip

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad parameter (its name and the allowed values)."""
        for name in ("rows", "n"):
            check_int(name, params[name], 1, N_MAX)
        check_choice("contention", params["contention"], CONTENTION)
        check_choice("op", params["op"], OPS)
        check_choice("dtype", params["dtype"], ("float32",))

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """``scatter/<op>``."""
        return f"{self.name}/{params['op']}"
