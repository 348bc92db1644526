# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Version-upgrade review
#
# Each JAX version against the one before it (version order: 0.4.9 before 0.4.10): which train
# steps, compiles and forward-mode products got slower or faster, by how much, and whether the
# change is real. The verdicts that hold come first (regressions, then improvements), then what
# the data cannot tell; steady state and compile time are always separate rows. The same review
# as `jaxbench report` (which also writes it as Markdown with figures).
#
# The process is the unit: each process (a run) is summarised by the median of its calls, and
# the versions are compared with Welch's t interval of the mean log per-process medians (live
# comparisons: the t interval over process pairs). Verdict rule
# (`jaxbench.inference.verdicts.decide`), with t the threshold: `slower` when the whole interval
# of the ratio (candidate / baseline) lies above 1 + t, `faster` when it lies below 1 / (1 + t),
# `same` when it lies within both bounds, `inconclusive` otherwise (with the advice of what would
# settle it: usually more processes), and `unstable` when the noise indicators say the machine
# changed. A false `slower` has probability at most alpha / 2 per case. One process a side gives
# no interval: `inconclusive`. Results: the folder named by `JAXBENCH_RESULTS` (default
# `results/versions`, relative to the repository root).

# %%
# %matplotlib inline
import pandas as pd
from IPython.display import Markdown, display

from jaxbench.analysis import facets, report_tables
from jaxbench.analysis import markdown as md
from jaxbench.analysis.compare import COMPILE, STEADY_STATE
from jaxbench.analysis.drift import sorted_findings
from jaxbench.analysis.frames import steady_state_samples
from jaxbench.analysis.notebook import results_dir
from jaxbench.analysis.programs import programs_frame
from jaxbench.analysis.report import load_review
from jaxbench.analysis.report_context import ReportContext
from jaxbench.analysis.report_explain import explanations_section
from jaxbench.analysis.report_live import review_live_table

pd.set_option("display.max_colwidth", None)  # case labels are long: show them whole
results = results_dir()
review = load_review(results)  # consecutive pairs; baseline=..., candidate=... for one pair
settings = review.settings
display(
    Markdown(
        f"Results `{results}`; versions {', '.join(review.versions)}; compared "
        + (
            "; ".join(report_tables.pair_label(a, b) for a, b in review.pairs)
            or "none (one version: nothing to compare, the tables below are empty)"
        )
        + f". Design: **{review.design.name}**. Thresholds: steady state {settings.threshold:.0%}, "
        f"compile time {settings.compile_threshold:.0%}; alpha {settings.alpha} "
        f"({settings.confidence:.0%} intervals over processes). Verdicts: "
        + report_tables.verdict_sentence(review.verdict_counts())
        + "."
    )
)
display(report_tables.summary_counts(review))
if review.problems:
    display(Markdown("**Problems with files:**\n\n" + md.bullets(map(str, review.problems))))

# %% [markdown]
# ## Regressions (every pair)
#
# Worst first; steady state before compile time. Ratio = candidate / baseline (geometric mean
# over processes of each process's median) with its interval over processes; `processes`:
# baseline + candidate processes; `detectable`: the smallest slowdown found with 80 % power.

# %%
display(report_tables.comparison_table(review.regressions).frame())

# %% [markdown]
# ## Improvements

# %%
display(report_tables.comparison_table(review.improvements).frame())

# %% [markdown]
# ## Inconclusive and unstable
#
# `unstable`: the machine changed under the comparison (`advice` gives the reason).
# `inconclusive`: the interval is too wide to show a change beyond the threshold or its absence;
# `advice` says what would settle it. Largest apparent change first.

# %%
display(report_tables.comparison_table(review.unstable, advice=True).frame())
display(report_tables.comparison_table(review.inconclusive, advice=True).frame())

