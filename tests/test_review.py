"""``jaxbench review``: screen, confirm, explain, report; resumable; simulated at the process level.

The two JAX versions are simulated: each ``jaxbench run`` process of a side writes records whose
calls scatter around that process's own offset (lognormal, :data:`PROCESS_SD`: the unit is the
process), and each live pair draws its own offset too. The known truth: one case is
:data:`SLOWDOWN` times slower under the candidate, with a program that gained a ``tanh``; the
other is unchanged, with the same program.
"""

from __future__ import annotations

import itertools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from typer.testing import CliRunner

from jaxbench.cases import select_cases
from jaxbench.cli import app
from jaxbench.measure.harness import CompileTarget, compile_targets
from jaxbench.store import Appender, PairRun, Record, Round, SideInfo, save_programs

VERSIONS = ("0.11.2", "0.12.0.1")
SELECT = ["-w", "train_step", "-s", "tiny", "-s", "small", "-d", "float32", "--optimizer", "sgd"]
#: The selection as the review passes it on to ``jaxbench run`` (long option names).
RUN_SELECT = ["--workload", "train_step", "--size", "tiny", "--size", "small", "--dtype",
              "float32", "--optimizer", "sgd"]  # fmt: skip
CASES = select_cases(["train_step"], overrides={"size": ["tiny", "small"], "dtype": ["float32"],
                                                "optimizer": ["sgd"]})  # fmt: skip
SLOW = CASES[1].label  # the small train step
SLOWDOWN = 1.3
PROCESS_SD = 0.002
CALL_SD = 0.01


def _programs(fn):
    x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
    return compile_targets([CompileTarget("train_step", object(), jax.jit(fn), (x, w))]).programs


PLAIN = _programs(lambda x, w: x @ w)
TANH = _programs(lambda x, w: jnp.tanh(x) @ w)


def _truth(label: str, version: str) -> tuple[float, list[dict]]:
    """The case's true median latency (seconds) and its programs under ``version``."""
    slow = label == SLOW and version == VERSIONS[1]
    return (1e-3 * SLOWDOWN if slow else 1e-3), (TANH if slow else PLAIN)


