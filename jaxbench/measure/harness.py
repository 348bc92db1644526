"""Measure one prepared case: compile apart, first call, warm-up, then blocked steady-state samples.

The steady state is timed with :func:`time.perf_counter_ns` around one call and a
:func:`jax.block_until_ready` on its whole output PyTree, so asynchronous dispatch can never make a
call look faster than its work; or, pipelined (``TimingConfig.pipeline`` > 1), around N calls
dispatched back to back and blocked on once, each sample their time over N. Every sample is
kept. Compile events are counted around every phase; any compile or trace inside the timed region
marks the measurement ``recompiled``. The last output of the warm-up and of the timed region is
checked to be finite, on the device and outside both regions (:func:`finite_flags`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import resource
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxbench.measure.costs import cost_analysis, memory_analysis
from jaxbench.measure.events import EventCounts, compile_events
from jaxbench.measure.noise import NoiseProbe
from jaxbench.measure.programs import describe


@dataclass(frozen=True)
class TimingConfig:
    """How long to sample.

    Attributes:
        budget_s: Time budget for the timed region, seconds; sampling stops at the first sample
            that ends past it, once ``min_samples`` are taken.
        min_samples: Floor on the number of timed calls, whatever the budget.
        max_samples: Ceiling on the number of timed calls.
        warmup_calls: Untimed calls after the first call, with the same argument PyTree.
        pipeline: Calls per sample. 1: **blocked** latency, each call timed alone and blocked
            on. ``N > 1``: **pipelined** throughput, ``N`` calls dispatched back to back and
            blocked on once, the sample being their time divided by ``N`` (what a training
            loop that does not wait on every step sees). Records of the two are never pooled.
    """

    budget_s: float = 1.0
    min_samples: int = 20
    max_samples: int = 100_000
    warmup_calls: int = 3
    pipeline: int = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.budget_s) and self.budget_s >= 0):
            raise ValueError(
                f"budget_s must be a finite number >= 0 seconds, got {self.budget_s!r}"
            )
        if self.min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {self.min_samples!r}")
        if self.max_samples < self.min_samples:
            raise ValueError(
                f"max_samples ({self.max_samples}) must be >= min_samples ({self.min_samples})"
            )
        if self.warmup_calls < 0:
            raise ValueError(f"warmup_calls must be >= 0, got {self.warmup_calls!r}")
        n = self.pipeline
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"pipeline must be an integer >= 1 (calls per sample), got {n!r}")

    def recorded(self) -> dict[str, Any]:
        """The settings as a record's ``env.timing`` holds them.

        ``pipeline`` is there only when above 1: a record without it was timed blocked, like
        every record written before pipelined timing existed, so those stay comparable.
        """
        out = dataclasses.asdict(self)
        if self.pipeline == 1:
            del out["pipeline"]
        return out


@dataclass(frozen=True)
class CompileTarget:
    """One jitted callable of a case, with the exact arguments it is called with.

    Attributes:
        name: Label, e.g. ``"train_step"`` or ``"apply"``.
        key: Hashable identity of the program (function and argument shapes/dtypes); compile
            figures are measured once per key and process, and reused after.
        jitted: A ``jax.jit``-wrapped callable.
        args: Positional arguments (PyTrees of arrays or ``jax.ShapeDtypeStruct``) as used in
            the timed calls, or a function returning them, called after the targets before it
            have been compiled (for arguments that are a previous target's output).
        calls_per_unit: How many times one timed call runs this target (e.g. K for a jvp loop);
            FLOP are scaled by it. 0 marks a set-up-only program (compiled, not counted).
    """

    name: str
    key: Hashable
    jitted: Any
    args: tuple[Any, ...] | Callable[[], tuple[Any, ...]]
    calls_per_unit: int = 1


@dataclass(frozen=True)
class TargetStats:
    """Lowering (s), compile (s), FLOP and bytes accessed per call, memory analysis (bytes)."""

    lower_s: float
    compile_s: float
    flops: float | None
    bytes_accessed: float | None
    memory: dict[str, int]
    events: EventCounts
    program: dict[str, Any] = field(default_factory=dict, repr=False)
    phases_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CompileStats:
    """Lowering and compile of the counted targets of a case (``calls_per_unit > 0``), summed.

    ``lower_s`` and ``compile_s`` are seconds; ``flops``/``bytes_accessed`` are per timed call
    (scaled by ``calls_per_unit``); ``memory`` is the first counted target's memory analysis
    (bytes); ``cache_hits``/``cache_misses`` count persistent-cache lookups while compiling;
    ``reused`` is true when every figure came from an earlier compile in this process;
    ``programs`` holds every target's program (counted or not, in target order), as
    :func:`jaxbench.measure.programs.describe` gives it, and ``phases_s`` each target's compile
    phases by name (seconds of ``trace``, ``lower`` and ``backend_compile``, as JAX reports
    them to ``jax.monitoring``; from the process's first compile of it).
    """

    lower_s: float
    compile_s: float
    flops: float | None
    bytes_accessed: float | None
    memory: dict[str, int]
    cache_hits: int
    cache_misses: int
    reused: bool
    programs: list[dict[str, Any]] = field(default_factory=list, repr=False)
    phases_s: dict[str, dict[str, float]] = field(default_factory=dict)


_TARGET_STATS: dict[tuple[Hashable, str], TargetStats] = {}


def _device_of(args: Any) -> str:
    """The device(s) a target compiles for: those of its first array argument.

    Lazy arguments (a callable) are not built for this; then the ``jax.default_device`` in
    force (as :func:`jaxbench.prepared.prepare` sets it), else JAX's first device.
    """
    import jax

    if not callable(args):
        for leaf in jax.tree.leaves(args):
            if isinstance(leaf, jax.Array) and not leaf.is_deleted():
                return ",".join(sorted(str(d) for d in leaf.devices()))
    default = jax.config.jax_default_device
    return str(default if default is not None else jax.local_devices()[0])


def _compile_one(target: CompileTarget) -> TargetStats:
    args = target.args() if callable(target.args) else target.args
    start = compile_events.snapshot()
    phases = compile_events.phase_seconds()
    t0 = time.perf_counter_ns()
    lowered = target.jitted.lower(*args)
    t1 = time.perf_counter_ns()
    compiled = lowered.compile()
    t2 = time.perf_counter_ns()
    events = compile_events.since(start)
    phases = {k: v - phases[k] for k, v in compile_events.phase_seconds().items()}
    flops, accessed = cost_analysis(compiled)
    return TargetStats(
        lower_s=(t1 - t0) / 1e9,
        compile_s=(t2 - t1) / 1e9,
        flops=flops,
        bytes_accessed=accessed,
        memory=memory_analysis(compiled),
        events=events,
        program=describe(target.name, target.jitted, args, lowered, compiled),
        phases_s=phases,
    )


def compile_targets(targets: Sequence[CompileTarget]) -> CompileStats:
    """Lower and compile each target ahead of time (``jitted.lower(*args).compile()``).

    Each program is measured once per process and device (by ``target.key`` and the device of
    its arguments, so a CPU and a GPU case of one program are two) and its figures reused after,
    so a caller that rebuilds its case (asv runs ``setup()`` before every sample) never re-times
    a warm compile as if it were cold. A program that JAX's own cache in this process served
    (no XLA compile event: another case compiled the same program under another key) counts as
    reused too. A cold figure also needs a persistent cache that is off or
    empty (:func:`jaxbench.measure.configure_compilation_cache`).

    Raises:
        Any error of tracing or compiling, unchanged (e.g. ``ValueError`` for a bad shape).
    """
    reused = True
    keys = [(t.key, _device_of(t.args)) for t in targets]
    for target, key in zip(targets, keys, strict=True):
        if key not in _TARGET_STATS:
            _TARGET_STATS[key] = stats = _compile_one(target)
            # JAX's own in-process cache served it (no XLA compile, no persistent-cache hit,
            # where compiles are seen at all): a program another case compiled under another
            # key (a user's module-level jit called with other parameters), not a cold figure
            served = stats.events.compiles == 0 and stats.events.cache_hits == 0
            reused = reused and served and compile_events.snapshot().compiles > 0
    counted = [
        (t, _TARGET_STATS[key]) for t, key in zip(targets, keys, strict=True) if t.calls_per_unit
    ]
    flops: float | None = 0.0
    accessed: float | None = 0.0
    for target, stats in counted:
        n = target.calls_per_unit
        flops = None if stats.flops is None or flops is None else flops + stats.flops * n
        accessed = (
            None
            if stats.bytes_accessed is None or accessed is None
            else accessed + stats.bytes_accessed * n
        )
    return CompileStats(
        lower_s=sum(s.lower_s for _, s in counted),
        compile_s=sum(s.compile_s for _, s in counted),
        flops=flops,
        bytes_accessed=accessed,
        memory=counted[0][1].memory if counted else {},
        cache_hits=sum(s.events.cache_hits for _, s in counted),
        cache_misses=sum(s.events.cache_misses for _, s in counted),
        reused=reused,
        programs=[_TARGET_STATS[key].program for key in keys],
        phases_s={
            t.name: _TARGET_STATS[key].phases_s for t, key in zip(targets, keys, strict=True)
        },
    )


class NonFiniteOutput(RuntimeError):
    """A timed unit's output held a NaN or an infinity; the message names the call and leaf."""


@functools.cache
def _all_finite() -> Callable[[list[Any]], list[Any]]:
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda leaves: [jnp.isfinite(x).all() for x in leaves])


def finite_flags(tree: Any) -> dict[int, bool]:
    """Whether each floating-point leaf of ``tree`` is finite, computed on its device.

    One jitted ``jnp.isfinite(leaf).all()`` per floating (real or complex) leaf, fetched as
    one batch of booleans, so no leaf is copied to the host. Integer, boolean and PRNG-key
    leaves, and leaves without a ``dtype``, are not checked.

    Returns:
        ``{leaf index in jax.tree.leaves(tree): finite}``, floating leaves only.
    """
    import jax
    import jax.numpy as jnp

    leaves = jax.tree.leaves(tree)
    index = [
        i
        for i, leaf in enumerate(leaves)
        if (dtype := getattr(leaf, "dtype", None)) is not None
        and jnp.issubdtype(dtype, jnp.inexact)
    ]
    if not index:
        return {}
    chosen = [leaves[i] for i in index]
    try:
        flags = _all_finite()(chosen)
    except ValueError:  # leaves committed to different devices: one check per leaf
        flags = [jnp.isfinite(leaf).all() for leaf in chosen]
    return dict(zip(index, (bool(f) for f in jax.device_get(flags)), strict=True))


def _check_output(out: Any, call: int) -> None:
    bad = [i for i, finite in finite_flags(out).items() if not finite]
    if bad:
        raise NonFiniteOutput(
            f"output of call {call} is not finite (leaf {bad[0]}); the last output of the "
            "warm-up and of each timed block is checked"
        )


@dataclass
class Measurement:
    """What :func:`measure` saw. Seconds for times, bytes for memory.

    ``recompiled`` is true when any compile or trace happened inside the timed region; then the
    samples are not a steady state, and sampling stopped at the first such call. ``noise`` holds
    the noise indicators of the timed region (:mod:`jaxbench.measure.noise`: CPU share,
    context switches, GC collections, load, steal, usable CPUs). ``calls`` counts the calls of
    the timed unit so far: those before this measurement (``calls_before``) and its own.
    ``recompile_cause`` (when recompiled) says what changed in the arguments between the call
    before the recompiling one and that call (:func:`changed_arguments`).
    """

    samples_s: list[float]
    first_call_s: float
    compiles_setup: int
    compiles_timed: int
    traces_timed: int
    device_peak_bytes: int | None
    host_peak_rss_bytes: int
    final_state: Any = field(repr=False, default=None)
    noise: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    recompile_cause: str | None = None

    @property
    def recompiled(self) -> bool:
        """True when the timed region compiled or traced anything."""
        return self.compiles_timed > 0 or self.traces_timed > 0


def device_peak_bytes(device: Any) -> int | None:
    """``peak_bytes_in_use`` of ``device.memory_stats()``; ``None`` where the backend has none."""
    try:
        stats = device.memory_stats()
    except Exception:  # unimplemented on some backends
        return None
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return int(stats["peak_bytes_in_use"])


def device_bytes_in_use(device: Any) -> int | None:
    """``bytes_in_use`` of ``device.memory_stats()``; ``None`` where the backend has none."""
    try:
        stats = device.memory_stats()
    except Exception:  # unimplemented on some backends
        return None
    return int(stats["bytes_in_use"]) if stats and "bytes_in_use" in stats else None


#: Linux's per-process files (proc(5)): writing ``5`` to ``clear_refs`` resets the peak resident
#: set size (``VmHWM`` in ``status``) to the current one (Linux >= 4.0).
PROC_SELF = Path("/proc/self")


def reset_host_peak() -> bool:
    """Reset this process's peak RSS to its current RSS; whether it could (Linux only)."""
    try:
        (PROC_SELF / "clear_refs").write_text("5")
    except OSError:
        return False
    return _vm_hwm() is not None


def _vm_hwm() -> int | None:
    try:
        for line in (PROC_SELF / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_peak_rss_bytes() -> int:
    """Peak resident set size of this process, bytes.

    Linux's ``VmHWM``, the peak since the last :func:`reset_host_peak`; elsewhere
    ``getrusage``'s peak over the process's life (KiB on Linux, bytes on macOS).
    """
    if (hwm := _vm_hwm()) is not None:
        return hwm
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _pipelined(
    call: Callable[[Any], Any],
    state: Any,
    next_state: Callable[[Any, Any], Any] | None,
    calls: int,
    block: Callable[[Any], Any],
) -> tuple[Any, Any]:
    """``calls`` calls dispatched back to back, then one block; returns ``(state, output)``.

    Where outputs feed the next call, the last output depends on every call before it, and
    only it is blocked on (the earlier ones may be donated already); otherwise every output is.
    """
    if next_state is None:
        return state, block([call(state) for _ in range(calls)])[-1]
    for _ in range(calls):
        out = call(state)
        state = next_state(state, out)
    return state, block(out)


def argument_signature(tree: Any) -> dict[str, str]:
    """What ``jit`` keys a call on, per leaf of its argument PyTree (by key path).

    An array leaf: dtype, shape, ``weak`` for a weakly typed one, and its partition spec where
    it has a ``NamedSharding``; any other leaf (a Python scalar, weakly typed in JAX): its type
    and value. The tree's structure is under ``(structure)``.
    """
    import jax

    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    out = {"(structure)": str(treedef)}
    for path, leaf in leaves:
        if hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
            text = f"{leaf.dtype}{list(leaf.shape)}"
            text += " weak" if getattr(leaf, "weak_type", False) else ""
            sharding = getattr(leaf, "sharding", None)
            if isinstance(sharding, jax.sharding.NamedSharding):
                text += f" {sharding.spec}"
        else:
            text = f"Python {type(leaf).__name__} {leaf!r}"
        out[jax.tree_util.keystr(path) or "(root)"] = text
    return out


def changed_arguments(before: dict[str, str], after: dict[str, str]) -> str:
    """One sentence naming each argument leaf whose :func:`argument_signature` changed."""
    keys = dict.fromkeys([*before, *after])
    changed = [f"{k}: {before.get(k, 'absent')} -> {after.get(k, 'absent')}"
               for k in keys if before.get(k) != after.get(k)]  # fmt: skip
    if not changed:
        return ("the arguments kept their shapes, dtypes, weak types and shardings: a static "
                "argument, a closed-over value or a cleared cache changed the program")  # fmt: skip
    return "the arguments changed: " + "; ".join(changed)


def measure(
    call: Callable[[Any], Any],
    state: Any,
    config: TimingConfig,
    next_state: Callable[[Any, Any], Any] | None = None,
    device: Any | None = None,
    collect_garbage: bool = True,
    calls_before: int = 0,
) -> Measurement:
    """Time ``call(state)``: first call, ``config.warmup_calls`` warm-up calls, then samples.

    The timed region (the samples, not the first or warm-up calls) is wrapped in a
    :class:`~jaxbench.measure.noise.NoiseProbe`, which collects garbage just before it starts
    (unless ``collect_garbage`` is false: a :func:`gc.collect` takes 25-40 ms with JAX loaded,
    too much before every short block of a live comparison; collections inside the region are
    counted either way).

    Args:
        call: The timed unit; returns a PyTree of arrays (blocked on as a whole).
        state: The argument PyTree. Warm-up and timed calls use exactly this PyTree (shapes,
            dtypes and weak types), threaded through ``next_state`` when given.
        config: Budget and sample counts.
        next_state: ``(state, output) -> state`` for calls whose output feeds the next call,
            e.g. a train step that donates its params buffer (a donated buffer is never reused).
        device: The device to read peak memory from; ``None`` skips device memory.
        collect_garbage: Run :func:`gc.collect` before the timed region.
        calls_before: Calls of ``call`` made before this measurement (earlier blocks), so
            that call numbers count from the case's first call.

    Returns:
        A :class:`Measurement`; ``samples_s`` in call order, seconds per call (pipelined: the
        mean of each sample's ``config.pipeline`` calls); ``noise`` of the timed region.

    Raises:
        NonFiniteOutput: The last output of the warm-up (the first call, when there is no
            warm-up) or of the timed region holds a NaN or an infinity; checked outside the
            timed region and the compile counts (:func:`finite_flags`), and the message names
            the call (counted from 1, ``calls_before`` included). No samples are returned.
    """
    import jax

    block = jax.block_until_ready
    clock = time.perf_counter_ns
    start = compile_events.snapshot()

    given = state  # the argument of the latest call, kept to name what a recompile saw
    t0 = clock()
    out = block(call(state))
    first_call_s = (clock() - t0) / 1e9
    if next_state is not None:
        state = next_state(state, out)
    for _ in range(config.warmup_calls):
        given = state
        out = block(call(state))
        if next_state is not None:
            state = next_state(state, out)
    setup = compile_events.since(start)
    calls = calls_before + 1 + config.warmup_calls
    _check_output(out, calls)
    del out

    probe = NoiseProbe.start(collect=collect_garbage)
    try:
        timed_start = compile_events.snapshot()
        seen = compile_events.compiles_and_traces
        samples: list[float] = []
        deadline = clock() + int(config.budget_s * 1e9)
        per_sample = config.pipeline
        while True:
            previous, given = given, state
            if per_sample == 1:
                t0 = clock()
                out = block(call(state))
                t1 = clock()
                if next_state is not None:
                    state = next_state(state, out)
            else:
                t0 = clock()
                state, out = _pipelined(call, state, next_state, per_sample, block)
                t1 = clock()
            samples.append((t1 - t0) / per_sample)
            n = len(samples)
            if compile_events.compiles_and_traces != seen:
                break
            if n >= config.max_samples or (n >= config.min_samples and t1 >= deadline):
                break
    finally:
        noise = probe.stop()
    timed = compile_events.since(timed_start)
    calls += len(samples) * per_sample
    _check_output(out, calls)
    cause = None
    if timed.compiles or timed.traces:
        cause = changed_arguments(argument_signature(previous), argument_signature(given))
    return Measurement(
        samples_s=[s / 1e9 for s in samples],
        first_call_s=first_call_s,
        compiles_setup=setup.compiles,
        compiles_timed=timed.compiles,
        traces_timed=timed.traces,
        device_peak_bytes=device_peak_bytes(device) if device is not None else None,
        host_peak_rss_bytes=host_peak_rss_bytes(),
        final_state=state,
        noise=noise,
        calls=calls,
        recompile_cause=cause,
    )
