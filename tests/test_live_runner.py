"""The one live-comparison runner: the file after every pair, one way to stop, resuming.

The engine (:mod:`jaxbench.interleave.session`) runs for real; only its worker processes are
fakes that answer at once, so a pair costs nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from jaxbench.interleave import (
    LiveStopped,
    Schedule,
    Variant,
    WorkerDied,
    live_path,
    resume_live,
    run_live,
)
from jaxbench.store import load

TINY = {"size": "tiny", "dtype": "float32", "optimizer": "sgd"}
CASES = [("train_step", TINY), ("train_step", TINY | {"size": "small"})]
A, B = Variant("a", "py-a"), Variant("b", "py-b")


class Workers:
    """Fake worker processes; the pair numbered ``stop_at`` (from 0) raises ``stop``."""

    def __init__(self, stop_at: int | None = None, stop: BaseException | None = None) -> None:
        self.started = itertools.count()
        self.stop_at, self.stop = stop_at, stop

    def __call__(self, python, backend, timeout_s=None):
        n = next(self.started)
        return FakeWorker(python, n // 2 == self.stop_at and self.stop, n)


class FakeWorker:
    """Answers at once; ``py-a`` takes 1 ms a call, any other 1.1 ms, each with 1 % scatter."""

    def __init__(self, python, stop, seed):
        self.python, self.stop, self.rng = python, stop, np.random.default_rng(seed)

    def send(self, **request):
        self.pending = request

    def answer(self):
        return self.request(**self.pending)

    def request(self, op, **kw):
        if self.stop:
            raise self.stop
        if op == "trace":
            return {"bytes": 1, "ops": [{"name": "fusion", "seconds": 1e-3}]}
        if op == "prepare":
            env = {"jax": "0.0", "jaxlib": "0.0", "backend": "cpu", "device_kind": "cpu"}
            return {"env": env, "benchmark": kw["workload"], "compile_s": 0.1, "flops": 1.0,
                    "programs_hash": "h", "gate_mode": "run"}  # fmt: skip
        latency = 1e-3 if self.python == "py-a" else 1.1e-3
        samples = latency * np.exp(0.01 * self.rng.standard_normal(kw["calls"]))
        return {"samples_s": list(samples), "compiles_timed": 0, "traces_timed": 0}

    def quit(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _use(monkeypatch, workers: Workers) -> None:
    monkeypatch.setattr("jaxbench.interleave.session.Worker", workers)


SCHEDULE = Schedule(pairs=4, max_pairs=4, rounds=6, calls_per_block=2, warmup_rounds=0)


def _pairs_on_disk(path):
    return [len(c.pairs) for c in load(path).models("live-comparison")]


@pytest.mark.parametrize("mode", ["interleaved", "back_to_back"])
def test_the_file_holds_every_finished_pair_after_each_pair(monkeypatch, tmp_path, mode):
    _use(monkeypatch, Workers())
    path = live_path(tmp_path)
    on_disk = []
    run = run_live(A, B, CASES, path, "cpu", SCHEDULE, mode,
                   on_saved=lambda n, p: on_disk.append((n, _pairs_on_disk(p))))  # fmt: skip
    assert on_disk == [(n, [n, n]) for n in (1, 2, 3, 4)]
    assert path.name.startswith("interleave-") and path.suffix == ".jsonl"
    assert run.pairs == 4 and [c.mode for c in run.comparisons] == [mode, mode]
    saved = load(path).models("live-comparison")
    assert [c.model_dump() for c in saved] == [c.model_dump() for c in run.comparisons]


@pytest.mark.parametrize(
    ("stop", "code", "start"),
    [(KeyboardInterrupt(), 130, "interrupted after 2 process pair(s); "),
     (WorkerDied("worker (py-b) ended: exit code 1"), 1, "worker (py-b) ended: exit code 1; ")],
)  # fmt: skip
def test_a_run_stopped_after_k_pairs_keeps_k_pairs_and_says_so_in_one_line(
    monkeypatch, tmp_path, stop, code, start
):
    _use(monkeypatch, Workers(stop_at=2, stop=stop))
    path = live_path(tmp_path)
    with pytest.raises(LiveStopped) as caught:
        run_live(A, B, CASES, path, "cpu", SCHEDULE)
    stopped = caught.value
    assert (stopped.path, stopped.pairs, stopped.exit_code) == (path, 2, code)
    assert stopped.line() == f"{start}pairs finished before it are in {path}"
    assert "\n" not in stopped.line()
    assert _pairs_on_disk(path) == [2, 2]


def test_a_run_stopped_before_its_first_pair_says_nothing_was_saved(monkeypatch, tmp_path):
    _use(monkeypatch, Workers(stop_at=0, stop=KeyboardInterrupt()))
    path = live_path(tmp_path)
    with pytest.raises(LiveStopped, match="nothing was saved") as caught:
        run_live(A, B, CASES, path, "cpu", SCHEDULE)
    assert caught.value.path is None and caught.value.pairs == 0 and not path.exists()


@pytest.mark.parametrize("mode", ["interleaved", "back_to_back"])
def test_a_file_cut_short_is_completed_in_place_with_its_own_design(monkeypatch, tmp_path, mode):
    _use(monkeypatch, Workers(stop_at=1, stop=KeyboardInterrupt()))
    path = live_path(tmp_path)
    traced = dataclasses.replace(SCHEDULE, trace_calls=2) if mode == "interleaved" else SCHEDULE
    with pytest.raises(LiveStopped):
        run_live(A, B, CASES, path, "cpu", traced, mode)
    before = load(path).models("live-comparison")
    _use(monkeypatch, Workers())
    counts = []
    run = resume_live(path, before, A, B, "cpu", on_saved=lambda n, p: counts.append(n))
    assert counts == [2, 3, 4] and run.pairs == 4
    after = load(path).models("live-comparison")
    assert _pairs_on_disk(path) == [4, 4]
    assert [p.index for p in after[0].pairs] == [0, 1, 2, 3]
    assert after[0].pairs[0] == before[0].pairs[0]  # the first pair, as measured
    assert {len(p.rounds) for p in after[0].pairs} == {SCHEDULE.rounds}
    # the resumed pairs keep the file's design: back to back runs A then B, whole
    orders = {r.order for p in after[0].pairs[1:] for r in p.rounds}
    assert orders == ({"AB"} if mode == "back_to_back" else {"AB", "BA"})
    assert {c.mode for c in after} == {mode}
    # and its tracing: the resumed pairs were traced as the first was (they were not, before)
    want = {2} if mode == "interleaved" else {None}
    assert {p.baseline.trace.calls if p.baseline.trace else None for p in after[0].pairs} == want
    with pytest.raises(ValueError, match="no comparison was cut short"):
        resume_live(path, after, A, B, "cpu")


def test_the_bisect_judge_saves_each_comparison_through_the_runner(monkeypatch, tmp_path):
    from jaxbench.bisect.live import LiveJudge

    _use(monkeypatch, Workers())
    pythons = {"0.1": "py-a", "0.2": "py-b"}
    judge = LiveJudge(pythons.get, {"tiny": CASES[0]}, "cpu", SCHEDULE, 0.02, 0.05, tmp_path)
    got = judge("0.1", "0.2", ["tiny"])
    (path,) = judge.paths
    assert got["tiny"].verdict == "slower" and _pairs_on_disk(path) == [SCHEDULE.pairs]
    _use(monkeypatch, Workers(stop_at=1, stop=KeyboardInterrupt()))
    with pytest.raises(LiveStopped) as caught:
        judge("0.2", "0.1", ["tiny"])
    assert judge.paths == [path] and _pairs_on_disk(caught.value.path) == [1]


def test_a_calibration_saves_its_finished_comparisons_and_stops_the_same_way(monkeypatch, tmp_path):
    from jaxbench.calibrate import load_calibrations, run_calibration

    s = Schedule(pairs=3, max_pairs=3, rounds=6, calls_per_block=2, warmup_rounds=0)
    _use(monkeypatch, Workers())
    on_disk = []

    def seen(index, pairs):
        found = load_calibrations([tmp_path])[0]
        on_disk.append((index, pairs, [len(c.comparisons) for c in found]))

    record, path = run_calibration("train_step", TINY, tmp_path, 2, s, "cpu", on_pair=seen,
                                   python="py-a")  # fmt: skip
    assert on_disk == [(0, 1, []), (0, 2, []), (0, 3, [1]), (1, 1, [1]), (1, 2, [1]),
                       (1, 3, [2])]  # fmt: skip
    assert path == tmp_path / record.path_name and record.complete
    assert load_calibrations([path])[0] == [record]
    assert all(len(c.pair_seconds) == 3 for c in record.comparisons)
    # Ctrl-C in the second comparison's second pair: the first comparison is kept.
    _use(monkeypatch, Workers(stop_at=4, stop=KeyboardInterrupt()))
    with pytest.raises(LiveStopped) as caught:
        run_calibration("train_step", TINY, tmp_path / "cut", 2, s, "cpu", python="py-a")
    stopped = caught.value
    (kept,) = load_calibrations([tmp_path / "cut"])[0]
    assert (stopped.path, stopped.pairs, stopped.exit_code) == (tmp_path / "cut" / kept.path_name,
                                                                3, 130)  # fmt: skip
    assert len(kept.comparisons) == 1 and not kept.complete


@pytest.mark.parametrize(
    ("command", "stop", "code", "line"),
    [(["compare", "--interleave", "current", "current", "--set-b", "size=tiny*1.5"],
      KeyboardInterrupt(), 130, "error: interrupted after 2 process pair(s); pairs finished "
      "before it are in {path}"),
     (["compare", "--back-to-back", "current", "current"], WorkerDied("worker ended: exit 1"),
      1, "error: worker ended: exit 1; pairs finished before it are in {path}"),
     (["calibrate", "--comparisons", "2", "--pairs", "2"], KeyboardInterrupt(), 130,
      "error: interrupted after 2 process pair(s); pairs finished before it are in {path}; a "
      "comparison cut short is not kept (complete: false)")],
)  # fmt: skip
def test_each_command_turns_a_stopped_run_into_its_one_line_and_exit_code(
    monkeypatch, tmp_path, command, stop, code, line
):
    from typer.testing import CliRunner

    from jaxbench.cli import app

    _use(monkeypatch, Workers(stop_at=2, stop=stop))
    args = [*command, "-w", "train_step", "-s", "tiny", "-d", "float32", "--optimizer", "sgd",
            "--rounds", "6", "--calls-per-block", "2", "-o", str(tmp_path)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    (path,) = tmp_path.glob("*-*.json*")
    assert result.exit_code == code, result.output
    assert result.stderr.splitlines()[-1] == line.format(path=path)


def test_compare_interleave_run_again_completes_the_first_look_it_cut_short(monkeypatch, tmp_path):
    """Before, the same command measured afresh into a new file, and the pairs of the file cut
    short were never joined; a comparison of other sides is not touched."""
    from typer.testing import CliRunner

    from jaxbench.cli import app

    args = ["compare", "--interleave", "current", "current", "-w", "train_step", "-s", "tiny",
            "-d", "float32", "--optimizer", "sgd", "--pairs", "3", "--max-pairs", "3",
            "--rounds", "6", "--calls-per-block", "2", "-o", str(tmp_path)]  # fmt: skip
    other = [*args[:4], "--set-b", "donate=false", *args[4:]]  # other sides: not resumed
    _use(monkeypatch, Workers(stop_at=1, stop=KeyboardInterrupt()))
    assert CliRunner().invoke(app, other).exit_code == 130
    (theirs,) = tmp_path.glob("interleave-*.jsonl")
    _use(monkeypatch, Workers(stop_at=1, stop=KeyboardInterrupt()))
    assert CliRunner().invoke(app, args).exit_code == 130
    (cut,) = set(tmp_path.glob("interleave-*.jsonl")) - {theirs}
    assert _pairs_on_disk(cut) == [1]
    _use(monkeypatch, Workers())
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"completing the first look cut short in {cut}" in " ".join(result.stderr.split())
    assert set(tmp_path.glob("interleave-*.jsonl")) == {theirs, cut}  # no new file
    assert _pairs_on_disk(cut) == [3] and _pairs_on_disk(theirs) == [1]


def test_a_comparison_cut_short_says_so_and_its_early_interval_reads_short(monkeypatch, tmp_path):
    """Its advice was "the estimate sits at the threshold: more pairs will not settle it", and
    the report printed the interval's end as a number of 300 digits."""
    from jaxbench.analysis import markdown as md
    from jaxbench.interleave import estimate

    _use(monkeypatch, Workers(stop_at=2, stop=KeyboardInterrupt()))
    with pytest.raises(LiveStopped):
        run_live(A, B, CASES, live_path(tmp_path), "cpu", SCHEDULE)
    (cut, _) = load(tmp_path).models("live-comparison")
    est = estimate(cut)
    assert "stopped after 2 of the 4 pairs of its first look" in est.advice, est.advice
    assert "will not settle it" not in est.advice
    assert "the same command completes it" in est.advice
    assert md.ratio_ci(1.013, math.exp(-700), math.exp(700)) == "1.013 [9.86e-305, 1.01e+304]"
    assert md.ratio_ci(1.013, 0.98, 1.05) == "1.013 [0.980, 1.050]"