class Simulation:
    """Fakes of the processes a review starts, counting what was started."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(7)
        self.runs: list[str] = []
        self.live: list[list[tuple[str, int]]] = []
        self.interrupt_after: int | None = None
        self.process = itertools.count()
        self.screen_sd = PROCESS_SD  # spread of the recorded processes' offsets
        self.fails: set[tuple[str, str]] = set()  # (version, case label) whose records fail
        self.fail_status = "failed"  # the status those records get
        #: Case label -> the candidate's compile time over the baseline's (each process's
        #: compile time then scatters by 1 %; else it is 0.2 s in every process).
        self.compile_slowdown: dict[str, float] = {}

    def run_process(self, side, run_args, log):
        assert run_args[: len(RUN_SELECT)] == RUN_SELECT and "-b" in run_args
        assert "--record-refused" in run_args  # a case one side's JAX refuses: a failed record
        self.runs.append(side.name)
        n = next(self.process)
        side.folder.mkdir(parents=True, exist_ok=True)
        with Appender(side.folder / f"run-{n}.jsonl") as out:
            for case in CASES:
                if (side.name, case.label) in self.fails:
                    compiled = {"compile_s": 0.2} if self.fail_status == "recompiled" else {}
                    out.write(Record(run_id=f"run-{n}", benchmark="train_step", **compiled,
                                     params=dict(case.params), status=self.fail_status,
                                     error="GateFailure: loss not finite",
                                     env={"jax": side.name, "process_id": f"p{n}"}))  # fmt: skip
                    continue
                median, programs = _truth(case.label, side.name)
                offset = median * math.exp(self.screen_sd * self.rng.standard_normal())
                samples = offset * self._calls(60)
                compile_s = 0.2
                if self.compile_slowdown:
                    slower = side.name == VERSIONS[1]
                    compile_s *= self.compile_slowdown.get(case.label, 1.0) if slower else 1.0
                    compile_s *= math.exp(0.01 * self.rng.standard_normal())
                out.write(Record(
                    run_id=f"run-{n}", benchmark="train_step", params=dict(case.params),
                    status="ok", samples_s=list(samples), compile_s=compile_s,
                    programs=save_programs(side.folder, programs),
                    env={"jax": side.name, "jaxlib": side.name, "backend": "cpu",
                         "device_kind": "cpu", "process_id": f"p{n}",
                         "timing": {"budget_s": float(run_args[run_args.index("--budget") + 1])}},
                ))  # fmt: skip
        return 0, 0.1

    def _calls(self, n: int) -> np.ndarray:
        return np.exp(CALL_SD * self.rng.standard_normal(n))

    def run_pairs(self, a, b, cases, backend, schedule, on_pair, threshold, alpha,
                  strict=False, mode="interleaved"):  # fmt: skip
        """Pairs of the simulated versions, saved after each; Ctrl-C after ``interrupt_after``."""
        from jaxbench.store import CaseComparison

        self.live.append([(workload, schedule.pairs) for workload, _ in cases])
        found = []
        for workload, params in cases:
            c = CaseComparison.start("interleaved", workload, params, schedule)
            c.baseline, c.candidate = (self._side(v, params) for v in (a, b))
            found.append(c)
        for i in range(schedule.pairs):
            for n, c in enumerate(found):
                label = next(x.label for x in CASES if dict(x.params) == c.params)
                (base, _), (cand, _) = _truth(label, a.label), _truth(label, b.label)
                shift = math.exp(PROCESS_SD * self.rng.standard_normal())
                rounds = [Round(order="AB", baseline_s=list(base * self._calls(10)),
                                candidate_s=list(cand * shift * self._calls(10)))
                          for _ in range(schedule.rounds)]  # fmt: skip
                pair = PairRun(index=i, rounds=rounds, baseline=c.baseline,
                               candidate=c.candidate, started_at="2026-12-02")  # fmt: skip
                found[n] = c.with_pair(pair)
            on_pair(found)
            if self.interrupt_after == i + 1:
                self.interrupt_after = None
                raise KeyboardInterrupt
        return found

    @staticmethod
    def _side(variant, params):
        return SideInfo(label=variant.label, python=variant.python, params=params,
                        benchmark="train_step", jax=variant.label, jaxlib=variant.label,
                        backend="cpu", device_kind="cpu", compile_s=0.2, flops=None,
                        env={})  # fmt: skip


@pytest.fixture
def simulated(monkeypatch):
    sim = Simulation()
    monkeypatch.setattr("jaxbench.cli.review.pythons_for",
                        lambda sides, envs, **k: [f"py-{spec}" for _, spec in sides])  # fmt: skip
    monkeypatch.setattr("jaxbench.cli.review.jax_version", lambda python: python[3:])
    monkeypatch.setattr("jaxbench.upgrade.screen.run_process", sim.run_process)
    monkeypatch.setattr("jaxbench.interleave.runner.run_pairs", sim.run_pairs)
    return sim


def _review(out, *extra):
    where = ["-o", str(out)] if out is not None else []
    return CliRunner().invoke(app, ["review", *VERSIONS, *SELECT, "--no-drift", "--processes",
                                    "3", "--pairs", "4", "--max-pairs", "4", "--rounds", "8",
                                    *where, *extra])  # fmt: skip


def test_the_default_folder_is_review_base_cand_outside_the_committed_results(
    simulated, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    result = _review(None)
    assert result.exit_code in (0, 1), result.output
    assert (tmp_path / "review" / "-".join(VERSIONS) / "report" / "report.md").is_file()
    assert not (tmp_path / "results").exists()


def test_a_review_screens_confirms_only_what_is_open_and_explains_the_change(simulated, tmp_path):
    result = _review(tmp_path / "review")
    assert result.exit_code == 1, result.output  # a case is slower
    assert simulated.runs == ["0.11.2", "0.12.0.1"] * 3  # the sides in turn
    assert simulated.live == [[("train_step", 4)]]  # only the slower case went live
    rows = result.output.split("┡")[1]
    tiny, small = rows.split("│ train_step donate")[1:3]  # selection order: tiny, small
    assert "same" in tiny and "│ -" in tiny and "slower" not in tiny  # settled by the screen
    assert "slower 1.297 [1.288, 1.305]" in small and "slower 1.302 [1.296, 1.309]" in small
    assert "same 1.000 [1.000, 1.000]" in small  # compile time, recorded
    (explained,) = [x for x in result.output.splitlines() if x.startswith("  train_step: ")]
    assert "optimized HLO differ" in explained
    report = (tmp_path / "review" / "report" / "report.md").read_text()
    answer = report.split("## The review's answer", 1)[1].split("\n## ", 1)[0]
    assert report.index("## The review's answer") < report.index("## Regressions")
    row = next(line for line in answer.splitlines() if "size=small" in line)
    assert "| slower " in row and "optimized HLO differ" in row
    section = report.split("## Explanations", 1)[1]
    assert f"### {SLOW}: 0.11.2 -> 0.12.0.1, slower (recorded steady state, live)" in section
    assert "op:tanh: 0 -> 1 (+1)" in section


def test_review_json_holds_the_final_verdict_per_case_and_the_exit_status(simulated, tmp_path):
    out = tmp_path / "verdicts.json"
    summary = tmp_path / "summary.md"
    result = _review(tmp_path / "review", "--json", str(out), "--markdown", str(summary))
    assert result.exit_code == 1, result.output
    text = summary.read_text()
    assert text.startswith(f"## jaxbench review: JAX {VERSIONS[0]} -> {VERSIONS[1]}\n")
    assert "**Verdicts:** " in text and "1 slower" in text and "1 same" in text
    assert ("Exit status 1: a case is slower (steady state or compile time), failed on the "
            "candidate, or its outputs drifted.") in text  # fmt: skip
    assert "report.md" in text
    written = json.loads(out.read_text())
    assert (written["command"], written["exit_status"], written["baseline"]) == (
        "review", 1, VERSIONS[0])  # fmt: skip
    assert {c["case"]: c["verdict"] for c in written["cases"]} == {CASES[0].label: "same",
                                                                  SLOW: "slower"}  # fmt: skip


def test_a_case_slower_in_compile_time_alone_exits_1_and_is_explained(
    simulated, tmp_path, monkeypatch
):
    """A 2.8x compile time with the steady state unchanged: `compare` exits 1, so must review."""
    monkeypatch.setitem(globals(), "SLOWDOWN", 1.0)
    simulated.compile_slowdown = {CASES[0].label: 2.8}
    out = tmp_path / "verdicts.json"
    result = _review(tmp_path / "review", "--json", str(out))
    assert result.exit_code == 1, result.output
    cases = {c["case"]: c for c in json.loads(out.read_text())["cases"]}
    slow, other = cases[CASES[0].label], cases[SLOW]
    assert slow["verdict"] != "slower" and slow["compile_verdict"] == "slower"
    assert slow["explanation"] and slow["explanation"][0].startswith("compile time slower: ")
    assert other["compile_verdict"] != "slower" and not other["explanation"]
    assert f"{CASES[0].label} ({slow['verdict']}):\n  compile time slower: " in result.output


def test_fail_on_undecided_exits_3_when_no_case_is_slower_but_one_is_undecided(
    simulated, tmp_path, monkeypatch
):
    """No true change, and processes too noisy (30 %) to show equivalence within 2 %."""
    monkeypatch.setitem(globals(), "SLOWDOWN", 1.0)
    monkeypatch.setitem(globals(), "PROCESS_SD", 0.3)
    simulated.screen_sd = 0.3
    plain = _review(tmp_path / "plain")
    assert plain.exit_code == 0, plain.output
    summary = tmp_path / "summary.md"
    gated = _review(tmp_path / "gated", "--fail-on-undecided", "--markdown", str(summary))
    assert gated.exit_code == 3, gated.output
    assert "slower" not in summary.read_text().split("**Verdicts:**")[1].split("\n")[0]
    assert ("Exit status 3: no case is slower, but one is undecided (--fail-on-undecided)."
            in summary.read_text())  # fmt: skip


def _answered(monkeypatch) -> list:
    """The answers the terminal prints, as :func:`jaxbench.cli.review._print` gets them."""
    import jaxbench.cli.review as review_cli

    printed = []
    real = review_cli._print
    monkeypatch.setattr(review_cli, "_print", lambda found: (printed.append(found), real(found)))
    return printed


def _header(report: str) -> str:
    return report.split("\n## ", 1)[0]


@pytest.mark.parametrize("screen_sd", [PROCESS_SD, 0.3])
def test_the_report_leads_with_the_terminals_answer_per_case(
    simulated, monkeypatch, tmp_path, screen_sd
):
    """The header counts the final verdicts; the recorded screen's counts come later, labelled.

    With a wide spread between recorded processes the screen calls the slow case
    ``inconclusive``; the live pairs call it ``slower``, and so do the terminal and the header.
    """
    from jaxbench.inference.verdicts import VERDICTS

    simulated.screen_sd = screen_sd
    printed = _answered(monkeypatch)
    result = _review(tmp_path / "review")
    assert result.exit_code == 1, result.output
    (found,) = printed
    final = {a.case: a.verdict for a in found}
    assert final == {CASES[0].label: "same", SLOW: "slower"}
    report = (tmp_path / "review" / "report" / "report.md").read_text()
    head = _header(report)
    counts = {v: sum(x == v for x in final.values()) for v in VERDICTS}
    assert (
        f"The review's answer: **{counts['slower']} slower**, **{counts['faster']} faster**, "
        f"{counts['same']} same (verdicts that hold); {counts['inconclusive']} inconclusive, "
        f"{counts['unstable']} unstable, over 2 case(s)"
    ) in head
    assert "**1 slower**" in head and "comparisons" not in head and "Verdicts per pair" not in head
    screen = report.split("## The recorded screen", 1)[1].split("\n## ", 1)[0]
    assert report.index("## The review's answer") < report.index("## The recorded screen")
    assert "Recorded screen: **" in screen and "Recorded screen, verdicts per pair:" in screen
    (slow,) = [a for a in found if a.case == SLOW]
    if screen_sd == PROCESS_SD:
        assert slow.recorded.startswith("slower ") and "Recorded screen: **1 slower**" in screen
    else:  # the screen left it open; the live pairs settled it
        assert slow.recorded.startswith("inconclusive ") and slow.live.startswith("slower ")
        assert "Recorded screen: **0 slower**" in screen
        assert "0 slower" not in head


def test_a_case_the_candidate_fails_is_said_and_exits_1(simulated, tmp_path):
    simulated.fails = {(VERSIONS[1], SLOW)}  # the one slower case fails instead: none slower
    out = tmp_path / "verdicts.json"
    result = _review(tmp_path / "review", "--json", str(out))
    assert result.exit_code == 1, result.output
    assert "slower" not in result.output
    text = " ".join(result.output.split())
    assert f"failed: {SLOW}: no ok record on {VERSIONS[1]} (3 failed); first error: " in text
    (answer,) = [a for a in json.loads(out.read_text())["cases"] if a["case"] == SLOW]
    assert answer["recorded"].startswith(f"not compared: {SLOW}: no ok record on {VERSIONS[1]}")
    (failure,) = json.loads(out.read_text())["failed"]
    assert failure["side"] == VERSIONS[1] and failure["statuses"] == {"failed": 3}


def test_a_case_neither_version_timed_says_what_each_recorded(simulated, tmp_path):
    """Recompiled under both versions: not "failed" with "no records on one side" (and exit 0,
    JSON's failed empty, which contradicted it), but each side's statuses and `recompiled`."""
    simulated.fails = {(v, SLOW) for v in VERSIONS}
    simulated.fail_status = "recompiled"
    out = tmp_path / "verdicts.json"
    result = _review(tmp_path / "review", "--json", str(out))
    assert result.exit_code == 0, result.output
    (answer,) = [a for a in json.loads(out.read_text())["cases"] if a["case"] == SLOW]
    assert answer["verdict"] == "recompiled"
    assert answer["recorded"] == (f"not compared ({VERSIONS[0]}: 3 recompiled; {VERSIONS[1]}: "
                                  "3 recompiled)")  # fmt: skip
    simulated.fail_status = "failed"
    again = _review(tmp_path / "failed", "--json", str(out))
    (answer,) = [a for a in json.loads(out.read_text())["cases"] if a["case"] == SLOW]
    assert answer["verdict"] == "failed" and "3 failed; " in answer["recorded"], again.output


def test_a_case_this_interpreters_jax_refuses_is_measured_by_each_version_not_refused(
    simulated, tmp_path, monkeypatch
):
    """`review OLD current` of a model the new JAX breaks: its factory raised here (under
    current), and the review ended with exit 2 before measuring anything."""
    from jaxbench.workloads import WORKLOADS

    real = WORKLOADS["train_step"].validate

    def validate(params):
        if params["size"] == "small":
            raise ValueError("broken on the new JAX")
        real(params)

    monkeypatch.setattr(WORKLOADS["train_step"], "validate", validate)
    result = _review(tmp_path / "review")
    assert result.exit_code in (0, 1), result.output
    said = " ".join(result.output.split())
    assert f"note: {SLOW}: refused under this interpreter's JAX (broken on the new JAX)" in said
    assert simulated.runs  # the versions ran it, and the other case


def test_a_second_review_reuses_what_is_on_disk(simulated, tmp_path):
    first = _review(tmp_path / "review")
    simulated.runs.clear()
    simulated.live.clear()
    second = _review(tmp_path / "review")
    assert second.exit_code == 1, second.output
    assert simulated.runs == [] and simulated.live == []
    assert "on disk, reused" in second.output
    table = [line for line in first.output.splitlines() if line.startswith("│")]
    assert table == [line for line in second.output.splitlines() if line.startswith("│")]


def test_a_review_of_a_model_whose_code_changed_is_refused_not_judged_on_the_old_runs(
    simulated, tmp_path, monkeypatch
):
    """The folder's runs were of other code (the digest of the model's files): exit 2, nothing
    reused or run. Here the built-in family stands in for a user's model."""
    from jaxbench.store.record import WorkloadSource

    assert _review(tmp_path / "review").exit_code == 1  # the slow case
    folder = tmp_path / "review" / VERSIONS[0]
    (first, *_) = sorted(folder.glob("*.jsonl"))
    then = WorkloadSource(workload="train_step", digest="a" * 64)
    with Appender(first) as out:
        out.write(Record(run_id="old", benchmark="train_step", params=dict(CASES[0].params),
                         status="ok", samples_s=[1e-3], env={"workload_source": then}))  # fmt: skip
    monkeypatch.setattr("jaxbench.workloads.source.user_workload_names", lambda names: names[:1])
    monkeypatch.setattr("jaxbench.workloads.source.source_of",
                        lambda name: WorkloadSource(workload=name, digest="b" * 64))  # fmt: skip
    simulated.runs.clear()
    simulated.live.clear()
    again = _review(tmp_path / "review")
    assert again.exit_code == 2, again.output
    assert "holds runs of train_step measured from other code" in " ".join(again.output.split())
    assert simulated.runs == [] and simulated.live == []


