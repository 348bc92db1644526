"""The one loader: every file of the store, every kind, one bad-line policy.

:func:`load` reads the files :func:`jaxbench.store.scan.store_files` finds. A JSON Lines file
holds one object per line; a ``.json`` file is one object (or an asv result file, converted to
records by :mod:`jaxbench.store.asv`). Each object is validated into its model by its ``kind``
(:data:`jaxbench.store.kinds.STORED`), straight from its JSON text (pydantic's parser, one
pass); only an object that does not validate so (a schema-1 object without ``kind``, an asv
file, a kind passed over, a bad line) is parsed apart to tell what it is.

**Bad lines.** A line (or file) that cannot be read, is not JSON (e.g. a last line cut short by a
kill), is not a jaxbench object, is of a kind this version does not know, or has a
``schema_version`` newer than this version reads is a :class:`Problem` that names the file and
the line; everything else in the file still loads. ``strict=True`` raises
:class:`StoreFormatError` at the first such line instead (``jaxbench show --strict``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import typing
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from jaxbench.store import asv
from jaxbench.store.kinds import ASV, KINDS, MODELS, STORED, UNMODELLED, kind_of, upgrade
from jaxbench.store.record import Env, Record
from jaxbench.store.scan import store_files

#: Bad line numbers named in one problem before "...".
NAMED_LINES = 5


@dataclass(frozen=True)
class Problem:
    """A file (or some lines of one) that did not load; the rest of the file still loaded.

    Attributes:
        path: The file.
        reason: What is wrong, e.g. ``"line 3: not JSON (cut short?): ..."``.
    """

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class StoreFormatError(ValueError):
    """A file holds a bad line (strict loading); the message is ``"<file>:<line>: <reason>"``."""


@dataclass(frozen=True)
class Item:
    """One object read from the store.

    Attributes:
        model: The validated model (:class:`~jaxbench.store.Record`, ...).
        path: The file it came from.
        line: Its line (from 1) in a JSON Lines file; ``None`` for a ``.json`` file.
    """

    model: BaseModel
    path: Path
    line: int | None

    @property
    def kind(self) -> str:
        """The model's ``kind``."""
        return str(getattr(self.model, "kind", ""))


@dataclass
class Loaded:
    """What :func:`load` read: the items in file and line order, and the problems."""

    items: list[Item] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Kinds seen but not read (:data:`jaxbench.store.kinds.UNMODELLED`), e.g. ``sensitivity``.
    passed_over: set[str] = field(default_factory=set)
    #: Every file read (resolved), whatever it held: pass it as ``skip`` to a later :func:`load`
    #: so that no file is read twice in one command.
    files: set[Path] = field(default_factory=set)

    def of(self, kind: str) -> list[Item]:
        """The items of one kind."""
        return [i for i in self.items if i.kind == kind]

    def models(self, kind: str) -> list[Any]:
        """The models of one kind."""
        return [i.model for i in self.of(kind)]

    def extend(self, other: Loaded) -> None:
        """Add another :class:`Loaded` (items and problems) to this one."""
        self.items.extend(other.items)
        self.problems.extend(other.problems)
        self.passed_over |= other.passed_over
        self.files |= other.files


class _Bad(Exception):
    """One line or file that does not load (the message is the reason)."""


class _Unmodelled(Exception):
    """An object of a kind the store passes over (the message is the kind)."""


def _newest(kind: str) -> int:
    versions = typing.get_args(MODELS[kind].model_fields["schema_version"].annotation)
    return max(versions)


def _reason(exc: ValidationError, kind: str) -> str:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    if loc and loc[-1] == "schema_version" and len(loc) <= 2:
        got = err.get("input")
        if isinstance(got, int) and not isinstance(got, bool) and got > _newest(kind):
            return (
                f"schema_version {got} of kind {kind!r} is newer than this jaxbench reads "
                f"(up to {_newest(kind)}): upgrade jaxbench"
            )
        return f"schema_version {got!r} of kind {kind!r} is not one this jaxbench reads"
    where = ".".join(loc[1:]) or "top level"  # loc[0] is the union's tag
    return f"not a valid {kind}: {where}: {err['msg']}"


def _models(raw: Any, path: Path) -> list[BaseModel]:
    """The models of one parsed JSON object (several for an asv result file)."""
    kind = kind_of(raw)
    if kind is None:
        raise _Bad(
            "not a jaxbench object (no 'kind', and not an older record, live comparison, "
            "sweep or asv result)"
        )
    if kind in UNMODELLED:
        raise _Unmodelled(kind)
    if kind == ASV:
        try:
            return list(asv.records(raw, path))
        except asv.AsvFormatError as exc:
            raise _Bad(str(exc)) from None
    if kind not in KINDS:
        raise _Bad(f"kind {kind!r} is not one this jaxbench reads ({', '.join(sorted(KINDS))})")
    try:
        return [STORED.validate_python(upgrade(raw, kind))]
    except ValidationError as exc:
        raise _Bad(_reason(exc, kind)) from None


def _parse(data: bytes, path: Path) -> list[BaseModel]:
    try:  # the common case: a current object of a modelled kind
        return [STORED.validate_json(data)]
    except ValidationError:
        pass
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _Bad(f"not UTF-8 text: {exc}") from None
    except ValueError as exc:
        raise _Bad(f"not JSON (cut short?): {exc}") from None
    return _models(raw, path)


