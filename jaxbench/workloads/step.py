"""The one workload protocol: a factory returns a :class:`Step`, and the harness runs it.

Every workload, built-in or the user's, is a factory ``factory(**params) -> Step``: its
keyword parameters are the case's parameters and the :class:`Step` is what is compiled, gated
and timed. The built-in families (:mod:`jaxbench.workloads`) are factories like a user's
(:mod:`jaxbench.workloads.user`); they use the optional fields a plain step does not need:
more than one compiled program (forward mode's linearize and apply), arguments made by an
untimed program, a gate against a NumPy reference, and figures of their own. From ``--param``
to the record, every case goes through :meth:`jaxbench.workloads.Workload.build` and this
module's methods (:mod:`jaxbench.prepared`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxbench.measure.harness import CompileTarget
from jaxbench.tolerance import tolerance
from jaxbench.workloads.base import TOLERANCES, GateFailure, LeafTolerance, check_close


@dataclass(frozen=True)
class Step:
    """One timed call of a workload, as its factory returns it.

    Attributes:
        fn: The step: each timed call is ``fn(*args)``, blocked on its whole output. A
            ``jax.jit``-wrapped function (it may donate arguments); any callable when
            ``programs`` names the jitted programs it calls (a loop of JVPs).
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
            (:func:`jaxbench.tolerance.tolerance`). ``None``: 64, and drift says so. The
            gate widens its tolerance to that one where it is wider (:func:`gate_tolerance`).
        tolerances: Output leaves that need another tolerance, or none, in the gate and in
            ``drift --workload``: a pattern over the output's key paths joined by ``/`` (the
            output of ``fn``: ``0/params/attn/key/bias``; ``fnmatch``, first match counts) ->
            :class:`jaxbench.workloads.base.LeafTolerance`, whose reason is recorded. A
            pattern that matches no leaf fails the gate. For parameters after one Adam or
            AdamW step: :func:`jaxbench.workloads.base.adam_first_step`.
        programs: The programs whose lowering and compile are timed, in order, when they are
            not ``fn`` at ``args``: e.g. forward mode's ``linearize`` (compiled and run
            untimed, ``calls_per_unit=0``) and ``apply`` (run K times a call). Empty: ``fn`` at
            ``args``, keyed by the workload's name and parameters.
        make_args: Builds the first call's arguments, after the programs are compiled; it may
            run an untimed program (forward mode's linearization at the primal). What it
            returns is used as it is, not copied: a donating ``fn`` deletes arrays it hands
            back from the factory (the built-in train steps do so, to hold one copy of a large
            model). ``None``: ``args``, filled and copied as above.
        gate: The correctness gate, run after compiling and before any timing: it returns
            facts to record (tolerances, largest errors) and raises
            :class:`jaxbench.workloads.GateFailure`. ``None``: the jitted ``fn`` against
            ``reference`` within ``tolerances`` (:meth:`check`).
        metrics: More figures recorded with the result (e.g. ``held_bytes``), beside
            ``flops`` (as ``model_flops``), ``tokens`` and the arguments' shardings.
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
    programs: tuple[CompileTarget, ...] = ()
    make_args: Callable[[], tuple[Any, ...]] | None = None
    gate: Callable[[], dict[str, Any]] | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def call(self, args: tuple[Any, ...]) -> Any:
        """One call: ``fn(*args)`` (not blocked; the harness blocks on it)."""
        return self.fn(*args)

    def next_state(self, args: tuple[Any, ...], out: Any) -> tuple[Any, ...]:
        """The next call's arguments: ``next_args(args, out)`` as a tuple, else ``args``."""
        return args if self.next_args is None else tuple(self.next_args(args, out))

    def targets(self, name: str, key: Hashable) -> list[CompileTarget]:
        """:attr:`programs`, else ``fn`` at ``args`` labelled ``name`` with identity ``key``."""
        return list(self.programs) or [CompileTarget(name, key, self.fn, self.args)]

    def first_args(self) -> tuple[Any, ...]:
        """The first call's arguments: ``make_args()``, else :func:`materialize` of ``args``."""
        return self.make_args() if self.make_args is not None else materialize(self.args, self.seed)

    def check(self, name: str = "step") -> dict[str, Any]:
        """Run the gate (:attr:`gate`, else the jitted ``fn`` against its reference).

        Raises:
            jaxbench.workloads.GateFailure: As :attr:`gate`, or the outputs differ beyond the
                tolerance of their lowest floating precision (:func:`tolerance_dtype`), or
                ``fn`` donates its arguments and there is no ``next_args`` to replace them.
        """
        return self.gate() if self.gate is not None else _reference_gate(name, self)

    def record_metrics(self) -> dict[str, Any]:
        """What the record keeps of the step, besides XLA's figures.

        The mesh and partition specs of sharded arguments (:func:`sharding_facts`),
        ``model_flops`` (:attr:`flops`) and ``tokens``, then :attr:`metrics` (a family's own
        figures replace the others of the same name).
        """
        named = {k: v for k, v in (("model_flops", self.flops), ("tokens", self.tokens))
                 if v is not None}  # fmt: skip
        return sharding_facts(self.args) | named | dict(self.metrics)


def check_step(name: str, step: Any) -> Step:
    """``step`` if it is a well-formed :class:`Step` from workload ``name``'s factory.

    Raises:
        ValueError: Not a :class:`Step`, or a field of the wrong kind (one line naming the
            workload and the field): ``fn`` not ``jax.jit``-wrapped while ``programs`` is
            empty, ``args`` not a tuple, a ``programs`` entry not a
            :class:`~jaxbench.measure.harness.CompileTarget`, a bad ``reduction_length``,
            ``tolerances``, ``flops`` or ``tokens``.
    """
    if not isinstance(step, Step):
        raise ValueError(
            f"workload {name!r}: the factory returned {type(step).__name__}, "
            "expected jaxbench.workloads.Step"
        )
    if not all(isinstance(p, CompileTarget) for p in step.programs):
        raise ValueError(
            f"workload {name!r}: Step.programs must hold jaxbench.workloads.CompileTarget s"
        )
    if not step.programs and not hasattr(step.fn, "lower"):
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
    return step


def materialize(args: tuple[Any, ...], seed: int = 0) -> tuple[Any, ...]:
    """Fresh arguments: ``ShapeDtypeStruct`` leaves filled, concrete leaves copied.

    Floating leaves are ``jax.random.normal(fold_in(key(seed), i), shape, dtype)`` for the
    ``i``-th leaf; other dtypes are zeros. Same seed, same values. A leaf with a
    ``NamedSharding`` (a ``ShapeDtypeStruct`` given ``sharding=NamedSharding(...)``, or a
    sharded array), or another sharding over several devices, is placed on that sharding, so a
    sharded step is timed sharded, and one given a single device runs there; an array on one
    device without a ``NamedSharding`` (as every array is made) goes to the default device.
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
        if placed(leaf):
            new = jax.device_put(new, sharding)
        out.append(new)
    return tuple(jax.tree.unflatten(tree, out))


def placed(leaf: Any) -> bool:
    """Whether a workload placed ``leaf`` itself.

    A leaf with a ``NamedSharding`` (of one device too), or a sharding over several devices, is
    filled and kept where it says (:func:`materialize`, :func:`jaxbench.prepared.place`); every
    other goes to the default device.
    """
    import jax

    sharding = getattr(leaf, "sharding", None)
    if sharding is None:
        return False
    return isinstance(sharding, jax.sharding.NamedSharding) or len(sharding.device_set) > 1


def sharding_facts(args: tuple[Any, ...]) -> dict[str, Any]:
    """What a record keeps of the arguments' shardings: the mesh and each sharded leaf's spec.

    Returns:
        ``{}`` when no leaf has a ``NamedSharding``; else ``mesh`` (the first such leaf's,
        :func:`jaxbench.workloads.meshes.mesh_facts`, one device's too) and
        ``partition_specs`` (leaf key path -> spec, for every leaf with a ``NamedSharding``).
    """
    import jax

    from jaxbench.workloads.meshes import mesh_facts
    from jaxbench.workloads.trees import path_text

    specs, mesh = {}, None
    for path, leaf in jax.tree_util.tree_flatten_with_path(args)[0]:
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, jax.sharding.NamedSharding):
            specs[path_text(path, "/") or "(root)"] = str(sharding.spec)
            mesh = mesh or sharding.mesh
    return {"mesh": mesh_facts(mesh), "partition_specs": specs} if mesh is not None else {}


def _reference_gate(name: str, step: Step) -> dict[str, Any]:
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
    dtype = tolerance_dtype(got)
    facts = check_close(f"{name}: jit vs {source}", got, want, dtype,
                        gate_tolerance(dtype, step.reduction_length),
                        leaves=step.tolerances)  # fmt: skip
    return facts | {"reference": source}


def gate_tolerance(dtype: str, reduction_length: int | None) -> dict[str, float]:
    """The ``{"rtol", "atol"}`` a user step's gate holds its outputs to.

    The dtype's (:data:`jaxbench.workloads.base.TOLERANCES`), or, where the step gives its
    :attr:`Step.reduction_length` and that allows more, the tolerance drift derives from it
    (:func:`jaxbench.tolerance.tolerance`): the jitted step sums in another order than the plain
    one, and a sum of ``n`` float32 terms rounds by up to ``n`` unit roundoffs (Higham 2002,
    sec. 4.2), more than the fixed float32 bound once ``n`` is above a few dozen.
    """
    base = TOLERANCES[dtype]
    if reduction_length is None:
        return dict(base)
    wide = tolerance(dtype, reduction_length)
    return {k: max(base[k], wide[k]) for k in ("rtol", "atol")}


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