def test_an_interrupted_confirmation_is_completed_in_its_own_file_and_nothing_is_lost(
    simulated, tmp_path
):
    out = tmp_path / "review"
    simulated.interrupt_after = 1  # Ctrl-C after the first of four pairs
    first = _review(out)
    assert first.exit_code == 130 and "the same command resumes from it" in first.output
    (path,) = out.glob("interleave-*.jsonl")
    kept = path.read_text()
    second = _review(out, "--pairs", "6", "--max-pairs", "6", "--rounds", "6")  # asks otherwise
    assert second.exit_code == 1, second.output
    assert simulated.live[-1] == [("train_step", 3)]  # the three pairs the saved design lacks
    assert "confirm: pair 2 saved" in second.output and "pair 1 saved" not in second.output
    assert list(out.glob("interleave-*.jsonl")) == [path]  # completed in the same file
    from jaxbench.store import load

    (comparison,) = load(path).models("live-comparison")
    assert [p.index for p in comparison.pairs] == [0, 1, 2, 3]
    assert {len(p.rounds) for p in comparison.pairs} == {8}  # the saved design's rounds
    assert kept.split('"pairs"')[1][:200] in path.read_text()  # the first pair, as measured
    report = (out / "report" / "report.md").read_text()
    assert "0 of 1 live comparison(s) disagree" in report
    assert "slower (recorded steady state, live)" in report


