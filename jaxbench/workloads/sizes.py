"""The model-size registry shared by every workload."""

from __future__ import annotations

import itertools
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


def get_size(name: str) -> MLPSize:
    """Look up a size by name.

    Raises:
        ValueError: Unknown name; the message lists the known ones.
    """
    try:
        return SIZES[name]
    except KeyError:
        raise ValueError(f"unknown size {name!r}; choose from {', '.join(SIZES)}") from None


def check_dtype(name: str) -> str:
    """Return ``name`` if it is a supported dtype, else raise ``ValueError`` listing them."""
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    return name
