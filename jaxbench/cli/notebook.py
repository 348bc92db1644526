"""``jaxbench notebook``: run an analysis notebook and save it with its outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jaxbench.cli.options import console, fail


def notebook_cmd(
    name: Annotated[
        str,
        typer.Argument(help="latency_distributions, upgrade_review or forward_crossover."),
    ],
    results: Annotated[
        Path | None,
        typer.Option("--results", "-r", help="Results folder (default: results/versions)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Executed notebook (default: `analysis/<name>.ipynb`)."),
    ] = None,
) -> None:
    """Run `analysis/<name>.py` top to bottom on this Python and save the .ipynb with its outputs.

    Needs the notebooks extra (bash scripts/setup.sh notebooks). Open the .ipynb in Jupyter or
    VS Code; `analysis/*.ipynb` are not kept in git. The folder of --out is checked to be writable
    before the notebook runs.
    """
    from jaxbench.analysis.notebook import repo_root
    from jaxbench.analysis.notebook_run import NOTEBOOKS, NotebookError, execute_notebook
    from jaxbench.folders import ensure_writable

    if name not in NOTEBOOKS:
        raise fail(f"unknown notebook {name!r}; choose from {', '.join(NOTEBOOKS)}")
    if results is not None and not results.is_dir():
        what = "a file, expected a folder of results" if results.exists() else "no such folder"
        raise fail(f"--results {results}: {what}")
    target = out or repo_root() / "analysis" / f"{name}.ipynb"
    if target.suffix != ".ipynb":
        raise fail(f"--out {target}: expected a .ipynb file")
    try:  # before the notebook runs: its minutes are not spent on a file that cannot be saved
        ensure_writable(target.parent, "its folder")
    except ValueError as exc:
        raise fail(f"--out {target}: {exc}") from None
    try:
        nb = execute_notebook(name, results)
    except NotebookError as exc:
        raise fail(str(exc)) from None
    import nbformat

    try:
        nbformat.write(nb, target)
    except OSError as exc:
        raise fail(f"--out {target}: cannot write it: {exc.strerror or exc}") from None
    console.print(f"notebook: {target}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``notebook`` to the ``jaxbench`` command."""
    app.command("notebook")(notebook_cmd)
