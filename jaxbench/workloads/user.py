"""Bring your own workload: a factory, found by name, that returns one :class:`Step`.

A factory is a callable ``factory(**params) -> Step``. Its keyword parameters are the workload's
parameters: their defaults are its grid (one case), and ``--param NAME=VALUE`` replaces them
(repeat it to sweep), the text converted to the type of the default or annotation (``int``,
``float``, ``bool`` or ``str``). A parameter whose default is anything else (a tuple, a dtype
object) is not one of the case's: the factory keeps its default, and records never hold it.
The factory validates the values itself: whatever it raises is the one-line error the user sees.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads.base import Built, GateFailure, LeafTolerance, Workload, check_close

#: Entry-point group of installed packages' workload factories.
GROUP = "jaxbench.workloads"


@dataclass(frozen=True)
class Step:
    """One timed call of a user workload, as a factory returns it.

    Attributes:
        fn: The step, a ``jax.jit``-wrapped function (it may donate arguments); each timed
            call is ``fn(*args)``, blocked on its whole output.
        args: The positional arguments, a tuple of PyTrees. A ``jax.ShapeDtypeStruct`` leaf is
            filled before the first call: floating dtypes from N(0, 1) (``jax.random.normal``
            with key ``seed``, folded with the leaf's index), other dtypes with zeros; give
            concrete arrays where values matter (e.g. indices). Concrete leaves are copied for
            each use, so a donating ``fn`` never deletes the factory's arrays.
        next_args: ``(args, output) -> args`` where outputs feed the next call (a train step
            returning new parameters; required when ``fn`` donates what it returns). ``None``:
            every call gets the same arguments.
        reference: The plain function the gate compares ``fn`` with (same arguments). ``None``:
            ``fn`` itself run op by op under ``jax.disable_jit``.
        flops: Model FLOP per call by the workload's own formula (e.g. 6 N per token), recorded
            beside XLA's count; ``None`` when there is none. Either MFU needs the device's
            peak at the case's ``dtype`` parameter: give the factory one (``dtype: str =
            "float32"``), else the MFU columns read n/a.
        tokens: Tokens (or items) per call, for throughput; ``None`` when not meaningful.
        seed: Seed of the synthetic arguments.
        reduction_length: The most terms summed into one element of any output (a matmul's
            inner dimension, a softmax's width, a mean over the batch; the widest of them), for
            ``jaxbench drift --workload``: its float32 tolerance is derived from it
            (:func:`jaxbench.drift.tolerance.tolerance`). ``None``: 64, and drift says so.
        tolerances: Output leaves that need another tolerance, or none, in the gate and in
            ``drift --workload``: a pattern over the output's key paths joined by ``/`` (the
            output of ``fn``: ``0/params/attn/key/bias``; ``fnmatch``, first match counts) ->
            :class:`jaxbench.workloads.base.LeafTolerance`, whose reason is recorded. A
            pattern that matches no leaf fails the gate. For parameters after one Adam or
            AdamW step: :func:`jaxbench.workloads.base.adam_first_step`.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    next_args: Callable[[tuple[Any, ...], Any], tuple[Any, ...]] | None = None
    reference: Callable[..., Any] | None = None
    flops: float | None = None
    tokens: int | None = None
    seed: int = 0
    reduction_length: int | None = None
    tolerances: Mapping[str, LeafTolerance] = field(default_factory=dict)


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
        self._params = {
            p.name: p
            for p in inspect.signature(factory).parameters.values()
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
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"--param {name}={text!r}: expected {kind.__name__}") from None

    def _type_of(self, name: str) -> type:
        p = self._params[name]
        note = p.annotation
        if isinstance(note, str):
            note = _TYPES.get(note.strip(), inspect.Parameter.empty)
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
                message, one line), or it did not return a :class:`Step`.
        """
        self.step(params)

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """The workload's name."""
        return self.name

    def build(self, params: Mapping[str, Any]) -> Built:
        """The factory's step as a :class:`Built`: one compile target, its gate, its metrics."""
        step = self.step(params)
        target_key = (self.name, *sorted(params.items()))
        metrics = {
            k: v for k, v in (("model_flops", step.flops), ("tokens", step.tokens)) if v is not None
        } | sharding_facts(step.args)
        next_state = None
        if step.next_args is not None:
            advance = step.next_args

            def next_state(state: Any, out: Any) -> Any:
                return tuple(advance(state, out))

        return Built(
            targets=[CompileTarget(self.name, target_key, step.fn, step.args)],
            call=lambda state: step.fn(*state),
            make_state=lambda: materialize(step.args, step.seed),
            check=lambda: _gate(self.name, step),
            next_state=next_state,
            metrics=metrics,
        )

    def step(self, params: Mapping[str, Any]) -> Step:
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
            step = self.factory(**params)
        except Exception as exc:
            raise ValueError(f"workload {self.name!r}: {type(exc).__name__}: {exc}") from None
        _check_step(self.name, step)
        self._last = (key, step)
        return step


