"""The one scanner: which files under some paths belong to the store.

Folders are searched recursively for ``*.jsonl`` and ``*.json``; what a file holds is decided by
its content (:mod:`jaxbench.store.kinds`), never by its name. Left out of folder scans: hidden
files and folders, virtual environments (a folder with ``pyvenv.cfg``, such as the per-version
environments under a sweeps folder's ``envs/``), :data:`NOT_STORE_FILES`, and a sweep's
gathered ``results.jsonl`` where that
sweep's ``records/`` is read too (it repeats every record file of the sweep). A file named
explicitly is always read, and a file named twice (or inside two named folders) is read once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

#: JSON files of other tools found in results folders: asv's metadata, a per-version
#: environment's marker (:mod:`jaxbench.cluster.pyenvs`).
NOT_STORE_FILES = frozenset({"benchmarks.json", "machine.json", "jaxbench-env.json"})
#: A sweep folder's manifest, records folder and gathered records (:mod:`jaxbench.cluster.sweep`).
SWEEP_MANIFEST, SWEEP_RECORDS, SWEEP_RESULTS = "sweep.json", "records", "results.jsonl"
SUFFIXES = (".jsonl", ".json")
#: The file that makes a folder a virtual environment (PEP 405), which a scan does not enter.
VENV_MARKER = "pyvenv.cfg"


def _in_folder(root: Path) -> list[Path]:
    found = []
    for folder, subfolders, names in os.walk(root):
        # not into hidden folders, nor into virtual environments (the per-version ones under
        # a sweeps folder's envs/ hold thousands of JSON files of installed packages)
        subfolders[:] = [d for d in subfolders if not d.startswith(".")
                         and not os.path.isfile(os.path.join(folder, d, VENV_MARKER))]  # fmt: skip
        found += [Path(folder, n) for n in names if n.endswith(SUFFIXES)
                  and not n.startswith(".") and n not in NOT_STORE_FILES]  # fmt: skip
    return sorted(found)


def _is_gathered(path: Path, folders: set[Path]) -> bool:
    """Whether ``path`` is a sweep's ``results.jsonl`` while files of its ``records/`` are read."""
    sweep = path.parent
    return (
        path.name == SWEEP_RESULTS
        and sweep / SWEEP_RECORDS in folders
        and (sweep / SWEEP_MANIFEST).is_file()
    )


def sweep_of(folder: Path) -> Path | None:
    """The sweep folder whose ``records/`` is ``folder``, else ``None``."""
    sweep = folder.parent
    is_sweep = folder.name == SWEEP_RECORDS and (sweep / SWEEP_MANIFEST).is_file()
    return sweep if is_sweep else None


def store_files(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, bool]]:
    """The files to read under ``paths``, each once, in a stable order.

    Returns:
        ``(file, named)`` pairs: ``named`` is true for a file given explicitly (the loader says
        when such a file holds nothing asked for), false for one found in a folder.

    Raises:
        FileNotFoundError: A named path does not exist (a typo should not pass as "no results").
    """
    files: list[tuple[Path, bool]] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such results file or folder: {p}")
        if p.is_dir():
            files.extend((f, False) for f in _in_folder(p))
        else:
            files.append((p, True))
    unique: dict[Path, tuple[Path, bool]] = {}  # resolved -> (as first found, named at all)
    for f, named in files:
        first, was_named = unique.get(f.resolve(), (f, False))
        unique[f.resolve()] = (first, was_named or named)
    folders = {r.parent for r in unique}
    return [v for r, v in unique.items() if not _is_gathered(r, folders)]
