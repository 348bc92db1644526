"""A case prepared once per process: built, compiled, gated and warmed, then reused.

asv (asv_runner >= 0.3) re-runs a benchmark's ``setup()`` before every timed sample. Fetching the
case from :func:`prepare` makes that free: the first ``setup()`` of a process builds the case,
compiles its programs (figures from :func:`jaxbench.measure.compile_targets`), runs the
correctness gate and warms it with the harness; every later one gets the same object back, so no
sample can contain tracing or compilation. Failures (absent backend, gate, not applicable) are
remembered too and raised again on every call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxbench.cases import Case, resolve_device
from jaxbench.measure.harness import (
    CompileStats,
    Measurement,
    TimingConfig,
    compile_targets,
    finite_flags,
    measure,
)
from jaxbench.workloads import Step, Workload, get_workload
from jaxbench.workloads.step import placed

WARMUP_CALLS = 3


@dataclass
class PreparedCase:
    """A built, compiled, gated and warmed case on one device.

    Attributes:
        case: Workload name and parameters.
        device: The ``jax.Device`` it runs on.
        step: The workload's :class:`~jaxbench.workloads.Step` (its factory's, at the case's
            parameters: the timed call, its arguments, its metrics).
        stats: Lowering and compile figures of its programs (seconds, FLOP, bytes), measured cold
            by the first preparation in the process.
        gate: Facts from the correctness gate (tolerances, largest errors); where the gate was
            reused (``gate_mode``), the hash it was reused for and the finiteness check's.
        warmup: The harness's first call and warm-up calls, compile events counted.
        state: The argument PyTree of the next call, committed to ``device`` (a state with
            leaves sharded over a mesh is left as placed, :func:`place`); outputs that feed
            the next call (donated params) are threaded into it.
        programs_hash: Content hash of the compiled programs
            (:func:`jaxbench.store.programs.programs_digest`, the name of their artifact).
        gate_mode: ``"run"`` (the full gate ran here) or ``"reused"`` (``programs_hash`` had
            passed it in an earlier process: only the finiteness of one call's output was
            checked here).
        calls: Calls of the timed unit made so far (first call, warm-up, samples), so that a
            non-finite output is named by its call number
            (:class:`jaxbench.measure.NonFiniteOutput`).
        metrics: The record's workload figures (:meth:`Step.record_metrics`), taken when the
            step was built, before any call could donate its arguments.
    """

    case: Case
    device: Any
    step: Step
    stats: CompileStats
    gate: dict[str, Any]
    warmup: Measurement = field(repr=False)
    state: Any = field(repr=False)
    programs_hash: str = ""
    gate_mode: str = "run"
    calls: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def devices(self) -> int:
        """Devices its program runs on: its mesh's (``metrics["mesh"]``), else 1."""
        mesh = self.metrics.get("mesh") or {}
        return max(1, len(mesh.get("device_ids") or ()))

    def call_once(self) -> Any:
        """One call of the timed unit on the current state, blocked on its whole output.

        Returns:
            The output PyTree (ready). The state is advanced with ``step.next_state``.
        """
        import jax

        out = jax.block_until_ready(self.step.call(self.state))
        self.calls += 1
        self.state = self.step.next_state(self.state, out)
        return out

    def steady_state(self, timing: TimingConfig, collect_garbage: bool = True) -> Measurement:
        """Time the case with the harness (:func:`jaxbench.measure.measure`) from its state.

        The case is warm already, so ``timing.warmup_calls`` is not spent again;
        ``collect_garbage`` is passed on (a live worker's blocks skip it).

        Raises:
            jaxbench.measure.NonFiniteOutput: The block's last output is not finite (the
                message names the call, counted from the case's first).
        """
        timing = dataclasses.replace(timing, warmup_calls=0)
        m = measure(self.step.call, self.state, timing, _advance(self.step), self.device,
                    collect_garbage, calls_before=self.calls)  # fmt: skip
        self.state = m.final_state
        self.calls = m.calls
        return m


_PREPARED: dict[tuple[Any, ...], PreparedCase | BaseException] = {}


