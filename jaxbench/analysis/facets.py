"""Figures of several cases at once: one axes per case (or per version), drawn by :mod:`.plots`.

Each function takes rows of one measurement condition and returns a
:class:`matplotlib.figure.Figure` made without ``pyplot`` (nothing registered globally; see
:mod:`jaxbench.analysis.plots`). Facets are laid out in rows of at most ``ncols`` axes, titled
with the case.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from jaxbench.analysis import plots
from jaxbench.analysis.conditions import CONDITION
from jaxbench.analysis.versions import sort_versions
from jaxbench.store.record import case_sort_key

FACET_SIZE = (4.6, 3.4)  # inches per facet: width, height
TITLE_WIDTH = 52  # characters per line of a facet title


def facet_grid(
    n: int, ncols: int = 3, size: tuple[float, float] = FACET_SIZE
) -> tuple[Figure, list[Axes]]:
    """A figure with ``n`` axes in rows of ``ncols`` (unused cells of the last row removed).

    Args:
        n: Number of axes, at least 1.
        ncols: Axes per row, at most.
        size: ``(width, height)`` of one facet, inches.

    Raises:
        ValueError: ``n`` or ``ncols`` is below 1.
    """
    if n < 1 or ncols < 1:
        raise ValueError(f"a facet grid needs n >= 1 and ncols >= 1, got n={n}, ncols={ncols}")
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    grid = list(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for ax in grid[n:]:
        fig.delaxes(ax)
    return fig, grid[:n]


def _title(ax: Axes, label: str) -> None:
    ax.set_title(textwrap.fill(label, TITLE_WIDTH), fontsize="small")


def _condition(rows: pd.DataFrame) -> str:
    conditions = rows[CONDITION].dropna().unique() if CONDITION in rows else []
    if len(conditions) != 1:
        raise ValueError(
            f"a facet figure takes rows of one condition, got {len(conditions)}; filter on "
            f"{CONDITION!r}"
        )
    return str(conditions[0])


def _cases(rows: pd.DataFrame, cases: Sequence[str] | None) -> list[str]:
    present = {str(c) for c in rows["case"].dropna().unique()}  # one per case, not per row
    if cases is None:
        chosen = sorted(present, key=case_sort_key)
    else:
        chosen = [c for c in cases if c in present]
    if not chosen:
        raise ValueError("nothing to plot: none of the cases has rows")
    return chosen


def _case_grid(
    rows: pd.DataFrame,
    cases: Sequence[str] | None,
    ncols: int,
    draw: Callable[[pd.DataFrame, Axes], object],
    title: str,
) -> Figure:
    """One axes per case, each drawn by ``draw(rows of the case, ax)``; ``title, <condition>``."""
    condition = _condition(rows)
    chosen = _cases(rows, cases)
    fig, axes = facet_grid(len(chosen), ncols)
    for ax, case in zip(axes, chosen, strict=True):
        draw(rows[rows["case"] == case], ax)
        _title(ax, case)
    fig.suptitle(f"{title}, {condition}", fontsize="medium")
    return fig


def latency_grid(
    samples: pd.DataFrame,
    cases: Sequence[str] | None = None,
    kind: str = "violin",
    ncols: int = 3,
) -> Figure:
    """Latency per version, one axes per case: :func:`plots.latency_violins` (log space).

    Args:
        samples: :func:`jaxbench.analysis.steady_state_samples` rows of one condition.
        cases: Cases to draw, in this order (those without samples are left out); all when
            ``None``, sorted.
        kind: ``"violin"`` or ``"box"``.
        ncols: Facets per row.

    Raises:
        ValueError: Several conditions, no sample of any case, or as
            :func:`plots.latency_violins`.
    """
    return _case_grid(
        samples,
        cases,
        ncols,
        lambda rows, ax: plots.latency_violins(rows, kind=kind, ax=ax),
        "steady-state latency per call",
    )


def ecdf_grid(samples: pd.DataFrame, cases: Sequence[str] | None = None, ncols: int = 3) -> Figure:
    """ECDF of latency per version, one axes per case: :func:`plots.latency_ecdf`.

    Args:
        samples: As :func:`latency_grid`.
        cases: As :func:`latency_grid`.
        ncols: Facets per row.

    Raises:
        ValueError: Several conditions, or no sample of any case.
    """
    return _case_grid(
        samples,
        cases,
        ncols,
        lambda rows, ax: plots.latency_ecdf(rows, ax=ax),
        "ECDF of steady-state latency",
    )


def compile_grid(
    compiles: pd.DataFrame, cases: Sequence[str] | None = None, ncols: int = 3
) -> Figure:
    """Compile time per version, one axes per case: :func:`plots.compile_bars`.

    Args:
        compiles: :func:`jaxbench.analysis.compile_times` rows of one condition.
        cases: As :func:`latency_grid`.
        ncols: Facets per row.

    Raises:
        ValueError: Several conditions, or no compile time of any case.
    """
    return _case_grid(
        compiles,
        cases,
        ncols,
        lambda rows, ax: plots.compile_bars(rows, ax=ax),
        "XLA compile time (bar: median; dots: records)",
    )


def crossover_grid(frame: pd.DataFrame, versions: Sequence[str] | None = None) -> Figure:
    """Forward-mode cost against K, one row per version: :func:`plots.forward_crossover`.

    Each row has the time per call of every strategy (log-log, crossover of linearize and
    vmap(jvp) marked) and the held memory.

    Args:
        frame: :func:`jaxbench.analysis.load_results` rows of one forward-mode series (size,
            dtype, wrt, condition); other benchmarks are ignored.
        versions: Versions to draw, one row each; all present when ``None``.

    Raises:
        ValueError: No forward-mode samples, or more than one series.
    """
    forward = frame[frame["benchmark"].astype(str).str.startswith("forward/")]
    forward = forward[forward["status"] == "ok"]
    present = sort_versions(forward["version"])
    chosen = present if versions is None else [v for v in versions if str(v) in present]
    if not chosen:
        raise ValueError("no forward-mode steady-state samples to plot")
    fig = Figure(figsize=(11, 3.8 * len(chosen)), layout="constrained")
    rows = fig.subplots(len(chosen), 2, squeeze=False)
    for (ax_t, ax_m), version in zip(rows, chosen, strict=True):
        plots.forward_crossover(
            forward[forward["version"].astype(str) == version], axes=(ax_t, ax_m)
        )
    return fig


#: The columns that name one family of :func:`jaxbench.analysis.scaling.swept_points`.
SWEEP_KEYS = ("benchmark", "backend", "device_kind", "machine", "params", "swept")


def sweep_grid(
    points: pd.DataFrame, families: Sequence[tuple[str, ...]] | None = None, ncols: int = 3
) -> Figure:
    """Latency against each swept parameter, one axes per family: :func:`plots.latency_against`.

    Args:
        points: :func:`jaxbench.analysis.scaling.swept_points` rows.
        families: Families to draw, in this order, as tuples of :data:`SWEEP_KEYS` values as
            text (``str``); all when ``None``, in sweep order (numbers by value).
        ncols: Facets per row.

    Raises:
        ValueError: No points, or none of ``families`` has points.
    """
    if points.empty:
        raise ValueError("nothing to plot: no swept parameter")
    groups = {
        tuple(map(str, key)): rows
        for key, rows in points.groupby(list(SWEEP_KEYS), dropna=False, sort=False)
    }
    if families is None:
        families = sorted(groups, key=lambda k: case_sort_key(" ".join(map(str, k))))
    chosen = [f for f in families if f in groups]
    if not chosen:
        raise ValueError("nothing to plot: none of the families has points")
    fig, axes = facet_grid(len(chosen), ncols)
    for ax, family in zip(axes, chosen, strict=True):
        plots.latency_against(groups[family], ax=ax)
        benchmark, backend, _, _, params, swept = family
        _title(ax, f"{benchmark} {params} ({backend}), against {swept}".replace("  ", " "))
    fig.suptitle("median latency against each swept parameter", fontsize="medium")
    return fig
