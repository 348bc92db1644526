"""What changed in the compiled program: captures of a case's programs at each level, compared.

:func:`capture` (in a worker of either side) -> :func:`diff_programs` -> :func:`explain_lines`;
``jaxbench explain`` runs them on two interpreters (JAX versions).
"""

from jaxbench.explain.diff import BELOW_HLO, TargetDiff, diff_programs, explain_lines
from jaxbench.explain.normalize import hlo_counts, normalize_hlo
from jaxbench.explain.program import capture

__all__ = [
    "BELOW_HLO",
    "TargetDiff",
    "capture",
    "diff_programs",
    "explain_lines",
    "hlo_counts",
    "normalize_hlo",
]
