"""Drift tolerances per dtype and the element-wise comparison that applies them (numpy only).

A recomputed output agrees with its reference when every element satisfies::

    |current - reference| <= atol * scale + rtol * |reference|,   scale = max(1, max |reference|)

(the one rule of :func:`jaxbench.tolerance.bound_ratio`, which the correctness gate applies too:
an element that cancels to near zero carries the rounding error of the large terms it was summed
from, not of its own size). Agreement is never
judged by bit identity: another JAX version, XLA fusion or backend may sum in another order.

Why these values. The widest reduction behind an output (the most terms summed into one
element, forward or backward) is its set's ``reduction_length`` n: 64 for the ``tiny`` MLP
(reductions of length 32 and 64 in the forward pass, 32 over the batch in the backward pass; the
loss's mean of 256 squares adds positive terms, whose sum is accurate relative to itself: see the
measured errors below), the loop and scatter sets;
512 for the ``tiny`` transformer (the softmax over its vocabulary; :attr:`LMSize.
longest_reduction`); a user workload's own (:attr:`jaxbench.workloads.Step.reduction_length`).

- **float32** (unit roundoff u = 2^-24, epsilon 2^-23): summing n terms in any order is within
  gamma_n = n u of the exact sum, relative to the sum of the terms' magnitudes (Higham, *Accuracy
  and Stability of Numerical Algorithms*, 2nd ed., 2002, section 4.2). Two summation orders of the
  widest reduction differ by up to 2 gamma_n; an output chains about two such reductions
  (forward, loss, backward), so ``rtol = 4 n u`` (2^-16 at n = 64: 128 ulps at 1.0). An element
  that cancels carries the error of its terms, not of itself: ``atol = n u`` (gamma_n; 2^-18 at
  n = 64) in units of the output's scale.
- **bfloat16** (8-bit significand: epsilon 2^-7, unit roundoff 2^-8): every operation rounds, and
  another XLA fusion may keep intermediates in float32 or round them to bfloat16, so two versions
  differ by a few roundings of the output's scale: ``rtol = atol = 2^-5`` (4 epsilon, the bound
  of :data:`jaxbench.workloads.base.TOLERANCES`), or the float32 rule where that is larger
  (reductions of more than 2^17 terms, accumulated in float32). The transformer's gradients
  pass through many more rounded stages (two layers of norm, attention and MLP, forward and
  back: about 40): measured 4.6 epsilon x scale from float64, so two faithful implementations
  may differ by 9.2 epsilon, past 4. Its bfloat16 floor is ``2^-3`` (16 epsilon): the first
  power of two above that, which still sees a change of an eighth of the gradients' scale.

Measured (``scripts/drift_tolerances.py``: every valid set against a float64 computation from the
same inputs; CPU, JAX 0.12.0.1, 2026-12-01): float32 outputs are within 2.9 epsilon x scale
absolute and 21 epsilon relative (elements at least 0.1 of the largest), bfloat16 outputs within
0.7 epsilon x scale and 5.6 epsilon. Two faithful implementations differ by at most twice that,
which uses at most 14% of the float32 bound and 33% of the bfloat16 bound. The loop family's sets
(a 64-step recurrence, its gradient summed over the 64 steps, and its tangent) are within 1.9
epsilon x scale and 9 epsilon relative: at most 8% of the float32 bound; the scatter sets (at
most 64 updates summed into one row) within 0.9 and 2.3 epsilon: 2%. The transformer's sets
(loss, logits and every gradient of the ``tiny`` model, n = 512; 2026-12-02): float32 within 3.6
epsilon x scale and 46 epsilon relative, at most 1.5% of its bound; bfloat16 gradients within
4.6 epsilon x scale and 30 epsilon relative, 41% of the 2^-3 bound (the bfloat16 logits: 6%).

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

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from jaxbench.tolerance import (
    BASE_REDUCTION,
    BFLOAT16_FLOOR,
    DRIFT_TOLERANCES,
    FLOAT32_U,
    bound_ratio,
    tolerance,
)

__all__ = [
    "BASE_REDUCTION",
    "BFLOAT16_FLOOR",
    "DRIFT_TOLERANCES",
    "FLOAT32_U",
    "ArrayCheck",
    "compare",
    "tolerance",
]


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


def compare(current: np.ndarray, reference: np.ndarray, tol: Mapping[str, float]) -> ArrayCheck:
    """Compare one recomputed output with its reference, element-wise, in float64.

    An integer or boolean reference (indices, counts) is compared exactly: rounding does not
    apply to it, and a tolerance scaled by its magnitude would let ``5000001 -> 5000002`` pass.

    Args:
        current: The output computed now, any shape and dtype (bfloat16 included).
        reference: The saved output, the same shape.
        tol: ``{"rtol", "atol"}``, from :func:`tolerance` (unused for integer references).

    Returns:
        An :class:`ArrayCheck`; a shape mismatch or a non-finite value is a finding, not an error.
    """
    if np.asarray(reference).dtype.kind in "iub":
        return _compare_exactly(np.asarray(current), np.asarray(reference))
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
            f"atol={tol['atol']:g} x scale {scale:.3g} ({ratio:.3g} x the bound)"
        )
    return ArrayCheck(float(np.max(diff)), max_rel, ratio, scale, within, finding)


def _compare_exactly(current: np.ndarray, reference: np.ndarray) -> ArrayCheck:
    """An integer or boolean output: within tolerance only when every element is equal."""
    if current.shape != reference.shape:
        return ArrayCheck(
            None, None, None, 1.0, False, f"shape {current.shape}, reference {reference.shape}"
        )
    diff = np.abs(current.astype(np.float64) - reference.astype(np.float64))
    worst = float(diff.max()) if diff.size else 0.0
    differ = int(np.count_nonzero(diff))
    finding = None
    if differ:
        finding = f"{differ} of {diff.size} elements differ (an integer output, compared exactly)"
    return ArrayCheck(worst, None, None, 1.0, differ == 0, finding)
