"""Plots of results with seaborn.

Figures are made with :class:`matplotlib.figure.Figure` directly, not through ``pyplot``: nothing
is registered globally, no GUI backend is needed (saving uses Agg), and a notebook's backend is
left alone. Pass ``ax=`` to draw into a figure of your own.

Latencies span decades and cannot be negative, so they are drawn on a log scale (seaborn's
``log_scale=True``), where seaborn also estimates violin densities and box whiskers: no violin
reaches zero or below. Ticks are at 1, 2 and 5 times powers of ten (powers of ten only beyond two
decades), labelled in seconds (:func:`log_seconds_axis`). Every plot takes one measurement
condition at a time (:mod:`jaxbench.analysis.conditions`), with versions in version order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from jaxbench.analysis.conditions import CONDITION, NOT_RECORDED
from jaxbench.analysis.forward import crossover_k, forward_table
from jaxbench.analysis.versions import sort_versions
from jaxbench.units import fmt_seconds

#: Seed of the compile figure's jitter of its dots (any fixed number: the same figure each time).
JITTER_SEED = 0

STRATEGIES = (
    "forward/linearize",
    "forward/linearize_apply",
    "forward/vmap_jvp",
    "forward/jvp_loop",
    "forward/jacfwd",
)


def _single(frame: pd.DataFrame, column: str, what: str) -> None:
    if frame.empty:
        raise ValueError("nothing to plot: the frame has no rows")
    values = frame[column].dropna().unique() if column in frame else []
    if len(values) > 1:
        raise ValueError(
            f"the data hold {len(values)} {what}s ({', '.join(map(str, values[:4]))}...); "
            f"plot one {what} at a time (filter on {column!r})"
        )


def _labels(values: pd.Series) -> pd.Series:
    """``values`` as text, a missing one as :data:`NOT_RECORDED`, drawn and named, not lost.

    An asv ``existing`` environment records no JAX version.
    """
    return values.astype(object).where(values.notna(), NOT_RECORDED).astype(str)


def _order(frame: pd.DataFrame, column: str) -> list[str]:
    values = frame[column][frame[column] != NOT_RECORDED]
    order = sort_versions(values) if column == "version" else sorted(map(str, values.unique()))
    return order + [NOT_RECORDED] * bool((frame[column] == NOT_RECORDED).any())


def _axes(ax: Axes | None) -> Axes:
    return ax if ax is not None else Figure(figsize=(7, 4), layout="constrained").add_subplot()


def log_seconds_axis(ax: Axes, axis: str = "y") -> None:
    """Tick a log-scaled seconds axis at 1, 2 and 5 times powers of ten, labelled in seconds.

    Beyond two decades (at the current limits) the ticks are at powers of ten only; where the
    range is too narrow for two such ticks, :class:`matplotlib.ticker.LogLocator` itself falls
    back to round values. Minor ticks stay, unlabelled. Labels read ``2 ms``, ``500 µs``
    (:func:`jaxbench.units.fmt_seconds`, as in the tables).

    Args:
        ax: Axes whose ``axis`` is log-scaled and in seconds.
        axis: ``"x"`` or ``"y"``.
    """
    target = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = target.get_view_interval()
    decades = math.log10(hi / lo) if lo > 0 and hi > 0 else 0.0
    target.set_major_locator(LogLocator(subs=(1.0,) if decades > 2 else (1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: fmt_seconds(v)))
    target.set_minor_formatter(NullFormatter())


def latency_violins(
    samples: pd.DataFrame,
    x: str = "version",
    kind: str = "violin",
    ax: Axes | None = None,
) -> Axes:
    """Latency per version (or other ``x``) as violins or boxes, log scale, density in log space.

    Args:
        samples: :func:`jaxbench.analysis.steady_state_samples` rows of one case and condition.
        x: Column on the x axis; versions are in version order.
        kind: ``"violin"`` or ``"box"``.
        ax: Axes to draw on; a new figure when ``None``.

    Returns:
        The axes; y is latency in seconds on a log scale, tick labels in seconds.

    Raises:
        ValueError: Several cases or conditions, a non-positive latency, or an unknown ``kind``.
    """
    _single(samples, "case", "case")
    _single(samples, CONDITION, "condition")
    if (samples["latency_s"] <= 0).any():
        raise ValueError("latencies must be positive seconds to be drawn on a log scale")
    plot = {"violin": sns.violinplot, "box": sns.boxplot}.get(kind)
    if plot is None:
        raise ValueError(f"kind must be 'violin' or 'box', got {kind!r}")
    data = samples.assign(
        **{x: _labels(samples[x]), "latency_s": samples["latency_s"].astype(float)}
    )
    ax = _axes(ax)
    plot(data=data, x=x, y="latency_s", order=_order(data, x), log_scale=True, ax=ax)
    log_seconds_axis(ax, "y")
    ax.set_ylabel("latency per call (log scale)")
    if "case" in samples and len(samples):
        ax.set_title(str(samples["case"].iloc[0]), fontsize="small")
    return ax


def latency_ecdf(samples: pd.DataFrame, hue: str = "version", ax: Axes | None = None) -> Axes:
    """Empirical CDF of latency per version (or other ``hue``), log-scaled x axis in seconds.

    Args:
        samples: :func:`jaxbench.analysis.steady_state_samples` rows of one case and condition.
        hue: Column giving one curve each; versions are in version order.
        ax: Axes to draw on; a new figure when ``None``.

    Raises:
        ValueError: Several cases or conditions.
    """
    _single(samples, "case", "case")
    _single(samples, CONDITION, "condition")
    data = samples.assign(**{hue: _labels(samples[hue])})
    ax = _axes(ax)
    sns.ecdfplot(
        data=data, x="latency_s", hue=hue, hue_order=_order(data, hue), log_scale=True, ax=ax
    )
    log_seconds_axis(ax, "x")
    ax.set_xlabel("latency per call (log scale)")
    return ax


def compile_bars(
    compiles: pd.DataFrame, x: str = "version", hue: str | None = None, ax: Axes | None = None
) -> Axes:
    """Compile time per version: bars at the median, one dot per record.

    Args:
        compiles: :func:`jaxbench.analysis.compile_times` rows of one condition (and one case,
            unless ``hue="case"``).
        x: Column on the x axis; versions in version order.
        hue: Optional column for grouped bars, e.g. ``"case"``.
        ax: Axes to draw on; a new figure when ``None``.

    Raises:
        ValueError: Several conditions, or several cases without ``hue="case"``.
    """
    _single(compiles, CONDITION, "condition")
    if hue != "case":
        _single(compiles, "case", "case")
    data = compiles.assign(**{x: _labels(compiles[x])})
    order = _order(data, x)
    ax = _axes(ax)
    common = {"data": data, "x": x, "y": "compile_s", "order": order, "hue": hue, "ax": ax}
    sns.barplot(**common, estimator="median", errorbar=None, alpha=0.6)
    # seaborn jitters the dots with NumPy's global generator: seeded here (and given back as
    # it was), so the same records draw the same figure
    state = np.random.get_state()
    np.random.seed(JITTER_SEED)
    try:
        sns.stripplot(**common, dodge=hue is not None, color="black", size=3, legend=False)
    finally:
        np.random.set_state(state)
    ax.set_ylabel("XLA compile time, s")
    return ax


def forward_crossover(
    frame: pd.DataFrame,
    strategies: Sequence[str] = STRATEGIES,
    cheaper: str = "forward/linearize",
    than: str = "forward/vmap_jvp",
    axes: tuple[Axes, Axes] | None = None,
) -> Figure:
    """Forward-mode cost against K: time per call (log-log) and held memory, crossover marked.

    Left: median latency per strategy against K, both axes log scale; a dashed vertical line marks
    the K at which ``cheaper`` becomes cheaper than ``than`` (:func:`crossover_k`), when it does.
    Right: ``metrics.held_bytes`` (MiB) per strategy against K.

    Args:
        frame: :func:`jaxbench.analysis.load_results` rows of one size, dtype, wrt, condition and
            version (other benchmarks are ignored).
        strategies: Benchmarks to draw.
        cheaper: Benchmark expected to win at large K (see :func:`crossover_k`).
        than: Benchmark it is compared with.
        axes: ``(time axes, memory axes)`` to draw on, e.g. one row of a grid of several
            versions; the series is then named in the time axes' title instead of a figure
            title. A new figure when ``None``.

    Returns:
        The figure (two axes, or the figure holding ``axes``).

    Raises:
        ValueError: No forward-mode samples, or more than one series.
    """
    table = forward_table(frame)
    if table.empty:
        raise ValueError("no forward-mode steady-state samples to plot")
    for column, what in (
        ("param.size", "size"),
        ("param.dtype", "dtype"),
        ("param.wrt", "wrt"),
        (CONDITION, "condition"),
        ("version", "version"),
    ):
        _single(table, column, what)
    table = table[table["benchmark"].isin(strategies)].assign(
        held_mib=lambda t: t["held_bytes"] / 2**20
    )
    if axes is None:
        fig = Figure(figsize=(11, 4), layout="constrained")
        ax_t, ax_m = fig.subplots(1, 2)
    else:
        ax_t, ax_m = axes
        fig = ax_t.figure
    order = [s for s in strategies if s in set(table["benchmark"])]
    sns.lineplot(
        data=table, x="k", y="p50_s", hue="benchmark", hue_order=order, marker="o", ax=ax_t
    )
    ax_t.set(xscale="log", yscale="log", xlabel="K (tangents)", ylabel="median time per call, s")
    k_x = crossover_k(table, cheaper, than)
    if k_x is not None:
        ax_t.axvline(k_x, color="gray", linestyle="--")
        ax_t.annotate(
            f"{cheaper.split('/')[-1]} < {than.split('/')[-1]}\nfrom K ≈ {k_x:.3g}",
            (k_x, 0.95),
            xycoords=("data", "axes fraction"),
            va="top",
            fontsize="small",
        )
    sns.lineplot(
        data=table, x="k", y="held_mib", hue="benchmark", hue_order=order, marker="o", ax=ax_m
    )
    ax_m.set(xscale="log", xlabel="K (tangents)", ylabel="held memory, MiB")
    # One legend for both panels (same colours), below the time panel, clear of the annotation.
    ax_m.get_legend().remove()
    sns.move_legend(ax_t, "upper left", bbox_to_anchor=(0.0, -0.16), ncol=min(3, len(order)),
                    frameon=False, title=None, fontsize="small")  # fmt: skip
    first = table.iloc[0]
    title = (
        f"forward mode: {first['param.size']} {first['param.dtype']} wrt={first['param.wrt']}, "
        f"jax {first['version']}"
    )
    if axes is None:
        fig.suptitle(title, fontsize="medium")
    else:
        ax_t.set_title(title, fontsize="small")
    return fig


def latency_against(points: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Median latency against a swept parameter, one line per version, both axes log scale.

    Each record is a dot at its value and median latency; the line goes through the median of
    the records at each value, so the slope between values reads as the scaling exponent of
    :func:`jaxbench.analysis.scaling.exponents_frame` (1: linear, 2: quadratic).

    Args:
        points: :func:`jaxbench.analysis.scaling.swept_points` rows of one family and swept
            parameter (``x``, ``median_s``, ``jax``).
        ax: Axes to draw on; a new figure's when ``None``.

    Raises:
        ValueError: No points, or more than one swept parameter.
    """
    if points.empty:
        raise ValueError("no swept points to plot")
    _single(points, "swept", "swept parameter")
    ax = _axes(ax)
    order = sort_versions(points["jax"])
    data = points.assign(jax=points["jax"].astype(str))
    # The dots as one marker line per version (Agg stamps one marker), not a scatter
    # collection of a path per record: a long history has tens of thousands of records.
    for color, version in zip(sns.color_palette(n_colors=len(order)), order, strict=True):
        dots = data[data["jax"] == version]
        ax.plot(dots["x"], dots["median_s"], linestyle="none", marker="o", markersize=5,
                markeredgecolor="white", markeredgewidth=0.5, alpha=0.35, color=color)  # fmt: skip
    sns.lineplot(data=data, x="x", y="median_s", hue="jax", hue_order=order, estimator="median",
                 errorbar=None, marker="o", ax=ax)  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel=str(points["swept"].iloc[0]),
           ylabel="median latency per call")  # fmt: skip
    log_seconds_axis(ax)
    return ax
