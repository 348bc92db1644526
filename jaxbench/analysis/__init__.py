"""Analysis of results: tidy frames, per-case statistics, version comparisons and plots.

Reads jaxbench records and asv results (never writes them). Typical use::

    from jaxbench import analysis

    frame, problems = analysis.load_results(["results"])
    samples = analysis.steady_state_samples(frame)
    summary = analysis.case_summary(samples)  # n, processes, p50, p95, IQR, MAD, interval
    result = analysis.compare_versions(frame, "0.4.30", "0.4.31")
    result.table  # ratio and interval over processes, verdict; steady state and compile apart

Plots live in :mod:`jaxbench.analysis.plots` (imported on demand: it loads matplotlib), and so
does the version-upgrade report, :func:`jaxbench.analysis.report.write_report` (``report.md`` with
PNG figures; the ``jaxbench report`` command).
"""

from jaxbench.analysis.compare import Comparison, compare_to_previous, compare_versions
from jaxbench.analysis.conditions import (
    DEFAULT_FIELDS,
    SeriesSplit,
    add_conditions,
    condition_fields,
    split_series,
)
from jaxbench.analysis.forward import crossover_k, forward_table
from jaxbench.analysis.frames import (
    Problem,
    case_label,
    compile_times,
    load_results,
    steady_state_samples,
)
from jaxbench.analysis.stats import case_summary, process_interval, summarize_samples
from jaxbench.analysis.versions import (
    previous_version,
    sort_versions,
    version_categorical,
    version_key,
)
from jaxbench.inference.verdicts import (
    VERDICTS,
    Estimate,
    decide,
    estimate_independent,
    estimate_paired,
)

__all__ = [
    "DEFAULT_FIELDS",
    "VERDICTS",
    "Comparison",
    "Estimate",
    "Problem",
    "SeriesSplit",
    "add_conditions",
    "case_label",
    "case_summary",
    "compare_to_previous",
    "compare_versions",
    "compile_times",
    "condition_fields",
    "crossover_k",
    "decide",
    "estimate_independent",
    "estimate_paired",
    "forward_table",
    "load_results",
    "previous_version",
    "process_interval",
    "sort_versions",
    "split_series",
    "steady_state_samples",
    "summarize_samples",
    "version_categorical",
    "version_key",
]
