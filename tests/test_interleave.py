"""Live comparisons: per-pair statistics, the worker protocol, pairs of processes, files, CLI."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from jaxbench.analysis import load_results
from jaxbench.analysis.live import comparisons_frame
from jaxbench.cli import app
from jaxbench.inference.paired import pair_log_ratio, round_ratios
from jaxbench.interleave import (
    Schedule,
    Variant,
    WorkerError,
    estimate,
    run_pairs,
)
from jaxbench.interleave.session import interleave_case, live_worker_environ
from jaxbench.interleave.worker import serve
from jaxbench.store import load, write_jsonl
from jaxbench.store.live import CaseComparison, PairRun, Round, now
from jaxbench.workloads.sizes import SIZES, get_size

TINY = {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True}


def drifting_rounds(shift: float, rounds: int = 30, seed: int = 0):
    """Blocks whose speed drifts by up to 30 % between rounds, alike for both sides."""
    rng = np.random.default_rng(seed)
    drift = 1 + 0.3 * rng.random(rounds)
    base = [list(1e-3 * d * np.exp(0.01 * rng.standard_normal(10))) for d in drift]
    cand = [list(shift * 1e-3 * d * np.exp(0.01 * rng.standard_normal(10))) for d in drift]
    return base, cand


def test_a_pair_ratio_finds_a_known_10_percent_shift_despite_drift():
    base, cand = drifting_rounds(1.10)
    assert np.exp(pair_log_ratio(base, cand)) == pytest.approx(1.10, rel=0.01)
    base, cand = drifting_rounds(1.0)
    assert np.exp(pair_log_ratio(base, cand)) == pytest.approx(1.0, abs=0.01)


def test_pair_statistics_refuse_mismatched_and_empty_blocks():
    with pytest.raises(ValueError, match="3 rounds, candidate 2"):
        round_ratios([[1.0]] * 3, [[1.0]] * 2)
    with pytest.raises(ValueError, match="round 1"):
        round_ratios([[1.0], []], [[1.0], [1.0]])
    with pytest.raises(ValueError, match="without timed rounds"):
        pair_log_ratio([], [])


def _comparison(pair_ratios, rounds=30, mode="interleaved", **schedule):
    """A finished comparison whose pairs have these ratios (candidate / baseline)."""
    rng = np.random.default_rng(0)
    c = CaseComparison.start(mode, "train_step", TINY, Schedule(**schedule))
    for i, ratio in enumerate(pair_ratios):
        rs = [Round(order="AB", baseline_s=list(1e-3 * np.exp(0.01 * rng.standard_normal(5))),
                    candidate_s=list(ratio * 1e-3 * np.exp(0.01 * rng.standard_normal(5))))
              for _ in range(rounds)]  # fmt: skip
        c = c.with_pair(PairRun(index=i, rounds=rs, started_at=now()))
    return c


def test_the_interval_is_over_pairs_not_rounds():
    # Every pair is very precise on its own, but the pairs disagree by several percent: the
    # rounds of one pair would call it; the pairs cannot.
    c = _comparison([1.00, 1.06, 0.97, 1.04, 0.99, 1.05])
    e = estimate(c)
    assert e.units == "6 pairs" and e.verdict == "inconclusive"
    assert e.ci_low < 1.0 < e.ci_high
    assert "more process pairs" in e.advice
    # One look at 4 (5) pairs; the default schedule's look after 4 of 30 pairs spends almost
    # nothing, so there the same pairs are not yet enough.
    assert estimate(_comparison([1.20, 1.21, 1.19, 1.20], pairs=4, max_pairs=4)).verdict == "slower"
    assert estimate(_comparison([1.20, 1.21, 1.19, 1.20])).verdict == "inconclusive"
    assert (
        estimate(_comparison([1.0, 1.001, 0.999, 1.0, 1.0], pairs=5, max_pairs=5)).verdict == "same"
    )


def test_one_pair_gives_no_interval():
    e = estimate(_comparison([1.3]))
    assert e.verdict == "inconclusive" and "no interval" in e.advice


def test_one_outlying_pair_is_named_in_the_advice_of_an_inconclusive_comparison():
    ratios = [1.0, 1.002, 0.998, 1.001, 0.999, 1.6, 1.0, 1.001]
    e = estimate(_comparison(ratios, pairs=8, max_pairs=8))
    assert e.verdict == "inconclusive"
    assert e.advice.startswith("pair 5 stands out: 1.6")
    assert "without it: same" in e.advice
    b2b = estimate(_comparison(ratios, mode="back_to_back", pairs=8, max_pairs=8))
    assert b2b.verdict == "inconclusive"
    assert b2b.advice.startswith("candidate process 5 (pair 5) stands out: 1.6")


def test_each_look_spends_its_share_of_alpha():
    pairs = [1.03, 1.05, 1.02, 1.04, 1.035, 1.045]
    one = estimate(_comparison(pairs, pairs=6, max_pairs=6), threshold=0.0)
    three = estimate(_comparison(pairs, pairs=6, max_pairs=16, pairs_step=5), threshold=0.0)
    assert three.ci_high - three.ci_low > one.ci_high - one.ci_low  # alpha/3 per look


def test_back_to_back_pairs_are_independent_processes():
    c = _comparison([1.2, 1.21, 1.19], mode="back_to_back", pairs=3, max_pairs=3)
    e = estimate(c)
    assert e.design == "independent" and e.units == "3+3 processes" and e.verdict == "slower"
    with pytest.raises(ValueError, match="not paired"):
        estimate(c, mode="interleaved")


def test_a_ratio_that_moves_part_way_through_a_pair_is_unstable():
    # The per-round ratio of one real session: 0.99 for 20 rounds, then 0.53.
    rng = np.random.default_rng(1)
    c = CaseComparison.start("interleaved", "train_step", TINY, Schedule())
    for i in range(6):
        ratios = [0.99] * 40 if i != 3 else [0.99] * 20 + [0.53] * 20
        rs = [
            Round(order="AB", baseline_s=[1e-3 * (1 + 0.01 * rng.random())],
                  candidate_s=[r * 1e-3 * (1 + 0.01 * rng.random())])
            for r in ratios
        ]  # fmt: skip
        c = c.with_pair(PairRun(index=i, rounds=rs, started_at=now()))
    e = estimate(c)
    assert e.verdict == "unstable" and "pair 4: per-round ratio moved" in e.advice  # index 3


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


def _prepare_in(gated=None, params=TINY):
    """One worker's ``prepare`` answer, served in this process."""
    request = {"op": "prepare", "workload": "train_step", "params": params, "backend": "cpu",
               "warmup": 1}  # fmt: skip
    if gated is not None:
        request["gated"] = gated
    answers = io.StringIO()
    serve(io.StringIO(json.dumps(request) + "\n"), answers)
    answer = json.loads(answers.getvalue())
    assert answer["ok"], answer
    return answer


