"""Profiler traces of a case's steady state, taken apart from its timing, and their per-op table.

:func:`take_trace` runs a few warmed calls untraced, then as many under
:func:`jax.profiler.trace` (after the case's samples, never inside the timed region), and
returns the XSpace the profiler wrote (bytes of its ``.xplane.pb``) with the wall time per call
of both, so the profiler's own cost is known. :func:`op_table` reads an XSpace with
:class:`jax.profiler.ProfileData` (no TensorFlow needed) into one row per executed op, with its
own (self) time: an op nested in another (the thunks of a loop's body inside the loop's thunk)
is not counted again in its parent:

- on the CPU, the thunks XLA's runtime executes, one event each on the host plane (on the
  calling thread's line, or an ``tf_XLAExecute`` line when the run is dispatched), named after
  their HLO instruction (``call.1``, ``copy.7``, ``loop_add_fusion``). A thunk is known by the
  ``end: NAME`` marker the runtime writes after it; the markers and the runtime's other events
  (dispatch, buffer handling) are left out;
- on a GPU or TPU, the events of the device planes' op lines (``/device:GPU:0``, line ``XLA
  Ops``), named after their HLO op; kernel names are kept where the line holds kernels.

A trace opens in Perfetto (https://ui.perfetto.dev, "Open trace file" on the ``.xplane.pb``
converted by ``tensorboard-plugin-profile``) or in TensorBoard/XProf (``tensorboard --logdir``
on the folder that holds ``plugins/profile/<run>/<host>.xplane.pb``).
"""

from __future__ import annotations

import glob
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Steady-state calls a trace covers.
TRACE_CALLS = 5
#: The prefix of the marker the CPU runtime writes when a thunk ends.
END_MARK = "end: "
#: Device-plane lines that hold ops (GPU, TPU); the kernel line is used where it is all there is.
DEVICE_OP_LINES = ("XLA Ops", "Ops", "XLA Modules")
#: A trace event: its name, start and duration (ns).
Event = tuple[str, float, float]


@dataclass(frozen=True)
class OpTime:
    """One op's time in a trace.

    Attributes:
        name: The op: its HLO instruction name on the CPU (``copy.7``), its HLO op or kernel
            name on a device.
        count: Events of it in the trace (over all traced calls).
        total_s: Seconds summed over those events.
        per_call_s: ``total_s`` divided by the calls traced and by the devices the program
            runs on (the mean over them: each device runs its share of every op), so the ops
            add up to one call's time.
        share: ``total_s`` over the total of every op of the trace (0-1).
    """

    name: str
    count: int
    total_s: float
    per_call_s: float
    share: float


@dataclass(frozen=True)
class TakenTrace:
    """A trace of a few warmed calls, and what the profiler cost them.

    Attributes:
        xspace: The bytes of the ``.xplane.pb`` the profiler wrote (a serialized XSpace).
        untraced_s: Wall seconds per call of the same number of calls just before, untraced.
        traced_s: Wall seconds per call under the profiler (its start and stop left out).
    """

    xspace: bytes
    untraced_s: float
    traced_s: float


def take_trace(step: Callable[[], Any], calls: int = TRACE_CALLS) -> TakenTrace:
    """Run ``calls`` steps of a warmed case untraced, then ``calls`` under the profiler.

    The untraced calls give the profiler's cost (:attr:`TakenTrace.traced_s` over
    :attr:`TakenTrace.untraced_s`): on the CPU every thunk the runtime executes is an event, so
    a loop whose body runs as many small thunks is slowed by a per-event cost that a loop
    compiled into one thunk is not.

    Args:
        step: One call of the case, blocked on its whole output, that advances its state
            (:meth:`jaxbench.prepared.PreparedCase.call_once`: donated state stays valid).
        calls: Steps to trace.

    Raises:
        RuntimeError: The profiler wrote no ``.xplane.pb`` (another trace was running).
    """
    from jax import profiler

    options = profiler.ProfileOptions()
    options.host_tracer_level = 3  # the runtime's thunks on the CPU
    options.python_tracer_level = 0  # no Python frames: only what JAX and XLA run
    clock = time.perf_counter
    t0 = clock()
    for _ in range(calls):
        step()
    untraced_s = (clock() - t0) / calls
    with tempfile.TemporaryDirectory(prefix="jaxbench-trace-") as folder:
        with profiler.trace(folder, profiler_options=options):
            t0 = clock()
            for _ in range(calls):
                step()
            traced_s = (clock() - t0) / calls
        found = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        if not found:
            raise RuntimeError("the profiler wrote no .xplane.pb (is another trace running?)")
        with open(found[0], "rb") as f:
            return TakenTrace(f.read(), untraced_s, traced_s)


