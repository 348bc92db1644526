"""Decisive verdicts: the rule, its sequential looks, and disturbances that veto only what they
could explain. Seeded simulations with a known truth (process-level noise, sd 0.028 a pair)."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pytest
from analysis_data import lognormal, record, write
from scipy import stats as sps
from typer.testing import CliRunner

from jaxbench.cli import app
from jaxbench.inference import sequential, stability, verdicts
from jaxbench.live_defaults import DEFAULT_MAX_PAIRS, DEFAULT_PAIRS, DEFAULT_PAIRS_STEP

SD = 0.028  # a pair's log-ratio spread on the project's VM (docs/review.md)
REPLICATES = 1000


def test_boundaries_agree_with_scipys_multivariate_normal():
    fractions = [0.3, 0.6, 1.0]
    c = sequential.boundaries(fractions, 0.05)
    t = np.asarray(fractions)
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    for k in range(1, len(c) + 1):
        hi = np.asarray(c[:k])
        inside = sps.multivariate_normal(np.zeros(k), cov[:k, :k]).cdf(
            hi, lower_limit=-hi, rng=np.random.default_rng(0)
        )
        assert 1 - inside == pytest.approx(sequential.spent(fractions[k - 1], 0.05), abs=2e-5)
    # One look at the cap is the fixed-sample 95 % interval; earlier looks are stricter.
    assert sequential.nominal_level([30], 30, 0.05) == pytest.approx(0.05)
    assert c[0] > c[1] > c[2] > sps.norm.isf(0.025)


def test_looks_follow_the_schedule_and_a_cut_short_one():
    assert sequential.looks_at(7, 3, 2, 20) == [3, 5, 7]
    assert sequential.looks_at(8, 3, 2, 20) == [3, 5, 7, 8]  # stopped between looks
    assert sequential.looks_at(2, 3, 2, 20) == [2]  # before the first look
    assert sequential.looks_at(20, 3, 5, 20) == [3, 8, 13, 18, 20]  # the cap is a look
    with pytest.raises(ValueError, match="schedule"):
        sequential.looks_at(0, 3, 1, 20)
    with pytest.raises(ValueError, match="increase"):
        sequential.boundaries([0.5, 0.5], 0.05)


def _sequential(effect: float, seed: int, strict: bool = False) -> tuple[list[str], list[int]]:
    """The default live schedule on ``REPLICATES`` simulated comparisons of a known effect."""
    first, step, cap = DEFAULT_PAIRS, DEFAULT_PAIRS_STEP, DEFAULT_MAX_PAIRS
    grid = sequential.looks_at(cap, first, step, cap)
    level = {n: sequential.nominal_level(sequential.looks_at(n, first, step, cap), cap, 0.05)
             for n in grid}  # fmt: skip
    rng = np.random.default_rng(seed)
    out, used = [], []
    for _ in range(REPLICATES):
        d = rng.normal(math.log(effect), SD, cap)
        for n in grid:
            est = verdicts.estimate_paired(d[:n], (0, 0), 0.02, level[n], strict)
            if est.verdict != "inconclusive":
                break
        out.append(est.verdict)
        used.append(n)
    return out, used


def _upper(k: int, p: float) -> bool:
    """``k`` of :data:`REPLICATES` is within the binomial bounds of a rate of at most ``p``."""
    return sps.binomtest(k, REPLICATES, p, alternative="greater").pvalue > 0.001


def test_aa_false_alarms_are_within_the_stated_level_and_same_is_called():
    got, used = _sequential(1.0, seed=11)
    slower, faster, same = (got.count(v) for v in ("slower", "faster", "same"))
    # P(slower | no change) <= alpha / 2 over all looks, and likewise faster.
    assert _upper(slower, 0.025) and _upper(faster, 0.025), (slower, faster)
    assert same >= 0.80 * REPLICATES, same
    assert max(used) <= DEFAULT_MAX_PAIRS


def test_three_percent_is_called_within_the_cap_and_large_changes_stop_early():
    got, used = _sequential(1.03, seed=12)
    assert got.count("slower") >= 0.80 * REPLICATES
    assert got.count("faster") == 0
    big, used_big = _sequential(2.0, seed=13)
    assert big.count("slower") == REPLICATES
    assert np.median(used_big) < np.median(used) < DEFAULT_MAX_PAIRS


def test_strict_has_lower_power_on_the_same_data():
    default, _ = _sequential(1.03, seed=14)
    strict, _ = _sequential(1.03, seed=14, strict=True)
    assert strict.count("slower") < 0.5 * default.count("slower")


class _Round:
    def __init__(self, a, b, na=None, nb=None):
        self.baseline_s, self.candidate_s = a, b
        self.baseline_noise, self.candidate_noise = na or {}, nb or {}


def _pairs(effect: float, n: int, seed: int, noise=lambda i, r: ({}, {})) -> list[list[_Round]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        shift = rng.normal(0, SD)
        rounds = []
        for r in range(30):
            a = list(1e-3 * np.exp(rng.normal(0, 0.05, 10)))
            b = list(1e-3 * effect * math.exp(shift) * np.exp(rng.normal(0, 0.05, 10)))
            rounds.append(_Round(a, b, *noise(i, r)))
        out.append(rounds)
    return out


def _judge(pairs: list[list[_Round]]) -> verdicts.Estimate:
    from jaxbench.inference.paired import pair_log_ratio

    logs = [pair_log_ratio([r.baseline_s for r in p], [r.candidate_s for r in p]) for p in pairs]
    est = verdicts.estimate_paired(logs, (0, 0), 0.02, 0.05)
    return stability.veto(est, stability.pairs_disturbances(pairs, 0.02))


def test_a_1000x_slowdown_beside_14_percent_steal_is_slower():
    def steal(i, r):
        return ({"steal_share": 0.14}, {"steal_share": 0.14}) if i == 3 else ({}, {})

    est = _judge(_pairs(1000.0, 10, seed=21, noise=steal))
    assert est.verdict == "slower"
    assert "stole 14.0%" in est.advice and "do not explain" in est.advice


def test_a_3_percent_slowdown_beside_a_hog_that_doubles_one_side_is_unstable():
    def hog(i, r):  # from pair 5 on, the candidate gets half the CPU it had
        quiet = {"cpu_share": 1.8, "wall_s": 0.05}
        return (quiet, {"cpu_share": 0.9, "wall_s": 0.05} if i >= 5 else quiet)

    est = _judge(_pairs(1.03, 10, seed=22, noise=hog))
    assert est.verdict == "unstable"
    assert "CPU share" in est.advice
    # The same data without the hog's traces decides.
    assert _judge(_pairs(1.03, 10, seed=22)).verdict != "unstable"


def test_compare_of_recorded_runs_with_a_1000x_slowdown_exits_1(tmp_path):
    for side, (version, median) in enumerate((("0.11.0", 1e-4), ("0.11.1", 1e-1))):
        for p in range(3):
            noise = {"cpu_share": 1.0, "wall_s": 1.0, "steal_share": 0.14 if p == 0 else 0.0}
            # The first third of each process settles (warm-up), then a 12 % drift: neither
            # can explain a 1000x change.
            samples = lognormal(median, 60, seed=10 * side + p, sigma=0.02)
            samples = [x * (1.12 if i >= 40 else 1.0) for i, x in enumerate(samples)]
            write(tmp_path / version / f"run{p}.jsonl",
                  [record(version, samples, run_id=f"{version}-{p}", noise=noise)])  # fmt: skip
    verdicts_json = tmp_path / "verdicts.json"
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "0.11.0"),
                                      str(tmp_path / "0.11.1"), "--json",
                                      str(verdicts_json)])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "slower" in result.output and "unstable" not in result.output.split("verdicts:")[-1]
    assert "processes a side" in " ".join(result.output.split())
    written = json.loads(verdicts_json.read_text())
    assert (written["kind"], written["command"], written["exit_status"]) == (
        "jaxbench-verdicts", "compare", 1)  # fmt: skip
    steady = [c for c in written["cases"] if c["metric"] == "steady_state"]
    assert [c["verdict"] for c in steady] == ["slower"] and steady[0]["ratio"] > 500


def two_sides(tmp_path, processes):
    """Folders ``a`` and ``b`` of ``processes`` runs each, of one case and no change."""
    for side, version in enumerate(("a", "b")):
        for p in range(processes):
            samples = lognormal(1e-3, 40, seed=100 + 10 * side + p, sigma=0.05)
            write(tmp_path / version / f"run{p}.jsonl",
                  [record("0.1", samples, run_id=f"{version}-{p}")])  # fmt: skip
    return [str(tmp_path / "a"), str(tmp_path / "b")]


def _two_sides(tmp_path, seed, more):
    """Two processes (files) a side, ``a`` and ``b``: each a timed train step, then the records
    ``more(side, run_id, samples)`` gives."""
    for side, version in enumerate(("a", "b")):
        for p in range(2):
            samples = lognormal(1e-3, 40, seed=seed + 10 * side + p, sigma=0.01)
            good = record("0.1", samples, run_id=f"{version}-{p}")
            write(tmp_path / version / f"run{p}.jsonl",
                  [good, *more(version, f"{version}-{p}", samples)])  # fmt: skip


def test_a_case_that_fails_on_every_candidate_run_is_said_and_exits_1(tmp_path):
    broken = {"benchmark": "mywl:maybe_broken", "params": {"n": 16}}
    _two_sides(tmp_path, 100, lambda side, run, samples: [
        record("0.1", samples, run_id=run, **broken) if side == "a"
        else record("0.1", [], run_id=run, status="failed",
                    error="GateFailure: max error 0.9 > atol", **broken)])  # fmt: skip
    out = tmp_path / "verdicts.json"
    args = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    b = str(tmp_path / "b")
    assert (
        f"failed: mywl:maybe_broken n=16: no ok record on {b} (2 failed); first error: "
        "GateFailure: max error 0.9 > atol"
    ) in " ".join(result.output.split())
    assert "unmatched" not in result.output  # not "only a has it": b has it, failed
    written = json.loads(out.read_text())
    assert written["exit_status"] == 1
    assert written["failed"] == [{"side": b, "case": "mywl:maybe_broken n=16",
                                  "statuses": {"failed": 2},
                                  "error": "GateFailure: max error 0.9 > atol"}]  # fmt: skip
    assert [c["case"] for c in written["cases"]] == ["train_step dtype=float32 mesh=none size=tiny"]
    # the other way round, a case that the candidate fixed is said, and exits 0
    fixed = CliRunner().invoke(app, ["compare", b, str(tmp_path / "a")])
    assert fixed.exit_code == 0, fixed.output
    assert f"failed: mywl:maybe_broken n=16: no ok record on {b}" in " ".join(fixed.output.split())


def test_a_case_the_candidate_only_skipped_is_unmatched_not_failed_and_exits_0(tmp_path):
    """An asv benchmark that a ``--bench`` run did not select is stored as NaN (``skipped``);
    that is no regression. Before, it was "failed" and ``compare`` exited 1."""
    other = {"benchmark": "bench_train_step.TrainStep.time_step", "params": {"size": "small"}}
    bare = {"benchmark": "bench_loops.Loop.time_loop", "params": {"trip": 8}}
    _two_sides(tmp_path, 200, lambda side, run, samples: [
        record("0.1", samples, run_id=run, **other) if side == "a"
        else record("0.1", [], run_id=run, status="skipped",
                    error="asv: skipped (NotImplementedError)", **other),
        # asv without --record-samples: ok, its median only
        record("0.1", samples if side == "a" else [], run_id=run, **bare)])  # fmt: skip
    out = tmp_path / "verdicts.json"
    args = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(out)]
    result = CliRunner().invoke(app, args)
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "failed:" not in text
    b = str(tmp_path / "b")
    assert (f"unmatched: bench_train_step.TrainStep.time_step size=small: {b} skipped it "
            "(asv: skipped (NotImplementedError))") in text  # fmt: skip
    assert (f"unmatched: steady_state bench_loops.Loop.time_loop trip=8: {b} has no samples, "
            "so nothing to compare (an asv result of a run without --record-samples keeps only "
            "its median)") in text  # fmt: skip
    assert f"only {tmp_path / 'a'} has it" not in text
    assert json.loads(out.read_text())["failed"] == []


def test_fail_on_undecided_exits_3_and_slower_still_wins(tmp_path):
    args = ["compare", *two_sides(tmp_path, 2)]
    plain = CliRunner().invoke(app, args)
    assert plain.exit_code == 0, plain.output
    assert "inconclusive" in plain.output
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    gated = CliRunner().invoke(app, [*args, "--fail-on-undecided", "--markdown", str(summary)])
    assert gated.exit_code == 3, gated.output
    text = summary.read_text()  # appended to what was there, as GitHub's step summary wants
    assert text.startswith("earlier step\n## jaxbench compare: ")
    assert "| inconclusive |" in text and "**Verdicts:** 1 inconclusive." in text
    assert "Exit status 3: no case is slower, but one is undecided" in text
    unwritable = CliRunner().invoke(app, [*args, "--markdown", str(tmp_path / "no" / "s.md")])
    assert unwritable.exit_code == 2 and "--markdown" in unwritable.output
    (tmp_path / "afile").write_text("")
    one = tmp_path / "out.txt"
    both = CliRunner().invoke(app, [*args, "--json", str(one), "--markdown", str(one)])
    assert both.exit_code == 2 and not one.exists()
    assert f"--json and --markdown both name {one}" in both.output
    under_a_file = tmp_path / "afile" / "v.json"
    blocked = CliRunner().invoke(app, [*args, "--json", str(under_a_file)])
    assert blocked.exit_code == 2  # before the comparison: no table was printed
    assert (
        blocked.output.strip() == f"error: --json {under_a_file}: its folder "
        f"{tmp_path / 'afile'} is a file"
    )


def test_json_and_markdown_never_overwrite_or_append_to_results(tmp_path):
    args = ["compare", *two_sides(tmp_path, 2)]
    results = tmp_path / "b" / "run0.jsonl"
    before = results.read_bytes()
    for option in ("--json", "--markdown"):
        refused = CliRunner().invoke(app, [*args, option, str(results)])
        assert refused.exit_code == 2, refused.output
        assert f"error: {option} {results}: a jaxbench record file" in refused.output
        assert results.read_bytes() == before
    verdicts = tmp_path / "verdicts.json"
    for _ in range(2):  # an earlier verdicts file is replaced, and loads as no problem
        assert CliRunner().invoke(app, [*args, "--json", str(verdicts)]).exit_code == 0
    assert json.loads(verdicts.read_text())["kind"] == "jaxbench-verdicts"
    shutil.copy(verdicts, tmp_path / "b")
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "jaxbench-verdicts" not in again.output, again.output
    onto = CliRunner().invoke(app, [*args, "--markdown", str(verdicts)])
    assert onto.exit_code == 2 and "a jaxbench jaxbench-verdicts file" in onto.output


def test_the_design_line_says_when_the_planned_change_is_below_the_threshold(tmp_path):
    args = ["compare", *two_sides(tmp_path, 3)]
    above = CliRunner().invoke(app, [*args, "--threshold", "0.06"])
    assert "design: a 5% change does not reach the threshold 6.0%: no number of processes" in (
        " ".join(above.output.split())
    )
    below = " ".join(CliRunner().invoke(app, [*args, "--threshold", "0.04"]).output.split())
    assert re.search(r"design: to call a 5% change slower .* needs about \d+ processes", below)


def test_the_design_line_says_when_the_spread_is_too_wide_for_any_number_of_processes(tmp_path):
    """Processes 4x apart: the 5 % change is above the 2 % threshold, the spread is the cause."""
    for side in ("a", "b"):
        for p, level in enumerate((1e-3, 4e-3)):
            samples = lognormal(level, 40, seed=7 + p, sigma=0.01)
            write(tmp_path / side / f"run{p}.jsonl", [record("0.1", samples, run_id=f"{side}{p}")])
    said = " ".join(CliRunner().invoke(app, ["compare", str(tmp_path / "a"),
                                             str(tmp_path / "b")]).output.split())  # fmt: skip
    assert "does not reach the threshold" not in said, said
    assert re.search(r"design: the spread between processes \(sd [\d.]+ in log, median over the "
                     r"cases\) is too wide to call a 5% change with fewer than 1000 processes",
                     said)  # fmt: skip