def test_a_worker_skips_the_op_by_op_gate_only_for_a_program_already_gated():
    first = _prepare_in()
    digest = first["programs_hash"]
    assert first["gate_mode"] == "run" and "max_abs_err_loss" in first["gate"]
    assert first["compilation_cache_dir"] is None
    again = _prepare_in(gated=[digest, "0" * 64])
    assert again["gate_mode"] == "reused" and again["programs_hash"] == digest
    assert again["gate"]["reused"] == digest and "max_abs_err_loss" not in again["gate"]
    assert again["gate"]["finite_leaves"] > 0  # the cheap check still ran
    assert _prepare_in(gated=["0" * 64])["gate_mode"] == "run"
    # Other parameters compile another program: its hash differs, so it is gated in full.
    wider = _prepare_in(gated=[digest], params=TINY | {"size": "tiny*1.5"})
    assert wider["gate_mode"] == "run" and wider["programs_hash"] != digest


class FakeWorker:
    """Answers like a worker; records the order in which it was timed."""

    def __init__(self, name, log, latency, recompile_at=None):
        self.name, self.log, self.latency, self.recompile_at = name, log, latency, recompile_at
        self.blocks = 0

    def send(self, **request):
        self.log.append(f"{self.name} sent {request['op']}")
        self.pending = request

    def answer(self):
        self.log.append(f"{self.name} answered {self.pending['op']}")
        return self.request(**self.pending)

    def request(self, op, **kw):
        if op == "prepare":
            if kw["params"].get("size") == "broken":
                raise WorkerError("worker (py): ValueError: no such size")
            self.prepared = kw
            size = get_size(kw["params"]["size"])
            env = {"jax": "0.0", "jaxlib": "0.0", "backend": "cpu", "device_kind": "cpu"}
            digest = f"hash-of-{size.name}"
            mode = "reused" if digest in kw.get("gated", []) else "run"
            return {"env": env, "benchmark": "train_step", "compile_s": 0.1,
                    "flops": float(size.params_count), "programs_hash": digest,
                    "gate_mode": mode}  # fmt: skip
        self.log.append(self.name)
        self.blocks += 1
        recompiled = self.blocks == self.recompile_at
        return {"samples_s": [self.latency] * kw["calls"], "compiles_timed": int(recompiled),
                "traces_timed": 0, "noise": {"cpu_share": 1.0}}  # fmt: skip


