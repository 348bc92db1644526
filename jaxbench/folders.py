"""Results folders: created and probed before anything is measured or submitted."""

from __future__ import annotations

from pathlib import Path


def ensure_writable(folder: str | Path) -> Path:
    """Create ``folder`` if needed and prove a file can be written in it.

    Raises:
        ValueError: Empty path, a file in the way, or a folder that cannot be created or
            written (the message names the folder and the reason).
    """
    if not str(folder).strip():
        raise ValueError("results folder must be a path, got ''")
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ValueError(f"results folder {str(folder)!r} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".jaxbench-write-test"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise ValueError(
            f"results folder {str(folder)!r} is not writable: {exc.strerror or exc}"
        ) from None
    return path
