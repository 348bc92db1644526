"""A drift reference on disk: writing it once, reading and validating it (numpy, no JAX).

Layout of a reference folder (default ``results/drift/reference/``):

- ``reference.json``: the :class:`~jaxbench.store.drift.ReferenceManifest` (generating
  environment, tolerances, and per set its file and the names, shapes and dtypes of its arrays);
- ``<workload>-<dtype>-<set>.npz``, one per set: ``input.<name>`` (params, batch, tangents) and
  ``output.<name>`` (the reference outputs), read with ``allow_pickle=False``. bfloat16 arrays,
  which ``.npz`` cannot hold, are stored as float32: every bfloat16 value is exactly a float32.

Every file is written atomically (:func:`jaxbench.store.write_atomic`) and the manifest
last, so a reference is complete once ``reference.json`` exists; overwriting (``force``) first
removes the old manifest, so an interrupted overwrite reads as "no reference", never as a mix.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes  # noqa: F401 - registers the bfloat16 dtype name with numpy
import numpy as np

from jaxbench.drift.tolerance import DRIFT_TOLERANCES
from jaxbench.store import StoreFormatError, read_model, write_atomic, write_json
from jaxbench.store.drift import MANIFEST_NAME, ArrayInfo, ReferenceManifest, SetEntry

DEFAULT_REFERENCE = Path("results/drift/reference")
#: Dtypes that ``.npz`` cannot hold; stored as float32 (exact) and cast back on reading inputs.
WIDENED = {"bfloat16": np.float32}


class DriftReferenceError(ValueError):
    """A drift reference cannot be used; the message names the folder or file and the fix."""


class ReferenceMissingError(DriftReferenceError):
    """No reference in the folder; the message says how to create one."""


class ReferenceExistsError(DriftReferenceError):
    """Saving would overwrite an existing reference and ``force`` was not given."""


class ReferenceCorruptError(DriftReferenceError):
    """A reference file is unreadable or does not match its manifest; the message names it."""


@dataclass(frozen=True)
class SavedSet:
    """What :func:`write_reference` saves of one regression set.

    Attributes:
        workload: A built-in family or a user workload's name.
        dtype: Workload dtype.
        set: Set name.
        inputs: Input arrays by name, in their own dtype.
        outputs: Reference outputs by name (empty for ``invalid_shape``).
        expect_error: Qualified name of the error the set must raise (``invalid_shape``).
        raised: ``"<type>: <message>"`` raised when saving (``invalid_shape``), else ``None``.
        params: A user workload's factory parameters (empty for the built-in families).
        reduction_length: What the set's tolerance was derived for.
    """

    workload: str
    dtype: str
    set: str
    inputs: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray]
    expect_error: str | None = None
    raised: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    reduction_length: int | None = None

    @property
    def file(self) -> str:
        """``<workload>-<dtype>-<set>.npz``, characters other than ``A-Za-z0-9_.=-`` as ``-``."""
        name = f"{self.workload}-{self.dtype}-{self.set}"
        return re.sub(r"[^A-Za-z0-9_.=-]+", "-", name) + ".npz"


@dataclass(frozen=True)
class LoadedSet:
    """One set read back: its manifest entry, inputs (in their dtype) and reference outputs.

    Attributes:
        entry: The :class:`~jaxbench.store.drift.SetEntry`.
        inputs: Input arrays by name, cast back to the dtype the manifest names.
        outputs: Reference outputs by name, as stored (bfloat16 ones as float32).
    """

    entry: SetEntry
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]


@dataclass(frozen=True)
class Reference:
    """A validated reference: the folder, its manifest and every set's arrays.

    Attributes:
        folder: The reference folder.
        manifest: The parsed ``reference.json``.
        sets: Every set, in manifest order.
    """

    folder: Path
    manifest: ReferenceManifest
    sets: list[LoadedSet]


def manifest_path(folder: str | Path) -> Path:
    """``<folder>/reference.json``."""
    return Path(folder) / MANIFEST_NAME


def create_hint(folder: str | Path) -> str:
    """The command that creates a reference in ``folder``."""
    where = "" if Path(folder) == DEFAULT_REFERENCE else f" --reference {folder}"
    return f"jaxbench drift --save-reference{where}"


def _info(name: str, arr: np.ndarray) -> ArrayInfo:
    return ArrayInfo(name=name, shape=list(arr.shape), dtype=arr.dtype.name)


def _stored(arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr)
    wide = WIDENED.get(arr.dtype.name)
    return arr.astype(wide) if wide is not None else arr


def _npz_bytes(saved: SavedSet) -> bytes:
    arrays = {f"input.{k}": _stored(v) for k, v in saved.inputs.items()}
    arrays |= {f"output.{k}": _stored(v) for k, v in saved.outputs.items()}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def write_reference(
    folder: str | Path,
    saved: list[SavedSet],
    env: dict[str, Any],
    tolerances: dict[str, dict[str, float]],
    size: str | None,
    created_at: str,
    force: bool = False,
) -> Path:
    """Write a reference: one ``.npz`` per set, then ``reference.json``, each atomically.

    Args:
        folder: The reference folder; created if missing.
        saved: The sets with their inputs and outputs.
        env: :func:`jaxbench.env.collect` of the generating process.
        tolerances: ``{dtype: {"rtol", "atol"}}`` in force.
        size: The MLP size name of the built-in sets; ``None`` for a user workload's.
        created_at: ISO-8601 UTC time.
        force: Overwrite an existing reference (its files not in the new one are removed).

    Returns:
        The manifest path.

    Raises:
        ReferenceExistsError: ``reference.json`` exists and ``force`` is false; nothing written.
        DriftReferenceError: ``folder`` is a file.
        OSError: The folder cannot be created or written.
    """
    folder = Path(folder)
    path = manifest_path(folder)
    if folder.exists() and not folder.is_dir():
        raise DriftReferenceError(f"reference folder {folder} is a file, not a folder")
    files = [s.file for s in saved]
    twice = sorted({f for f in files if files.count(f) > 1})
    if twice:
        raise DriftReferenceError(f"sets would share the file name(s) {', '.join(twice)}")
    old_files: set[str] = set()
    if path.exists():
        if not force:
            raise ReferenceExistsError(
                f"a drift reference already exists in {folder} ({MANIFEST_NAME}); "
                "pass --force to overwrite it"
            )
        try:
            old_files = {s.file for s in _parse_manifest(path).sets}
        except ReferenceCorruptError:
            old_files = set()
        path.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for s in saved:
        write_atomic(folder / s.file, _npz_bytes(s))
        entries.append(
            SetEntry(
                workload=s.workload,
                dtype=s.dtype,
                set=s.set,
                file=s.file,
                inputs=[_info(k, np.asarray(v)) for k, v in s.inputs.items()],
                outputs=[_info(k, np.asarray(v)) for k, v in s.outputs.items()],
                expect_error=s.expect_error,
                raised=s.raised,
                params=dict(s.params),
                reduction_length=s.reduction_length,
            )
        )
    for stale in old_files - {s.file for s in saved}:
        (folder / stale).unlink(missing_ok=True)
    manifest = ReferenceManifest(
        created_at=created_at, size=size, env=env, tolerances=tolerances, sets=entries
    )
    return write_json(path, manifest)


def _parse_manifest(path: Path) -> ReferenceManifest:
    try:
        return read_model(path, ReferenceManifest)
    except StoreFormatError as exc:
        raise ReferenceCorruptError(f"not a drift reference manifest: {exc}") from None


def _load_array(npz: Any, key: str, info: ArrayInfo, file: Path) -> np.ndarray:
    if key not in npz.files:
        raise ReferenceCorruptError(f"{file}: array {key!r} listed in {MANIFEST_NAME} is missing")
    arr = npz[key]
    try:
        want_dtype = np.dtype(WIDENED.get(info.dtype, info.dtype))
    except TypeError:
        raise ReferenceCorruptError(
            f"{file}: {MANIFEST_NAME} gives array {key!r} the unknown dtype {info.dtype!r}"
        ) from None
    if list(arr.shape) != info.shape or arr.dtype != want_dtype:
        raise ReferenceCorruptError(
            f"{file}: array {key!r} has shape {tuple(arr.shape)} and dtype {arr.dtype}; "
            f"{MANIFEST_NAME} says shape {tuple(info.shape)} and dtype {want_dtype}"
        )
    return arr


def _load_set(folder: Path, entry: SetEntry) -> LoadedSet:
    file = folder / entry.file
    if Path(entry.file).name != entry.file:
        raise ReferenceCorruptError(f"{manifest_path(folder)}: set file {entry.file!r} is a path")
    try:
        with np.load(file, allow_pickle=False) as npz:
            inputs = {
                i.name: _load_array(npz, f"input.{i.name}", i, file).astype(np.dtype(i.dtype))
                for i in entry.inputs
            }
            outputs = {o.name: _load_array(npz, f"output.{o.name}", o, file) for o in entry.outputs}
    except FileNotFoundError:
        raise ReferenceCorruptError(
            f"{file}: listed in {MANIFEST_NAME} but missing; save the reference again"
        ) from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        if isinstance(exc, ReferenceCorruptError):
            raise
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ReferenceCorruptError(f"{file}: not a readable .npz file: {reason}") from None
    return LoadedSet(entry, inputs, outputs)


def read_reference(folder: str | Path) -> Reference:
    """Read and validate a reference: the manifest and every set's arrays.

    Args:
        folder: The reference folder.

    Returns:
        A :class:`Reference`, every array checked against the manifest's name, shape and dtype.

    Raises:
        ReferenceMissingError: No ``reference.json`` in ``folder`` (the message gives the command
            that creates one).
        ReferenceCorruptError: The manifest or a ``.npz`` is unreadable, invalid, or disagrees
            with the manifest, or a set's dtype has no drift tolerance; the message names the
            file.
    """
    folder = Path(folder)
    path = manifest_path(folder)
    if not path.is_file():
        raise ReferenceMissingError(
            f"no drift reference in {folder} ({MANIFEST_NAME} not found); "
            f"create one with `{create_hint(folder)}`"
        )
    manifest = _parse_manifest(path)
    for entry in manifest.sets:
        if entry.dtype not in DRIFT_TOLERANCES:
            raise ReferenceCorruptError(
                f"{path}: set {entry.file} has dtype {entry.dtype!r}, which has no drift "
                f"tolerance (known: {', '.join(DRIFT_TOLERANCES)})"
            )
    return Reference(folder, manifest, [_load_set(folder, e) for e in manifest.sets])