def _self_times(events: list[Event]) -> list[tuple[str, float]]:
    """Each event's own time: its duration less that of the events nested in it (ns).

    ``events`` are ``(name, start, duration)`` on one line; an event that starts and ends
    inside another (a thunk of a loop's body inside the loop's thunk) is its child.
    """
    ordered = sorted(events, key=lambda e: (e[1], -e[2]))
    own = [duration for _, _, duration in ordered]
    stack: list[int] = []  # indices of the open events, innermost last
    for i, (_, start, duration) in enumerate(ordered):
        while stack and ordered[stack[-1]][1] + ordered[stack[-1]][2] <= start:
            stack.pop()
        if stack:
            own[stack[-1]] -= duration
        stack.append(i)
    return [(name, max(t, 0.0)) for (name, _, _), t in zip(ordered, own, strict=True)]


def _device_op_events(data: Any) -> list[list[Event]]:
    """The events of each device plane's op line (the first of :data:`DEVICE_OP_LINES`)."""
    out = []
    for plane in data.planes:
        if plane.name.startswith("/device:"):
            lines = {line.name: line for line in plane.lines}
            chosen = next((lines[n] for n in DEVICE_OP_LINES if n in lines), None)
            if chosen is not None:
                out.append([(e.name, e.start_ns, e.duration_ns) for e in chosen.events])
    return [events for events in out if events]


def _host_thunk_events(data: Any) -> list[list[Event]]:
    """The thunks of each host line (the events a ``end: NAME`` marker names)."""
    out = []
    for plane in data.planes:
        if plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            events = [(e.name, e.start_ns, e.duration_ns) for e in line.events]
            thunks = {n.removeprefix(END_MARK) for n, _, _ in events if n.startswith(END_MARK)}
            out.append([e for e in events if e[0] in thunks])
    return out


def op_table(xspace: bytes, calls: int, devices: int = 1) -> list[OpTime]:
    """One :class:`OpTime` per op of a trace, the longest total first.

    An op's time is its own (self) time: the time of the ops nested in it (the thunks of a
    loop's body inside the loop's thunk) is theirs, so the ops' times add up to the traced
    calls' time once. Where a device plane has ops (a GPU, a TPU), only device planes are read,
    each on the first of :data:`DEVICE_OP_LINES` it has; else the host's thunks (the CPU).

    Args:
        xspace: The bytes :func:`take_trace` returned (or a saved ``.xplane.pb``).
        calls: The calls the trace covers (divides each op's total).
        devices: The devices the traced program runs on (a program sharded over a mesh of
            ``devices``: each op is an event on each of them, so it divides each op's total
            too).

    Raises:
        ValueError: Bytes that are not an XSpace, or ``calls`` or ``devices`` below 1.
    """
    from jax.profiler import ProfileData

    if calls < 1 or devices < 1:
        raise ValueError(f"calls and devices must be >= 1, got {calls} and {devices}")
    try:
        data = ProfileData.from_serialized_xspace(xspace)
    except Exception as exc:  # the parser's own error types vary by version
        raise ValueError(f"not a profiler trace (XSpace): {type(exc).__name__}") from None
    totals: dict[str, list[float]] = {}
    for events in _device_op_events(data) or _host_thunk_events(data):
        for name, own_ns in _self_times(events):
            entry = totals.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += own_ns * 1e-9
    whole = sum(t for _, t in totals.values()) or 1.0
    rows = [OpTime(name, int(n), t, t / calls / devices, t / whole)
            for name, (n, t) in totals.items()]  # fmt: skip
    return sorted(rows, key=lambda r: -r.total_s)
