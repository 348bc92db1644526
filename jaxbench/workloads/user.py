"""Bring your own workload: a factory, found by name, that returns one :class:`Step`.

A factory is a callable ``factory(**params) -> Step``. Its keyword parameters are the workload's
parameters: their defaults are its grid (one case), and ``--param NAME=VALUE`` replaces them
(repeat it to sweep), the text converted to the type of the annotation or default (``int``,
``float``, ``bool`` or ``str``; ``int | None`` and ``Optional[int]`` read as ``int``). A
parameter whose default is anything else (a tuple, a dtype object) is not one of the case's:
the factory keeps its default, and records never hold it. The factory validates the values
itself: whatever it raises is the one-line error the user sees.
A factory is found by name (:func:`find`):

- ``package.module:factory``: imported where it is needed, in every worker process too (workers
  get the name, nothing is pickled), so the module must be importable there (installed, or on
  ``PYTHONPATH``);
- the name of an entry point in the group ``jaxbench.workloads`` of an installed package
  (``[project.entry-points."jaxbench.workloads"]`` in its ``pyproject.toml``:
  ``my_lm = "my_pkg.bench:lm_step"``); ``jaxbench list`` shows them.

Like the built-in families, a user workload proves itself before it is timed: the jitted step
and a plain reference (the factory's, else the same function run with ``jax.disable_jit``) must
agree within the tolerance of :data:`jaxbench.workloads.base.TOLERANCES`.
"""

from __future__ import annotations

import importlib
import inspect
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from jaxbench.workloads.base import Workload, typed_param
from jaxbench.workloads.step import Step, check_step

#: The start of JAX's warning that a dtype asked for is truncated (``jax._src.dtypes``: a 64-bit
#: dtype while ``jax_enable_x64`` is off), a regular expression as :mod:`warnings` takes it.
TRUNCATED_DTYPE = r"Explicitly requested dtype \S+ .*is not available, and will be truncated"

#: Entry-point group of installed packages' workload factories.
GROUP = "jaxbench.workloads"


class _Required:
    def __repr__(self) -> str:
        return "<required>"


#: Grid value of a factory parameter without a default: ``--param`` must give it.
REQUIRED = _Required()

_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


class UserWorkload(Workload):
    """A factory as a :class:`jaxbench.workloads.Workload`: no drift sets, no asv classes.

    Args:
        name: The name it was found by (``module:factory`` or an entry point's name); it is
            also the record's benchmark name.
        factory: ``factory(**params) -> Step``.
    """

    def __init__(self, name: str, factory: Callable[..., Any]) -> None:
        self.name = name
        self.factory = factory
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        try:  # annotations as types, also under ``from __future__ import annotations``
            signature = inspect.signature(factory, eval_str=True)
        except Exception:  # a name the annotations use is not importable: read them as text
            signature = inspect.signature(factory)
        self._params = {
            p.name: p
            for p in signature.parameters.values()
            if p.kind in kinds and _recordable(p.default)
        }
        self.param_names = tuple(self._params)
        self._last: tuple[tuple[Any, ...], Step] | None = None

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """The factory's defaults, one value each (:data:`REQUIRED` where it has none)."""
        return {
            n: [REQUIRED if p.default is inspect.Parameter.empty else p.default]
            for n, p in self._params.items()
        }

    def parse_param(self, name: str, text: str) -> Any:
        """``--param NAME=VALUE`` text as the parameter's type (its annotation, else default's).

        Raises:
            ValueError: The text is not of that type (the message names ``--param``).
        """
        kind = self._type_of(name)
        if kind is bool:
            if text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            raise ValueError(f"--param {name}={text!r}: expected true or false")
        return typed_param(name, text, kind, kind.__name__)

    def _type_of(self, name: str) -> type:
        p = self._params[name]
        note = p.annotation
        if isinstance(note, str):
            note = _TYPES.get(note.strip(), inspect.Parameter.empty)
        if typing.get_origin(note) in (typing.Union, types.UnionType):  # Optional[int], int | None
            named = [a for a in typing.get_args(note) if a is not type(None)]
            note = named[0] if len(named) == 1 else inspect.Parameter.empty
        if note in _TYPES.values():
            return note
        default = p.default
        if default is not inspect.Parameter.empty and default is not None:
            return type(default) if type(default) in _TYPES.values() else str
        return str

    def validate(self, params: Mapping[str, Any]) -> None:
        """Call the factory with ``params`` and check what it returns.

        Raises:
            ValueError: A parameter without a default is not given, the factory raised (its
                message, one line) or called ``sys.exit``, or it did not return a
                :class:`Step`.
        """
        self.build(params)

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """The workload's name."""
        return self.name

    def release(self) -> None:
        """Drop the last :class:`Step` kept by :meth:`build` (its arrays, e.g. a model's)."""
        self._last = None

    def build(self, params: Mapping[str, Any]) -> Step:
        """The factory's :class:`Step` for ``params`` (the last one is kept, not rebuilt).

        Raises:
            ValueError: As :meth:`validate`.
        """
        key = tuple(sorted(params.items(), key=lambda kv: kv[0]))
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        missing = [n for n, v in params.items() if v is REQUIRED]
        if missing:
            raise ValueError(
                f"workload {self.name!r} needs " + ", ".join(f"--param {n}=VALUE" for n in missing)
            )
        try:
            with warnings.catch_warnings():
                # JAX truncates a 64-bit dtype it was asked for to 32 bits, with a warning,
                # while jax_enable_x64 is off: the case would be recorded under the dtype asked
                # for and measured in the other. The warning fails the case (its text says how).
                warnings.filterwarnings("error", TRUNCATED_DTYPE, UserWarning)
                step = self.factory(**params)
        except SystemExit as exc:  # its own process, not the command's, to end
            raise ValueError(f"workload {self.name!r}: the factory called sys.exit({exc.code!r})"
                             ) from None  # fmt: skip
        except Exception as exc:
            raise ValueError(f"workload {self.name!r}: {type(exc).__name__}: {exc}") from None
        check_step(self.name, step)
        self._last = (key, step)
        return step


