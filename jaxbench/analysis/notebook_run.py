"""Run an analysis notebook (``analysis/<name>.py``) top to bottom, as ``jaxbench notebook`` does.

The notebooks are jupytext percent scripts; :func:`execute_notebook` reads one with jupytext and
runs it with nbclient on a Jupyter kernel of *this* interpreter (a kernel spec written for the
run, so the notebook sees the same jaxbench and JAX as the command), from ``analysis/``, with
:data:`jaxbench.analysis.notebook.RESULTS_ENV` pointing at the results. Needs the ``notebooks``
extra (``jupytext``, ``nbclient``, ``ipykernel``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jaxbench.analysis.notebook import RESULTS_ENV, repo_root

NOTEBOOKS = ("latency_distributions", "upgrade_review", "forward_crossover")
KERNEL = "jaxbench-python"


class NotebookError(RuntimeError):
    """A notebook could not be run: unknown name, a missing extra, or a cell that failed."""


@contextlib.contextmanager
def _results_env(results: Path | None) -> Iterator[None]:
    before = os.environ.get(RESULTS_ENV)
    if results is not None:
        os.environ[RESULTS_ENV] = str(Path(results).resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RESULTS_ENV, None)
        else:
            os.environ[RESULTS_ENV] = before


def execute_notebook(name: str, results: Path | None = None, timeout_s: float = 600.0) -> Any:
    """Run ``analysis/<name>.py`` on this interpreter and return the executed notebook.

    Args:
        name: One of :data:`NOTEBOOKS`.
        results: Results folder for the notebook (default: its own default,
            ``results/versions``, or :data:`RESULTS_ENV` if set).
        timeout_s: Seconds any one cell may take.

    Returns:
        The executed ``nbformat`` notebook (outputs filled in).

    Raises:
        NotebookError: ``name`` is unknown, the ``notebooks`` extra is missing, or a cell raised
            (one line: the cell's number and title, the exception and its first line).
    """
    if name not in NOTEBOOKS:
        raise NotebookError(f"unknown notebook {name!r}; choose from {', '.join(NOTEBOOKS)}")
    try:
        import jupytext
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:
        raise NotebookError(
            f"{exc.name} is missing: install the notebooks extra (bash scripts/setup.sh notebooks)"
        ) from None
    folder = repo_root() / "analysis"
    nb = jupytext.read(folder / f"{name}.py")
    with tempfile.TemporaryDirectory() as kernels, _results_env(results):
        spec = Path(kernels) / KERNEL
        spec.mkdir()
        # The kernel talks over Unix sockets in the temporary folder (IPC), not TCP ports any
        # user of the machine could reach; the kernel app's own warnings (e.g. "parent appears
        # to have exited" as it ends) are not the notebook's: its errors still show.
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                "--IPKernelApp.log_level=ERROR"]  # fmt: skip
        (spec / "kernel.json").write_text(
            json.dumps({"argv": argv, "display_name": "jaxbench", "language": "python"})
        )
        specs = KernelSpecManager(kernel_dirs=[kernels], ensure_native_kernel=False)
        # Its connection file too (else a file of tempfile's, which jupyter_client leaves behind).
        km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs, transport="ipc",
                           ip=str(Path(kernels) / "ipc"),
                           connection_file=str(Path(kernels) / "connection.json"))  # fmt: skip
        client = NotebookClient(
            nb, km=km, timeout=timeout_s, resources={"metadata": {"path": str(folder)}}
        )
        try:
            client.execute()
        except CellExecutionError as exc:
            evalue = (str(exc.evalue).strip().splitlines() or [""])[0]
            raise NotebookError(f"analysis/{name}.py: {failed_cell(nb)} raised {exc.ename}: "
                                f"{evalue}") from None  # fmt: skip
    return nb


def failed_cell(nb: Any) -> str:
    """``cell N (its title)`` of the first cell of ``nb`` with an error output.

    The title is the jupytext cell title (``# %% Title``), else the first line of code that is
    not a comment or an IPython magic; ``a cell`` where none holds an error.
    """
    for number, cell in enumerate(nb.cells, 1):
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            title = cell.get("metadata", {}).get("title")
            if not title:
                code = [ln.strip() for ln in cell.get("source", "").splitlines()]
                title = next((ln for ln in code if ln and not ln.startswith(("#", "%"))), "")
            return f"cell {number} ({title[:60]})" if title else f"cell {number}"
    return "a cell"