def test_each_round_times_one_block_per_side_in_a_random_order():
    log: list[str] = []
    wa, wb = FakeWorker("A", log, 1e-3), FakeWorker("B", log, 1.2e-3)
    s = Schedule(rounds=20, calls_per_block=3, warmup_rounds=2)
    run = interleave_case(wa, wb, Variant("a", "py"), Variant("b", "py", {"size": "tiny*1.5"}),
                          "train_step", TINY, "cpu", s, np.random.default_rng(0), 4)  # fmt: skip
    log = [x for x in log if " " not in x]  # the blocks only
    pairs = [log[i : i + 2] for i in range(0, len(log), 2)]
    assert len(pairs) == 22 and all(sorted(p) == ["A", "B"] for p in pairs)
    assert {r.order for r in run.rounds} == {"AB", "BA"}
    assert [r.order for r in run.rounds] == ["".join(p) for p in pairs[2:]]  # warm-up dropped
    assert run.candidate.params["size"] == "tiny*1.5" and run.baseline.params["size"] == "tiny"
    assert run.index == 4 and run.rounds[0].candidate_noise == {"cpu_share": 1.0}
    log_ratio = pair_log_ratio([r.baseline_s for r in run.rounds],
                               [r.candidate_s for r in run.rounds])  # fmt: skip
    assert np.exp(log_ratio) == pytest.approx(1.2)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_both_sides_prepare_at_once_on_the_cpu_and_in_turn_elsewhere(backend):
    """On a GPU a compile autotunes kernels, so the other side must not run beside it."""
    from jaxbench.interleave.session import prepare_pair

    log: list[str] = []
    wa, wb = FakeWorker("A", log, 1e-3), FakeWorker("B", log, 1e-3)
    if backend != "cpu":  # a worker that is only asked, one request at a time
        wa.send = wb.send = None
    s = Schedule(rounds=6, warmup_rounds=0)
    ready = prepare_pair(wa, wb, "train_step", (TINY, TINY | {"size": "tiny*1.5"}), backend, s)
    assert [r["programs_hash"] for r in ready] == ["hash-of-tiny", "hash-of-tiny*1.5"]
    if backend == "cpu":
        assert log == ["A sent prepare", "B sent prepare", "A answered prepare",
                       "B answered prepare"]  # fmt: skip
    else:
        assert log == []  # request(): no send/answer split
    # A side that cannot prepare: the other side's answer is read all the same, then the error.
    log.clear()
    wa, wb = FakeWorker("A", log, 1e-3), FakeWorker("B", log, 1e-3)
    with pytest.raises(WorkerError, match="no such size"):
        prepare_pair(wa, wb, "train_step", (TINY | {"size": "broken"}, TINY), "cpu", s)
    assert log[-1] == "B answered prepare"


