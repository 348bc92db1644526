"""A family's drift sets, declared with the family: fixed, seeded inputs and the outputs on them.

A built-in family that is checked for numerical drift (``jaxbench drift``) sets its
``drift`` attribute to a :class:`DriftSets`: the dtypes its sets are computed in, its
``standard`` inputs, how each set of :data:`SET_NAMES` derives from them, the function that
computes its outputs, the error a wrong-shape input must raise and the reduction length the
tolerance is derived from (:func:`jaxbench.drift.tolerance.tolerance`). :mod:`jaxbench.drift`
reads these from the registration (:data:`jaxbench.workloads.WORKLOADS`); it keeps no list of
its own.

The sets, for every family:

- ``standard``: the family's own seeded inputs at a small size;
- ``single``: one row (one sequence, one update, one step) of them;
- ``zeros``: the varying input all zeros;
- ``boundary``: the standard inputs with their first rows replaced by :func:`boundary_rows`
  (saturating, tiny and signed-zero values; every output stays finite);
- ``invalid_shape``: one input of the wrong shape, which must raise the family's own error.

Inputs are host numpy arrays in the set's dtype, saved with the reference, so a check recomputes
from exactly the saved inputs: a change in JAX's random number generation between versions is
not mistaken for drift of the computation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

Inputs = dict[str, np.ndarray]

#: The size of the MLP and transformer sets.
SIZE = "tiny"
SET_NAMES = ("standard", "single", "zeros", "boundary", "invalid_shape")
#: Finite magnitudes that saturate tanh after the first layer (|w x| >> 9 for any row).
HUGE = 2.0**100
LARGE = 1.0e4


@dataclass(frozen=True)
class DriftSets:
    """How a family's drift sets are made and computed.

    Attributes:
        dtypes: The dtypes its sets are computed in.
        reduction_length: The most terms summed into one element of any output: what its drift
            tolerance is derived for.
        expected_error: The family's own error a wrong-shape input (``invalid_shape``) raises.
        standard: ``dtype -> inputs``: the ``standard`` set's arrays by name, host numpy.
        variant: ``(set name, standard inputs) -> inputs`` for each name of :data:`SET_NAMES`.
        outputs: ``(inputs, dtype, device=None) -> {output name: host array}``, computed with
            the family's own jitted code; a wrong-shape input raises ``expected_error``.
        bfloat16_floor: A wider bfloat16 floor where the measured rounding needs it; ``None``
            for :data:`jaxbench.drift.tolerance.BFLOAT16_FLOOR`.
    """

    dtypes: tuple[str, ...]
    reduction_length: int
    expected_error: type[Exception]
    standard: Callable[[str], Inputs]
    variant: Callable[[str, Inputs], Inputs]
    outputs: Callable[..., Inputs]
    bfloat16_floor: float | None = None


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


def row_variant(name: str, std: Inputs, key: str = "x") -> Inputs:
    """The ``single``, ``zeros`` and ``boundary`` sets of the rows of ``std[key]``.

    ``single``: its first row; ``zeros``: all zeros; ``boundary``: :func:`boundary_rows` as its
    first 8 rows. Any other name (``standard``, ``invalid_shape``): a copy of ``std``, which the
    family edits.
    """
    rows = std[key]
    out = dict(std)
    if name == "single":
        out[key] = rows[:1]
    elif name == "zeros":
        out[key] = np.zeros_like(rows)
    elif name == "boundary":
        edge = boundary_rows(rows.shape[1], str(rows.dtype))
        out[key] = np.concatenate([edge, rows[len(edge) :]])
    return out


def unflatten_params(flat: Inputs, prefix: str = "params") -> list[dict]:
    """Inverse of flattening an MLP's params: the layers' ``{"w", "b"}`` dicts in layer order.

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


def on_device(tree: Any, device: Any | None) -> Any:
    """Every leaf of ``tree`` as a JAX array on ``device`` (``None``: the default device)."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda a: jax.device_put(jnp.asarray(a), device), tree)


def host(tree: Any) -> Any:
    """Every leaf of ``tree`` as a host numpy array."""
    import jax

    return jax.tree.map(np.asarray, jax.device_get(tree))
