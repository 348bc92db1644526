"""Live comparison of two variants in two persistent worker processes, interleaved or not.

:func:`run_interleaved` runs several pairs of fresh worker processes; within a pair it alternates
short blocks of timed calls between the variants (order drawn per round), and it judges over
pairs; :func:`run_back_to_back` runs one side after the other in each pair, as separate
``jaxbench run`` calls would. ``jaxbench compare --interleave`` is the command.
"""

from jaxbench.interleave.result import (
    CaseComparison,
    PairRun,
    comparisons_frame,
    load_comparisons,
)
from jaxbench.interleave.session import (
    Schedule,
    Variant,
    WorkerDied,
    WorkerError,
    run_back_to_back,
    run_interleaved,
    write_comparisons,
)

__all__ = [
    "CaseComparison",
    "PairRun",
    "Schedule",
    "Variant",
    "WorkerDied",
    "WorkerError",
    "comparisons_frame",
    "load_comparisons",
    "run_back_to_back",
    "run_interleaved",
    "write_comparisons",
]
