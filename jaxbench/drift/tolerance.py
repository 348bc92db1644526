"""Drift tolerances per dtype and the element-wise comparison that applies them (numpy only).

A recomputed output agrees with its reference when every element satisfies::

    |current - reference| <= atol * scale + rtol * |reference|,   scale = max(1, max |reference|)

(the one rule of :func:`jaxbench.tolerance.bound_ratio`, which the correctness gate applies too:
an element that cancels to near zero carries the rounding error of the large terms it was summed
from, not of its own size). Agreement is never
judged by bit identity: another JAX version, XLA fusion or backend may sum in another order.

Why these values (cross-version comparison of the ``tiny`` MLP: reductions of length 32 and 64
in the forward pass, 32 over the batch in the backward pass, 256 in the loss's mean):

- **float32** (unit roundoff u = 2^-24, epsilon 2^-23): summing n terms in any order is within
  gamma_n = n u of the exact sum, relative to the sum of the terms' magnitudes (Higham, *Accuracy
  and Stability of Numerical Algorithms*, 2nd ed., 2002, section 4.2). Two summation orders of the
  widest reduction (n = 64) differ by up to 2 gamma_64 = 2^-17; an output chains about two such
  reductions (forward, loss, backward), so ``rtol = 2^-16`` (128 ulps at 1.0). An element that
  cancels carries the error of its terms, not of itself: ``atol = 2^-18`` (gamma_64) in units of
  the output's scale.
- **bfloat16** (8-bit significand: epsilon 2^-7, unit roundoff 2^-8): every operation rounds, and
  another XLA fusion may keep intermediates in float32 or round them to bfloat16, so two versions
  differ by a few roundings of the output's scale: ``rtol = atol = 2^-5`` (4 epsilon, the bound
  of :data:`jaxbench.workloads.base.TOLERANCES`).

Measured (``scripts/drift_tolerances.py``: every valid set against a float64 computation from the
same inputs; CPU, JAX 0.12.0.1, 2026-12-01): float32 outputs are within 2.9 epsilon x scale
absolute and 21 epsilon relative (elements at least 0.1 of the largest), bfloat16 outputs within
0.7 epsilon x scale and 5.6 epsilon. Two faithful implementations differ by at most twice that,
which uses at most 14% of the float32 bound and 33% of the bfloat16 bound. The loop family's sets
(a 64-step recurrence, its gradient summed over the 64 steps, and its tangent) are within 1.9
epsilon x scale and 9 epsilon relative: at most 8% of the float32 bound; the scatter sets (at
most 64 updates summed into one row) within 0.9 and 2.3 epsilon: 2%.

Backends: by default JAX may compute float32 dot products in TF32 on recent NVIDIA GPUs (10-bit
significand, relative error up to 2^-11) and in bfloat16 on TPU ("Matmul precision",
https://docs.jax.dev/en/latest/201/precision.html). Against a CPU reference that exceeds the
float32 bound and is reported as drift, as it should be; set ``jax_default_matmul_precision`` to
``float32`` (e.g. ``JAX_DEFAULT_MATMUL_PRECISION=float32``) to compare true float32 arithmetic.
Each row records the JAX flags of the check in ``env.jax_flags``.

The tolerance of a set is its workload dtype's, also for outputs kept in float32 (the loss is
accumulated in float32 from bfloat16 activations, so it carries their error).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxbench.tolerance import bound_ratio

DRIFT_TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"rtol": 2.0**-16, "atol": 2.0**-18},
    "bfloat16": {"rtol": 2.0**-5, "atol": 2.0**-5},
}


@dataclass(frozen=True)
class ArrayCheck:
    """How far a recomputed output is from its reference.

    Attributes:
        max_abs_err: ``max |current - reference|``, in the output's units; ``None`` when the
            comparison could not be made (shape mismatch, non-finite values).
        max_rel_err: ``max |current - reference| / |reference|`` over elements whose reference is
            non-zero; ``None`` when there are none (or as ``max_abs_err``).
        worst_ratio: ``max |current - reference| / (atol * scale + rtol * |reference|)``: at most
            1.0 within tolerance; ``None`` as ``max_abs_err``.
        scale: ``max(1, max |reference|)``, the unit of ``atol``.
        within_tolerance: Every element within the bound, shapes equal, all values finite.
        finding: Why it is not within tolerance; ``None`` when it is.
    """

    max_abs_err: float | None
    max_rel_err: float | None
    worst_ratio: float | None
    scale: float
    within_tolerance: bool
    finding: str | None


def tolerance(dtype: str) -> dict[str, float]:
    """The ``{"rtol", "atol"}`` of a workload dtype (see the module docstring for the reasoning).

    Raises:
        ValueError: ``dtype`` has no drift tolerance; the message lists those that have one.
    """
    try:
        return dict(DRIFT_TOLERANCES[dtype])
    except KeyError:
        raise ValueError(
            f"no drift tolerance for dtype {dtype!r}; known: {', '.join(DRIFT_TOLERANCES)}"
        ) from None


def compare(current: np.ndarray, reference: np.ndarray, dtype: str) -> ArrayCheck:
    """Compare one recomputed output with its reference, element-wise, in float64.

    Args:
        current: The output computed now, any shape and floating dtype (bfloat16 included).
        reference: The saved output, the same shape.
        dtype: The set's workload dtype, which picks the tolerance (:data:`DRIFT_TOLERANCES`).

    Returns:
        An :class:`ArrayCheck`; a shape mismatch or a non-finite value is a finding, not an error.

    Raises:
        ValueError: ``dtype`` has no drift tolerance.
    """
    tol = tolerance(dtype)
    cur = np.asarray(current, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size and np.isfinite(ref).all() else 1.0
    if cur.shape != ref.shape:
        return ArrayCheck(
            None, None, None, scale, False, f"shape {cur.shape}, reference {ref.shape}"
        )
    for label, arr in (("current", cur), ("reference", ref)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        if bad:
            return ArrayCheck(
                None, None, None, scale, False, f"{label} has {bad} non-finite values"
            )
    if not cur.size:
        return ArrayCheck(0.0, None, 0.0, scale, True, None)
    diff = np.abs(cur - ref)
    nonzero = ref != 0
    max_rel = float(np.max(diff[nonzero] / np.abs(ref[nonzero]))) if nonzero.any() else None
    scale, ratio = bound_ratio(cur, ref, tol["rtol"], tol["atol"])
    within = ratio <= 1
    finding = None
    if not within:
        finding = (
            f"max abs error {float(np.max(diff)):.3g} exceeds rtol={tol['rtol']:g}, "
            f"atol={tol['atol']:g} x {scale:.3g} ({ratio:.3g} x the bound)"
        )
    return ArrayCheck(float(np.max(diff)), max_rel, ratio, scale, within, finding)
