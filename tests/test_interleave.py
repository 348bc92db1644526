"""Interleaved comparison: paired statistics, the worker protocol, sessions, files and the CLI."""

from __future__ import annotations

import dataclasses
import io
import json
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from jaxbench.analysis import load_results
from jaxbench.analysis.paired import paired_comparison, round_ratios
from jaxbench.cli import app
from jaxbench.interleave import (
    Schedule,
    Variant,
    WorkerError,
    load_comparisons,
    run_interleaved,
    write_comparisons,
)
from jaxbench.interleave.result import comparisons_frame
from jaxbench.interleave.sensitivity import asv_verdict, summarize
from jaxbench.interleave.session import interleave_case
from jaxbench.interleave.worker import serve
from jaxbench.workloads.sizes import SIZES, get_size

TINY = {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True}


def drifting_rounds(shift: float, rounds: int = 30, seed: int = 0):
    """Blocks whose speed drifts by up to 30 % between rounds, alike for both sides."""
    rng = np.random.default_rng(seed)
    drift = 1 + 0.3 * rng.random(rounds)
    base = [list(1e-3 * d * np.exp(0.01 * rng.standard_normal(10))) for d in drift]
    cand = [list(shift * 1e-3 * d * np.exp(0.01 * rng.standard_normal(10))) for d in drift]
    return base, cand


def test_paired_statistics_find_a_known_10_percent_shift_despite_drift():
    base, cand = drifting_rounds(1.10)
    result = paired_comparison(round_ratios(base, cand))
    assert result.verdict == "slower"
    assert result.ci_low <= 1.10 <= result.ci_high
    assert result.p_value < 0.05


def test_paired_statistics_call_an_a_a_pair_unchanged():
    base, cand = drifting_rounds(1.0)
    result = paired_comparison(round_ratios(base, cand))
    assert result.verdict == "unchanged"
    assert result.ci_low <= 1.0 <= result.ci_high


def test_paired_statistics_refuse_too_few_rounds_and_mismatched_blocks():
    with pytest.raises(ValueError, match="at least 6 rounds"):
        paired_comparison([1.0, 1.1, 1.2, 1.1, 1.0])
    with pytest.raises(ValueError, match="3 rounds, candidate 2"):
        round_ratios([[1.0]] * 3, [[1.0]] * 2)
    with pytest.raises(ValueError, match="round 1"):
        round_ratios([[1.0], []], [[1.0], [1.0]])


def test_scaled_size_scales_the_batch_rows_and_nothing_else():
    small = SIZES["small"]
    for factor in (1.03, 1.05, 1.10):
        s = get_size(f"small*{factor}")
        assert s.batch == round(factor * small.batch) and s.name == f"small*{factor}"
        assert dataclasses.replace(s, batch=small.batch, name="small") == small
    with pytest.raises(ValueError, match=r"'small\*x'.*number in \[0.5, 4.0\]"):
        get_size("small*x")
    with pytest.raises(ValueError, match="unknown size 'huge"):
        get_size("huge*1.1")


def test_worker_answers_errors_and_stays_up():
    requests = io.StringIO(
        '{"op": "block", "calls": 1}\n{"op": "dance"}\nnot json\n{"op": "quit"}\n'
        '{"op": "block", "calls": 1}\n'
    )
    answers = io.StringIO()
    serve(requests, answers)
    lines = [json.loads(x) for x in answers.getvalue().splitlines()]
    assert [a["ok"] for a in lines] == [False, False, False]  # nothing after quit
    assert "block before prepare" in lines[0]["error"]
    assert "unknown op 'dance'" in lines[1]["error"]


