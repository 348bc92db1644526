"""What a workload hands to the harness: jitted callables, the timed unit, and its gate."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxbench.tolerance import bound_ratio
from jaxbench.workloads.regression import DriftSets

if TYPE_CHECKING:
    from jaxbench.workloads.step import Step

TOLERANCES: dict[str, dict[str, float]] = {
    # float32: the acceptance bound of this project (rtol 1e-5, atol 1e-6).
    "float32": {"rtol": 1e-5, "atol": 1e-6},
    # bfloat16 has an 8-bit significand, so one rounding is a relative error up to 2**-8; fused
    # and unfused paths may round a few times differently: allow 2**-5.
    "bfloat16": {"rtol": 2.0**-5, "atol": 2.0**-5},
}


class GateFailure(RuntimeError):
    """A case failed its correctness gate; it is recorded as failed and not timed.

    Attributes:
        facts: What the comparison that failed applied and found, for the record's ``gate``
            (``rtol``, ``atol``, ``leaf``, ``max_abs_err``, ...); empty where none applies.
    """

    def __init__(self, message: str, facts: dict[str, Any] | None = None):
        super().__init__(message)
        self.facts = dict(facts or {})


@dataclass(frozen=True)
class LeafTolerance:
    """How the gate and drift compare some output leaves, and why (recorded with the result).

    A step names the leaves by a pattern over their key paths joined by ``/``
    (``fnmatch``: ``0/*/bias``, ``params/**``, ``*`` for all; the paths of
    :func:`jaxbench.workloads.trees.path_text`), e.g. ``Step.tolerances``.

    Attributes:
        reason: Why these leaves need it; recorded in the gate's facts and the drift rows.
        rtol: Relative tolerance; ``None`` keeps the dtype's.
        atol: Absolute tolerance, in units of ``max(1, max |reference leaf|)`` as the dtype's
            (:func:`jaxbench.tolerance.bound_ratio`); ``None`` keeps the dtype's.
        exclude: Leave these leaves out of the comparison (they must still be finite and of
            the same shape).
    """

    reason: str
    rtol: float | None = None
    atol: float | None = None
    exclude: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError("LeafTolerance.reason must say why (a non-empty text)")
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and value >= 0):
                raise ValueError(f"LeafTolerance.{name} must be a number >= 0, got {value!r}")


def adam_first_step(learning_rate: float) -> LeafTolerance:
    """Parameters after one Adam or AdamW step: they agree to ``2 * learning_rate``.

    Adam's update is ``lr * m_hat / (sqrt(v_hat) + eps)`` (Kingma & Ba 2015, Algorithm 1; AdamW
    adds decoupled weight decay, Loshchilov & Hutter 2019). After the first step ``m_hat /
    sqrt(v_hat) = g / |g| = sign(g)`` for every ``|g| >> eps``, so each weight moves by about
    ``lr`` whatever the gradient's size. A gradient within rounding of zero (a bias whose
    gradient cancels, e.g. attention's key bias under softmax's shift invariance) may take
    either sign in two correct programs, and the weight then differs by up to ``2 * lr``. The
    loss and the moments (linear and quadratic in the gradient) keep the dtype's tolerance.
    This is the one place that rule is stated; the built-in transformer's gate uses it, and a
    user's ``Step.tolerances`` can (``{"0/params/**": adam_first_step(1e-3)}``).

    Args:
        learning_rate: The step's learning rate (> 0).

    Raises:
        ValueError: ``learning_rate`` is not > 0.
    """
    if not learning_rate > 0:
        raise ValueError(f"adam_first_step: learning rate must be > 0, got {learning_rate!r}")
    return LeafTolerance(
        reason=f"one Adam step moves each weight by about lr * sign(gradient); a gradient within "
        f"rounding of zero may move either way, so weights agree to 2 * lr = {2 * learning_rate:g}",
        atol=2 * learning_rate,
    )


def leaf_tolerance(
    path: str, leaves: Mapping[str, LeafTolerance]
) -> tuple[str, LeafTolerance] | None:
    """The first ``(pattern, tolerance)`` of ``leaves`` whose pattern matches ``path``."""
    import fnmatch

    for pattern, tol in leaves.items():
        if fnmatch.fnmatchcase(path, pattern):
            return pattern, tol
    return None


class NotApplicable(RuntimeError):
    """A case does not apply (e.g. a Jacobian too large to form); it is recorded as skipped."""


@dataclass(frozen=True)
class AsvSuite:
    """One asv class of a family, made by ``benchmarks/common.py`` from this declaration.

    asv names a benchmark ``<module>.<name>.<method>``; its result history is keyed by that name
    and the parameter values, so a declared suite's ``module``, ``name``, ``method`` and
    ``swept`` keep their values once results exist.

    Attributes:
        name: The asv class name, e.g. ``Scatter``.
        swept: Parameter -> values, in asv's order; asv appends ``backend``.
        fixed: The family's other parameters, the same in every case of the class.
        kind: ``time`` (asv times ``method``: one call of the warmed case), ``peakmem`` (the
            process's peak resident bytes after ``method``) or ``costs`` (compile and lowering
            seconds, FLOP/s, MFU and device peak bytes of each case, measured once per
            environment by the core runner, and the figures of ``tracks``).
        method: The timed method's name (``time``, ``peakmem``); its prefix is asv's type.
        tracks: ``costs`` only: more figures to track, by name: a key of the record's
            ``metrics`` (e.g. ``held_bytes``) or of
            :func:`jaxbench.analysis.derived.record_figures` (e.g. ``tokens_per_s``), with its
            unit.
        timeout: asv's timeout of one benchmark, seconds (``costs``: the measurement of the
            whole grid may take ``max(900, 3 * timeout)``).
        module: The file under ``benchmarks/`` (no ``.py``) whose classes include this one;
            ``bench_workloads`` holds every suite no other file claims.
    """

    name: str
    swept: dict[str, list[Any]]
    fixed: dict[str, Any] = field(default_factory=dict)
    kind: str = "time"
    method: str = "time_call"
    tracks: dict[str, str] = field(default_factory=dict)
    timeout: float = 300
    module: str = "bench_workloads"


class Workload(ABC):
    """A family of cases: its parameters, grid and builder, and what drift and asv read from it.

    A family is a factory, ``factory(**params) -> Step`` (:class:`jaxbench.workloads.step.Step`,
    the one workload protocol, a user's too), registered by a subclass of this that sets
    :attr:`name`, :attr:`param_names` and :attr:`factory`; :meth:`grid`, :meth:`validate` and
    :meth:`benchmark` are required, the rest have defaults here. Registered in
    :data:`jaxbench.workloads.WORKLOADS`, it is run, selected, drift-checked (where
    :attr:`drift` is set) and benchmarked by asv (one class per :attr:`asv` suite) with no
    other file edited: a new family is its module and its registration.

    Attributes:
        name: The family's name, the first part of its benchmark names.
        param_names: Its parameters, in the order of a case's grid: the factory's keyword
            parameters.
        factory: ``factory(**params) -> Step``; a built-in family's is a function of its
            module (e.g. :func:`jaxbench.workloads.train_step.train_step`).
        drift: Its regression sets (:class:`~jaxbench.workloads.regression.DriftSets`); ``None``
            where it has none.
        asv: Its asv classes.
        choices: Text parameter -> its allowed values, shown by ``jaxbench list``.
        aliases: Text parameter -> {alias: value}: other names :meth:`parse_param` accepts for
            a value (e.g. ``dus`` for ``dynamic_update_slice``), shown by ``jaxbench list`` and
            in the message for an unknown value (:func:`check_choice`).
        spellings: Text parameter -> a function giving a value's one spelling (e.g.
            :func:`jaxbench.workloads.meshes.spelled`), applied by :meth:`parse_param`, so
            that two spellings of one value are one case.
    """

    name: str
    param_names: tuple[str, ...]
    factory: Callable[..., Step]
    drift: DriftSets | None = None
    asv: tuple[AsvSuite, ...] = ()
    choices: Mapping[str, tuple[str, ...]] = {}
    aliases: Mapping[str, Mapping[str, str]] = {}
    spellings: Mapping[str, Callable[[str], str]] = {}

    @abstractmethod
    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Default values per parameter: the quick grid or the full one."""

    @abstractmethod
    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming the parameter if ``params`` is not a valid case."""

    @abstractmethod
    def benchmark(self, params: Mapping[str, Any]) -> str:
        """Benchmark name for the record, e.g. ``forward/vmap_jvp``."""

    def release(self) -> None:
        """Drop what :meth:`validate` kept, so that this process holds no case's arrays.

        Called once the cases are chosen (:func:`jaxbench.cases.cases`): a command whose cases
        run in worker processes must not keep a model on the device they measure on. A
        built-in family keeps nothing; a user workload keeps the last :class:`Step` its
        factory made (:class:`jaxbench.workloads.user.UserWorkload`).
        """
        return None

    def build(self, params: Mapping[str, Any]) -> Step:
        """The case's :class:`~jaxbench.workloads.step.Step`: ``factory(**params)``, checked.

        Built on the default device. The harness compiles, gates and times it
        (:mod:`jaxbench.prepared`), the same for every family and a user's factory.

        Raises:
            ValueError: The factory returned something that is not a well-formed ``Step``
                (:func:`jaxbench.workloads.step.check_step`).
            NotApplicable: The case does not apply (raised by the factory).
        """
        from jaxbench.workloads.step import check_step

        return check_step(self.name, self.factory(**params))

    def parse_param(self, name: str, text: str) -> Any:
        """A parameter's value from ``--param``/``--set-a`` text, typed by its full grid.

        ``int`` when the grid's values are all ints, ``bool`` when all bools (``true`` or
        ``false``), ``float`` when all floats, else the text, an alias of :attr:`aliases`
        replaced by its value, then put in its one spelling (:attr:`spellings`). A user
        workload types by its factory's signature instead
        (:class:`jaxbench.workloads.user.UserWorkload`).

        Raises:
            ValueError: The text is not of that type (naming ``--param``).
        """
        kinds = {type(v) for v in self.grid(False).get(name, [])}
        if kinds == {bool}:
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            raise ValueError(f"--param {name}={text!r}: expected true or false")
        for kind, what in ((int, "an integer"), (float, "a number")):
            if kinds == {kind}:
                return typed_param(name, text, kind, what)
        value = self.aliases.get(name, {}).get(text, text)
        return self.spellings[name](value) if name in self.spellings else value

    def meant_for(self, params: Mapping[str, Any]) -> str:
        """Where a case is meant to run, ``"cpu"`` or ``"gpu"``; ``"cpu"`` unless overridden.

        A family with model sizes overrides it, so its GPU sizes warn in ``run`` and are n/a in
        asv on a CPU.
        """
        return "cpu"


def typed_param(name: str, text: str, kind: type, what: str) -> Any:
    """``--param name=text``'s value as ``kind`` (e.g. ``int``, ``float``, ``str``).

    Args:
        name: The parameter, for the message.
        text: The text the user gave.
        kind: A type whose constructor takes the text.
        what: How the message says the type, e.g. ``"an integer"``.

    Raises:
        ValueError: ``kind`` refuses the text, or it gives a float that is not finite: a record
            is JSON, which stores ``inf`` and ``nan`` as ``null``, so that cases of ``inf``,
            ``-inf`` and ``nan`` would all be recorded as one (the message names ``--param``).
    """
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"--param {name}={text!r}: expected {what}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"--param {name}={text!r}: expected a finite number (a record cannot "
                         "hold inf or nan)")  # fmt: skip
    return value


def copy_tree(tree: Any) -> Any:
    """A copy of every array of ``tree``, for a call that donates its arguments."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(jnp.copy, tree)


#: The normwise error a bfloat16 train step's optimizer moments may have (:func:`check_update`):
#: the widest bfloat16 floor of the project's tolerances, the transformer's drift (2^-3: its
#: roundings compound over more stages); a gradient left out is 100 % off.
UPDATE_RTOL_BFLOAT16 = 2.0**-3


def check_update(name: str, got: Any, want: Any, start: Any, rtol: float) -> float:
    """A train step's update, leaf by leaf: ``got - start`` against ``want - start`` in norm.

    ``|| (got - start) - (want - start) ||_2 <= rtol * || want - start ||_2`` for every leaf the
    reference step changed (the normwise relative error, Higham, "Accuracy and Stability of
    Numerical Algorithms", 2nd ed., section 1.2). The built-in steps hold their optimizer's
    moments to it in bfloat16: compared element by element at bfloat16's tolerance, in units of
    ``max(1, max |leaf|)``, moments of 1e-4 pass whatever they hold, while in norm a gradient
    left out is 100 % off and rounding that differs element by element stays small. (The
    bfloat16 weights themselves hold an update only to a few units of their last place, too
    coarse for this rule.)

    Args:
        name: What is compared, for the message.
        got: The jitted step's new state (a PyTree of arrays).
        want: The reference step's, the same structure.
        start: The state both stepped from.
        rtol: The largest normwise relative error allowed.

    Returns:
        The largest normwise relative error over the leaves (0 with none changed).

    Raises:
        GateFailure: A leaf's update is further off than ``rtol`` (the message names it).
    """
    import jax
    import numpy as np

    from jaxbench.workloads.trees import path_text

    worst = 0.0
    leaves = jax.tree_util.tree_flatten_with_path(got)[0]
    for (path, a), b, o in zip(leaves, jax.tree.leaves(want), jax.tree.leaves(start), strict=True):
        o = np.asarray(o, dtype=np.float64)
        step_want = np.asarray(b, dtype=np.float64) - o
        norm = float(np.linalg.norm(step_want))
        if norm == 0:
            continue
        off = float(np.linalg.norm(np.asarray(a, dtype=np.float64) - o - step_want)) / norm
        if off > rtol:
            leaf = path_text(path, "/") or "(root)"
            raise GateFailure(f"{name}: leaf {leaf}'s update is {off:.1%} off the reference "
                              f"step's in norm (at most {rtol:.1%})",
                              {"compared": name, "leaf": leaf, "update_rtol": rtol,
                               "update_err": off})  # fmt: skip
        worst = max(worst, off)
    return worst


def check_loss_lowered(step: Any, stepped_state: Any, batch: Any, before: float) -> float:
    """The loss at ``stepped_state`` (one more call of ``step``, which may donate it).

    Raises:
        GateFailure: It is not below ``before``, the loss the step started from.
    """
    after = float(step(stepped_state, batch)[1])
    if not after < before:
        raise GateFailure(f"one step did not lower the loss ({before:.6g} -> {after:.6g})")
    return after


def check_choice(
    name: str, value: Any, choices: tuple[str, ...], aliases: Mapping[str, str] | None = None
) -> None:
    """Raise ``ValueError`` naming parameter ``name`` unless ``value`` is one of ``choices``.

    The message lists the choices with their ``aliases`` (alias -> choice), e.g.
    ``dynamic_update_slice (alias dus)``; an alias itself is not a valid value here (text
    input resolves it first, :meth:`Workload.parse_param`).
    """
    if value not in choices:
        shown = ", ".join(choice_text(c, aliases or {}) for c in choices)
        raise ValueError(f"unknown {name} {value!r}; choose from {shown}")


def choice_text(choice: str, aliases: Mapping[str, str]) -> str:
    """``choice`` followed by its aliases, e.g. ``scan_stack (alias scan)``."""
    names = [a for a, c in aliases.items() if c == choice]
    return f"{choice} (alias {', '.join(names)})" if names else choice


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """``value``, or ``ValueError`` naming ``name`` unless it is an int in ``[low, high]``.

    A ``bool`` is not an int here.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def check_close(
    name: str,
    got: Any,
    want: Any,
    dtype: str,
    tolerance: Mapping[str, float] | None = None,
    leaves: Mapping[str, LeafTolerance] | None = None,
) -> dict[str, Any]:
    """Compare two PyTrees leaf by leaf with the dtype's tolerance from :data:`TOLERANCES`.

    The rule is :func:`jaxbench.tolerance.bound_ratio`'s (``atol`` in units of
    ``max(1, max |want leaf|)``). ``tolerance`` (``{"rtol", "atol"}``) replaces the dtype's
    where a workload derives its own (e.g. from the rounding of a long float32 sum). ``leaves``
    replaces it, or leaves the leaf out, for the leaves whose key path (joined by ``/``) a
    pattern matches (:class:`LeafTolerance`; the first matching pattern counts).

    Returns:
        ``{"rtol", "atol", "max_abs_err"}`` to record (``atol`` unscaled; ``max_abs_err`` over
        the leaves compared), plus ``leaf_tolerances`` (pattern -> its fields and the number of
        ``leaves`` it matched) when ``leaves`` is given.

    Raises:
        GateFailure: Structures differ, the output has no leaf (``None``), a leaf is not
            finite, a leaf is not ``allclose``, or a pattern of ``leaves`` matches no leaf;
            the message names the leaf by its key path (``leaf params/attn/key/bias``,
            :func:`jaxbench.workloads.trees.path_text`; ``leaf (root)`` for a lone array).
    """
    import dataclasses

    import jax
    import numpy as np

    from jaxbench.workloads.trees import path_text

    tol = dict(tolerance) if tolerance is not None else TOLERANCES[dtype]
    got_leaves, got_tree = jax.tree_util.tree_flatten_with_path(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    if got_tree != want_tree:
        raise GateFailure(f"{name}: PyTree structures differ: {got_tree} vs {want_tree}")
    if not got_leaves:  # e.g. a step returning None: nothing to check, nothing to wait on
        raise GateFailure(f"{name}: the output has no array (it is {got_tree}): nothing to "
                          "check, and nothing for the timing to wait on; return the step's "
                          "results")  # fmt: skip
    worst = 0.0
    matched: dict[str, int] = dict.fromkeys(leaves or {}, 0)
    for (path, a), b in zip(got_leaves, want_leaves, strict=True):
        i = path_text(path, "/") or "(root)"
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            raise GateFailure(f"{name}: leaf {i} has shape {a.shape}, expected {b.shape}")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise GateFailure(f"{name}: leaf {i} is not finite")
        here = tol
        found = leaf_tolerance(i, leaves or {})
        if found is not None:
            matched[found[0]] += 1
            if found[1].exclude:
                continue
            here = {k: tol[k] if getattr(found[1], k) is None else getattr(found[1], k)
                    for k in ("rtol", "atol")}  # fmt: skip
        if a.size:
            worst = max(worst, float(np.max(np.abs(a - b))))
        scale, ratio = bound_ratio(a, b, here["rtol"], here["atol"])
        if ratio > 1:
            err = float(np.max(np.abs(a - b)))
            raise GateFailure(
                f"{name}: leaf {i} differs beyond rtol={here['rtol']:g}, "
                f"atol={here['atol']:g} x scale {scale:.3g} (max abs error {err:.3g})",
                {"compared": name, "leaf": i, "rtol": here["rtol"], "atol": here["atol"],
                 "scale": scale, "max_abs_err": err},
            )  # fmt: skip
    unused = [p for p, n in matched.items() if n == 0]
    if unused:
        shown = ", ".join((path_text(p, "/") or "(root)") for p, _ in got_leaves[:8])
        raise GateFailure(f"{name}: tolerance pattern {unused[0]!r} matches no output leaf "
                          f"(leaves: {shown}{', ...' if len(got_leaves) > 8 else ''})")  # fmt: skip
    facts: dict[str, Any] = {"rtol": tol["rtol"], "atol": tol["atol"], "max_abs_err": worst}
    if leaves:
        facts["leaf_tolerances"] = {p: dataclasses.asdict(t) | {"leaves": matched[p]}
                                    for p, t in leaves.items()}  # fmt: skip
    return facts
