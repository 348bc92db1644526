"""One table model for every comparison table: built once, rendered by rich or as Markdown.

A builder (:func:`jaxbench.analysis.report_tables.comparison_table`,
:func:`jaxbench.analysis.report_live.live_table`, :func:`jaxbench.upgrade.summary.answers_table`)
decides a table's columns and the text of every cell (ratios, intervals, verdicts); the
renderers only lay it out: :func:`jaxbench.analysis.markdown.table` for the report,
:func:`jaxbench.tables.rich_table` for the terminal, :meth:`TextTable.frame` for notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import pandas as pd

__all__ = ["Column", "TextTable"]


@dataclass(frozen=True)
class Column:
    """One column: its header, how its cells line up, and whether its cells are verdicts.

    Attributes:
        header: The column's title.
        justify: ``"left"`` for names and words, ``"right"`` for figures.
        verdict: Its cells are verdicts (``slower``, ``faster``, ...): the terminal colours them.
    """

    header: str
    justify: Literal["left", "right"] = "left"
    verdict: bool = False


@dataclass(frozen=True)
class TextTable:
    """A table whose every cell is already text.

    Attributes:
        columns: The columns, in order.
        rows: One tuple of cell texts per row, as many cells as columns.
        title: Shown above the table (the terminal's title); ``""`` for none.
        notes: Lines shown below it (the terminal's caption), e.g. why a column is there.

    Raises:
        ValueError: A row with more or fewer cells than columns.
    """

    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row of {len(row)} cells in a table of "
                                 f"{len(self.columns)} columns: {row!r}")  # fmt: skip

    @classmethod
    def of(
        cls,
        cells: dict[Column, Sequence[str]],
        *,
        title: str = "",
        notes: Sequence[str] = (),
    ) -> TextTable:
        """A table from its columns' cells: ``{column: cells top to bottom}``, in column order.

        Raises:
            ValueError: Columns of different lengths.
        """
        lengths = {len(v) for v in cells.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        rows = tuple(zip(*(tuple(map(str, v)) for v in cells.values()), strict=True))
        return cls(tuple(cells), rows, title, tuple(notes))

    @property
    def headers(self) -> list[str]:
        """The columns' headers, in order."""
        return [c.header for c in self.columns]

    def column(self, header: str) -> list[str]:
        """The cells of the column ``header``, top to bottom.

        Raises:
            KeyError: No such column.
        """
        if header not in self.headers:
            raise KeyError(f"no column {header!r} (columns: {', '.join(self.headers)})")
        i = self.headers.index(header)
        return [row[i] for row in self.rows]

    def renamed(self, headers: dict[str, str]) -> TextTable:
        """The same table with some columns' headers replaced: ``{old: new}``."""
        columns = tuple(replace(c, header=headers.get(c.header, c.header)) for c in self.columns)
        return replace(self, columns=columns)

    def frame(self) -> pd.DataFrame:
        """The cells as a frame of strings, one column per header (for notebooks)."""
        return pd.DataFrame(list(self.rows), columns=self.headers, dtype=object)
