"""What changed in the compiled program: captures of a case's programs at each level, compared.

:func:`jaxbench.measure.programs.describe` (at compile, in a worker or a run) ->
:func:`diff_programs` -> :func:`explain_lines`; ``jaxbench explain`` runs them on two interpreters
(JAX versions) or reads them from two result sets' saved artifacts.
"""

from jaxbench.explain.diff import BELOW_HLO, TargetDiff, diff_programs, explain_lines
from jaxbench.explain.normalize import hlo_counts, normalize_hlo

__all__ = [
    "BELOW_HLO",
    "TargetDiff",
    "diff_programs",
    "explain_lines",
    "hlo_counts",
    "normalize_hlo",
]
