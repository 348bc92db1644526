"""What can change a timing: versions, backend, device, flags, host, commit and Slurm job facts.

Also which process took it: :data:`PROCESS_ID` names this process (the statistical unit of the
analysis), made once at import and made again in the child of every ``os.fork``.
"""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
import sys
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any

from jaxbench.distributed import facts as distributed_facts
from jaxbench.measure.noise import cpu_affinity, usable_cpus
from jaxbench.measure.programs import jax_flags

#: Identifier of this process: 32 hex digits (``uuid4``), the same for every record it writes,
#: different in every other process, forked children included (see :func:`process_id`).
PROCESS_ID = uuid.uuid4().hex


def _new_process_id() -> None:
    global PROCESS_ID
    PROCESS_ID = uuid.uuid4().hex


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process_id)


def process_id() -> str:
    """This process's :data:`PROCESS_ID`.

    A spawned interpreter imports this module afresh and so draws its own; a forked child gets
    a new one from an ``os.register_at_fork`` hook, so it never shares its parent's.
    """
    return PROCESS_ID


ENV_PREFIXES = (
    "XLA_",
    "JAX_",
    "LIBTPU_",
    "TPU_",
    "CUDA_",
    "NCCL_",
    "TF_CPP_",
    "NVIDIA_TF32_OVERRIDE",
    "NVIDIA_VISIBLE_DEVICES",
    "OMP_",
    "OPENBLAS_",
    "MKL_",
)
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL")
SLURM_KEYS = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_NODELIST",
    "SLURM_CLUSTER_NAME",
    "SLURM_CPUS_PER_TASK",
    "SLURM_GPUS_ON_NODE",
    "SLURM_NTASKS",
    "SLURM_PROCID",
)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_state(folder: Path) -> dict[str, Any]:
    """The commit and dirty state of the git repository that holds ``folder``.

    Returns:
        ``commit`` (``git rev-parse HEAD``) and ``dirty`` (uncommitted changes to tracked
        files; untracked files do not count); both ``None`` outside a repository or without
        ``git``.
    """
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head, "dirty": bool(dirty)}


@functools.cache
def _git_commit() -> dict[str, Any]:
    """:func:`git_state` of this jaxbench checkout."""
    return git_state(Path(__file__).resolve().parent.parent)


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _total_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def timing_env_vars() -> dict[str, str]:
    """Environment variables that can change a timing (XLA, JAX, CUDA, threads); secrets hidden.

    A variable whose name contains TOKEN, KEY, SECRET, PASSWORD or CREDENTIAL is recorded as
    ``"<redacted>"``, so results never carry credentials.
    """
    return {
        k: "<redacted>" if any(w in k.upper() for w in SECRET_WORDS) else v
        for k, v in sorted(os.environ.items())
        if k.startswith(ENV_PREFIXES)
    }


@functools.cache
def host() -> dict[str, Any]:
    """Host facts: name, OS, CPU model, logical CPU count, total memory (bytes).

    Cached: the same for every process of a host. The CPUs a process may use are not, so
    :func:`collect` adds them apart.
    """
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _total_memory_bytes(),
    }


#: Linux's CPU frequency interface (``Documentation/admin-guide/pm/cpufreq.rst``).
CPU_SYSFS = Path("/sys/devices/system/cpu")


def cpu_frequency_policy(root: Path | None = None) -> dict[str, Any]:
    """The CPU frequency governor and turbo state, where Linux exposes them.

    ``governor``: ``scaling_governor`` of the first CPU this process may use (e.g.
    ``performance``, ``powersave``, ``schedutil``). ``turbo``: ``False`` when
    ``intel_pstate/no_turbo`` is 1 or ``cpufreq/boost`` is 0, ``True`` for the opposite. Each
    is ``None`` where the files are absent (most VMs and containers) or unreadable. ``root``:
    the sysfs folder (default :data:`CPU_SYSFS`).
    """
    root = root or CPU_SYSFS
    cpus = cpu_affinity() or [0]

    def read(path: Path) -> str | None:
        try:
            return path.read_text().strip() or None
        except OSError:
            return None

    governor = read(root / f"cpu{cpus[0]}" / "cpufreq" / "scaling_governor")
    turbo = None
    if (no_turbo := read(root / "intel_pstate" / "no_turbo")) in ("0", "1"):
        turbo = no_turbo == "0"
    elif (boost := read(root / "cpufreq" / "boost")) in ("0", "1"):
        turbo = boost == "1"
    return {"governor": governor, "turbo": turbo}


def collect(device: Any | None = None) -> dict[str, Any]:
    """Describe the software, device and host that a timing was taken on.

    Args:
        device: The ``jax.Device`` the case ran on; ``None`` for the default device.

    Returns:
        A JSON-serialisable dict with at least ``jax``, ``jaxlib``, ``python``, ``numpy``,
        ``backend``, ``device_kind``, ``device_count``, ``platform_version``, ``env_vars``,
        ``jax_flags``, ``host``, ``git``, ``slurm`` (empty outside Slurm), ``process_id``
        (:func:`process_id`) and ``pid``. ``host`` has :func:`host`'s facts plus this process's
        ``usable_cpus`` (count) and ``affinity`` (sorted CPU ids, ``None`` where unknown), which
        ``taskset`` or Slurm's CPU binding can restrict per process, and the frequency
        ``governor`` and ``turbo`` state (:func:`cpu_frequency_policy`). In a program over
        several JAX processes, ``jax_processes`` (:func:`jaxbench.distributed.facts`), and
        ``device_count`` counts every process's devices.
    """
    import jax
    import numpy as np

    if device is None:
        device = jax.local_devices()[0]
    try:
        platform_version = device.client.platform_version
    except AttributeError:
        platform_version = None
    group = distributed_facts()
    return {
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "python": platform.python_version(),
        "python_implementation": sys.implementation.name,
        "numpy": np.__version__,
        "backend": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(device.platform),
        "platform_version": platform_version,
        "env_vars": timing_env_vars(),
        "jax_flags": jax_flags(),
        "host": host()
        | {"usable_cpus": usable_cpus(), "affinity": cpu_affinity()}
        | cpu_frequency_policy(),
        "git": _git_commit(),
        "slurm": {k: os.environ[k] for k in SLURM_KEYS if k in os.environ},
        "process_id": process_id(),
        "pid": os.getpid(),
    } | ({"jax_processes": group} if group is not None else {})