def _recordable(default: Any) -> bool:
    """Whether a parameter with this default is one of the case's.

    Its value goes into the record's ``params`` (JSON scalars only): no default, or an int,
    float, bool, str or ``None``.
    """
    scalar = default is None or type(default) in (int, float, bool, str)
    return default is inspect.Parameter.empty or scalar


def _check_step(name: str, step: Any) -> None:
    if not isinstance(step, Step):
        raise ValueError(
            f"workload {name!r}: the factory returned {type(step).__name__}, "
            "expected jaxbench.workloads.Step"
        )
    if not hasattr(step.fn, "lower"):
        raise ValueError(
            f"workload {name!r}: Step.fn must be a jax.jit-wrapped function, "
            f"got {type(step.fn).__name__}"
        )
    if not isinstance(step.args, tuple):
        raise ValueError(
            f"workload {name!r}: Step.args must be a tuple of positional arguments, "
            f"got {type(step.args).__name__}"
        )
    length = step.reduction_length
    whole = isinstance(length, int) and not isinstance(length, bool)
    if length is not None and not (whole and length >= 1):
        raise ValueError(
            f"workload {name!r}: Step.reduction_length must be a whole number >= 1, got {length!r}"
        )
    tolerances = step.tolerances
    if not isinstance(tolerances, Mapping) or not all(
        isinstance(k, str) and isinstance(v, LeafTolerance) for k, v in tolerances.items()
    ):
        raise ValueError(
            f"workload {name!r}: Step.tolerances must map key-path patterns (str) to "
            "jaxbench.workloads.LeafTolerance"
        )
    for field_name in ("flops", "tokens"):
        value = getattr(step, field_name)
        if value is not None and not (isinstance(value, int | float) and value >= 0):
            raise ValueError(
                f"workload {name!r}: Step.{field_name} must be a number >= 0, got {value!r}"
            )


def materialize(args: tuple[Any, ...], seed: int = 0) -> tuple[Any, ...]:
    """Fresh arguments: ``ShapeDtypeStruct`` leaves filled, concrete leaves copied.

    Floating leaves are ``jax.random.normal(fold_in(key(seed), i), shape, dtype)`` for the
    ``i``-th leaf; other dtypes are zeros. Same seed, same values. A leaf with a sharding over
    several devices (a ``ShapeDtypeStruct`` given ``sharding=NamedSharding(...)``, or a sharded
    array) is placed on that sharding, so a sharded step is timed sharded.
    """
    import jax
    import jax.numpy as jnp

    leaves, tree = jax.tree.flatten(args)
    key = jax.random.key(seed)
    out = []
    for i, leaf in enumerate(leaves):
        sharding = getattr(leaf, "sharding", None)
        if isinstance(leaf, jax.ShapeDtypeStruct):
            if jnp.issubdtype(leaf.dtype, jnp.floating):
                new = jax.random.normal(jax.random.fold_in(key, i), leaf.shape, leaf.dtype)
            else:
                new = jnp.zeros(leaf.shape, leaf.dtype)
        else:
            new = jnp.array(leaf, copy=True)
        if sharding is not None and len(sharding.device_set) > 1:
            new = jax.device_put(new, sharding)
        out.append(new)
    return tuple(jax.tree.unflatten(tree, out))


