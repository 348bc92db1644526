"""Scaling exponents of live comparisons: judged over process pairs, built from seeded pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jaxbench.analysis.scaling import live_exponent_changes
from jaxbench.inference.scaling import compare_pair_exponents
from jaxbench.store.live import CaseComparison, PairRun, Round, SideInfo, now

TRIPS = (1024, 2048, 4096)


def _side(label: str, params: dict) -> SideInfo:
    return SideInfo(label=label, python="py", params=params, benchmark="loop", jax=label,
                    jaxlib=label, backend="cpu", device_kind="cpu", compile_s=0.1, flops=1.0,
                    env={})  # fmt: skip


def live_sweep(
    exponents: tuple[float, float],
    pairs: int = 10,
    seed: int = 0,
    trips: tuple[int, ...] = TRIPS,
    process_sd: float = 0.1,
    slope_sd: float = 0.1,
    labels: tuple[str, str] = ("0.4.30", "0.4.31"),
) -> list[CaseComparison]:
    """One interleaved run of the loop at every ``trip``, ``pairs`` pairs of worker processes.

    Each process has its own speed factor (log sd ``process_sd``) and its own exponent (the
    side's, plus normal noise of sd ``slope_sd``), kept across every case it times, as a worker
    keeps its memory layout; each call adds 2 % noise.
    """
    from jaxbench.interleave.session import Schedule

    rng = np.random.default_rng(seed)
    schedule = Schedule(pairs=pairs, max_pairs=pairs)
    out = {t: CaseComparison.start("interleaved", "loop", {"trip": t, "body": "at_set"},
                                   schedule) for t in trips}  # fmt: skip
    for p in range(pairs):
        speed = np.exp(rng.normal(0, process_sd, 2))
        slope = np.asarray(exponents) + rng.normal(0, slope_sd, 2)
        for t in trips:
            params = {"trip": t, "body": "at_set"}
            medians = speed * 1e-8 * (t / trips[0]) ** slope * trips[0]
            rounds = [
                Round(order="AB" if r % 2 else "BA",
                      baseline_s=(medians[0] * np.exp(rng.normal(0, 0.02, 10))).tolist(),
                      candidate_s=(medians[1] * np.exp(rng.normal(0, 0.02, 10))).tolist())
                for r in range(6)
            ]  # fmt: skip
            run = PairRun(index=p, baseline=_side(labels[0], params),
                          candidate=_side(labels[1], params), rounds=rounds,
                          started_at=now())  # fmt: skip
            out[t] = out[t].with_pair(run)
    return list(out.values())


def test_linear_becoming_quadratic_is_changed_over_the_live_pairs():
    (row,) = live_exponent_changes(live_sweep((1.0, 2.0))).itertuples()
    assert (row.benchmark, row.params, row.swept) == ("loop", "body=at_set", "trip")
    assert (row.baseline, row.candidate, row.pairs) == ("0.4.30", "0.4.31", 10)
    assert row.exponent_baseline == pytest.approx(1.0, abs=0.15)
    assert row.exponent_candidate == pytest.approx(2.0, abs=0.15)
    assert row.ci_low > 0.1 and row.ci_low < row.difference < row.ci_high
    assert row.verdict == "changed" and row.reason == ""


def test_a_a_live_sweeps_are_rarely_changed_and_quadratic_always():
    aa, quadratic = [], []
    for seed in range(100):
        aa.append(live_exponent_changes(live_sweep((1.0, 1.0), seed=seed)).verdict[0])
        quadratic.append(live_exponent_changes(live_sweep((1.0, 2.0), seed=seed)).verdict[0])
    # A 95 % interval wholly beyond +-0.1 when the truth is 0: at most 2.5 %; 3 sd above that.
    assert aa.count("changed") <= 100 * 0.025 + 3 * math.sqrt(100 * 0.025), aa
    assert quadratic.count("changed") == 100


def test_a_a_with_little_process_noise_is_same():
    frame = live_exponent_changes(live_sweep((1.0, 1.0), slope_sd=0.01, seed=7))
    assert frame.verdict[0] == "same"


def test_the_pair_is_the_unit_a_shared_pair_slope_cancels():
    """Both processes of a pair off by the same slope: the paired interval stays narrow."""
    rng = np.random.default_rng(3)
    x = [1.0, 2.0, 4.0]
    base, cand = {}, {}
    for p in range(6):
        shared = rng.normal(0, 0.5)  # large between pairs, shared within one
        base[str(p)] = (x, [2.0 ** ((1.0 + shared) * math.log2(v)) for v in x])
        cand[str(p)] = (x, [3.0 * 2.0 ** ((1.3 + shared) * math.log2(v)) for v in x])
    change = compare_pair_exponents(base, cand)
    assert change.difference == pytest.approx(0.3)
    assert change.ci_high - change.ci_low == pytest.approx(0.0, abs=1e-9)
    assert change.verdict == "changed" and change.baseline.processes == 6


def test_one_pair_is_inconclusive_and_pairs_without_three_values_give_none():
    one = compare_pair_exponents({"0": ([1, 2, 4], [1, 2, 4])}, {"0": ([1, 2, 4], [1, 4, 16])})
    assert one.difference == pytest.approx(1.0) and one.verdict == "inconclusive"
    assert "at least 2 pairs" in one.reason
    assert compare_pair_exponents({"0": ([1, 2], [1, 2])}, {"0": ([1, 2], [1, 4])}) is None
    with pytest.raises(ValueError, match="threshold must be > 0"):
        compare_pair_exponents({}, {}, threshold=0)


def test_only_pairs_that_timed_every_value_count():
    comparisons = live_sweep((1.0, 2.0), pairs=6)
    last = comparisons[-1]  # trip=4096 decided early: no pairs from index 4 on
    comparisons[-1] = last.model_copy(update={"pairs": last.pairs[:4]})
    (row,) = live_exponent_changes(comparisons).itertuples()
    assert row.pairs == 4


def test_a_live_run_with_nothing_swept_gives_no_exponent():
    assert live_exponent_changes(live_sweep((1.0, 2.0), trips=(1024, 2048))).empty
    assert live_exponent_changes(live_sweep((1.0, 2.0), trips=(1024,))).empty
    assert live_exponent_changes([]).empty


def test_a_case_twice_is_named():
    run = live_sweep((1.0, 2.0))
    with pytest.raises(ValueError, match="give the comparisons of one live run"):
        live_exponent_changes(run + run[:1])


def _compare_live(monkeypatch, tmp_path, comparisons):
    from typer.testing import CliRunner

    import jaxbench.interleave.runner
    from jaxbench.cli import app

    def fake_run(a, b, cases, backend, schedule, on_pair=None, **opts):
        if on_pair:
            on_pair(comparisons)
        return comparisons

    monkeypatch.setattr(jaxbench.interleave.runner, "run_pairs", fake_run)
    args = ["compare", "--interleave", "current", "current", "-w", "train_step", "-s", "tiny",
            "--out", str(tmp_path)]  # fmt: skip
    return CliRunner().invoke(app, args)


def test_compare_interleave_prints_the_exponent_over_live_pairs(monkeypatch, tmp_path):
    result = _compare_live(monkeypatch, tmp_path, live_sweep((1.0, 2.0)))
    assert result.exit_code == 1, result.output  # the larger trips are slower
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("scaling:")]
    assert line.startswith("scaling: loop body=at_set: exponent of latency in trip ")
    assert "over 10 live pairs: changed" in line


def test_compare_interleave_without_a_sweep_prints_no_exponent(monkeypatch, tmp_path):
    result = _compare_live(monkeypatch, tmp_path, live_sweep((1.0, 2.0), trips=(1024, 4096)))
    assert result.exit_code == 1 and "wrote " in result.output, result.output
    assert not [ln for ln in result.output.splitlines() if ln.startswith("scaling:")]
