"""Live comparison of two variants in two persistent worker processes, interleaved or not.

:func:`run_pairs` runs several pairs of fresh worker processes; within a pair it alternates
short blocks of timed calls between the variants (order drawn per round), and it judges over
pairs; in its ``back_to_back`` mode it runs one side after the other in each pair, as separate
``jaxbench run`` calls would. :func:`run_live` runs either and saves its file after every pair
(the runner of every command that runs live pairs). ``jaxbench compare --interleave`` is the
command. The results are
:class:`jaxbench.store.CaseComparison` records; :func:`estimate` gives their verdicts.
"""

from jaxbench.interleave.runner import (
    LiveRun,
    LiveStopped,
    cut_short_files,
    live_path,
    resume_live,
    run_live,
)
from jaxbench.interleave.session import (
    Schedule,
    Variant,
    WorkerDied,
    WorkerError,
    run_pairs,
)
from jaxbench.interleave.verdict import estimate, summary_line

__all__ = [
    "LiveRun",
    "LiveStopped",
    "Schedule",
    "Variant",
    "WorkerDied",
    "WorkerError",
    "cut_short_files",
    "estimate",
    "live_path",
    "resume_live",
    "run_live",
    "run_pairs",
    "summary_line",
]
