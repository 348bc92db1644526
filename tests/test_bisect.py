"""``jaxbench bisect``: the releases in range, both search strategies, and bad input.

The strategies are tested on synthetic sequences of releases with known steps. Their judge is a
seeded simulation at the process level: each comparison draws 10 process pairs whose log ratios
scatter by 3 % around the true ratio of the two releases (the process is the unit, as in a live
comparison), and decides with the project's own paired verdict
(:func:`jaxbench.inference.verdicts.estimate_paired`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from jaxbench.bisect import releases_between, search
from jaxbench.bisect.search import Judgement
from jaxbench.bisect.summary import case_lines, markdown
from jaxbench.cli import app
from jaxbench.inference.verdicts import estimate_paired

RELEASES = [f"0.{i}.0" for i in range(10)]  # r0 (GOOD) .. r9 (BAD)
PAIR_SD = 0.03


def simulated_judge(times: dict[str, list[float]], seed: int = 0, pairs: int = 10):
    """A judge over releases whose true time per case is ``times[case][i]``."""
    rng = np.random.default_rng(seed)
    index = {r: i for i, r in enumerate(RELEASES)}
    asked = []

    def judge(before: str, after: str, cases):
        asked.append((before, after, tuple(cases)))
        out = {}
        for case in cases:
            true = math.log(times[case][index[after]] / times[case][index[before]])
            e = estimate_paired(true + rng.normal(0.0, PAIR_SD, pairs))
            out[case] = Judgement(e.verdict, e.ratio, e.ci_low, e.ci_high, e.advice)
        return out

    judge.asked = asked
    return judge


def level(steps_at: dict[int, float]) -> list[float]:
    """True times over the releases: 1.0, multiplied by ``factor`` from release ``i`` on."""
    out, t = [], 1.0
    for i in range(len(RELEASES)):
        t *= steps_at.get(i, 1.0)
        out.append(t)
    return out


@pytest.mark.parametrize("strategy", ["sweep", "binary"])
def test_a_step_and_a_second_later_step_are_both_found_with_the_first_slow_release(strategy):
    times = {"loop": level({3: 1.25, 7: 1.30}), "flat": level({})}
    judge = simulated_judge(times, pairs=40)  # enough pairs for "same" within 2 %
    result = search(strategy, RELEASES, ["loop", "flat"], judge, threshold=0.02)
    steps = [(b.case, b.before, b.after, b.judgement.verdict) for b in result.steps]
    assert steps == [("loop", "0.2.0", "0.3.0", "slower"), ("loop", "0.6.0", "0.7.0", "slower")]
    assert result.first_slow("loop") == "0.3.0" and result.first_slow("flat") is None
    loop = {(b, a): j for b, a, c, j in result.comparisons if c == "loop"}
    assert loop[("0.2.0", "0.3.0")].ratio == pytest.approx(1.25, rel=0.05)
    assert loop[("0.6.0", "0.7.0")].ratio == pytest.approx(1.30, rel=0.05)
    flat = [(b, a) for b, a, c, _ in result.comparisons if c == "flat"]
    if strategy == "binary":  # a case the same end to end is not looked into
        assert flat == [("0.0.0", "0.9.0")]
    else:
        assert len(flat) >= len(RELEASES) - 1  # every release against GOOD


def test_the_sweep_finds_a_step_that_is_later_undone_where_binary_cannot():
    times = {"scatter": level({2: 1.4, 6: 1 / 1.4})}
    swept = search("sweep", RELEASES, ["scatter"], simulated_judge(times), 0.02)
    got = [(b.before, b.after, b.judgement.verdict) for b in swept.steps]
    assert got == [("0.1.0", "0.2.0", "slower"), ("0.5.0", "0.6.0", "faster")]
    assert swept.first_slow("scatter") == "0.2.0"
    # Back where it started: 10 pairs of 3 % noise cannot show "same" at 2 %, only not-slower.
    assert swept.against_good["0.9.0"]["scatter"].verdict in ("same", "inconclusive")
    halved = search("binary", RELEASES, ["scatter"], simulated_judge(times), 0.02)
    assert halved.steps == [] and len(halved.comparisons) == 1  # same end to end: blind


def test_no_step_in_a_flat_sequence_of_a_a_releases_over_many_seeds():
    """A/A: no real change anywhere, 50 seeded sweeps: a false step at most 2.5 % per look and
    direction (so at most 5 % of the consecutive comparisons), within binomial bounds."""
    false_steps = 0
    for seed in range(50):
        result = search("sweep", RELEASES, ["flat"], simulated_judge({"flat": level({})}, seed),
                        0.02)  # fmt: skip
        false_steps += len(result.steps)
    looks = 50 * (len(RELEASES) - 1)
    assert binomtest(false_steps, looks, 0.05, alternative="greater").pvalue > 0.001, false_steps


def test_a_creep_below_the_threshold_per_release_is_reported_as_no_single_step():
    times = {"creep": [1.012**i for i in range(len(RELEASES))]}  # +11 % over nine releases
    result = search("sweep", RELEASES, ["creep"], simulated_judge(times, pairs=20), 0.02)
    assert result.against_good["0.9.0"]["creep"].verdict == "slower"
    assert result.steps == []
    text = " ".join(case_lines(result, "creep"))
    assert "no pair of neighbouring releases was" in text and "unsettled" in text


def test_the_report_names_each_step_its_explanation_and_the_files():
    times = {"lm": level({4: 1.5})}
    result = search("sweep", RELEASES, ["lm"], simulated_judge(times), 0.02)
    text = markdown(
        result,
        "jaxbench bisect 0.0.0 0.9.0",
        ["interleave-x.jsonl"],
        {("lm", "0.3.0", "0.4.0"): ["optimized HLO differs: fusion:kLoop: 2 -> 3"]},
    )
    assert "**step 0.3.0 -> 0.4.0: slower 1.5" in text
    assert "first slow release: 0.4.0" in text
    assert "### What changed in the program, 0.3.0 -> 0.4.0" in text and "kLoop" in text
    assert "| 0.4.0 | slower" in text and "`interleave-x.jsonl`" in text


JAX = ["0.12.0.1", "0.12.0", "0.11.2", "0.11.1", "0.11.0", "0.10.2", "0.5.2", "0.5.1"]
JAXLIB = ["0.12.0.1", "0.12.0", "0.11.2", "0.11.1", "0.11.0", "0.10.2", "0.5.1"]


def test_releases_are_those_of_both_packages_in_order_and_bad_ranges_are_named():
    got = releases_between("0.10.2", "0.12.0.1", JAX, JAXLIB)
    assert got == ["0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.12.0.1"]
    assert releases_between("0.5.1", "0.10.2", JAX, JAXLIB) == ["0.5.1", "0.10.2"]  # no 0.5.2
    with pytest.raises(ValueError, match=r"GOOD '0\.5\.2': no release of jax and jaxlib"):
        releases_between("0.5.2", "0.10.2", JAX, JAXLIB)
    with pytest.raises(ValueError, match=r"BAD '9\.9': no release"):
        releases_between("0.10.2", "9.9", JAX, JAXLIB)
    plugin = [v for v in JAX if v != "0.11.1"]  # a release without its CUDA plugin
    got = releases_between("0.10.2", "0.12.0.1", JAX, JAXLIB, plugin)
    assert got == ["0.10.2", "0.11.0", "0.11.2", "0.12.0", "0.12.0.1"]
    with pytest.raises(ValueError, match=r"GOOD '0\.11\.1': no release of jax, jaxlib and the"):
        releases_between("0.11.1", "0.12.0", JAX, JAXLIB, plugin)
    with pytest.raises(ValueError, match=r"is not older than BAD 0\.10\.2: the range is empty"):
        releases_between("0.11.0", "0.10.2", JAX, JAXLIB)
    with pytest.raises(ValueError, match="at least two releases"):
        search("sweep", ["0.10.2"], ["x"], simulated_judge({}), 0.02)
    with pytest.raises(ValueError, match="--strategy 'linear'"):
        search("linear", RELEASES, ["x"], simulated_judge({}), 0.02)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["0.11.0", "0.10.2", "-w", "loop"], "the range is empty"),
        (["0.10.2", "99.0.0", "-w", "loop"], "BAD '99.0.0': no release of jax and jaxlib"),
        (["0.9.2", "0.10.2", "-w", "loop"], "GOOD 0.9.2: jaxbench runs on jax>=0.10"),
        (["0.10.2", "0.11.0", "--search", "linear"], "--search 'linear'"),
        (["0.10.2", "0.11.0", "-w", "nope"], "unknown workload 'nope'"),
        (["0.10.2", "0.11.0", "--threshold", "-1"], "--threshold: threshold must be"),
        (["0.10.2", "0.11.0", "--jax-extra", "cuda11"], "--jax-extra 'cuda11': expected one of"),
        (["0.10.2", "0.11.0", "--profile", "nope"], "--profile 'nope': not found"),
        (["0.10.2", "0.11.0", "--profile", "local", "--processes", "1"], "--processes 1"),
        (["0.10.2", "0.11.0", "--processes", "0"], "--processes 0 applies to --profile"),
        (["0.10.2", "0.11.0", "--profile", "local", "--jax-extra", "cuda13"], "a local bisect"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_environment(tmp_path, args, message):
    envs = tmp_path / "envs"
    result = CliRunner().invoke(
        app, ["bisect", *args, "--env-root", str(envs), "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr.replace("\n", " ")
    assert "Traceback" not in result.output and not envs.exists()


def _recorded_frame(times: dict[str, list[float]], processes: int, seed: int):
    """Records of every release: ``processes`` processes each, every process its own offset."""
    from analysis_data import record

    from jaxbench.analysis.frames import records_frame
    from jaxbench.store import Item

    rng = np.random.default_rng(seed)
    items = []
    for case, series in times.items():
        for release, true in zip(RELEASES, series, strict=True):
            for p in range(processes):
                offset = true * math.exp(PAIR_SD / math.sqrt(2) * rng.standard_normal())
                samples = list(offset * np.exp(0.01 * rng.standard_normal(50)))
                name = f"{release}-{p}"
                rec = record(release, samples, benchmark=case, params={"n": 1}, run_id=name,
                             env={"process_id": name})  # fmt: skip
                items.append(Item(model=rec, path=Path(f"sweep/{name}.json"), line=None))
    return records_frame(items)


@pytest.mark.parametrize("strategy", ["sweep", "binary"])
def test_a_recorded_bisect_over_cluster_processes_finds_both_steps(strategy):
    from jaxbench.upgrade.recorded import RecordedJudge

    times = {"loop": level({3: 1.25, 7: 1.30})}
    frame = _recorded_frame(times, processes=8, seed=1)
    judge = RecordedJudge(frame, threshold=0.02, alpha=0.05)
    result = search(strategy, RELEASES, ["loop n=1"], judge, threshold=0.02)
    steps = [(b.before, b.after, b.judgement.verdict) for b in result.steps]
    assert steps == [("0.2.0", "0.3.0", "slower"), ("0.6.0", "0.7.0", "slower")]
    assert result.first_slow("loop n=1") == "0.3.0"
    assert judge("0.0.0", "0.5.0", ["loop n=1"])["loop n=1"].ratio == pytest.approx(1.25, rel=0.05)
    assert judge("0.0.0", "9.9.9", ["loop n=1"])["loop n=1"].verdict == "failed"  # no such records


def test_a_recorded_bisect_of_a_a_releases_finds_no_step():
    from jaxbench.upgrade.recorded import RecordedJudge

    false_steps = 0
    for seed in range(10):
        frame = _recorded_frame({"flat": level({})}, processes=4, seed=seed)
        judge = RecordedJudge(frame, threshold=0.02, alpha=0.05)
        false_steps += len(search("sweep", RELEASES, ["flat n=1"], judge, threshold=0.02).steps)
    # 10 sweeps of ten releases; each false call has p <= 2.5 % a direction.
    looks = 10 * (len(RELEASES) - 1)
    assert binomtest(false_steps, looks, 0.05, alternative="greater").pvalue > 0.001, false_steps


def test_a_live_bisect_run_again_reuses_the_comparisons_it_finished(tmp_path, monkeypatch):
    """A rerun into the same folder judges from the comparisons there that finished with the
    same releases and design, and measures only what is missing (another design: again)."""
    from test_scaling_live import live_sweep

    from jaxbench.bisect import live as bisect_live
    from jaxbench.interleave.session import Schedule
    from jaxbench.store import write_jsonl

    found = live_sweep((1.0, 1.0), pairs=4, labels=("0.4.30", "0.4.31"))
    kept = write_jsonl(tmp_path / "interleave-earlier.jsonl", found)
    cases = {c.label: (c.workload, dict(c.params)) for c in found}

    class MeasuredAgain(Exception):
        pass

    def measured(*args, **kwargs):
        raise MeasuredAgain

    monkeypatch.setattr(bisect_live, "run_live", measured)
    same = bisect_live.LiveJudge(lambda r: "py", cases, "cpu", Schedule(pairs=4, max_pairs=4),
                                 0.02, 0.05, tmp_path)  # fmt: skip
    got = same("0.4.30", "0.4.31", list(cases))
    assert list(got) == list(cases) and same.paths == [kept]
    assert got == {c.label: same.judgement(c) for c in found}
    with pytest.raises(MeasuredAgain):  # the releases the other way round: not measured yet
        same("0.4.31", "0.4.30", list(cases))
    other = bisect_live.LiveJudge(lambda r: "py", cases, "cpu", Schedule(pairs=6, max_pairs=6),
                                  0.02, 0.05, tmp_path)  # fmt: skip
    with pytest.raises(MeasuredAgain):
        other("0.4.30", "0.4.31", list(cases))


def test_the_terminal_says_each_step_and_the_first_line_of_its_explanation(tmp_path, monkeypatch):
    """The explanation of a step was only in bisect-<id>.md; an interrupted bisect said "the
    comparisons finished are in" its folder when none were."""
    from jaxbench.cli import bisect as cli_bisect

    releases = ["0.1", "0.2", "0.3"]
    label = "loop/at_set body=at_set dtype=float32 mode=plain trip=64 width=1"

    def judge(before, after, cases):
        slow = after == "0.3"
        figures = (1.5, 1.4, 1.6) if slow else (1.0, 0.99, 1.01)
        return {c: Judgement("slower" if slow else "same", *figures, "") for c in cases}

    monkeypatch.setattr(cli_bisect, "_releases", lambda good, bad, envs: ("py", releases))
    explained = lambda case, before, after, verdict: [f"step: first at optimized HLO ({verdict})"]  # noqa: E731
    monkeypatch.setattr(cli_bisect, "_live", lambda *a: (judge, lambda: [], explained))
    args = ["bisect", "0.1", "0.3", "-w", "loop", "--param", "trip=64", "--param", "mode=plain",
            "--param", "width=1", "-o", str(tmp_path / "out")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert label in text
    assert "explained 0.2 -> 0.3: step: first at optimized HLO (slower)" in text

    def interrupted(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_bisect, "_live", lambda *a: (interrupted, lambda: [], explained))
    stopped = CliRunner().invoke(app, args)
    assert stopped.exit_code == 130
    assert stopped.stderr.strip().splitlines()[-1] == "error: interrupted"  # nothing was kept


def test_the_jax_requirement_is_jaxbenchs_own_and_absent_from_a_source_tree(monkeypatch):
    import importlib.metadata

    from jaxbench.cluster import pyenvs

    with pytest.raises(ValueError, match=r"JAX 0\.9\.2: jaxbench runs on jax>=0\.10"):
        pyenvs.check_supported(["0.10.2", "0.9.2"])

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    pyenvs.check_supported(["0.9.2"])  # run from a source tree: no requirement to hold it to
