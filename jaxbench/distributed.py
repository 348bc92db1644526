"""One program over several JAX processes (multi-controller JAX, ``jax.distributed``).

Each process of a :class:`ProcessGroup` runs the same case: it joins the group
(:func:`join`, JAX's ``jax.distributed.initialize``) before its backend starts, then sees every
process's devices in ``jax.devices()`` and runs the case's programs over a mesh of them, as on a
multi-GPU node or a TPU slice. Process 0 writes the record; it names the group (:func:`facts`).

Where the group comes from:

- ``jaxbench run --jax-processes N`` on one machine: N workers with a coordinator on
  ``127.0.0.1`` at a free port (:func:`local_groups`);
- a Slurm job of several tasks (a profile's ``slurm.tasks_per_node`` or ``slurm.nodes``): one
  process a task, found by JAX's own Slurm detection from the task's environment
  (:func:`from_slurm`).

On the CPU the processes exchange data through JAX's CPU collectives over Gloo
(``jax_cpu_collectives_implementation``), set here before the backend starts. A process that
finds no coordinator, or a coordinator whose processes do not all arrive, gives up after
``timeout_s`` (JAX ends that process; the caller names what failed).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: Seconds a process waits for the others to join, unless told otherwise (``--join-timeout``).
DEFAULT_JOIN_TIMEOUT_S = 60
#: JAX's CPU collectives across processes (``jax_cpu_collectives_implementation``).
CPU_COLLECTIVES = "gloo"


@dataclass(frozen=True)
class ProcessGroup:
    """Where one process of a multi-process program stands.

    Attributes:
        coordinator: ``host:port`` of the coordinator (process 0 serves it); ``None``: JAX finds
            it from the cluster's environment (Slurm).
        count: How many processes the program has (>= 2).
        index: This process's index, ``0 <= index < count``.
        timeout_s: Whole seconds to wait for every process to join (JAX's
            ``initialization_timeout`` is in whole seconds).
    """

    coordinator: str | None
    count: int
    index: int
    timeout_s: int = DEFAULT_JOIN_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.count < 2 or not 0 <= self.index < self.count:
            raise ValueError(f"a process group needs count >= 2 and 0 <= index < count; got "
                             f"count={self.count}, index={self.index}")  # fmt: skip
        if not (isinstance(self.timeout_s, int) and self.timeout_s >= 1):
            raise ValueError(f"timeout_s must be a whole number of seconds >= 1, got "
                             f"{self.timeout_s!r}")  # fmt: skip

    def as_request(self) -> dict[str, Any]:
        """The group as the fields of a worker's ``join`` request."""
        return asdict(self)


def free_port() -> int:
    """A TCP port on ``127.0.0.1`` that was free a moment ago (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def local_groups(count: int, timeout_s: int = DEFAULT_JOIN_TIMEOUT_S) -> list[ProcessGroup]:
    """``count`` processes on this machine, one :class:`ProcessGroup` each, index order.

    Raises:
        ValueError: ``count`` < 2 or ``timeout_s`` < 1.
    """
    coordinator = f"127.0.0.1:{free_port()}"
    return [ProcessGroup(coordinator, count, i, timeout_s) for i in range(count)]


def from_slurm(environ: Mapping[str, str], timeout_s: int = DEFAULT_JOIN_TIMEOUT_S) -> (
    ProcessGroup | None
):  # fmt: skip
    """This Slurm task's place in its step (``SLURM_STEP_NUM_TASKS``, ``SLURM_PROCID``).

    Returns:
        A group whose coordinator JAX finds from the Slurm environment (its
        ``SlurmCluster``: the step's first node), or ``None`` for a step of one task or outside
        Slurm.

    Raises:
        ValueError: The task count or id is not a whole number.
    """
    count_text = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS")
    if not count_text or "SLURM_JOB_ID" not in environ:
        return None
    index_text = environ.get("SLURM_PROCID", "")
    if not (count_text.isdigit() and index_text.isdigit()):
        raise ValueError(f"SLURM_STEP_NUM_TASKS={count_text!r}, SLURM_PROCID={index_text!r}: "
                         "expected whole numbers")  # fmt: skip
    if int(count_text) < 2:
        return None
    return ProcessGroup(None, int(count_text), int(index_text), timeout_s)


def join(group: ProcessGroup) -> dict[str, Any]:
    """Join ``group`` (``jax.distributed.initialize``); call before anything starts a backend.

    Sets JAX's CPU collectives to :data:`CPU_COLLECTIVES` first, so CPU devices of different
    processes can exchange data (GPUs use NCCL whatever this says).

    Returns:
        :func:`facts` of the joined group.

    Raises:
        RuntimeError: JAX refused (e.g. a backend had started). A coordinator that is missing,
            or processes that do not all arrive within ``timeout_s``, make JAX end the process
            (a fatal error of its coordination service), which the watcher reports.
    """
    import jax

    jax.config.update("jax_cpu_collectives_implementation", CPU_COLLECTIVES)
    if group.coordinator is None:  # JAX reads the cluster (Slurm) from the environment
        jax.distributed.initialize(initialization_timeout=group.timeout_s)
    else:
        jax.distributed.initialize(group.coordinator, group.count, group.index,
                                   initialization_timeout=group.timeout_s)  # fmt: skip
    return facts()


def facts() -> dict[str, Any] | None:
    """``{"count", "index", "coordinator"}`` of this process's group; ``None`` when it has none.

    Read from JAX (``jax.process_count``, ``jax.process_index`` and the coordinator address it
    was given or found).
    """
    import jax

    if jax.process_count() < 2:
        return None
    from jax._src import distributed  # the address JAX resolved; no public accessor

    address = getattr(distributed.global_state, "coordinator_address", None)
    return {"count": jax.process_count(), "index": jax.process_index(),
            "coordinator": address or os.environ.get("SLURM_STEP_NODELIST")}  # fmt: skip
