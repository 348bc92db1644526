"""Noise indicators of a timed region: the one place that reads them.

A :class:`NoiseProbe` wraps a whole timed region (a block of calls, never one call) and gives a
plain JSON dict of what else went on meanwhile. Keys, units and sources:

- ``wall_s``: seconds of the region (:func:`time.perf_counter`);
- ``cpu_s``: CPU seconds this process used in it, user + system, all threads
  (:func:`time.process_time`, i.e. ``clock_gettime(CLOCK_PROCESS_CPUTIME_ID)``);
- ``cpu_share``: ``cpu_s / wall_s`` (``None`` for a region of zero length). It exceeds 1 when
  several threads work at once (XLA's CPU backend spreads a large enough program over every
  core: 1.9 for a ``medium`` train step on a 2-core VM) and falls when other processes take the
  CPUs (a ``tiny`` train step there: about 1.0, and 0.6 beside two busy-loop processes). It
  depends on the case, so compare a case with itself: a share well below its usual figure means
  the process waited for a CPU (preemption). Over a region shorter than a scheduler time slice
  (a few ms) it is all or nothing: the usual figure, or far below it when a preemption fell
  inside; judge such regions by many of them (medians), not one;
- ``ctx_involuntary``, ``ctx_voluntary``: context switches of the process in the region
  (deltas of ``ru_nivcsw`` and ``ru_nvcsw`` of ``getrusage(RUSAGE_SELF)``, man getrusage(2));
  involuntary ones are preemptions by the scheduler;
- ``gc_collections``: Python garbage collections that started in the region (counted with
  :data:`gc.callbacks`, phase ``"start"``). The probe runs :func:`gc.collect` *before* the
  region starts, so garbage left by set-up is not collected inside it;
- ``loadavg_start``, ``loadavg_end``: 1-minute load average (:func:`os.getloadavg`, from
  ``/proc/loadavg``) at each end; ``None`` where the platform has none;
- ``steal_share``: fraction of all CPU time (every CPU of the host) that the hypervisor stole
  in the region: delta of the ``steal`` column over the delta of ``user + nice + system + idle +
  iowait + irq + softirq + steal`` of the ``cpu`` line of ``/proc/stat`` (proc(5); ``guest``
  columns are already counted in ``user`` and ``nice``). Those count clock ticks (usually 10 ms)
  of all CPUs together, so over a short region one tick is a large share: ``None`` where
  ``/proc/stat`` is absent or the region spans fewer than :data:`MIN_STAT_TICKS` ticks (0.25 s
  of a 2-CPU host at 100 ticks per second), rather than a share that is mostly rounding;
- ``usable_cpus``: CPUs this process may run on (``len(os.sched_getaffinity(0))``, which
  ``taskset`` and Slurm's CPU binding restrict; :func:`os.cpu_count` where affinity is unknown).

Example::

    probe = NoiseProbe.start()
    for _ in range(n):
        ...  # the timed calls
    facts = probe.stop()  # {"wall_s": ..., "cpu_share": ..., ...}
"""

from __future__ import annotations

import gc
import os
import resource
import time
from pathlib import Path
from typing import Any

#: Keys of the dict of :meth:`NoiseProbe.stop`, in order.
NOISE_KEYS = (
    "wall_s",
    "cpu_s",
    "cpu_share",
    "ctx_involuntary",
    "ctx_voluntary",
    "gc_collections",
    "loadavg_start",
    "loadavg_end",
    "steal_share",
    "usable_cpus",
)
_PROC_STAT = Path("/proc/stat")
#: Fewest clock ticks (all CPUs) over which ``steal_share`` is given: one tick is 2 % of them.
MIN_STAT_TICKS = 50


def cpu_affinity() -> list[int] | None:
    """Sorted ids of the CPUs this process may run on; ``None`` where the OS does not say."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def usable_cpus() -> int | None:
    """How many CPUs this process may run on (affinity), else :func:`os.cpu_count`."""
    affinity = cpu_affinity()
    return len(affinity) if affinity is not None else os.cpu_count()


def loadavg() -> float | None:
    """1-minute load average, or ``None`` where the platform has none."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def cpu_times() -> tuple[int, int] | None:
    """``(steal, total)`` clock ticks of all CPUs from ``/proc/stat``; ``None`` if absent.

    ``total`` sums ``user nice system idle iowait irq softirq steal`` (proc(5)).
    """
    try:
        with _PROC_STAT.open() as fh:
            line = fh.readline()
    except OSError:
        return None
    fields = line.split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    ticks = [int(v) for v in fields[1:9]]
    return ticks[7], sum(ticks)


class NoiseProbe:
    """Noise indicators of one timed region: ``NoiseProbe.start()`` ... ``probe.stop()``.

    Also a context manager: ``with NoiseProbe.start() as probe: ...`` stops it on exit and
    leaves the dict in :attr:`facts`. Cheap (a few system calls and one read of ``/proc/stat``
    at each end, plus a :func:`gc.collect` before the start), so wrap a block of calls with it,
    never one call.

    Attributes:
        facts: The dict of :meth:`stop` once stopped, else ``None``.
    """

    def __init__(self) -> None:
        self.facts: dict[str, Any] | None = None
        self._collections = 0
        self._running = False
        self._usable = usable_cpus()
        self._load = loadavg()
        self._stat = cpu_times()
        self._usage = resource.getrusage(resource.RUSAGE_SELF)
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    @classmethod
    def start(cls, collect: bool = True) -> NoiseProbe:
        """Collect garbage (unless ``collect`` is false), then start the region.

        Returns:
            The running probe; call :meth:`stop` at the end of the region.
        """
        if collect:
            gc.collect()
        probe = cls()
        gc.callbacks.append(probe._on_gc)
        probe._running = True
        return probe

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._collections += 1

    def stop(self) -> dict[str, Any]:
        """End the region and return its indicators (keys :data:`NOISE_KEYS`, module docstring).

        Raises:
            RuntimeError: The probe was not started with :meth:`start` or was stopped already.
        """
        wall = time.perf_counter()
        cpu = time.process_time()
        if not self._running:
            raise RuntimeError("NoiseProbe.stop() without start(), or stopped twice")
        self._running = False
        gc.callbacks.remove(self._on_gc)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        stat = cpu_times()
        wall_s, cpu_s = wall - self._wall, cpu - self._cpu
        steal = None
        if (
            stat is not None
            and self._stat is not None
            and stat[1] - self._stat[1] >= MIN_STAT_TICKS
        ):
            steal = (stat[0] - self._stat[0]) / (stat[1] - self._stat[1])
        self.facts = {
            "wall_s": wall_s,
            "cpu_s": cpu_s,
            "cpu_share": cpu_s / wall_s if wall_s > 0 else None,
            "ctx_involuntary": usage.ru_nivcsw - self._usage.ru_nivcsw,
            "ctx_voluntary": usage.ru_nvcsw - self._usage.ru_nvcsw,
            "gc_collections": self._collections,
            "loadavg_start": self._load,
            "loadavg_end": loadavg(),
            "steal_share": steal,
            "usable_cpus": self._usable,
        }
        return self.facts

    def __enter__(self) -> NoiseProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._running:
            self.stop()
