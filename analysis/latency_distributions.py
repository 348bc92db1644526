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
# # Latency distributions across JAX versions
#
# Steady-state latency per call of every case, for each JAX version in the results: a summary
# table (n, processes, p50, p95, IQR, MAD and the interval over processes), violins on a log scale
# (densities estimated in log space) and ECDFs. One measurement condition at a time: rows
# measured under different conditions (device, machine, flags, ...) are never pooled.
#
# Results: the folder named by `JAXBENCH_RESULTS` (default `results/versions`, relative to
# the repository root).

# %%
# %matplotlib inline
import pandas as pd
from IPython.display import Markdown, display

from jaxbench import analysis
from jaxbench.analysis import facets
from jaxbench.analysis import markdown as md
from jaxbench.analysis.notebook import load_frame, results_dir
from jaxbench.analysis.report_figures import case_group
from jaxbench.store.record import case_sort_key

pd.set_option("display.max_colwidth", None)  # case labels are long: show them whole
results = results_dir()
frame, problems = load_frame(results)
samples = analysis.steady_state_samples(frame)
versions = analysis.sort_versions(frame["version"])
display(
    Markdown(
        f"{len(frame)} records from `{results}`; versions (version order): "
        f"{', '.join(versions)}; {samples['case'].nunique()} cases with steady-state samples."
    )
)
if problems:
    display(Markdown("**Problems with files:**\n\n" + md.bullets(map(str, problems))))

# %% [markdown]
# ## Summary per case, condition and version
#
# `n`: timed calls; `processes`: the processes (runs) they came from; `p50`/`p95`: percentiles
# over every call; `iqr`: p75 - p25; `mad`: median absolute deviation (raw); `ci`: 95 % interval
# of the typical process median (t interval of the mean log per-process median, so it is over
# processes, not calls: calls of one process are not independent). One process gives none.

# %%
summary = analysis.case_summary(samples)
shown = summary.assign(
    **{c: summary[c].map(md.seconds) for c in ("p50", "p95", "iqr", "mad")},
    ci=[
        f"[{md.seconds(lo)}, {md.seconds(hi)}]"
        for lo, hi in zip(summary["ci_low"], summary["ci_high"], strict=True)
    ],
).drop(columns=["ci_low", "ci_high"])
display(shown)

# %% [markdown]
# ## Violins: latency per version, log scale
#
# One figure per condition and case group (train steps, forward mode, others).

# %%
for condition, rows in samples.groupby("condition", sort=True):
    groups = rows["benchmark"].map(case_group)
    for group in sorted(groups.unique()):
        cases = sorted(rows.loc[groups == group, "case"].unique(), key=case_sort_key)
        display(Markdown(f"**{group}**, condition `{condition}`: {len(cases)} cases"))
        display(facets.latency_grid(rows, cases))

# %% [markdown]
# ## ECDFs
#
# The whole distribution per version: a shift right is slower at every quantile; a change of
# slope is a change of spread.

# %%
for condition, rows in samples.groupby("condition", sort=True):
    groups = rows["benchmark"].map(case_group)
    for group in sorted(groups.unique()):
        display(Markdown(f"**{group}**, condition `{condition}`"))
        cases = sorted(rows.loc[groups == group, "case"].unique(), key=case_sort_key)
        display(facets.ecdf_grid(rows, cases))