class FakeWorker:
    """Answers like a worker; records the order in which it was timed."""

    def __init__(self, name, log, latency, recompile_at=None):
        self.name, self.log, self.latency, self.recompile_at = name, log, latency, recompile_at
        self.blocks = 0

    def request(self, op, **kw):
        if op == "prepare":
            size = get_size(kw["params"]["size"])
            env = {"jax": "0.0", "jaxlib": "0.0", "backend": "cpu", "device_kind": "cpu"}
            return {"env": env, "benchmark": "train_step", "compile_s": 0.1,
                    "flops": float(size.params_count)}  # fmt: skip
        self.log.append(self.name)
        self.blocks += 1
        recompiled = self.blocks == self.recompile_at
        return {"samples_s": [self.latency] * kw["calls"], "compiles_timed": int(recompiled),
                "traces_timed": 0}  # fmt: skip


def test_each_round_times_one_block_per_side_in_a_random_order():
    log: list[str] = []
    wa, wb = FakeWorker("A", log, 1e-3), FakeWorker("B", log, 1.2e-3)
    s = Schedule(rounds=20, calls_per_block=3, warmup_rounds=2)
    c = interleave_case(wa, wb, Variant("a", "py"), Variant("b", "py", {"size": "tiny*1.5"}),
                        "train_step", TINY, "cpu", s, np.random.default_rng(0))  # fmt: skip
    pairs = [log[i : i + 2] for i in range(0, len(log), 2)]
    assert len(pairs) == 22 and all(sorted(p) == ["A", "B"] for p in pairs)
    assert {r.order for r in c.rounds} == {"AB", "BA"}
    assert [r.order for r in c.rounds] == ["".join(p) for p in pairs[2:]]  # warm-up dropped
    assert c.candidate.params["size"] == "tiny*1.5" and c.baseline.params["size"] == "tiny"
    f = c.figures()
    assert f["verdict"] == "slower" and f["ratio"] == pytest.approx(1.2)


def test_a_compile_inside_a_timed_block_marks_the_case_recompiled_not_timed():
    log: list[str] = []
    wa, wb = FakeWorker("A", log, 1e-3), FakeWorker("B", log, 1e-3, recompile_at=4)
    c = interleave_case(wa, wb, Variant("a", "py"), Variant("b", "py"), "train_step", TINY,
                        "cpu", Schedule(rounds=10), np.random.default_rng(0))  # fmt: skip
    assert c.status == "recompiled" and "b:" in c.error and c.rounds == []
    with pytest.raises(ValueError, match="no timed rounds"):
        c.figures()


@pytest.mark.slow
def test_live_interleaved_comparison_of_two_real_workers(tmp_path):
    py = sys.executable
    s = Schedule(rounds=6, calls_per_block=3, warmup_rounds=1, warmup_calls=1)
    cases = [("train_step", TINY), ("train_step", TINY | {"dtype": "bfloat16"})]
    found = run_interleaved(
        Variant("base", py), Variant("wide", py, {"size": "tiny*1.5"}), cases, "cpu", s
    )
    assert [c.status for c in found] == ["ok", "ok"]
    c = found[0]
    assert len(c.rounds) == 6 and all(len(r.baseline_s) == 3 for r in c.rounds)
    assert c.baseline.jax and c.baseline.backend == "cpu"
    assert c.candidate.flops > 1.3 * c.baseline.flops  # the wider model really ran
    assert found[1].candidate.params == TINY | {"dtype": "bfloat16", "size": "tiny*1.5"}
    path = write_comparisons(tmp_path / "interleave-x.jsonl", found)
    (tmp_path / "interleave-bad.jsonl").write_text('{"mode": "interleaved"}\n')
    loaded, problems = load_comparisons([tmp_path])
    assert [c.model_dump() for c in loaded] == [c.model_dump() for c in found]
    assert [p.path for p in problems] == [str(tmp_path / "interleave-bad.jsonl")]
    assert "line 1" in problems[0].reason
    assert load_results([tmp_path])[1] == []  # timing-record loader leaves these files alone
    frame = comparisons_frame(loaded)
    assert list(frame["rounds"]) == [6, 6] and set(frame["mode"]) == {"interleaved"}
    assert path.exists()


@pytest.mark.slow
def test_a_side_that_cannot_prepare_is_recorded_as_failed():
    py = sys.executable
    found = run_interleaved(
        Variant("a", py), Variant("b", py, {"dtype": "float64"}), [("train_step", TINY)], "cpu",
        Schedule(rounds=6),
    )  # fmt: skip
    assert found[0].status == "failed" and "float64" in found[0].error


