"""Program artifacts on disk: ``programs/<sha256>.json.gz``, named by the hash of their content.

One file per case and process: a list of program dicts (one per compiled target:
:func:`jaxbench.measure.programs.describe`), as sorted JSON, gzip-compressed. Its name is the
SHA-256 of the uncompressed JSON, so the same programs are stored once however often they are
compiled, and a record names its artifact by that hash (``Record.programs``). An artifact is
bounded: the texts of one case hold at most :data:`MAX_CASE_TEXT_CHARS` characters together,
the longest cut first (water-filling), each cut text's field listed in its ``truncated``.
Reading checks the hash, so a file that was cut, edited or damaged is named, not trusted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import Any

from jaxbench.store.files import write_atomic

#: Folder of the artifacts, beside the files of the records that name them.
PROGRAMS_DIR = "programs"
#: Most characters of text (jaxpr, StableHLO, optimized HLO, all targets) one artifact keeps.
MAX_CASE_TEXT_CHARS = 6_000_000


class ArtifactError(ValueError):
    """An artifact that cannot be read: missing, not gzip, not JSON, or not what its name says.

    Attributes:
        path: The file.
        reason: What is wrong with it, in a few words.
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def artifact_path(folder: str | os.PathLike[str], digest: str) -> Path:
    """Where the artifact ``digest`` lives under ``folder`` (a folder of record files)."""
    return Path(folder) / PROGRAMS_DIR / f"{digest}.json.gz"


def bound(programs: list[dict[str, Any]], limit: int = MAX_CASE_TEXT_CHARS) -> None:
    """Cut the texts of ``programs`` (in place) to ``limit`` characters together.

    Every string field but ``name`` counts. When they exceed ``limit``, each is cut to one
    common length ``c``, the largest with ``sum(min(len, c)) <= limit``, so short texts stay
    whole; a cut field is added to that program's ``truncated`` list.
    """
    fields = [(p, k) for p in programs for k, v in p.items() if k != "name" and isinstance(v, str)]
    lengths = sorted(len(p[k]) for p, k in fields)
    if sum(lengths) <= limit:
        return
    cap, left = 0, limit
    for i, n in enumerate(lengths):  # the largest common cap that fits
        share = left // (len(lengths) - i)
        if n > share:
            cap = share
            break
        left -= n
    for p, k in fields:
        if len(p[k]) > cap:
            p[k] = p[k][:cap]
            p["truncated"] = sorted({*p.get("truncated", []), k})


def save_programs(folder: str | os.PathLike[str], programs: list[dict[str, Any]]) -> str:
    """Write ``programs`` (bounded: :func:`bound`) under ``folder/programs/``; returns the hash.

    The file is written once per content (an existing one is kept) and atomically; the
    programs' compile timings (``phases_s``) are not written.

    Raises:
        OSError: The folder cannot be created or written.
        TypeError: ``programs`` is not JSON-serialisable.
    """
    data = _content(programs)
    digest = hashlib.sha256(data).hexdigest()
    path = artifact_path(folder, digest)
    if not path.exists():
        write_atomic(path, gzip.compress(data, mtime=0))
    return digest


def programs_digest(programs: list[dict[str, Any]]) -> str:
    """The hash :func:`save_programs` would name ``programs`` by, without writing anything.

    Equal programs give equal hashes in any process (nothing timed is in them), so a live
    worker names what it compiled by it (:func:`jaxbench.prepared.prepare`'s ``gated``).
    """
    return hashlib.sha256(_content(programs)).hexdigest()


def _content(programs: list[dict[str, Any]]) -> bytes:
    """The bytes an artifact holds: ``programs`` bounded (:func:`bound`), as sorted JSON.

    A program's compile timings (``phases_s``, which a live worker adds) are left out: they are
    measurements of one process, not the program, and identical programs must hash alike.
    """
    programs = [{k: v for k, v in p.items() if k != "phases_s"} for p in programs]
    bound(programs)
    return json.dumps(programs, sort_keys=True).encode()


def load_programs(folder: str | os.PathLike[str], digest: str) -> list[dict[str, Any]]:
    """The programs of artifact ``digest`` under ``folder/programs/``.

    Returns:
        One dict per compiled target (``name``, ``jaxpr``, ``stablehlo``, ``hlo``, ``cost``,
        ``memory``, ``flags``, ``truncated``; an artifact written before compile timings were
        left out of artifacts may also have ``phases_s``).

    Raises:
        ArtifactError: The file is missing, cut short, not gzip, not JSON, not a list of
            programs with names, or its content does not hash to ``digest`` (the message names
            the file).
    """
    path = artifact_path(folder, digest)
    try:
        data = gzip.decompress(path.read_bytes())
    except FileNotFoundError:
        raise ArtifactError(path, "missing") from None
    except EOFError:
        raise ArtifactError(path, "cut short (the gzip stream ends early)") from None
    except (OSError, zlib.error) as exc:
        raise ArtifactError(path, f"not a gzip file ({exc})") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise ArtifactError(path, "its content does not match its name (cut or edited)")
    try:
        programs = json.loads(data)
    except ValueError as exc:
        raise ArtifactError(path, f"not JSON ({exc})") from None
    if not isinstance(programs, list) or not all(
        isinstance(p, dict) and isinstance(p.get("name"), str) for p in programs
    ):
        raise ArtifactError(path, "not a list of programs with names")
    return programs
