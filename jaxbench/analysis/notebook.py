"""Where the analysis notebooks (``analysis/*.py``) find the repository and the results.

The notebooks read the results folder from the environment variable :data:`RESULTS_ENV`
(``JAXBENCH_RESULTS``), by default :data:`DEFAULT_RESULTS` (``results/versions``); a relative
path is taken relative to the repository root, found from the working directory, so a notebook
gives the same answer whether it runs from ``analysis/``, the root, or a test's folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

RESULTS_ENV = "JAXBENCH_RESULTS"
DEFAULT_RESULTS = "results/versions"


def _is_root(folder: Path) -> bool:
    return (folder / "pyproject.toml").is_file() and (folder / "jaxbench" / "__init__.py").is_file()


def repo_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The jaxbench repository root: ``start`` (default: the working directory) or a parent.

    A folder is the root when it holds ``pyproject.toml`` and ``jaxbench/__init__.py``. When no
    parent of ``start`` is, the checkout this package was imported from is used (an editable
    install run from elsewhere).

    Raises:
        FileNotFoundError: Neither way finds a root (the message names ``start``).
    """
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if _is_root(folder):
            return folder
    package_root = Path(__file__).resolve().parents[2]
    if _is_root(package_root):
        return package_root
    raise FileNotFoundError(f"no jaxbench repository root at or above {here}")


def results_dir(start: str | os.PathLike[str] | None = None) -> Path:
    """The results folder (or file) the notebooks read: ``$JAXBENCH_RESULTS`` or the default.

    Args:
        start: Where to look for the repository root (:func:`repo_root`); the working
            directory when ``None``.

    Returns:
        An absolute path; a relative ``$JAXBENCH_RESULTS`` is relative to the repository root.

    Raises:
        FileNotFoundError: The folder does not exist (the message says how to choose another),
            or no repository root is found.
    """
    value = os.environ.get(RESULTS_ENV, "").strip() or DEFAULT_RESULTS
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = repo_root(start) / path
    if not path.exists():
        raise FileNotFoundError(
            f"results folder {path} does not exist; set {RESULTS_ENV} to a results folder or file"
        )
    return path


def load_frame(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, list]:
    """The records under ``path`` as analysis rows, and the problems of what did not load.

    :func:`jaxbench.analysis.load_results`, refusing an empty answer in one line rather than
    letting the first cell that reads a column fail on it.

    Raises:
        ValueError: No record loaded; the message names ``path`` and the first problems
            (lines or files that did not load), or says there was no result file.
    """
    from jaxbench.analysis import load_results

    frame, problems = load_results(path)
    if frame.empty:
        failed = "; ".join(map(str, problems[:3])) + ("; ..." if len(problems) > 3 else "")
        raise ValueError(f"no records loaded from {path}: {failed or 'no result files'}")
    return frame, problems