def test_an_interrupted_screen_runs_only_the_missing_processes(simulated, tmp_path):
    out = tmp_path / "review"
    assert _review(out, "--processes", "2").exit_code == 1  # two a side on disk
    simulated.runs.clear()
    assert _review(out).exit_code == 1  # asks for three
    assert simulated.runs == ["0.11.2", "0.12.0.1"]
    assert "kept apart" not in _review(out).output  # the same settings: pooled


def test_a_screen_resumed_with_other_timing_settings_says_what_it_keeps_apart(simulated, tmp_path):
    out = tmp_path / "review"
    assert _review(out, "--processes", "2").exit_code == 1
    resumed = _review(out, "--budget", "0.7")  # a third process a side, timed otherwise
    assert simulated.runs[-2:] == ["0.11.2", "0.12.0.1"]
    assert [x for x in resumed.output.splitlines() if x.startswith("kept apart: ")]
    assert "budget_s" in " ".join(resumed.output.split()), resumed.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--processes", "1"], "--processes 1: expected at least 2"),
        (["--threshold", "-1"], "--threshold"),
        (["--alpha", "2"], "--alpha"),
        (["--pairs", "0"], "pairs"),
        (["-w", "nope"], "nope"),
        (["--reference", "/nowhere"], "--reference /nowhere: no such folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(simulated, tmp_path, extra, message):
    result = _review(tmp_path / "review", *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output and simulated.runs == []


def test_outputs_the_upgrade_moved_beyond_tolerance_exit_1_and_are_in_the_json(
    simulated, tmp_path, monkeypatch
):
    """Drift said "findings" on the terminal only: exit 0, nothing in --json or the summary."""
    import pandas as pd

    moved = pd.DataFrame([{"version": VERSIONS[1], "workload": "mine:step", "dtype": "float32",
                           "set": "s1", "output": "loss", "max_abs_err": 0.1, "max_rel_err": 0.1,
                           "rtol": 1e-5, "atol": 1e-6}])  # fmt: skip
    monkeypatch.setitem(globals(), "SLOWDOWN", 1.0)  # nothing slower: the drift decides
    monkeypatch.setattr("jaxbench.analysis.drift.new_findings", lambda drift, a, b: moved)
    out, summary = tmp_path / "verdicts.json", tmp_path / "summary.md"
    result = _review(tmp_path / "review", "--json", str(out), "--markdown", str(summary))
    assert result.exit_code == 1, result.output
    assert (f"drift: JAX {VERSIONS[1]}, mine:step float32 s1 loss: beyond tolerance (within it "
            f"under {VERSIONS[0]}") in " ".join(result.output.split())  # fmt: skip
    written = json.loads(out.read_text())
    assert written["exit_status"] == 1 and written["drift_findings"][0]["output"] == "loss"
    assert "**Drift:** 1 output(s) beyond tolerance" in summary.read_text()


def test_a_drift_reference_that_is_a_file_is_named_so(tmp_path):
    (tmp_path / "afile").write_text("")
    result = CliRunner().invoke(app, ["review", *VERSIONS, "--reference", str(tmp_path / "afile")])
    assert result.exit_code == 2
    assert f"--reference {tmp_path / 'afile'}: a file, expected a folder" in result.output


def test_two_sides_of_one_jax_version_are_refused_and_leave_no_folder(
    simulated, monkeypatch, tmp_path
):
    monkeypatch.setattr("jaxbench.cli.review.jax_version", lambda python: "0.12.0.1")
    result = _review(tmp_path / "review")
    assert result.exit_code == 2
    assert "both import JAX 0.12.0.1: a review compares two versions" in result.output
    assert not (tmp_path / "review").exists()
    same = CliRunner().invoke(app, ["review", "0.12.0.1", "0.12.0.1", "-o", str(tmp_path / "r")])
    assert same.exit_code == 2 and "0.12.0.1 twice: a review compares two versions" in same.output


@pytest.mark.parametrize(
    ("recorded", "live", "answer"),
    [
        ("faster", "inconclusive", "faster"),  # inconclusive claims nothing
        ("inconclusive", "same", "same"),
        ("slower", "slower", "slower"),
        ("faster", "same", "disagree"),  # two that hold and contradict: neither is the answer
        ("same", "", "same"),  # settled by the screen, no live comparison
        ("unstable", "inconclusive", "inconclusive"),
        ("inconclusive", "", "inconclusive"),
    ],
)
def test_the_final_verdict_is_the_one_that_holds(recorded, live, answer):
    from jaxbench.upgrade.summary import final

    assert final(recorded, live) == answer


def test_the_answer_counts_every_final_verdict_and_names_the_others():
    from jaxbench.upgrade.summary import CaseAnswer, answer_counts, answer_sentence, final

    pairs = [("inconclusive", "slower"), ("slower", "slower"), ("faster", "same"), ("same", "")]
    found = [CaseAnswer(f"c{i}", r, lv, final(r, lv), "", []) for i, (r, lv) in enumerate(pairs)]
    assert answer_counts(found) == {"slower": 2, "faster": 0, "same": 1, "inconclusive": 0,
                                    "unstable": 0, "disagree": 1}  # fmt: skip
    assert answer_sentence(found).startswith(
        "The review's answer: **2 slower**, **0 faster**, 1 same (verdicts that hold); "
        "0 inconclusive, 0 unstable, 1 disagree, over 4 case(s)"
    )
