"""Checks made before anything is submitted: each failure is one clear :class:`PreflightError`.

Slurm facts come from ``sinfo`` (partitions, GRES per node, time limits), so a profile asking for
a partition the cluster lacks, more GPUs than its nodes have, or more time than it allows fails
here and not as a job that pends forever.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from jaxbench.cluster.profile import Profile
from jaxbench.folders import ensure_writable


class PreflightError(ValueError):
    """The sweep cannot be submitted as asked; nothing was submitted."""


@dataclass(frozen=True)
class Partition:
    """What ``sinfo`` says of one partition.

    Attributes:
        name: Partition name.
        max_gpus_per_node: Most GPUs on one of its nodes (0: none).
        time_limit_min: Its time limit in minutes, ``None`` for unlimited.
        gpu_types: Most GPUs of each named type on one node (untyped GPUs are not listed).
    """

    name: str
    max_gpus_per_node: int
    time_limit_min: int | None
    gpu_types: tuple[tuple[str, int], ...] = ()


def parse_gpus(gres: str) -> dict[str | None, int]:
    """GPUs by type in a GRES string: ``gpu:h100:8(S:0-1),gpu:2`` -> ``{"h100": 8, None: 2}``.

    ``(null)`` or a string without GPUs gives ``{}``.
    """
    gpus: dict[str | None, int] = {}
    for kind, count in re.findall(r"\bgpu(?::([A-Za-z][\w.-]*))?:(\d+)", gres):
        gpus[kind or None] = gpus.get(kind or None, 0) + int(count)
    return gpus


def parse_time_limit(text: str) -> int | None:
    """Minutes in a Slurm time (``[D-]HH:MM:SS``, ``MM:SS``, ``MM``); ``None`` if unlimited.

    Raises:
        ValueError: Not a Slurm time.
    """
    text = text.strip()
    if text.lower() in ("infinite", "unlimited", "n/a"):
        return None
    days, _, clock = text.rpartition("-")
    fields = [int(f) for f in clock.split(":")]
    if not 1 <= len(fields) <= 3:
        raise ValueError(f"not a Slurm time: {text!r}")
    if len(fields) == 1:
        hours, minutes, seconds = 0, fields[0], 0
    elif len(fields) == 2:
        hours, minutes, seconds = 0, fields[0], fields[1]
    else:
        hours, minutes, seconds = fields
    total_min = int(days or 0) * 1440 + hours * 60 + minutes + (1 if seconds else 0)
    return total_min


def slurm_partitions() -> dict[str, Partition]:
    """Partitions of the cluster this machine submits to.

    Raises:
        PreflightError: ``sinfo`` is missing or fails.
    """
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        raise PreflightError(
            "sinfo/sbatch not found on PATH: this machine is not a Slurm login node "
            "(use --profile local to run here)"
        )
    proc = subprocess.run(
        ["sinfo", "--noheader", "--format=%R|%G|%l"], capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        raise PreflightError(f"sinfo failed: {proc.stderr.strip()}")
    gpus: dict[str, int] = {}
    types: dict[str, dict[str, int]] = {}
    limits: dict[str, int | None] = {}
    for line in proc.stdout.splitlines():
        name, gres, limit = [*line.split("|"), "", ""][:3]
        by_type = parse_gpus(gres)
        gpus[name] = max(gpus.get(name, 0), sum(by_type.values()))
        for kind, count in by_type.items():
            if kind is not None:
                types.setdefault(name, {})[kind] = max(types.get(name, {}).get(kind, 0), count)
        limits[name] = parse_time_limit(limit) if limit else None
    return {
        n: Partition(n, gpus[n], limits[n], tuple(sorted(types.get(n, {}).items()))) for n in gpus
    }


def check_slurm(profile: Profile, limit_min: int) -> Partition:
    """The profile's partition exists and can hold one task of this profile.

    Raises:
        PreflightError: Unknown partition, too many GPUs, or a time limit over the partition's.
    """
    s = profile.slurm
    assert s is not None
    partitions = slurm_partitions()
    part = partitions.get(s.partition)
    if part is None:
        raise PreflightError(
            f"profile {profile.name!r}: partition {s.partition!r} does not exist "
            f"(sinfo lists: {', '.join(sorted(partitions)) or 'none'})"
        )
    asked = parse_gpus(s.gres) if s.gres else ({None: s.gpus_per_node} if s.gpus_per_node else {})
    total = sum(asked.values())
    if total > part.max_gpus_per_node:
        raise PreflightError(
            f"profile {profile.name!r} asks for {total} GPU(s) per node, but partition "
            f"{part.name!r} has at most {part.max_gpus_per_node} per node"
        )
    offered = dict(part.gpu_types)
    for kind, count in asked.items():
        if kind is not None and count > offered.get(kind, 0):
            raise PreflightError(
                f"profile {profile.name!r} asks for {count} GPU(s) of type {kind!r} per node, "
                f"but partition {part.name!r} has at most {offered.get(kind, 0)} "
                f"(types: {', '.join(offered) or 'none named'})"
            )
    if part.time_limit_min is not None and limit_min > part.time_limit_min:
        raise PreflightError(
            f"a task needs a {limit_min} min time limit, over the {part.time_limit_min} min "
            f"limit of partition {part.name!r} (fewer --cases-per-task, or --time-limit)"
        )
    return part


def check_writable(folder: Path, what: str = "results folder") -> Path:
    """The folder can be created and written (see :func:`ensure_writable`; ``what`` names it).

    Raises:
        PreflightError: It cannot.
    """
    try:
        return ensure_writable(folder, what)
    except ValueError as exc:
        raise PreflightError(str(exc)) from None


def check_python(python: str) -> None:
    """The command's program exists (a path) or is on ``PATH`` (a name).

    Raises:
        PreflightError: It does not.
    """
    words = shlex.split(python)
    program = words[0] if words else ""
    if shutil.which(program) is None and not Path(program).is_file():
        raise PreflightError(f"environment.python {python!r}: no program {program!r} here")


GPU_BACKENDS = ("gpu", "cuda", "rocm")


def sharing_warnings(profile: Profile) -> list[str]:
    """Why tasks of this profile may not have their machine to themselves; empty if they do.

    A local profile with ``concurrent = true`` starts every task at once on one machine; a Slurm
    profile whose tasks use GPUs (``gpus_per_node``, a ``gres`` with GPUs, or a GPU backend)
    without ``exclusive = true`` may share its node and GPUs with other jobs.
    """
    where = f"profile {profile.name!r} ({profile.path or 'unsaved'})"
    if profile.executor == "local":
        assert profile.local is not None
        if profile.local.concurrent:
            return [
                f"{where}: [local] concurrent = true starts every task at once, so on one "
                "machine they time each other; records say env.sweep.exclusive = false"
            ]
        return []
    s = profile.slurm
    assert s is not None
    uses_gpus = bool(s.gpus_per_node or parse_gpus(s.gres or "") or (
        profile.worker.backend in GPU_BACKENDS))  # fmt: skip
    if uses_gpus and not s.exclusive:
        return [
            f"{where}: GPU tasks without exclusive = true in [slurm] may share their node and "
            "GPUs with other jobs, so a latency can be another job's; records say "
            "env.sweep.exclusive = false"
        ]
    return []


def exclusive(profile: Profile) -> bool:
    """Whether each task of this profile has its machine to itself (see :func:`sharing_warnings`).

    Local tasks that run one after another do; Slurm tasks do with ``exclusive = true``.
    """
    if profile.executor == "local":
        assert profile.local is not None
        return not profile.local.concurrent
    assert profile.slurm is not None
    return profile.slurm.exclusive


def max_array_size() -> int | None:
    """Slurm's ``MaxArraySize`` (``scontrol show config``): array indices must be below it.

    ``None`` where ``scontrol`` is missing, fails or does not say; then arrays are not split,
    and an ``sbatch`` that refuses one fails the submission, which removes the sweep folder.
    """
    if shutil.which("scontrol") is None:
        return None
    proc = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=60
    )
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", proc.stdout, re.MULTILINE)
    return int(found.group(1)) if proc.returncode == 0 and found else None