def prepare(
    workload: str,
    params: Mapping[str, Any],
    backend: str = "default",
    keep: bool = True,
    warmup_calls: int = WARMUP_CALLS,
    gated: Collection[str] = (),
) -> PreparedCase:
    """The case ``workload`` at ``params`` on ``backend``: built, compiled, gated, warmed up.

    In order: build, compile (:func:`jaxbench.measure.compile_targets`), gate, then the first
    call and ``warmup_calls`` warm-up calls through the harness. With ``keep`` the result (or the
    error) is kept and returned again by every later call in the process; without it nothing is
    kept but the compiled programs, so a long run holds one case's arrays at a time.

    ``gated`` holds program hashes (:func:`jaxbench.store.programs.programs_digest`) that
    passed this case's full gate in an earlier process with the same inputs (a live
    comparison's earlier pairs, one side and case). When the programs compiled here hash to
    one of them, the op-by-op gate is not run again: only one call's output is checked to be
    finite (``gate_mode`` ``"reused"``). A program that hashes otherwise is gated in full.
    Ignored with ``keep`` (a kept case is gated once per process anyway).

    Raises:
        ValueError: Unknown workload or backend, or a bad parameter.
        RuntimeError: ``backend`` is not present here (from
            :func:`jaxbench.cases.resolve_device`).
        jaxbench.workloads.NotApplicable: The case does not apply (e.g. a Jacobian too large).
        jaxbench.workloads.GateFailure: The case failed its correctness gate.
    """
    import jax

    spec = get_workload(workload)
    # On the case's device: a user factory's Step, made here and kept for the build below,
    # holds its arrays (e.g. a model's parameters) where the case runs.
    device = resolve_device(backend)
    with jax.default_device(device):
        spec.validate(params)
    case = Case(workload, dict(params))
    if not keep:
        return _prepare_now(spec, case, device, warmup_calls, frozenset(gated))
    key = (*case.key, backend)
    if key not in _PREPARED:
        try:
            _PREPARED[key] = _prepare_now(spec, case, device, warmup_calls)
        except Exception as exc:
            _PREPARED[key] = exc
    found = _PREPARED[key]
    if isinstance(found, BaseException):
        # Raised afresh from here: the kept exception's traceback does not grow with each call.
        raise found.with_traceback(None)
    return found


def _prepare_now(
    spec: Workload, case: Case, device: Any, warmup_calls: int, gated: frozenset[str] = frozenset()
) -> PreparedCase:
    import jax

    from jaxbench.store.programs import programs_digest

    with jax.default_device(device):
        step = spec.build(case.params)
        metrics = step.record_metrics()
        stats = compile_targets(step.targets(spec.name, (spec.name, *sorted(case.params.items()))))
        digest = programs_digest(stats.programs)
        reused = digest in gated
        gate = {"reused": digest} if reused else step.check(spec.name)
        state = place(step.first_args(), device)
    # Outside the default-device context, like every later call: that context is part of jit's
    # cache key, so warming inside it would leave a compile for the first sample.
    # No gc.collect before this one-sample region (it walks the whole heap: 80-150 ms once JAX's
    # caches are loaded); the steady-state region, whose samples count, collects before it.
    warmup = TimingConfig(budget_s=0.0, min_samples=1, max_samples=1, warmup_calls=warmup_calls)
    warm = measure(step.call, state, warmup, _advance(step), device, collect_garbage=False)
    p = PreparedCase(case, device, step, stats, gate, warm, state=warm.final_state,
                     programs_hash=digest, gate_mode="reused" if reused else "run",
                     calls=warm.calls, metrics=metrics)  # fmt: skip
    if reused:
        p.gate["finite_leaves"] = check_finite("output of one call", p.call_once())
    return p


def _advance(step: Step) -> Any:
    """The harness's ``next_state``: ``None`` where every call gets the same arguments."""
    return step.next_state if step.next_args is not None else None


def place(state: Any, device: Any) -> Any:
    """``state`` committed to ``device``, unless the workload placed a leaf of it itself.

    A workload that places its arguments (a ``NamedSharding``, of a mesh or of one device:
    :mod:`jaxbench.workloads.collectives`, a sharded train step, a user's sharded
    ``ShapeDtypeStruct``; :func:`jaxbench.workloads.step.placed`) keeps them where it put them,
    and its other leaves stay uncommitted for ``jit`` to place: moving them to one device would
    make every timed call reshard, or time the step on a device its record does not name.
    """
    import jax

    if any(placed(leaf) for leaf in jax.tree.leaves(state)):
        return state
    return jax.device_put(state, device)


def check_finite(name: str, tree: Any) -> int:
    """The number of floating-point leaves of ``tree``, all checked to be finite.

    Checked on the device (:func:`jaxbench.measure.finite_flags`); integer, boolean and PRNG-key
    leaves are not counted.

    Raises:
        GateFailure: A leaf holds a NaN or an infinity (the message names its index).
    """
    from jaxbench.workloads import GateFailure

    flags = finite_flags(tree)
    for i, finite in flags.items():
        if not finite:
            raise GateFailure(f"{name}: leaf {i} is not finite")
    return len(flags)
