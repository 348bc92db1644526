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
# # Forward mode: linearize vs vmap(jvp) vs a jvp loop, against K
#
# K Jacobian-vector products at one point cost, per strategy: `linearize` (linearize once, then
# K applications), `vmap_jvp` (one batched jvp), `jvp_loop` (K jvps), `jacfwd`. Linearizing
# pays once and holds its linearization in memory; the crossover is the K from which it takes
# less time per call than the rival. Per series (size, dtype, wrt, condition) and JAX version.
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
from jaxbench.analysis.forward import crossover_table, forward_series
from jaxbench.analysis.notebook import load_frame, results_dir
from jaxbench.analysis.report_figures import crossover_display

pd.set_option("display.max_colwidth", None)  # case labels are long: show them whole
results = results_dir()
frame, problems = load_frame(results)
table = analysis.forward_table(frame)
display(
    Markdown(
        f"{len(frame)} records from `{results}`; {len(table)} forward-mode medians "
        f"(strategy, K, series, version)."
    )
)
if problems:
    display(Markdown("**Problems with files:**\n\n" + md.bullets(map(str, problems))))

# %% [markdown]
# ## Crossover K per series and version
#
# Log-log interpolation between measured Ks; `none up to K = ...` when linearize never wins.

# %%
display(crossover_display(crossover_table(frame)))

# %% [markdown]
# ## Median time per call and held memory against K
#
# Per series, one row per version: time per call (log-log, crossover of linearize and
# vmap(jvp) dashed) and the memory each strategy holds between calls.

# %%
for (size, dtype, wrt, condition), rows in forward_series(frame):
    display(Markdown(f"### {size} {dtype} wrt={wrt}, condition `{condition}`"))
    display(facets.crossover_grid(rows))

# %% [markdown]
# ## The numbers behind the figures
#
# Median time per call (`p50`) and held memory (MiB) per strategy and K.

# %%
wide = table.assign(
    strategy=table["benchmark"].str.removeprefix("forward/"),
    p50=table["p50_s"].map(md.seconds),
    held_mib=(table["held_bytes"] / 2**20).round(2),
)
numbers = wide.pivot_table(
    index=["param.size", "param.dtype", "param.wrt", "condition", "version", "k"],
    columns="strategy",
    values=["p50", "held_mib"],
    aggfunc="first",
    observed=True,
)
display(numbers)
