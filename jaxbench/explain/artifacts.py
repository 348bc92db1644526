"""Captured programs on disk: ``programs/<sha256>.json.gz``, named by the hash of their content.

One file per side and case: the JSON of :func:`jaxbench.explain.program.capture` (keys sorted),
gzip-compressed; its name is the SHA-256 of the uncompressed JSON, so the same programs are
stored once however often they are captured. Each text inside is bounded
(:data:`jaxbench.explain.program.MAX_TEXT_CHARS`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

from jaxbench.store import write_atomic


def save_programs(folder: Path, programs: list[dict[str, Any]]) -> str:
    """Write ``programs`` under ``folder/programs/`` (once per content); returns the hash.

    Raises:
        OSError: The folder cannot be created or written.
    """
    data = json.dumps(programs, sort_keys=True).encode()
    digest = hashlib.sha256(data).hexdigest()
    path = folder / "programs" / f"{digest}.json.gz"
    if not path.exists():
        write_atomic(path, gzip.compress(data, mtime=0))
    return digest