def _recordable(default: Any) -> bool:
    """Whether a parameter with this default is one of the case's.

    Its value goes into the record's ``params`` (JSON scalars only): no default, or an int,
    float, bool, str or ``None``.
    """
    scalar = default is None or type(default) in (int, float, bool, str)
    return default is inspect.Parameter.empty or scalar


_FOUND: dict[str, UserWorkload] = {}


def installed() -> dict[str, str]:
    """Entry points of the group :data:`GROUP`: name -> ``module:attr``."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def find(name: str, known: tuple[str, ...] = ()) -> UserWorkload:
    """The user workload called ``name``: an entry point of :data:`GROUP` or ``module:factory``.

    Args:
        name: An entry point's name, or ``package.module:factory``.
        known: Built-in workload names, for the message when ``name`` is none of these.

    Raises:
        ValueError: Unknown name, a module that does not import, no such attribute, or an
            attribute that is not callable (one line each, naming ``--workload``).
    """
    if name in _FOUND:
        return _FOUND[name]
    points = {ep.name: ep for ep in entry_points(group=GROUP)}
    if name in points:
        try:
            factory = points[name].load()
        except Exception as exc:
            raise ValueError(
                f"--workload {name!r}: entry point {points[name].value} does not load: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    elif ":" in name:
        factory = _import(name)
    elif _a_path(name):
        raise ValueError(_not_a_path(name, name, ""))
    else:
        choices = ", ".join([*known, *points])
        choose = f"choose from {choices}, or give" if choices else "give"
        raise ValueError(
            f"--workload {name!r}: unknown workload {name!r}; {choose} package.module:factory"
        )
    if not callable(factory):
        raise ValueError(f"--workload {name!r}: not a factory but {factory!r} (of type "
                         f"{type(factory).__name__})")  # fmt: skip
    _FOUND[name] = UserWorkload(name, factory)
    return _FOUND[name]


def _a_path(text: str) -> bool:
    return text.endswith(".py") or "/" in text or "\\" in text


def _not_a_path(spec: str, module_name: str, attr: str) -> str:
    """Why ``-w some/file.py[:factory]`` is refused, and the name to give instead."""
    file = Path(module_name)
    name = f"{file.stem}:{attr or 'FACTORY'}"
    where = "this folder" if str(file.parent) == "." else str(file.parent)
    hint = (f": run from {where} with -w {name}" if file.is_file()
            else f" (and there is no file {module_name})")  # fmt: skip
    return (
        f"--workload {spec!r}: a workload is a module and its factory "
        f"(package.module:factory), not a file path{hint}"
    )


def _import(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--workload {spec!r}: expected package.module:factory")
    if _a_path(module_name):
        raise ValueError(_not_a_path(spec, module_name, attr))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(
            f"--workload {spec!r}: cannot import {module_name}: {type(exc).__name__}: {exc}"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--workload {spec!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