def test_a_worker_that_dies_is_an_error_with_its_exit():
    with pytest.raises(WorkerError, match="ended"):
        run_interleaved(Variant("a", "/bin/false"), Variant("b", "/bin/false"),
                        [("train_step", TINY)], "cpu")  # fmt: skip


def test_asv_verdict_follows_asv_factor_and_test():
    rng = np.random.default_rng(0)
    a = 1e-3 * np.exp(0.01 * rng.standard_normal(300))
    assert asv_verdict(a, a) == "unchanged"
    assert asv_verdict(a, 1.05 * a) == "unchanged"  # real, but below asv's factor 1.1
    assert asv_verdict(a, 1.3 * a) == "slower"
    assert asv_verdict(1.3 * a, a) == "faster"


def test_sensitivity_summary_counts_power_and_false_alarms():
    rows = pd.DataFrame(
        {
            "effect": [1.0, 1.0, 1.0, 1.0, 1.05, 1.05],
            "design": ["interleaved"] * 4 + ["interleaved"] * 2,
            "verdict": ["unchanged", "faster", "unchanged", "slower", "slower", "unchanged"],
            "ratio": [1.0, 0.9, 1.0, 1.1, 1.05, 1.01],
        }
    )
    s = summarize(rows).set_index("effect")
    assert s.loc[1.0, "called"] == 0.5 and s.loc[1.0, "repeats"] == 4
    assert s.loc[1.05, "slower"] == 0.5


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interleave", "--back-to-back", "current", "current"], "exclude each other"),
        (["a", "b", "--set-b", "size=tiny"], "apply to --interleave only"),
        (["--interleave", "current", "current", "--set-b", "size"], "expected NAME=VALUE"),
        (["--interleave", "current", "current", "-w", "train_step", "--set-b", "k=3"],
         "train_step has no such parameter"),
        (["--interleave", "current", "current", "--set-b", "size=huge"], "unknown size 'huge'"),
        (["--interleave", "current", "/no/python", "-w", "train_step", "-s", "tiny"],
         "no such interpreter"),
        (["--interleave", "current", "current", "--rounds", "0", "-w", "train_step"],
         "rounds must be >= 6"),
        (["results/cpu", "0.4.30"], "is a path but '0.4.30' is not"),
        (["0.4.1", "0.4.2", "-r", "results/cpu"], "baseline '0.4.1' has no rows"),
        (["0.4.1", "0.4.2", "--threshold", "-1"], "threshold must be >= 0"),
    ],
)  # fmt: skip
def test_compare_refuses_bad_input_with_one_line_and_exit_2(args, message):
    result = runner.invoke(app, ["compare", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_compare_of_two_result_paths_with_the_same_records_is_unchanged(tmp_path):
    result = runner.invoke(app, ["compare", "results/cpu", "results/cpu"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "mode: sequential" in text and "slower" not in text and "steady_state" in text
    assert "results/cpu (candidate) vs results/cpu (baseline)" in " ".join(text.split())
    assert "warning: baseline and candidate are the same records" in text


@pytest.mark.slow
def test_compare_back_to_back_saves_each_case_and_names_its_design(tmp_path):
    args = ["compare", "--back-to-back", "current", "current", "-w", "train_step", "-s", "tiny",
            "-d", "float32", "--set-b", "size=tiny*1.5", "--rounds", "6", "--calls-per-block",
            "3", "--warmup-rounds", "1", "-o", str(tmp_path)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "mode: back to back (sequential)" in result.output
    (found,), problems = load_comparisons([tmp_path])
    assert problems == [] and found.mode == "back_to_back" and len(found.rounds) == 6
    assert found.candidate.params["size"] == "tiny*1.5" and found.baseline.params["size"] == "tiny"
    assert found.figures()["basis"].startswith("independent samples")
    with pytest.raises(ValueError, match="not paired"):
        found.figures(mode="interleaved")
