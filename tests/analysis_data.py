"""Synthetic records for the analysis tests: seeded lognormal latencies, known shifts.

:func:`write_versions` writes :data:`PROCESSES` runs (processes: distinct ``run_id``) per
version. Each process of a case draws its own offset, lognormal with :data:`PROCESS_SD` (the
known process-level noise), and its calls scatter around it with :data:`CALL_SD`; compile times
scatter between processes with :data:`COMPILE_SD`. The known changes: :data:`SLOWER_CASE` is
:data:`SLOWDOWN` times slower in steady state from the second version on, and
:data:`SLOWER_COMPILE_CASE` compiles :data:`COMPILE_SLOWDOWN` times slower; nothing else moves.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from jaxbench.analysis import case_label
from jaxbench.store import Appender, Record

VERSIONS = ["0.4.9", "0.4.10", "0.4.31", "0.4.36.dev20241122", "0.4.36", "0.5.0"]
BASE_ENV: dict[str, Any] = {
    "jax": "0.4.30",
    "jaxlib": "0.4.30",
    "python": "3.12.1",
    "backend": "cpu",
    "device_kind": "cpu",
    "device_count": 1,
    "platform_version": "cpu",
    "env_vars": {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true"},
    "jax_flags": {"jax_enable_x64": False},
    "host": {"hostname": "box", "cpu_model": "AMD EPYC", "cpu_count": 2},
    "git": {"commit": "abc"},
}


def lognormal(median: float, n: int, seed: int, sigma: float = 0.1) -> list[float]:
    """``n`` seeded lognormal latencies (seconds) with the given median."""
    rng = np.random.default_rng(seed)
    return list(median * np.exp(sigma * rng.standard_normal(n)))


def record(
    version: str = "0.4.30",
    samples: list[float] | None = None,
    benchmark: str = "train_step",
    params: dict[str, Any] | None = None,
    env: dict[str, Any] | None = None,
    run_id: str | None = None,
    **fields: Any,
) -> Record:
    """A valid ``ok`` record of ``version`` (jax and jaxlib), env overrides merged in.

    ``run_id`` (default ``run-<version>``) names the run, and so the process, that took it.
    """
    return Record(
        run_id=run_id or f"run-{version}",
        benchmark=benchmark,
        params=params or {"size": "tiny", "dtype": "float32"},
        status=fields.pop("status", "ok"),
        samples_s=samples if samples is not None else lognormal(1e-3, 50, seed=0),
        env=BASE_ENV | {"jax": version, "jaxlib": version} | (env or {}),
        **fields,
    )


def write(path: Path, records: list[Record]) -> Path:
    """Write ``records`` as one JSON Lines run file."""
    with Appender(path) as writer:
        for rec in records:
            writer.write(rec)
    return path


def forward_records(
    version="0.4.30", ks=(1, 4, 16, 64), sigma=0.0, seed=0, n=21, scale=1.0, run_id=None
):
    """linearize costs 4 + K units, vmap_jvp 2 K units: linearize is cheaper for K > 4.

    ``scale`` multiplies every median (a process's offset); ``run_id`` names the process.
    """
    recs = []
    for k in ks:
        for name, median, held in (
            ("linearize", (4 + k) * 1e-4, 1 << 20),
            ("vmap_jvp", 2 * k * 1e-4, 0),
        ):
            params = {"size": "small", "dtype": "float32", "k": k, "strategy": name, "wrt": "input"}
            recs.append(
                record(
                    version,
                    lognormal(scale * median, n, seed=seed + k, sigma=sigma),
                    benchmark=f"forward/{name}",
                    params=params,
                    metrics={"held_bytes": held},
                    run_id=run_id,
                )
            )
    return recs


#: Versions of :func:`write_versions`, in version order (text order would put 0.4.10 first).
REVIEW_VERSIONS = ("0.4.9", "0.4.10", "0.5.0")
#: Processes (runs) per version in :func:`write_versions`.
PROCESSES = 4
#: Spread (log scale) of a process's offset from the case's true median.
PROCESS_SD = 0.005
#: Spread (log scale) of the calls around their process's median.
CALL_SD = 0.02
#: Spread (log scale) of a compile time between processes.
COMPILE_SD = 0.02
#: Steady-state factor of :data:`SLOWER_CASE` from the second version on.
SLOWDOWN = 1.20
#: Compile-time factor of :data:`SLOWER_COMPILE_CASE` from the second version on.
COMPILE_SLOWDOWN = 1.30
TRAIN = {"optimizer": "sgd", "donate": True}
#: Steady state 20 % slower from 0.4.9 to 0.4.10 (compile unchanged).
SLOWER_CASE = "train_step donate=True dtype=float32 mesh=none optimizer=sgd size=small"
#: Compile time 30 % slower from 0.4.9 to 0.4.10 (steady state unchanged).
SLOWER_COMPILE_CASE = "train_step donate=True dtype=bfloat16 mesh=none optimizer=sgd size=tiny"
#: Failed in 0.5.0: not timed there.
FAILED_CASE = "train_step donate=True dtype=float32 mesh=none optimizer=sgd size=tiny"


def review_records(version: str, index: int, n: int = 80, process: int = 0) -> list[Record]:
    """Train-step and forward records of one process of one version of :data:`REVIEW_VERSIONS`.

    Args:
        version: The version.
        index: Its place in :data:`REVIEW_VERSIONS` (the known changes start at 1).
        n: Timed calls of a train step (forward cases get ``n // 2``).
        process: The process's number within the version (seeds and ``run_id``).
    """
    run_id = f"run-{version}-p{process}"
    rng = np.random.default_rng([index, process])
    recs = []
    for j, (size, dtype) in enumerate(
        [("tiny", "float32"), ("tiny", "bfloat16"), ("small", "float32"), ("small", "bfloat16")]
    ):
        params = {"size": size, "dtype": dtype, **TRAIN}
        label = case_label("train_step", params)
        median = (1e-4 if size == "tiny" else 1e-3) * (1.2 if dtype == "bfloat16" else 1.0)
        compile_s = 0.2 if size == "tiny" else 0.5
        if index >= 1 and label == SLOWER_CASE:
            median *= SLOWDOWN
        if index >= 1 and label == SLOWER_COMPILE_CASE:
            compile_s *= COMPILE_SLOWDOWN
        median *= math.exp(PROCESS_SD * rng.standard_normal())
        compile_s *= math.exp(COMPILE_SD * rng.standard_normal())
        if index == 2 and label == FAILED_CASE:
            recs.append(
                record(
                    version,
                    [],
                    params=params,
                    status="failed",
                    error="gate: loss not finite",
                    run_id=run_id,
                )
            )
            continue
        samples = lognormal(median, n, seed=1000 * index + 10 * process + j, sigma=CALL_SD)
        recs.append(record(version, samples, params=params, compile_s=compile_s, run_id=run_id))
    recs += forward_records(
        version,
        ks=(1, 4, 16, 64),
        sigma=CALL_SD,
        seed=1000 * index + 100 * process,
        n=n // 2,
        scale=math.exp(PROCESS_SD * rng.standard_normal()),
        run_id=run_id,
    )
    return recs


def write_versions(folder: Path, n: int = 80, processes: int = PROCESSES) -> Path:
    """``processes`` JSON Lines runs per version of :data:`REVIEW_VERSIONS` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, version in enumerate(REVIEW_VERSIONS):
        for p in range(processes):
            write(folder / f"run-{version}-p{p}.jsonl", review_records(version, index, n, p))
    return folder


def write_processes(
    folder: Path, version: str, median: float, processes: int = PROCESSES, n: int = 60, **kw: Any
) -> list[Path]:
    """``processes`` one-record runs of ``version`` (``train_step`` tiny) with process noise.

    Args:
        folder: Where the files go (``<version>-p<i>.jsonl``).
        version: The JAX version.
        median: The case's true median latency, seconds.
        processes: How many processes (runs).
        n: Calls per process.
        **kw: Passed to :func:`record` (e.g. ``compile_s``).
    """
    rng = np.random.default_rng([len(version), int(median * 1e9) % 10_000])
    paths = []
    for p in range(processes):
        scale = math.exp(PROCESS_SD * rng.standard_normal())
        samples = lognormal(median * scale, n, seed=int(rng.integers(1 << 30)), sigma=CALL_SD)
        rec = record(version, samples, run_id=f"run-{version}-p{p}", **kw)
        paths.append(write(folder / f"{version}-p{p}.jsonl", [rec]))
    return paths
