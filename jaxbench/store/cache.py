"""A cache of what the loader made of each JSON Lines file, so a long history loads fast.

Validating a line into its model (:mod:`jaxbench.store.loader`) is most of the time of loading a
history, and a history mostly holds files that no longer change. The loader keeps, per JSON
Lines file, its validated models, line numbers and problems, pickled, in one entry of a
per-user folder, and reads them back while the file's bytes and the store's code are unchanged.
JSON Lines stays the format of record: an entry is only ever a copy of what the loader made of
the file, and deleting the folder loses nothing.

- **Where**: ``$JAXBENCH_STORE_CACHE`` (an absolute folder), or ``store`` in the user's cache
  folder (:func:`platformdirs.user_cache_dir`, e.g. ``~/.cache/jaxbench/store`` on Linux).
  ``JAXBENCH_STORE_CACHE=off`` (or ``0``, ``false``, ``no``, ``none``) turns it off.
- **When an entry is used**: its header holds the SHA-256 of the file's bytes and a token of the
  code that made it (this package's source, pydantic's and Python's versions); both must match.
  The bytes are hashed, not their size and time stamp, so a file rewritten in the same
  millisecond with the same size is never taken for the old one (git's "racy clean" case).
- **What is not cached**: ``.json`` files, and JSON Lines files that hold an asv result (its
  records depend on its folder's ``benchmarks.json`` too), and files that could not be read.
- **Safety**: an entry is a pickle, which can run code when loaded, so the folder must be the
  user's own and writable by nobody else (it is made so, mode ``0o700``); otherwise the cache
  is off for the process, with one warning line on stderr.
- **Failures**: an entry that cannot be read or unpickled is a miss, and one that cannot be
  written is skipped; neither is an error of the command.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

#: The environment variable naming the cache folder (``off``: no cache).
ENV = "JAXBENCH_STORE_CACHE"
#: Its values that turn the cache off (any case).
OFF = ("off", "0", "false", "no", "none")
_PROTOCOL = pickle.HIGHEST_PROTOCOL


@functools.cache
def code_token() -> str:
    """SHA-256 of what decides the models a file loads into (hex).

    This package's source, pydantic's and Python's versions, and the pickle protocol.
    """
    import pydantic

    h = hashlib.sha256(f"{sys.version}|{pydantic.VERSION}|{_PROTOCOL}".encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        h.update(source.name.encode() + b"\0" + source.read_bytes())
    return h.hexdigest()


@functools.cache
def folder() -> Path | None:
    """The cache folder, made if missing; ``None`` when off or unusable (warned once on stderr).

    ``$JAXBENCH_STORE_CACHE``: unset or blank for the user's cache folder (made with its
    parents), a value of :data:`OFF`, or an absolute folder (``~`` expanded) whose parent
    exists. Unusable: a relative path, a file, a folder that cannot be made, or one that is
    not the user's own or that others may write.
    """
    setting = os.environ.get(ENV, "").strip()
    if setting.lower() in OFF:
        return None
    if setting:
        try:
            where = Path(setting).expanduser()
        except RuntimeError as exc:  # ~user of no such user
            return _off(setting, str(exc))
        if not where.is_absolute():
            return _off(setting, "expected an absolute folder (or off)")
        if not where.parent.is_dir():
            return _off(setting, f"no folder {str(where.parent)!r} to make it in")
    else:
        import platformdirs

        where = Path(platformdirs.user_cache_dir("jaxbench")) / "store"
    if where.exists() and not where.is_dir():
        return _off(where, "is not a folder")
    try:
        where.mkdir(mode=0o700, parents=not setting, exist_ok=True)
        st = where.stat()
    except OSError as exc:
        return _off(where, f"cannot be made: {exc.strerror or exc}")
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        return _off(where, "must be the user's own and writable by nobody else (chmod go-w)")
    return where


def _off(where: Path | str, why: str) -> None:
    print(f"warning: {ENV} {str(where)!r}: {why}; loading without the cache", file=sys.stderr)
    return None


def _entry(path: Path) -> Path | None:
    base = folder()
    if base is None:
        return None
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:40]
    return base / f"{name}.pickle"


def stamp(data: bytes) -> bytes | None:
    """The header an entry made from ``data`` (a file's bytes) carries; ``None`` when off."""
    if folder() is None:
        return None
    digest = hashlib.sha256(data).hexdigest()
    return json.dumps({"code": code_token(), "sha256": digest}).encode() + b"\n"


def get(path: Path, key: bytes | None) -> Any | None:
    """What :func:`put` kept for ``path`` under ``key`` (:func:`stamp`), or ``None`` (a miss)."""
    entry = _entry(path) if key is not None else None
    if entry is None:
        return None
    try:
        with entry.open("rb") as f:
            if f.readline() != key:
                return None
            return pickle.load(f)
    except Exception:  # missing, cut short or stale: a miss, never an error
        return None


def put(path: Path, key: bytes | None, value: Any) -> None:
    """Keep ``value``, what the loader made of ``path`` when its bytes gave ``key``; best effort."""
    entry = _entry(path) if key is not None else None
    if entry is None:
        return
    tmp = None
    try:
        with tempfile.NamedTemporaryFile(dir=entry.parent, suffix=".tmp", delete=False) as f:
            tmp = f.name
            f.write(key)
            pickle.dump(value, f, protocol=_PROTOCOL)
        os.replace(tmp, entry)  # whole or not at all, also with a second command writing it
    except Exception:  # a full disk or an unpicklable value: load without it
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
