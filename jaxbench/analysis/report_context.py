"""What every section of a report gets: the review, where the report goes, how figures are saved.

A section is a function ``(ReportContext) -> str`` returning Markdown (``""`` to leave itself
out); :mod:`jaxbench.analysis.report` lists them. A section that draws saves its figures with
:meth:`ReportContext.save_figure` and links the relative path it returns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jaxbench.analysis.review import Review

if TYPE_CHECKING:  # matplotlib is imported by the sections that draw, not by the tables
    from matplotlib.figure import Figure

REPORT_NAME = "report.md"
#: The same report as one self-contained page (:mod:`jaxbench.analysis.report_html`).
REPORT_HTML = "report.html"
FIGURES = "figures"
DPI = 100


@dataclass(frozen=True)
class ReportContext:
    """The input of every report section.

    Attributes:
        review: The comparisons and everything else the report states.
        out_dir: Folder of ``report.md``; figures go to ``out_dir/figures/``.
    """

    review: Review
    out_dir: Path

    @property
    def figures_dir(self) -> Path:
        """``out_dir/figures``."""
        return self.out_dir / FIGURES

    def save_figure(self, fig: Figure, name: str) -> str:
        """Save ``fig`` as a PNG in :attr:`figures_dir` with the Agg canvas, then clear it.

        Args:
            fig: A figure (made without ``pyplot``, so nothing else holds it once cleared).
            name: File name without suffix; characters other than letters, digits, ``.``,
                ``_`` and ``-`` become ``-``.

        Returns:
            The path relative to :attr:`out_dir`, with ``/``, for a Markdown link.

        Raises:
            OSError: The file cannot be written.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "figure"
        self.figures_dir.mkdir(parents=True, exist_ok=True)
        FigureCanvasAgg(fig)  # non-interactive backend, whatever pyplot's backend is
        fig.savefig(self.figures_dir / f"{stem}.png", dpi=DPI)
        fig.clear()
        return f"{FIGURES}/{stem}.png"


#: A report section: Markdown from the context, ``""`` to leave the section out.
Section = Callable[[ReportContext], str]