def sharding_facts(args: tuple[Any, ...]) -> dict[str, Any]:
    """What a record keeps of the arguments' shardings: the mesh and each sharded leaf's spec.

    Returns:
        ``{}`` when no leaf has a ``NamedSharding`` over several devices; else ``mesh`` (the
        first such leaf's, :func:`jaxbench.workloads.meshes.mesh_facts`) and
        ``partition_specs`` (leaf key path -> spec, for every leaf with a ``NamedSharding``).
    """
    import jax

    from jaxbench.workloads.meshes import mesh_facts
    from jaxbench.workloads.trees import path_text

    specs, mesh = {}, None
    for path, leaf in jax.tree_util.tree_flatten_with_path(args)[0]:
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, jax.sharding.NamedSharding) and len(sharding.device_set) > 1:
            specs[path_text(path, "/") or "(root)"] = str(sharding.spec)
            mesh = mesh or sharding.mesh
    return {"mesh": mesh_facts(mesh), "partition_specs": specs} if mesh is not None else {}


def _gate(name: str, step: Step) -> dict[str, Any]:
    """The jitted step against its reference on the same fresh arguments.

    Raises:
        jaxbench.workloads.GateFailure: They differ beyond the tolerance of the output's
            lowest floating precision (bfloat16's for 16-bit floats, float32's otherwise), or
            ``fn`` donates its arguments and there is no ``next_args`` to replace them.
    """
    import jax

    if step.reference is not None:
        want = step.reference(*materialize(step.args, step.seed))
        source = "reference"
    else:
        with jax.disable_jit():
            want = step.fn(*materialize(step.args, step.seed))
        source = "jax.disable_jit"
    args = materialize(step.args, step.seed)
    got = step.fn(*args)
    donated = [i for i, leaf in enumerate(jax.tree.leaves(args))
               if getattr(leaf, "is_deleted", lambda: False)()]  # fmt: skip
    if donated and step.next_args is None:
        raise GateFailure(
            f"{name}: Step.fn donates argument leaves {donated} but Step.next_args is None; give "
            "next_args(args, output) returning the next call's arguments"
        )
    if step.next_args is not None:
        _check_next_args(name, args, step.next_args(args, got))
    facts = check_close(f"{name}: jit vs {source}", got, want, tolerance_dtype(got),
                        leaves=step.tolerances)  # fmt: skip
    return facts | {"reference": source}


def tolerance_dtype(outputs: Any) -> str:
    """``"bfloat16"`` if any floating leaf of ``outputs`` has 16 bits or fewer, else ``"float32"``.

    The dtype whose tolerance a user workload's outputs are held to, by the gate and by drift:
    the lowest floating precision among them. ``outputs`` may hold arrays or
    ``jax.ShapeDtypeStruct`` s.
    """
    import jax
    import jax.numpy as jnp

    narrow = any(
        jnp.issubdtype(leaf.dtype, jnp.floating) and jnp.dtype(leaf.dtype).itemsize <= 2
        for leaf in jax.tree.leaves(outputs)
    )
    return "bfloat16" if narrow else "float32"


def _check_next_args(name: str, args: tuple[Any, ...], following: Any) -> None:
    """``next_args``' result must be arguments like ``args``, none of them donated already.

    Raises:
        jaxbench.workloads.GateFailure: Another PyTree structure, or deleted (donated) leaves.
    """
    import jax

    want, got = jax.tree.structure(args), jax.tree.structure(following)
    if not isinstance(following, tuple) or got != want:
        raise GateFailure(f"{name}: Step.next_args returned {got}; expected arguments like {want}")
    dead = [i for i, leaf in enumerate(jax.tree.leaves(following))
            if getattr(leaf, "is_deleted", lambda: False)()]  # fmt: skip
    if dead:
        raise GateFailure(
            f"{name}: Step.next_args returned argument leaves {dead} that the call donated; "
            "return the call's outputs in their place"
        )


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
    else:
        choices = ", ".join([*known, *points])
        raise ValueError(
            f"unknown workload {name!r}; choose from {choices}, or give package.module:factory"
        )
    if not callable(factory):
        raise ValueError(f"--workload {name!r} is a {type(factory).__name__}, not a factory")
    _FOUND[name] = UserWorkload(name, factory)
    return _FOUND[name]


def _import(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--workload {spec!r}: expected package.module:factory")
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
