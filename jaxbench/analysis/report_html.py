"""The review's report as one self-contained HTML file, beside ``report.md``.

The Markdown of :func:`jaxbench.analysis.report.render_report` is converted by Python-Markdown
(its ``tables`` and ``fenced_code`` extensions); every figure it links is inlined as a
``data:`` URI, so the file can be mailed, attached to a CI run or opened offline; and every
table sorts by a click on a header (numbers by value: ``1.02``, ``-3.1 %``, ``2.906 [1.865,
4.528]`` by their first number; other cells as text; a second click reverses).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

#: The page's style: readable widths, tables with a header that says it sorts.
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #1b1b1b; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; }
th { background: #f3f3f3; cursor: pointer; user-select: none; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
img { max-width: 100%; }
code, pre { background: #f6f6f6; }
pre { padding: 0.5rem; overflow-x: auto; }
"""

#: Sorting by a header click: a table's body rows reordered, numbers by their first number.
SORT_SCRIPT = """
function sortKey(text) {
  const m = text.replace(/,/g, "").match(/^\\s*[-+]?(\\d+\\.?\\d*|\\.\\d+)(e[-+]?\\d+)?/i);
  return m ? [0, parseFloat(m[0]), text] : [1, 0, text.trim().toLowerCase()];
}
function compareKeys(a, b) {
  if (a[0] !== b[0]) return a[0] - b[0];
  if (a[0] === 0 && a[1] !== b[1]) return a[1] - b[1];
  return a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0;
}
function sortTable(table, column) {
  const header = table.tHead.rows[0].cells[column];
  const ascending = header.getAttribute("aria-sort") !== "ascending";
  for (const th of table.tHead.rows[0].cells) th.removeAttribute("aria-sort");
  header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows).map(
    (row, i) => [sortKey(row.cells[column].textContent), i, row]);
  rows.sort((a, b) => compareKeys(a[0], b[0]) * (ascending ? 1 : -1) || a[1] - b[1]);
  for (const [, , row] of rows) body.appendChild(row);
}
for (const table of document.querySelectorAll("table.sortable")) {
  Array.from(table.tHead.rows[0].cells).forEach((th, i) =>
    th.addEventListener("click", () => sortTable(table, i)));
}
"""

_IMG = re.compile(r'(<img\b[^>]*\bsrc=")([^"]+)(")')
_MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".gif": "image/gif"}


def report_html(markdown_text: str, folder: Path, title: str) -> str:
    """The report's Markdown as one HTML page, its figures inlined and its tables sortable.

    Args:
        markdown_text: The report's Markdown (``report.md``'s text).
        folder: The folder its relative image paths are read from (``figures/...``).
        title: The page's title.

    Returns:
        The HTML text (UTF-8). An image that cannot be read keeps its path (and a
        ``data-missing`` attribute naming it).
    """
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables", "fenced_code"])
    body = body.replace("<table>", '<table class="sortable">')
    body = _IMG.sub(lambda m: _inline(m, folder), body)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"{body}\n<script>{SORT_SCRIPT}</script>\n</body>\n</html>\n"
    )


def _inline(match: re.Match[str], folder: Path) -> str:
    source = match.group(2)
    path = folder / html.unescape(source)
    mime = _MIME.get(path.suffix.lower())
    if source.startswith(("data:", "http://", "https://")) or mime is None:
        return match.group(0)
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return match.group(0) + f' data-missing="{html.escape(source)}"'
    return f"{match.group(1)}data:{mime};base64,{data}{match.group(3)}"
