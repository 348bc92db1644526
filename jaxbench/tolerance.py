"""The one tolerance rule, shared by the correctness gate and the numerical drift check (numpy).

An array agrees with its reference when every element satisfies::

    |current - reference| <= atol * scale + rtol * |reference|,   scale = max(1, max |reference|)

:func:`numpy.allclose`'s rule, with ``atol`` in units of the reference's largest magnitude: an
element that cancels to near zero carries the rounding error of the large terms it was summed
from, not of its own size. The tolerances themselves differ by purpose: the gate's
(:data:`jaxbench.workloads.base.TOLERANCES`, plain vs jitted in one process, widened to
:func:`tolerance` where a user's step gives its reduction length) and drift's
(:func:`tolerance` of the set's reduction length, :data:`DRIFT_TOLERANCES` at 64 terms, across
versions and backends).
"""

from __future__ import annotations

import numpy as np

#: The reduction length the tolerances of :data:`DRIFT_TOLERANCES` are given at.
BASE_REDUCTION = 64
#: Unit roundoff of float32 (Higham's u).
FLOAT32_U = 2.0**-24
#: The bfloat16 tolerance's floor (4 bfloat16 epsilon), whatever the reduction length.
BFLOAT16_FLOOR = 2.0**-5
#: The tolerances at :data:`BASE_REDUCTION` terms (what the MLP, loop and scatter sets apply).
DRIFT_TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"rtol": 4 * BASE_REDUCTION * FLOAT32_U, "atol": BASE_REDUCTION * FLOAT32_U},
    "bfloat16": {"rtol": BFLOAT16_FLOOR, "atol": BFLOAT16_FLOOR},
}


def bound_ratio(
    current: np.ndarray, reference: np.ndarray, rtol: float, atol: float
) -> tuple[float, float]:
    """How far ``current`` is from ``reference``, as a multiple of the bound.

    Args:
        current: Finite values, any shape, converted to float64.
        reference: Finite values, the same shape.
        rtol: Relative tolerance.
        atol: Absolute tolerance, in units of ``scale``; must be positive.

    Returns:
        ``(scale, ratio)``: ``scale = max(1, max |reference|)`` and the largest
        ``|current - reference| / (atol * scale + rtol * |reference|)``; within tolerance when
        ``ratio <= 1``. ``ratio`` is 0 for empty arrays.
    """
    cur = np.asarray(current, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if not ref.size:
        return 1.0, 0.0
    scale = max(1.0, float(np.max(np.abs(ref))))
    bound = atol * scale + rtol * np.abs(ref)
    return scale, float(np.max(np.abs(cur - ref) / bound))


def tolerance(
    dtype: str, reduction_length: int = BASE_REDUCTION, bfloat16_floor: float = BFLOAT16_FLOOR
) -> dict[str, float]:
    """The ``{"rtol", "atol"}`` of a dtype and a reduction length, for drift and the gate.

    Why these values: :mod:`jaxbench.drift.tolerance`.

    Args:
        dtype: ``float32`` or ``bfloat16``: the set's dtype (its compute dtype).
        reduction_length: The most terms summed into one element behind any output, >= 1.
        bfloat16_floor: The least bfloat16 ``rtol`` and ``atol`` (:data:`BFLOAT16_FLOOR`; wider
            for a workload whose bfloat16 roundings compound over more stages, as the
            transformer's: its :attr:`DriftSets.bfloat16_floor
            <jaxbench.workloads.regression.DriftSets.bfloat16_floor>`).

    Raises:
        ValueError: ``dtype`` has no drift tolerance (the message lists those that have one), or
            ``reduction_length`` is not a whole number >= 1.
    """
    if dtype not in DRIFT_TOLERANCES:
        raise ValueError(
            f"no drift tolerance for dtype {dtype!r}; known: {', '.join(DRIFT_TOLERANCES)}"
        )
    if isinstance(reduction_length, bool) or not isinstance(reduction_length, int):
        raise ValueError(f"reduction_length must be a whole number >= 1, got {reduction_length!r}")
    if reduction_length < 1:
        raise ValueError(f"reduction_length must be a whole number >= 1, got {reduction_length}")
    n_u = reduction_length * FLOAT32_U
    if dtype == "float32":
        return {"rtol": 4 * n_u, "atol": n_u}
    return {"rtol": max(bfloat16_floor, 4 * n_u), "atol": max(bfloat16_floor, n_u)}