def test_later_pairs_send_each_side_the_programs_it_gated_and_record_the_reuse():
    log: list[str] = []
    a, b = Variant("a", "py"), Variant("b", "py", {"size": "tiny*1.5"})
    s, rng, gated = Schedule(rounds=6, warmup_rounds=0), np.random.default_rng(0), {}

    def pair(params, index):
        wa, wb = FakeWorker("A", log, 1e-3), FakeWorker("B", log, 1e-3)
        run = interleave_case(wa, wb, a, b, "train_step", params, "cpu", s, rng, index, gated)
        return run, wa.prepared, wb.prepared

    first, sent_a, sent_b = pair(TINY, 0)
    assert "gated" not in sent_a and "gated" not in sent_b  # the first pair always gates
    assert (first.baseline.gate, first.candidate.gate) == ("run", "run")
    second, sent_a, sent_b = pair(TINY, 1)
    assert sent_a["gated"] == ["hash-of-tiny"] and sent_b["gated"] == ["hash-of-tiny*1.5"]
    assert (second.baseline.gate, second.candidate.gate) == ("reused", "reused")
    assert second.baseline.programs_hash == "hash-of-tiny"
    # Another case (other parameters) has nothing gated yet on either side.
    other, sent_a, _ = pair(TINY | {"size": "small"}, 2)
    assert "gated" not in sent_a and other.baseline.gate == "run"


def test_a_compile_inside_a_timed_block_marks_the_case_recompiled_not_timed():
    log: list[str] = []
    wa, wb = FakeWorker("A", log, 1e-3), FakeWorker("B", log, 1e-3, recompile_at=4)
    run = interleave_case(wa, wb, Variant("a", "py"), Variant("b", "py"), "train_step", TINY,
                          "cpu", Schedule(rounds=10), np.random.default_rng(0))  # fmt: skip
    assert run.status == "recompiled" and "b:" in run.error and run.rounds == []
    c = CaseComparison.start("interleaved", "train_step", TINY, Schedule()).with_pair(run)
    assert c.status == "recompiled" and c.error.startswith("pair 1:")
    with pytest.raises(ValueError, match="no timed rounds"):
        estimate(c)


def test_pairs_are_added_while_a_case_is_inconclusive_up_to_the_cap(monkeypatch):
    # Case 0 is clearly slower after the first look; case 1 never settles (pairs disagree).
    spread = iter(np.random.default_rng(2).normal(0, 0.05, 100))
    calls = []

    def fake_pair(a, b, cases, backend, s, index, rng, gated):
        calls.append((index, [p["size"] for _, p in cases]))
        out = []
        for _, p in cases:
            ratio = 1.5 if p["size"] == "tiny" else float(np.exp(next(spread)))
            rs = [Round(order="AB", baseline_s=[1e-3], candidate_s=[ratio * 1e-3])] * 6
            out.append(PairRun(index=index, rounds=rs, started_at=now()))
        return out

    cases = [("train_step", TINY), ("train_step", TINY | {"size": "small"})]
    s = Schedule(pairs=3, max_pairs=8, pairs_step=2, rounds=6)
    saved = []
    monkeypatch.setattr("jaxbench.interleave.session._interleaved_pair", fake_pair)
    found = run_pairs(Variant("a", "py"), Variant("b", "py"), cases, "cpu", s, saved.append)
    assert s.looks == 4 and s.batches() == [3, 2, 2, 1]
    assert [len(c.pairs) for c in found] == [3, 8]
    assert [i for i, _ in calls] == list(range(8)) and calls[3][1] == ["small"]
    assert estimate(found[0]).verdict == "slower"
    assert len(saved) == 8 and found[0].schedule["looks"] == 4


