"""Sensitivity of the comparison designs: power against known slowdowns, false alarms on A/A.

A benchmark of jaxbench itself, not a test: ``python -m jaxbench.interleave.sensitivity``. The
candidate is the baseline train step on ``effect`` times the batch rows, so ``effect`` times
the FLOP (:func:`jaxbench.workloads.sizes.scaled`, e.g. ``small*1.03``); ``effect`` 1 is an A/A pair
(the very same build on both sides). Each repeat starts fresh processes and judges every effect
three ways:

- ``interleaved``: both variants live in two workers, blocks alternating in random order; paired
  statistics over rounds (:mod:`jaxbench.analysis.paired`);
- ``sequential``: the baseline in one process, then each candidate in its own process, with
  the same warm-up and number of calls; independent-sample statistics (ratio of medians,
  bootstrap CI, Mann-Whitney U), as for two recorded runs;
- ``asv``: asv's default rule on the same sequential samples: changed when the medians differ by
  more than ``factor`` 1.1 and :func:`asv._stats.is_different` (asv's 99 % interval test) agrees
  (asv ``compare``'s ``_is_result_better``).

Power is the share of repeats that call a real slowdown ``slower``; a false alarm is any verdict
other than ``unchanged`` on an A/A pair. The actual slowdown of each effect is measured apart, by
one long interleaved run. Everything measured is written to ``results/sensitivity/``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from jaxbench.env import host
from jaxbench.interleave.result import CaseComparison, Round
from jaxbench.interleave.session import (
    Schedule,
    Variant,
    Worker,
    interleave_case,
    run_side,
)

ASV_FACTOR = 1.1
EFFECTS = (1.0, 1.03, 1.05, 1.10)


def _variant(python: str, size: str, effect: float) -> Variant:
    if effect == 1.0:
        return Variant("A/A", python, {})
    return Variant(f"x{effect:g}", python, {"size": f"{size}*{effect:g}"})


def asv_verdict(baseline: np.ndarray, candidate: np.ndarray, factor: float = ASV_FACTOR) -> str:
    """The default verdict of ``asv compare`` on two samples of one benchmark (``number`` = 1).

    Uses asv's own functions: :func:`asv_runner.statistics.compute_stats` for each side, then
    ``asv.commands.compare._is_result_better`` both ways (the median must change by more than
    ``factor`` and asv's statistical test must call the samples different).

    Returns:
        ``slower``, ``faster`` or ``unchanged``.

    Raises:
        ImportError: asv is not installed (the ``asv`` extra).
    """
    from asv.commands.compare import _is_result_better
    from asv_runner.statistics import compute_stats

    a, a_stats = compute_stats(list(baseline), 1)
    b, b_stats = compute_stats(list(candidate), 1)
    ss_a, ss_b = (a_stats, list(baseline)), (b_stats, list(candidate))
    if _is_result_better(b, a, ss_b, ss_a, factor):
        return "faster"
    if _is_result_better(a, b, ss_a, ss_b, factor):
        return "slower"
    return "unchanged"


def _run_alone(
    variant: Variant, workload: str, params: dict[str, Any], backend: str, s: Schedule
) -> tuple[Any, list[list[float]]]:
    """A whole side in a fresh process (:func:`~jaxbench.interleave.session.run_side`)."""
    ((info, blocks),) = run_side(variant, [(workload, params)], backend, s)
    if isinstance(info, str):
        raise RuntimeError(info)
    return info, blocks


def one_repeat(
    python: str,
    workload: str,
    params: dict[str, Any],
    effects: tuple[float, ...],
    backend: str,
    s: Schedule,
    rng: np.random.Generator,
) -> list[dict[str, Any]]:
    """Judge every effect once, interleaved then sequential; one row per effect and design."""
    size = params["size"]
    base = Variant("base", python, {})
    rows: list[dict[str, Any]] = []
    with Worker(python, backend) as wa, Worker(python, backend) as wb:
        for effect in effects:
            c = interleave_case(
                wa, wb, base, _variant(python, size, effect), workload, params, backend, s, rng
            )
            rows.append({"effect": effect, "design": "interleaved"} | c.figures())
    base_info, base_blocks = _run_alone(base, workload, params, backend, s)
    for effect in effects:
        info, blocks = _run_alone(_variant(python, size, effect), workload, params, backend, s)
        c = (
            CaseComparison.start("back_to_back", workload, params, s)
            .with_sides(base_info, info)
            .finished(
                [
                    Round(order="AB", baseline_s=x, candidate_s=y)
                    for x, y in zip(base_blocks, blocks, strict=True)
                ]
            )
        )
        rows.append({"effect": effect, "design": "sequential"} | c.figures())
        a, b = np.concatenate(base_blocks), np.concatenate(blocks)
        rows.append(
            {
                "effect": effect,
                "design": "asv",
                "ratio": float(np.median(b) / np.median(a)),
                "verdict": asv_verdict(a, b),
                "basis": f"asv compare default: factor {ASV_FACTOR}, asv._stats.is_different",
            }
        )
    return rows


def confirm(
    python: str,
    workload: str,
    params: dict[str, Any],
    effects: tuple[float, ...],
    backend: str,
    rounds: int,
) -> list[dict[str, Any]]:
    """The actual slowdown of each effect: one long interleaved run, plus XLA's FLOP ratio."""
    s = Schedule(rounds=rounds, calls_per_block=20, warmup_rounds=5)
    rng = np.random.default_rng(1)
    base = Variant("base", python, {})
    out = []
    with Worker(python, backend) as wa, Worker(python, backend) as wb:
        for effect in effects:
            v = _variant(python, params["size"], effect)
            c = interleave_case(wa, wb, base, v, workload, params, backend, s, rng)
            f = c.figures()
            assert c.baseline and c.candidate
            flops = (c.candidate.flops or np.nan) / (c.baseline.flops or np.nan)
            out.append(
                {
                    "effect": effect,
                    "size": (params | v.params)["size"],
                    "flops_ratio": flops,
                    "time_ratio": f["ratio"],
                    "ci_low": f["ci_low"],
                    "ci_high": f["ci_high"],
                    "rounds": rounds,
                }
            )
    return out


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Per effect and design: repeats, share called slower (power), share of any call (alarms).

    Args:
        rows: One row per repeat, effect and design, with ``verdict`` and ``ratio``.

    Returns:
        Columns ``effect``, ``design``, ``repeats``, ``slower``, ``faster``, ``called``
        (share not ``unchanged``), ``median_ratio``.
    """
    g = rows.groupby(["effect", "design"], sort=True)
    return pd.DataFrame(
        {
            "repeats": g.size(),
            "slower": g["verdict"].apply(lambda v: float((v == "slower").mean())),
            "faster": g["verdict"].apply(lambda v: float((v == "faster").mean())),
            "called": g["verdict"].apply(lambda v: float((v != "unchanged").mean())),
            "median_ratio": g["ratio"].median(),
        }
    ).reset_index()


def main(
    repeats: Annotated[int, typer.Option(help="Repeats per effect and design.")] = 20,
    size: Annotated[str, typer.Option(help="Train-step size of the baseline.")] = "small",
    effects: Annotated[str, typer.Option(help="Comma-separated FLOP factors; 1 = A/A.")] = ",".join(
        f"{e:g}" for e in EFFECTS
    ),
    rounds: Annotated[int, typer.Option(help="Timed rounds per comparison.")] = 100,
    calls_per_block: Annotated[int, typer.Option(help="Timed calls per block.")] = 10,
    confirm_rounds: Annotated[int, typer.Option(help="Rounds of the confirmation run.")] = 300,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("results/sensitivity"),
) -> None:
    """Measure power and false alarms of interleaved, sequential and asv-style comparisons."""
    factors = tuple(float(e) for e in effects.split(","))
    python, backend = sys.executable, "cpu"
    workload = "train_step"
    params = {"size": size, "dtype": "float32", "optimizer": "sgd", "donate": True}
    s = Schedule(rounds=rounds, calls_per_block=calls_per_block)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    confirmation = confirm(python, workload, params, factors, backend, confirm_rounds)
    print(pd.DataFrame(confirmation).to_string(index=False), flush=True)
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for r in range(repeats):
        for row in one_repeat(python, workload, params, factors, backend, s, rng):
            rows.append({"repeat": r} | row)
        print(f"repeat {r + 1}/{repeats} done", file=sys.stderr, flush=True)
    frame = pd.DataFrame(rows)
    summary = summarize(frame)
    out.mkdir(parents=True, exist_ok=True)
    stamp = started.replace(":", "").replace("-", "").replace("+0000", "Z")
    path = out / f"sensitivity-{stamp}.json"
    path.write_text(
        json.dumps(
            {
                "started_at": started,
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "machine": host() | {"platform": platform.platform(),
                                     "python": platform.python_version()},
                "jax": _jax_version(python),
                "workload": workload,
                "params": params,
                "schedule": asdict(s),
                "confirmation": confirmation,
                "summary": summary.to_dict("records"),
                "rows": rows,
            },
            indent=1,
        )
    )  # fmt: skip
    print(summary.to_markdown(index=False) if _has_tabulate() else summary.to_string(index=False))
    print(f"wrote {path}")


def _jax_version(python: str) -> str:
    import subprocess

    return subprocess.run(
        [python, "-c", "import jax; print(jax.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    typer.run(main)
