"""The one way the project writes files: an appender for JSON Lines and an atomic writer.

Every kind of the store (:mod:`jaxbench.store.kinds`) is written through here:

- :class:`Appender` adds one JSON line at a time to a file opened with ``O_APPEND``, each line
  written whole and ``fsync``-ed before the call returns (run records: a run killed part-way
  keeps every case it finished);
- :func:`write_atomic` replaces a whole file (a sweep record, a live comparison file rewritten
  after every pair, a calibration, a manifest, a drift check): readers see the old file or all of
  the new one, never part.

Both write through :func:`write_all`, which loops over short writes (``os.write`` may write fewer
bytes than asked, e.g. on a full disk or a signal) and raises rather than leave a line cut short.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

__all__ = ["Appender", "json_line", "write_all", "write_atomic", "write_json", "write_jsonl"]


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``, retrying after short writes.

    Raises:
        OSError: The file takes no more bytes (``os.write`` returned 0: ``ENOSPC``), or the write
            itself failed; its ``written`` attribute is the number of bytes that did go out.
    """
    view = memoryview(data)
    try:
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(
                    errno.ENOSPC, f"short write: {len(view)} of {len(data)} bytes not written"
                )
            view = view[n:]
    except OSError as exc:
        exc.written = len(data) - len(view)  # type: ignore[attr-defined]
        raise


def json_line(model: BaseModel) -> bytes:
    """``model`` as one JSON line (UTF-8, ending in a newline)."""
    return (model.model_dump_json() + "\n").encode()


class Appender:
    """Append models to one JSON Lines file, each durable on disk before the next is written.

    Each line goes out whole (:func:`write_all`) to a file opened with ``O_APPEND`` and is then
    ``fsync``-ed, so a crash never leaves half of an earlier line behind. A line that fails part
    way (a full disk) is cut off again, so the file ends with the last whole line.

    A file removed (``rm``) or replaced (``mv`` over it) while lines are appended would take
    them with it: before each line, the file is checked to be still the one at :attr:`path`.
    If it is not, what it holds is copied whole to a new file, at :attr:`path` if nothing is
    there, else beside it (``<name>-kept.jsonl``, ``-kept-2``, ...), which :attr:`path` then
    names; :attr:`moved_from` names the path the lines were first written to.

    Raises:
        OSError: The folder cannot be created or the file cannot be opened for appending.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self.moved_from: Path | None = None

    def write(self, model: BaseModel) -> None:
        """Append ``model`` as one line and flush it to disk.

        Raises:
            OSError: The line could not be written whole (see :func:`write_all`); what of it
                went out is cut off again (:meth:`_cut_back`). Or the file was removed or
                replaced and its lines cannot be copied to a new one.
        """
        line = json_line(model)
        self._keep_at_a_path()
        try:
            write_all(self._fd, line)
        except OSError as exc:
            self._cut_back(line[: getattr(exc, "written", 0)])
            raise
        os.fsync(self._fd)

    def _keep_at_a_path(self) -> None:
        """Copy the lines to a new file if the path no longer names the one held open."""
        held = os.fstat(self._fd)
        try:
            there = os.stat(self.path)
            if (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino):
                return
        except FileNotFoundError:
            there = None
        stem, suffix = self.path.stem, self.path.suffix
        names = ([self.path] if there is None else []) + [
            self.path.with_name(f"{stem}-kept{'' if n == 1 else f'-{n}'}{suffix}")
            for n in range(1, 100)
        ]
        for name in names:
            try:
                fd = os.open(name, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"{self.path} was replaced and every -kept name is taken")
        try:
            write_all(fd, os.pread(self._fd, held.st_size, 0))
            os.fsync(fd)
        except OSError:
            os.close(fd)
            raise
        os.close(self._fd)
        self._fd, self.moved_from, self.path = fd, self.moved_from or self.path, name

    def _cut_back(self, part: bytes) -> None:
        """Truncate the file by ``part`` if it ends with it (our own cut-short line).

        Only our bytes are cut: if another writer appended after them, the file is left as it
        is and its reader names the one bad line.
        """
        if not part:
            return
        with contextlib.suppress(OSError):
            size = os.fstat(self._fd).st_size
            if size >= len(part) and os.pread(self._fd, len(part), size - len(part)) == part:
                os.ftruncate(self._fd, size - len(part))

    def close(self) -> None:
        """Close the file; further writes raise ``OSError``."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: readers see the old file, or all of the new one.

    The bytes go to a temporary file in the same folder, are ``fsync``-ed, then renamed over
    ``path`` (``os.replace``, atomic on POSIX and on NFS for a rename within one folder); the
    folder is ``fsync``-ed too. Many processes may write different files of one folder at once.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: The folder cannot be created or written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def write_json(path: str | os.PathLike[str], model: BaseModel) -> Path:
    """Write one model as an indented JSON file, atomically (:func:`write_atomic`)."""
    return write_atomic(path, model.model_dump_json(indent=1).encode())


def write_jsonl(path: str | os.PathLike[str], models: Iterable[BaseModel]) -> Path:
    """Write models as a JSON Lines file, one per line, replacing it atomically."""
    return write_atomic(path, b"".join(json_line(m) for m in models))