@pytest.mark.slow
def test_live_interleaved_comparison_of_two_real_workers(tmp_path):
    py = sys.executable
    s = Schedule(pairs=2, max_pairs=2, rounds=6, calls_per_block=3, warmup_rounds=1,
                 warmup_calls=1)  # fmt: skip
    cases = [("train_step", TINY), ("train_step", TINY | {"dtype": "bfloat16"})]
    found = run_pairs(
        Variant("base", py), Variant("wide", py, {"size": "tiny*1.5"}), cases, "cpu", s
    )
    assert [c.status for c in found] == ["ok", "ok"]
    c = found[0]
    assert len(c.pairs) == 2 and all(len(p.rounds) == 6 for p in c.pairs)
    assert all(len(r.baseline_s) == 3 for p in c.pairs for r in p.rounds)
    pids = {p.baseline.env.get("process_id") for p in c.pairs}
    assert len(pids) == 2  # fresh processes for every pair
    # Two workers at once: each may take 45 % of a GPU's memory, not JAX's 75 % each.
    assert c.pairs[0].baseline.env["env_vars"]["XLA_CLIENT_MEM_FRACTION"] == "0.45"
    assert c.pairs[0].rounds[0].candidate_noise["cpu_share"] > 0
    assert c.baseline.jax and c.baseline.backend == "cpu"
    assert c.candidate.flops > 1.3 * c.baseline.flops  # the wider model really ran
    assert found[1].candidate.params == TINY | {"dtype": "bfloat16", "size": "tiny*1.5"}
    # The first pair gates every case in full; the second reuses that gate for the same
    # programs (the same hash), per side: the wider candidate compiled another program.
    first, second = c.pairs
    assert (first.baseline.gate, first.candidate.gate) == ("run", "run")
    assert (second.baseline.gate, second.candidate.gate) == ("reused", "reused")
    assert second.baseline.programs_hash == first.baseline.programs_hash
    assert second.candidate.programs_hash == first.candidate.programs_hash
    assert first.candidate.programs_hash != first.baseline.programs_hash
    assert first.baseline.compilation_cache_dir is None  # no cache shared between workers
    path = write_jsonl(tmp_path / "interleave-x.jsonl", found)
    (tmp_path / "interleave-bad.jsonl").write_text('{"mode": "interleaved"}\n')
    store = load([tmp_path], kinds={"live-comparison"})
    loaded, problems = store.models("live-comparison"), store.problems
    assert [c.model_dump() for c in loaded] == [c.model_dump() for c in found]
    assert [p.path for p in problems] == [str(tmp_path / "interleave-bad.jsonl")]
    assert "line 1" in problems[0].reason
    assert load_results([tmp_path])[1] == problems  # one bad-line policy for every kind
    frame = comparisons_frame(loaded)
    assert list(frame["pairs"]) == [2, 2] and list(frame["n_baseline"]) == [2, 2]
    assert path.exists()


@pytest.mark.slow
def test_a_side_that_cannot_prepare_is_recorded_as_failed():
    py = sys.executable
    found = run_pairs(
        Variant("a", py), Variant("b", py, {"dtype": "float64"}), [("train_step", TINY)], "cpu",
        Schedule(rounds=6),
    )  # fmt: skip
    assert found[0].status == "failed" and "float64" in found[0].error


def test_live_workers_get_a_share_of_gpu_memory_each_unless_one_is_set():
    both = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")
    assert [live_worker_environ({"A": "1"})[v] for v in both] == ["0.45", "0.45"]
    cache = {"JAX_COMPILATION_CACHE_DIR": "/c"}
    assert "JAX_COMPILATION_CACHE_DIR" not in live_worker_environ(cache)
    given = live_worker_environ({"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.3"})
    assert [given[v] for v in both] == ["0.3", "0.3"]


def test_a_worker_that_dies_is_an_error_with_its_exit():
    with pytest.raises(WorkerError, match="exited with code 1 during 'prepare', case train_step "):
        run_pairs(Variant("a", "/bin/false"), Variant("b", "/bin/false"),
                        [("train_step", TINY)], "cpu")  # fmt: skip


