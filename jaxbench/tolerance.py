"""The one tolerance rule, shared by the correctness gate and the numerical drift check (numpy).

An array agrees with its reference when every element satisfies::

    |current - reference| <= atol * scale + rtol * |reference|,   scale = max(1, max |reference|)

:func:`numpy.allclose`'s rule, with ``atol`` in units of the reference's largest magnitude: an
element that cancels to near zero carries the rounding error of the large terms it was summed
from, not of its own size. The tolerances themselves differ by purpose: the gate's
(:data:`jaxbench.workloads.base.TOLERANCES`, plain vs jitted in one process) and drift's
(:data:`jaxbench.drift.tolerance.DRIFT_TOLERANCES`, across versions and backends).
"""

from __future__ import annotations

import numpy as np


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