# %% [markdown]
# ## Numerical drift beside the timings
#
# `jaxbench drift` results found in the same folder: each version's outputs, gradients and loss
# on the stored regression sets against the reference, with the recorded tolerance. A version
# that is faster but drifts past tolerance is a finding.

# %%
display(report_tables.environment_table(review))
if review.drift is None:
    display(Markdown("Drift not checked: no `drift-*.jsonl` files in the results."))
else:
    drift_summary = review.drift.groupby(["version", "dtype"], observed=True).agg(
        outputs=("output", "size"),
        max_abs_err=("max_abs_err", "max"),
        max_rel_err=("max_rel_err", "max"),
        findings=("within_tolerance", lambda w: int((~w.astype(bool)).sum())),
    )
    display(drift_summary)
    display(sorted_findings(review.drift))

# %% [markdown]
# ## Live comparisons
#
# `jaxbench compare --interleave` results found in the same folder, shown apart from the recorded
# runs: the interval is over process pairs (`pairs`), and `disagree` marks a case whose live and
# recorded verdicts both hold and contradict each other.

# %%
live = review_live_table(ReportContext(review, results))
display(live.frame() if review.live else Markdown("None."))

# %% [markdown]
# ## What changed in the programs
#
# Every timed record names its case's program artifact (`programs/<sha256>.json.gz` beside the
# run): jaxpr, StableHLO, optimized HLO, XLA's cost and memory figures and flags.
# `programs_frame` reads each once: one row per compiled program, with the counts derived from its
# optimized HLO, FLOP, temporary bytes and the compile phases (median seconds). Then the
# explanation of each verdict that holds, as the report gives it.

# %%
programs = programs_frame(review.frame)
if programs.empty:
    display(Markdown("No saved programs (records written before artifacts were saved)."))
else:
    display(
        programs.pivot_table(
            index=["case", "target"], columns="jax", values="instructions", aggfunc="first"
        )
    )
    broken = programs[programs["problem"].notna()]
    if not broken.empty:  # named, and left out of the table above
        display(broken[["case", "jax", "digest", "problem"]])
    display(Markdown(explanations_section(ReportContext(review, results)) or "No verdict holds."))

# %% [markdown]
# ## The regressed cases, seen whole
#
# Latency per version (log scale) of each steady-state regression, per condition.

# %%
slow = review.regressions[review.regressions["metric"] == STEADY_STATE]
samples = steady_state_samples(review.frame)
for condition, rows in slow.groupby("condition", sort=True):
    cases = list(dict.fromkeys(rows["case"]))
    display(Markdown(f"Condition `{condition}`"))
    display(facets.latency_grid(samples[samples["condition"] == condition], cases))
if slow.empty:
    display(Markdown("No steady-state regression."))

# %% [markdown]
# ## Every comparison, pair by pair
#
# Verdict counts, then steady state and compile time in separate tables, with each row's advice.

# %%
for a, b in review.pairs:
    rows = review.results[(review.results["baseline"] == a) & (review.results["candidate"] == b)]
    display(Markdown(f"### {report_tables.pair_label(a, b)}"))
    display(report_tables.verdict_counts(rows))
    for metric, title in ((STEADY_STATE, "Steady state"), (COMPILE, "Compile time")):
        display(Markdown(f"**{title}**"))
        display(
            report_tables.comparison_table(
                rows[rows["metric"] == metric], versions=False, verdict=True, advice=True
            ).frame()
        )

# %% [markdown]
# ## Kept apart, unmatched, not timed
#
# Rows of one case measured under different conditions are never pooled; cases with no
# counterpart in the other version are listed, and so are records that were not timed.

# %%
for comparison in review.comparisons:
    label = report_tables.pair_label(comparison.baseline, comparison.candidate)
    display(Markdown(f"**{label}**, kept apart:\n\n" + md.bullets(comparison.kept_apart)))
    display(Markdown(f"**{label}**, unmatched:\n\n" + md.bullets(comparison.unmatched)))
display(report_tables.not_timed_table(review))