class _SharedEnv:
    """Gives the records of one file that recorded the same environment one :class:`Env`.

    A process writes one environment on each of its records. Sharing the model lets the
    analysis read a history's environments once each (its condition labels are made per
    environment object, :func:`jaxbench.analysis.conditions.condition_fields`), not once per
    record. Records are not modified after loading, so the shared model is never changed
    through one of them. "The same" is equality of the models' values, so an environment that
    wrote a flag as ``1`` and the next that wrote it as ``true`` share the first's model (and
    its condition); jaxbench writes a process's environment the same way on every record.
    """

    def __init__(self) -> None:
        self._last: Env | None = None

    def __call__(self, model: BaseModel) -> BaseModel:
        if isinstance(model, Record):
            if self._last is not None and model.env == self._last:
                model.env = self._last
            else:
                self._last = model.env
        return model


def _summary(bad: list[tuple[int, str]], loaded: int) -> str:
    first_line, first_reason = bad[0]
    kept = f"{loaded} loaded" if loaded else "nothing loaded"
    if len(bad) == 1:
        return f"line {first_line}: {first_reason}; {kept}"
    lines = ", ".join(str(n) for n, _ in bad[:NAMED_LINES]) + (", ..." * (len(bad) > NAMED_LINES))
    return f"{len(bad)} bad lines ({lines}; first: {first_reason}); {kept}"


def read_file(path: str | os.PathLike[str], strict: bool = False) -> Loaded:
    """Every object of one file (see the module docstring for what goes wrong and how).

    Raises:
        StoreFormatError: ``strict`` and a line or the file does not load.
    """
    path = Path(path)
    out = Loaded()
    try:
        data = path.read_bytes()
    except OSError as exc:
        if strict:
            raise StoreFormatError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        out.problems.append(Problem(str(path), f"cannot be read: {exc.strerror or exc}"))
        return out
    if path.suffix != ".jsonl":
        try:
            out.items.extend(Item(m, path, None) for m in _parse(data, path))
        except _Unmodelled as exc:
            out.passed_over.add(str(exc))
        except _Bad as exc:
            if strict:
                raise StoreFormatError(f"{path}: {exc}") from None
            out.problems.append(Problem(str(path), str(exc)))
        return out
    bad: list[tuple[int, str]] = []
    shared = _SharedEnv()
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.items.extend(Item(shared(m), path, lineno) for m in _parse(line, path))
        except _Unmodelled as exc:
            out.passed_over.add(str(exc))
        except _Bad as exc:
            if strict:
                raise StoreFormatError(f"{path}:{lineno}: {exc}") from None
            bad.append((lineno, str(exc)))
    if bad:
        out.problems.append(Problem(str(path), _summary(bad, len(out.items))))
    return out


def load(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    kinds: Iterable[str] | None = None,
    strict: bool = False,
    skip: Collection[Path] = frozenset(),
) -> Loaded:
    """Read every store file under ``paths`` (files, or folders searched recursively).

    Args:
        paths: Files or folders.
        kinds: Keep only these kinds (:data:`jaxbench.store.kinds.KINDS`); default all. Objects
            of other kinds are passed over, but a file named explicitly that holds none of them
            is a :class:`Problem` (e.g. a live comparison file given where records are read).
        strict: Raise at the first bad line instead of reporting it.
        skip: Resolved files not to read (:attr:`Loaded.files` of an earlier load).

    Returns:
        The items in file and line order, and the problems.

    Raises:
        FileNotFoundError: A named path does not exist.
        ValueError: ``kinds`` names a kind the store does not have.
        StoreFormatError: ``strict`` and a line does not load.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    wanted = frozenset(KINDS if kinds is None else kinds)
    if unknown := wanted - KINDS:
        raise ValueError(f"unknown kinds {sorted(unknown)}; the store has {sorted(KINDS)}")
    out = Loaded()
    with collector_paused():
        _load_into(out, paths, wanted, strict, skip)
    return out


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused inside the block (as it was after it).

    Loading a store, and the frames made from it, make a few objects per field of every line,
    none of them cyclic garbage, and the collector would walk all those already made again and
    again as they pile up (about 40 % of the time of loading 50,000 records). Reference
    counting still frees what is dropped. :func:`load` pauses it; a command that analyses what
    it loaded pauses it for the analysis (``show``, ``compare`` of records, ``report`` until it
    draws its figures, which hold reference cycles).
    Never around timed calls: a user's program runs with the collector as Python sets it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load_into(
    out: Loaded,
    paths: Iterable[str | os.PathLike[str]],
    wanted: frozenset[str],
    strict: bool,
    skip: Collection[Path],
) -> None:
    for path, named in store_files(paths):
        resolved = path.resolve()
        if resolved in skip:
            continue
        out.files.add(resolved)
        found = read_file(path, strict=strict)
        keep = [i for i in found.items if i.kind in wanted]
        out.items.extend(keep)
        out.problems.extend(found.problems)
        out.passed_over |= found.passed_over
        if named and not keep and not found.problems:
            held = sorted({i.kind for i in found.items} | found.passed_over) or ["nothing"]
            what = " or ".join(sorted(wanted))
            out.problems.append(Problem(str(path), f"holds no {what} (it holds {', '.join(held)})"))


def read_model[M: BaseModel](path: str | os.PathLike[str], model: type[M]) -> M:
    """The one object of a ``.json`` file that must be of ``model``'s kind (e.g. ``sweep.json``).

    Raises:
        StoreFormatError: The file does not load, or holds another kind (names the file).
        OSError: Only through ``StoreFormatError``: an unreadable file is reported there too.
    """
    loaded = read_file(path, strict=True)
    found = [i.model for i in loaded.items if isinstance(i.model, model)]
    if len(found) != 1 or len(loaded.items) != 1:
        held = ", ".join(sorted({i.kind for i in loaded.items})) or "nothing"
        kind = model.model_fields["kind"].default
        raise StoreFormatError(f"{path}: holds {held}, not one {kind}")
    return found[0]
