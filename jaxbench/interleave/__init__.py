"""Live comparison of two variants in two persistent worker processes, interleaved or not.

:func:`run_interleaved` alternates short blocks of timed calls between the variants (order drawn
per round) and judges them on paired per-round ratios; :func:`run_back_to_back` runs one after
the other, as separate ``jaxbench run`` calls would. ``jaxbench compare --interleave`` is the
command.
"""

from jaxbench.interleave.result import (
    CaseComparison,
    comparisons_frame,
    load_comparisons,
)
from jaxbench.interleave.session import (
    Schedule,
    Variant,
    WorkerDied,
    WorkerError,
    append_comparison,
    run_back_to_back,
    run_interleaved,
    write_comparisons,
)

__all__ = [
    "CaseComparison",
    "Schedule",
    "Variant",
    "WorkerDied",
    "WorkerError",
    "append_comparison",
    "comparisons_frame",
    "load_comparisons",
    "run_back_to_back",
    "run_interleaved",
    "write_comparisons",
]
