"""Markdown for reports: pipe tables from frames, and the figures' text forms.

Tables are GitHub-flavoured pipe tables made by :meth:`pandas.DataFrame.to_markdown` (tabulate),
with every cell passed as text (no number re-parsing, so ``1.10`` stays ``1.10``) and ``|``
escaped so a value never splits a cell. A :class:`~jaxbench.analysis.text_table.TextTable` keeps
its columns' alignment and its notes; the terminal renders the same model with rich
(:func:`jaxbench.tables.rich_table`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from jaxbench.analysis.text_table import TextTable
from jaxbench.units import fmt_seconds

NONE = "_(none)_"
NOT_AVAILABLE = "n/a"


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(frame: pd.DataFrame | TextTable) -> str:
    """A Markdown pipe table (a frame's index left out); :data:`NONE` when it has no rows.

    A :class:`TextTable` keeps its columns' alignment; its title, if any, is a bold line above
    the table and its notes an italic line below.
    """
    if isinstance(frame, TextTable):
        model, frame = frame, frame.frame()
        align = [c.justify for c in model.columns]
    else:
        model, align = None, None
    if frame.empty:
        return NONE
    cells = frame.map(_cell)
    cells.columns = [_cell(c) for c in frame.columns]
    text = cells.to_markdown(index=False, disable_numparse=True, colalign=align)
    if model is not None and model.title:
        text = f"**{_cell(model.title)}**\n\n{text}"
    if model is not None and model.notes:
        text += "\n\n_" + "; ".join(_cell(n) for n in model.notes) + "_"
    return text


def bullets(lines: Iterable[str]) -> str:
    """One Markdown list item per line (``|`` escaped, line breaks joined); :data:`NONE` if none."""
    items = [f"- {_cell(line)}" for line in lines]
    return "\n".join(items) if items else NONE


def image(path: str, alt: str) -> str:
    """``![alt](path)``: ``path`` relative to the Markdown file."""
    return f"![{alt.replace(']', ')').replace('[', '(')}]({path})"


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def seconds(value: float | None) -> str:
    """``1.23 ms`` style (:func:`jaxbench.tables.fmt_seconds`); ``n/a`` when missing."""
    return NOT_AVAILABLE if _missing(value) else fmt_seconds(float(value))  # type: ignore[arg-type]


def ratio_ci(ratio: float, low: float, high: float) -> str:
    """``1.102 [1.085, 1.121]``; ``1.300 (no CI)`` without an interval; ``n/a`` without a ratio.

    A figure from 1000 up, or below 0.001, is in three significant digits with an exponent
    (``1.01e+304``: the end of an early look's interval), not hundreds of digits.
    """
    if _missing(ratio):
        return NOT_AVAILABLE
    if _missing(low) or _missing(high):
        return f"{_ratio(ratio)} (no CI)"
    return f"{_ratio(ratio)} [{_ratio(low)}, {_ratio(high)}]"


def _ratio(x: float) -> str:
    return f"{x:.3f}" if x == 0 or 1e-3 <= abs(x) < 1e3 else f"{x:.3g}"


def change(ratio: float) -> str:
    """The ratio as a relative change: ``+10.2 %`` (slower), ``-8.0 %`` (faster)."""
    return NOT_AVAILABLE if _missing(ratio) else f"{(ratio - 1) * 100:+.1f} %"


def p_value(p: float) -> str:
    """``3.1e-05``, ``0.42``; ``n/a`` when no test was possible."""
    return NOT_AVAILABLE if _missing(p) else f"{p:.2g}"


def number(value: float | None, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits; ``n/a`` when missing."""
    return NOT_AVAILABLE if _missing(value) else f"{value:.{digits}g}"


def share(value: float | None) -> str:
    """A relative amount as a percentage: ``0.031`` -> ``3.1 %``; ``n/a`` when missing."""
    return NOT_AVAILABLE if _missing(value) else f"{value * 100:.1f} %"  # type: ignore[operator]
