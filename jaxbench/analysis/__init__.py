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

import importlib

# Names load on first use (PEP 562), so importing one submodule, e.g. the record tables'
# ``jaxbench.analysis.conditions``, does not import scipy.stats and the rest.
_SOURCES = {
    "Comparison": "jaxbench.analysis.compare",
    "compare_to_previous": "jaxbench.analysis.compare",
    "compare_versions": "jaxbench.analysis.compare",
    "DEFAULT_FIELDS": "jaxbench.analysis.conditions",
    "SeriesSplit": "jaxbench.analysis.conditions",
    "add_conditions": "jaxbench.analysis.conditions",
    "condition_fields": "jaxbench.analysis.conditions",
    "split_series": "jaxbench.analysis.conditions",
    "crossover_k": "jaxbench.analysis.forward",
    "forward_table": "jaxbench.analysis.forward",
    "Problem": "jaxbench.analysis.frames",
    "case_label": "jaxbench.analysis.frames",
    "compile_times": "jaxbench.analysis.frames",
    "drawn_samples": "jaxbench.analysis.frames",
    "load_results": "jaxbench.analysis.frames",
    "steady_state_samples": "jaxbench.analysis.frames",
    "case_summary": "jaxbench.analysis.stats",
    "process_interval": "jaxbench.analysis.stats",
    "summarize_samples": "jaxbench.analysis.stats",
    "previous_version": "jaxbench.analysis.versions",
    "sort_versions": "jaxbench.analysis.versions",
    "version_categorical": "jaxbench.analysis.versions",
    "version_key": "jaxbench.analysis.versions",
    "VERDICTS": "jaxbench.inference.verdicts",
    "Estimate": "jaxbench.inference.verdicts",
    "decide": "jaxbench.inference.verdicts",
    "estimate_independent": "jaxbench.inference.verdicts",
    "estimate_paired": "jaxbench.inference.verdicts",
}
__all__ = sorted(_SOURCES)


def __getattr__(name: str):
    """Import the submodule that defines ``name`` (an entry of ``__all__``) when first asked."""
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_SOURCES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_SOURCES])
