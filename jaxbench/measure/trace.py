"""Profiler traces of a case's steady state, taken apart from its timing, and their per-op table.

:func:`take_trace` runs a few warmed calls under :func:`jax.profiler.trace` (after the case's
samples, never inside the timed region) and returns the XSpace the profiler wrote (bytes of its
``.xplane.pb``). :func:`op_table` reads an XSpace with :class:`jax.profiler.ProfileData` (no
TensorFlow needed) into one row per executed op:

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Steady-state calls a trace covers.
TRACE_CALLS = 5
#: The prefix of the marker the CPU runtime writes when a thunk ends.
END_MARK = "end: "
#: Device-plane lines that hold ops (GPU, TPU); the kernel line is used where it is all there is.
DEVICE_OP_LINES = ("XLA Ops", "Ops", "XLA Modules")


@dataclass(frozen=True)
class OpTime:
    """One op's time in a trace.

    Attributes:
        name: The op: its HLO instruction name on the CPU (``copy.7``), its HLO op or kernel
            name on a device.
        count: Events of it in the trace (over all traced calls).
        total_s: Seconds summed over those events.
        per_call_s: ``total_s`` divided by the calls traced.
        share: ``total_s`` over the total of every op of the trace (0-1).
    """

    name: str
    count: int
    total_s: float
    per_call_s: float
    share: float


def take_trace(step: Callable[[], Any], calls: int = TRACE_CALLS) -> bytes:
    """Run ``calls`` steps of a warmed case under the profiler; the XSpace it wrote.

    Args:
        step: One call of the case, blocked on its whole output, that advances its state
            (:meth:`jaxbench.prepared.PreparedCase.call_once`: donated state stays valid).
        calls: Steps to trace.

    Returns:
        The bytes of the ``.xplane.pb`` file (a serialized XSpace).

    Raises:
        RuntimeError: The profiler wrote no ``.xplane.pb`` (another trace was running).
    """
    from jax import profiler

    options = profiler.ProfileOptions()
    options.host_tracer_level = 3  # the runtime's thunks on the CPU
    options.python_tracer_level = 0  # no Python frames: only what JAX and XLA run
    with tempfile.TemporaryDirectory(prefix="jaxbench-trace-") as folder:
        with profiler.trace(folder, profiler_options=options):
            for _ in range(calls):
                step()
        found = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        if not found:
            raise RuntimeError("the profiler wrote no .xplane.pb (is another trace running?)")
        with open(found[0], "rb") as f:
            return f.read()


def op_table(xspace: bytes, calls: int) -> list[OpTime]:
    """One :class:`OpTime` per op of a trace, the longest total first.

    Args:
        xspace: The bytes :func:`take_trace` returned (or a saved ``.xplane.pb``).
        calls: The calls the trace covers (divides each op's total).

    Raises:
        ValueError: Bytes that are not an XSpace, or ``calls`` below 1.
    """
    from jax.profiler import ProfileData

    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    try:
        data = ProfileData.from_serialized_xspace(xspace)
    except Exception as exc:  # the parser's own error types vary by version
        raise ValueError(f"not a profiler trace (XSpace): {type(exc).__name__}") from None
    totals: dict[str, list[float]] = {}

    def add(name: str, duration_ns: float) -> None:
        entry = totals.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += duration_ns * 1e-9

    for plane in data.planes:
        device = plane.name.startswith("/device:")
        for line in plane.lines:
            if device and line.name not in DEVICE_OP_LINES:
                continue
            events = [(e.name, e.duration_ns) for e in line.events]
            thunks = {n.removeprefix(END_MARK) for n, _ in events if n.startswith(END_MARK)}
            for name, duration_ns in events:
                if device or name in thunks:
                    add(name, duration_ns)
    whole = sum(t for _, t in totals.values()) or 1.0
    rows = [OpTime(name, int(n), t, t / calls, t / whole) for name, (n, t) in totals.items()]
    return sorted(rows, key=lambda r: -r.total_s)
