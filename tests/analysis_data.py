"""Synthetic records for the analysis tests: seeded lognormal latencies, known shifts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from jaxbench.analysis import case_label
from jaxbench.results import Record, ResultsWriter

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
    **fields: Any,
) -> Record:
    """A valid ``ok`` record of ``version`` (jax and jaxlib), env overrides merged in."""
    return Record(
        run_id=f"run-{version}",
        benchmark=benchmark,
        params=params or {"size": "tiny", "dtype": "float32"},
        status=fields.pop("status", "ok"),
        samples_s=samples if samples is not None else lognormal(1e-3, 50, seed=0),
        env=BASE_ENV | {"jax": version, "jaxlib": version} | (env or {}),
        **fields,
    )


def write(path: Path, records: list[Record]) -> Path:
    """Write ``records`` as one JSON Lines run file."""
    with ResultsWriter(path) as writer:
        for rec in records:
            writer.write(rec)
    return path


def forward_records(version="0.4.30", ks=(1, 4, 16, 64), sigma=0.0, seed=0, n=21):
    """linearize costs 4 + K units, vmap_jvp 2 K units: linearize is cheaper for K > 4."""
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
                    lognormal(median, n, seed=seed + k, sigma=sigma),
                    benchmark=f"forward/{name}",
                    params=params,
                    metrics={"held_bytes": held},
                )
            )
    return recs


#: Versions of :func:`write_versions`, in version order (text order would put 0.4.10 first).
REVIEW_VERSIONS = ("0.4.9", "0.4.10", "0.5.0")
TRAIN = {"optimizer": "sgd", "donate": True}
#: Steady state 10 % slower from 0.4.9 to 0.4.10 (compile unchanged).
SLOWER_CASE = "train_step donate=True dtype=float32 optimizer=sgd size=small"
#: Compile time 30 % slower from 0.4.9 to 0.4.10 (steady state unchanged).
SLOWER_COMPILE_CASE = "train_step donate=True dtype=bfloat16 optimizer=sgd size=tiny"
#: Failed in 0.5.0: not timed there.
FAILED_CASE = "train_step donate=True dtype=float32 optimizer=sgd size=tiny"


def review_records(version: str, index: int, n: int = 80) -> list[Record]:
    """Train-step and forward records of one version of :data:`REVIEW_VERSIONS` (``index``)."""
    recs = []
    for j, (size, dtype) in enumerate(
        [("tiny", "float32"), ("tiny", "bfloat16"), ("small", "float32"), ("small", "bfloat16")]
    ):
        params = {"size": size, "dtype": dtype, **TRAIN}
        label = case_label("train_step", params)
        median = (1e-4 if size == "tiny" else 1e-3) * (1.2 if dtype == "bfloat16" else 1.0)
        compile_s = 0.2 if size == "tiny" else 0.5
        if index >= 1 and label == SLOWER_CASE:
            median *= 1.10
        if index >= 1 and label == SLOWER_COMPILE_CASE:
            compile_s *= 1.30
        if index == 2 and label == FAILED_CASE:
            recs.append(
                record(version, [], params=params, status="failed", error="gate: loss not finite")
            )
            continue
        samples = lognormal(median, n, seed=100 * index + j, sigma=0.05)
        recs.append(record(version, samples, params=params, compile_s=compile_s))
    recs += forward_records(version, ks=(1, 4, 16, 64), sigma=0.05, seed=100 * index, n=n // 2)
    return recs


def write_versions(folder: Path, n: int = 80) -> Path:
    """One JSON Lines run per version of :data:`REVIEW_VERSIONS` in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, version in enumerate(REVIEW_VERSIONS):
        write(folder / f"run-{version}.jsonl", review_records(version, index, n))
    return folder
