"""Profiler trace artifacts on disk: ``traces/<sha256>.xplane.pb.gz``, named by their content.

One file per traced case and process (``jaxbench run --trace``): the XSpace that
:func:`jax.profiler.trace` wrote (its ``.xplane.pb``), gzip-compressed. Its name is the SHA-256
of the uncompressed bytes, and reading checks it, so a cut or damaged file is named, not
trusted. A trace above :data:`MAX_TRACE_BYTES` is not saved (the record's op table stays).

To open one: ``gunzip -k <hash>.xplane.pb.gz``, then put it at
``<logdir>/plugins/profile/<run>/<host>.xplane.pb`` and run ``tensorboard --logdir <logdir>``
with ``tensorboard-plugin-profile`` (XProf), or ``xprof <logdir>``; XProf's trace viewer exports
it for Perfetto (https://ui.perfetto.dev).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from pathlib import Path

from jaxbench.store.files import write_atomic
from jaxbench.store.programs import ArtifactError

#: Folder of the traces, beside the files of the records that name them.
TRACES_DIR = "traces"
#: Largest trace saved, in bytes before compression (a few steps of a large model stay below).
MAX_TRACE_BYTES = 64 * 2**20


def trace_path(folder: str | os.PathLike[str], digest: str) -> Path:
    """Where the trace ``digest`` lives under ``folder`` (a folder of record files)."""
    return Path(folder) / TRACES_DIR / f"{digest}.xplane.pb.gz"


def save_trace(folder: str | os.PathLike[str], xspace: bytes) -> str:
    """Write ``xspace`` under ``folder/traces/`` (once per content, atomically); its hash.

    Raises:
        ValueError: ``xspace`` is larger than :data:`MAX_TRACE_BYTES`.
        OSError: The folder cannot be created or written.
    """
    if len(xspace) > MAX_TRACE_BYTES:
        raise ValueError(f"a trace of {len(xspace):,} bytes is above the {MAX_TRACE_BYTES:,} "
                         "kept")  # fmt: skip
    digest = hashlib.sha256(xspace).hexdigest()
    path = trace_path(folder, digest)
    if not path.exists():
        write_atomic(path, gzip.compress(xspace, mtime=0))
    return digest


def load_trace(folder: str | os.PathLike[str], digest: str) -> bytes:
    """The XSpace bytes of the trace ``digest`` under ``folder``.

    Raises:
        ArtifactError: Missing, not gzip, or not what its name says.
    """
    path = trace_path(folder, digest)
    try:
        data = gzip.decompress(path.read_bytes())
    except FileNotFoundError:
        raise ArtifactError(path, "missing") from None
    except (OSError, EOFError, zlib.error):
        raise ArtifactError(path, "not a gzip file, or cut short") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise ArtifactError(path, "its content does not match its name (edited or damaged)")
    return data
