"""The model-size registry shared by every workload."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class MLPSize:
    """An MLP shape: ``d_in -> width x depth (tanh) -> d_out`` on batches of ``batch`` rows.

    ``params_count`` is the number of weights and biases; ``device`` is where the size is meant to
    run (``"cpu"`` sizes finish in milliseconds to seconds on a laptop core).
    """

    name: str
    d_in: int
    width: int
    depth: int
    d_out: int
    batch: int
    device: str

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """Feature sizes of every layer boundary, input first."""
        return (self.d_in, *([self.width] * self.depth), self.d_out)

    @property
    def params_count(self) -> int:
        """Number of parameters (weights plus biases)."""
        s = self.layer_sizes
        return sum(m * n + n for m, n in itertools.pairwise(s))

    def train_step_flops(self) -> int:
        """Matmul FLOP of one training step on a batch: ``2 B (3 W - d_in w_1)``.

        ``W`` is the number of weights (not biases) and ``w_1`` the first layer's width: the
        forward pass and the weight gradients are ``2 B W`` each (a multiply and an add per
        weight and example), the input gradients ``2 B W`` less the first layer's, which nothing
        needs. It is the MLP case of the ``6 N`` per token of Kaplan et al., "Scaling Laws for
        Neural Language Models" (2020), section 2.1. Elementwise work (``tanh``, the loss, the
        optimizer's update) is left out, as there, so XLA's count is a few percent above it.
        """
        s = self.layer_sizes
        weights = sum(m * n for m, n in itertools.pairwise(s))
        return 2 * self.batch * (3 * weights - s[0] * s[1])


SIZES: dict[str, MLPSize] = {
    s.name: s
    for s in (
        MLPSize("tiny", d_in=32, width=64, depth=2, d_out=8, batch=32, device="cpu"),
        MLPSize("small", d_in=128, width=256, depth=3, d_out=16, batch=128, device="cpu"),
        MLPSize("medium", d_in=512, width=1024, depth=4, d_out=64, batch=512, device="cpu"),
        MLPSize("large", d_in=2048, width=4096, depth=4, d_out=256, batch=2048, device="gpu"),
        # About 0.5 GiB of bf16 weights and 1 GiB of bf16 activations per step.
        MLPSize("xl", d_in=8192, width=8192, depth=8, d_out=1024, batch=8192, device="gpu"),
    )
}


SCALE_RANGE = (0.5, 4.0)


def get_size(name: str) -> MLPSize:
    """Look up a size by name, or a scaled size ``<name>*<factor>`` (see :func:`scaled`).

    ``"small*1.05"`` is ``small`` with 5 % more batch rows, so about 5 % more FLOP per call: a
    controlled slowdown for sensitivity studies (``jaxbench compare --interleave``).

    Raises:
        ValueError: Unknown name (the message lists the known ones), or a factor that is not a
            number in :data:`SCALE_RANGE`.
    """
    base_name, star, factor_text = name.partition("*")
    try:
        base = SIZES[base_name]
    except KeyError:
        raise ValueError(
            f"unknown size {name!r}; choose from {', '.join(SIZES)} (or <size>*<factor>)"
        ) from None
    if not star:
        return base
    try:
        factor = float(factor_text)
    except ValueError:
        factor = math.nan
    if not SCALE_RANGE[0] <= factor <= SCALE_RANGE[1]:
        raise ValueError(
            f"size {name!r}: the factor after '*' must be a number in "
            f"[{SCALE_RANGE[0]}, {SCALE_RANGE[1]}], got {factor_text!r}"
        )
    return scaled(base, factor, name)


def scaled(base: MLPSize, factor: float, name: str | None = None) -> MLPSize:
    """``base`` with ``factor`` times its batch rows (rounded): ``factor`` times the FLOP per step.

    Every matmul of a train step or JVP has the batch as its row dimension, so the FLOP per call
    grow exactly with the rows (to within the rounding to whole rows; ``batch`` of the result
    gives the exact figure), while the weights, and the memory layout of every array's rows,
    stay as they are: widening a layer instead changes strides and cache behaviour, and on a
    CPU a slightly wider layer can run faster. The time ratio this causes must still be
    measured, not assumed.

    Args:
        base: The size to scale; only ``batch`` changes.
        factor: Wanted FLOP ratio, > 0.
        name: Name of the result; default ``"<base>*<factor>"``.

    Raises:
        ValueError: ``factor`` is not positive.
    """
    if not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor!r}")
    batch = max(1, round(base.batch * factor))
    return dataclasses.replace(base, name=name or f"{base.name}*{factor:g}", batch=batch)


def check_dtype(name: str) -> str:
    """Return ``name`` if it is a supported dtype, else raise ``ValueError`` listing them."""
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    return name
