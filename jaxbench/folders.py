"""Results folders: created and probed before anything is measured or submitted, and held.

A command that resumes, reuses or replaces what a folder holds (``review``, ``report``) holds
the folder while it writes (:func:`sole_writer`), so two of them never interleave their files.
Commands that only add files of their own (``run``, ``compare``, ``calibrate``: one new file
each) need no lock: two of them into one folder both complete.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

#: The lock file of a held folder, and the file naming its holder (hidden: the store skips both).
LOCK_NAME = ".jaxbench.lock"
HOLDER_NAME = ".jaxbench.holder"


class FolderBusy(RuntimeError):
    """Another process holds the folder (:func:`sole_writer`); the message names it."""


def ensure_writable(folder: str | Path, what: str = "results folder") -> Path:
    """Create ``folder`` if needed and prove a file can be written in it.

    Args:
        folder: The folder.
        what: How errors name it: the user's option (``--out``), else ``results folder``.

    Raises:
        ValueError: Empty path, a file in the way, or a folder that cannot be created or
            written (the message names the folder and the reason).
    """
    if not str(folder).strip():
        raise ValueError(f"{what} must be a path, got ''")
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} {str(folder)!r} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".jaxbench-write-test"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"{what} {str(folder)!r} is not writable: {exc.strerror or exc}") from None
    return path


@contextlib.contextmanager
def sole_writer(folder: Path, option: str) -> Iterator[None]:
    """Hold ``folder`` for this process while the block runs.

    The lock is the kernel's (``flock``, through ``filelock``): it is released when its
    process ends however it ends, so a lock left by a killed command is taken over by the next
    one. The holder's pid and command line are written beside it for the message, and removed
    on release. The (empty, hidden) lock file stays: unlinking it would let a process that
    opened it just before lock the removed file while a third locks a new one.

    Args:
        folder: An existing folder (:func:`ensure_writable` first).
        option: The command's option that named it (e.g. ``--out``), for the message.

    Raises:
        FolderBusy: Another process holds it: ``--out F is in use by pid N (jaxbench review
            ...); wait for it to end or choose another --out``.
    """
    import filelock

    lock = filelock.FileLock(str(folder / LOCK_NAME), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        try:
            holder = (folder / HOLDER_NAME).read_text().strip() or "another process"
        except OSError:
            holder = "another process"
        raise FolderBusy(f"{option} {folder} is in use by {holder}; wait for it to end or "
                         f"choose another {option}") from None  # fmt: skip
    holder = folder / HOLDER_NAME
    try:
        command = " ".join(["jaxbench", *sys.argv[1:]])
        holder.write_text(f"pid {os.getpid()} ({command})\n")
        yield
    finally:
        holder.unlink(missing_ok=True)  # still held: no next holder's file is removed
        lock.release()


def remove_if_only_lock(folder: Path) -> None:
    """Remove ``folder`` if all it holds is the lock file :func:`sole_writer` leaves.

    For a command that made the folder and wrote nothing in it (refused or interrupted): it
    leaves no folder behind. A folder holding anything else is left as it is.
    """
    try:
        if {p.name for p in folder.iterdir()} <= {LOCK_NAME}:
            (folder / LOCK_NAME).unlink(missing_ok=True)
            folder.rmdir()
    except OSError:
        pass  # a folder another process writes into: it stays