def test_a_killed_worker_is_named_by_its_signal_and_case(tmp_path):
    from jaxbench.interleave.session import Worker, WorkerDied

    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nkill -9 $$\n")
    python.chmod(0o755)
    with Worker(str(python), "cpu") as worker, pytest.raises(WorkerDied) as died:
        worker.request(op="prepare", workload="train_step", params={"size": "tiny"})
    assert "killed by SIGKILL during 'prepare', case train_step mesh=none size=tiny" in str(
        died.value
    )
    assert "exit code" not in str(died.value)


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interleave", "--back-to-back", "current", "current"], "exclude each other"),
        (["a", "b", "--set-b", "size=tiny"], "--set-a/--set-b apply to --interleave"),
        (["results/versions", "results/cpu", "-w", "loop", "--param", "trip=7"],
         "no record of the selected cases"),
        (["results/versions", "results/cpu", "-s", "huge"], "unknown size 'huge'"),
        (["a", "b", "--pairs", "0"], "--pairs: a live comparison's option"),
        (["a", "b", "-b", "gpu", "--seed", "3"], "--backend, --seed: a live comparison's option"),
        (["--interleave", "current", "current", "--set-b", "size"], "expected NAME=VALUE"),
        (["--interleave", "current", "current", "-w", "train_step", "--set-b", "k=3"],
         "train_step has no such parameter"),
        (["--interleave", "current", "current", "--set-b", "size=huge"], "unknown size 'huge'"),
        (["--interleave", "current", "/no/python", "-w", "train_step", "-s", "tiny"],
         "no such interpreter"),
        (["--interleave", "current", "current", "--rounds", "0", "-w", "train_step"],
         "--rounds must be >= 6"),
        (["--interleave", "current", "current", "--pairs", "4", "--max-pairs", "2"],
         "--max-pairs (2) must be >= --pairs (4)"),
        (["results/cpu", "0.4.30"], "is a path but '0.4.30' is not"),
        (["0.4.1", "0.4.2", "-r", "results/cpu"], "baseline '0.4.1' has no rows"),
        (["0.4.1", "0.4.2", "--threshold", "-1"], "--threshold: threshold must be a number"),
        (["0.4.1", "0.4.2", "--alpha", "2"], "--alpha: alpha must be in (0, 1)"),
    ],
)  # fmt: skip
def test_compare_refuses_bad_input_with_one_line_and_exit_2(args, message):
    result = runner.invoke(app, ["compare", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_compare_of_two_result_paths_with_the_same_records_is_never_slower_or_faster(tmp_path):
    result = runner.invoke(app, ["compare", "results/cpu", "results/cpu"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "mode: sequential" in text and "steady state" in text
    assert "slower" not in text.replace("0 slower", "") and "faster" not in text
    assert "1+1" in text and "no interval" in text  # one run a side: one process a side
    assert "results/cpu (candidate) vs results/cpu (baseline)" in text
    assert "warning: baseline and candidate are the same records" in text
    spelled = runner.invoke(app, ["compare", "results/cpu", "./results/cpu/"])  # one folder
    assert "warning: baseline and candidate are the same records" in spelled.output
    assert "(baseline)" in spelled.output and "(candidate)" in spelled.output  # kept apart
    folder = Path("results/versions/0.11.2")
    part = sorted(folder.glob("*.jsonl"))[0]
    overlap = runner.invoke(app, ["compare", str(folder), str(part)])
    assert f"warning: the sides share 1 file(s) (e.g. {part.resolve()})" in " ".join(
        overlap.output.split()
    )


def test_compare_of_a_version_with_itself_warns_that_it_is_an_a_a_check():
    result = runner.invoke(app, ["compare", "0.12.0.1", "0.12.0.1", "-r", "results/versions"])
    text = " ".join(result.output.split())
    assert "warning: baseline and candidate are the same records (JAX 0.12.0.1)" in text
    (counts,) = [ln for ln in result.output.splitlines() if "verdicts:" in ln]
    assert result.exit_code == 0 and "slower" not in counts and "faster" not in counts


def test_a_recorded_compare_takes_the_selection_options_of_a_live_one(tmp_path):
    out = tmp_path / "v.json"
    args = ["compare", "0.11.2", "0.12.0.1", "-r", "results/versions", "--json", str(out)]
    runner.invoke(app, args)
    everything = {c["case"] for c in json.loads(out.read_text())["cases"]}
    result = runner.invoke(app, [*args, "-w", "train_step", "-s", "tiny"])
    assert result.exit_code in (0, 1), result.output
    chosen = {c["case"] for c in json.loads(out.read_text())["cases"]}
    assert chosen and chosen < everything
    assert all(c.startswith("train_step ") and "size=tiny" in c for c in chosen)


def test_compare_of_sets_with_no_common_case_fails_with_one_line(tmp_path):
    lines = (tmp_path / "a.jsonl"), (tmp_path / "b.jsonl")
    src = Path("results/cpu/20261130T175000Z-8e5564b3.jsonl").read_text().splitlines()
    lines[0].write_text(src[0] + "\n")
    lines[1].write_text(src[2] + "\n")
    result = runner.invoke(app, ["compare", str(lines[0]), str(lines[1])])
    assert result.exit_code == 2
    assert "no common case" in " ".join(result.output.split())


@pytest.mark.slow
def test_compare_back_to_back_saves_each_pair_and_names_its_design(tmp_path):
    args = ["compare", "--back-to-back", "current", "current", "-w", "train_step", "-s", "tiny",
            "-d", "float32", "--set-b", "size=tiny*1.5", "--pairs", "2", "--max-pairs", "2",
            "--rounds", "6", "--calls-per-block", "3", "--warmup-rounds", "1", "-o",
            str(tmp_path)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output  # 1: the wider side is slower
    assert "mode: back to back (sequential)" in result.output
    title = " ".join(result.output.split())
    assert "intervals over processes (each side's apart)" in title and "process pairs" not in title
    store = load([tmp_path], kinds={"live-comparison"})
    (found,), problems = store.models("live-comparison"), store.problems
    assert problems == [] and found.mode == "back_to_back" and len(found.pairs) == 2
    assert found.candidate.params["size"] == "tiny*1.5" and found.baseline.params["size"] == "tiny"
    assert estimate(found).units == "2+2 processes"
    assert (result.exit_code == 1) == (estimate(found).verdict == "slower")


def test_a_recorded_compare_admits_the_recorded_cases_the_options_name_not_a_grid(tmp_path):
    """results/versions holds forward mode at K 1, 8 and 64, the quick grid has K 1 and 64: with
    `-w forward` every recorded K is compared, and the scaling exponents in K stay (they went
    with K 8). A parameter given is held to its values; `--full` changes nothing."""
    base = ["compare", "0.11.2", "0.12.0.1", "-r", "results/versions"]

    def scaling(result):
        return [x for x in result.output.splitlines() if x.startswith("scaling: forward/")]

    def cases(*extra):
        out = tmp_path / "verdicts.json"
        runner.invoke(app, [*base, *extra, "--json", str(out)])
        return {c["case"] for c in json.loads(out.read_text())["cases"]}

    every, forward = runner.invoke(app, base), runner.invoke(app, [*base, "-w", "forward"])
    assert scaling(forward) and scaling(forward) == scaling(every)
    assert {re.search(r"k=(\d+)", c)[1] for c in cases("-w", "forward")} == {"1", "8", "64"}
    k8 = cases("-w", "forward", "-k", "8")
    assert k8 and all(c.startswith("forward/") and " k=8 " in c for c in k8)
    assert not scaling(runner.invoke(app, [*base, "-w", "forward", "-k", "8"]))  # one K: no fit
    assert cases("-w", "loop") == cases("-w", "loop", "--full") != set()
