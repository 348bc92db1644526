"""scripts/sensitivity.py: the study's repeats, its summary, its file, its hog, a tiny run."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from typer.testing import CliRunner

from jaxbench.calibrate import design_detectable
from jaxbench.inference import verdicts

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("sensitivity", ROOT / "scripts/sensitivity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sensitivity"] = module  # pydantic resolves the models' annotations here
    spec.loader.exec_module(module)
    return module


sens = _load_script()
runner = CliRunner()
QUIET = {"cpu_share": 1.8}


def synthetic_study(run_id="20260101T000000Z-00000000", hog=False, repeats=3, pairs=6, seed=0):
    """A study file as ``run`` writes it: effect 1.0 (true ratio 1) and 1.05, sd 0.02."""
    rng = np.random.default_rng(seed)
    s = sens.Schedule(pairs=pairs, max_pairs=pairs, rounds=6, calls_per_block=2)
    settings = sens.Settings(
        workload="train_step", params={"size": "tiny", "dtype": "float32", "optimizer": "sgd",
                                       "donate": True},
        size="tiny", effects=[1.0, 1.05], repeats=repeats, pairs=pairs, hog=hog,
        hog_tool="2 python loops" if hog else None, backend="cpu", threshold=0.02, alpha=0.05,
        seed=0, schedule=sens.dataclasses.asdict(s), design=sens.default_design(),
    )  # fmt: skip
    study = sens.Study(run_id=run_id, started_at="2026-01-01T00:00:00+00:00",
                       updated_at="2026-01-01T00:00:00+00:00", complete=True,
                       host={"hostname": "box"}, python="python", jax="0.12.0.1",
                       settings=settings)  # fmt: skip
    for r in range(repeats):
        for j in range(pairs):
            on = hog and j >= pairs // 2
            for pos, effect in enumerate(settings.effects):
                log = math.log(effect) + 0.02 * rng.standard_normal()
                rounds = [sens.RoundFigures(order="AB", baseline_median_s=1e-3,
                                            candidate_median_s=1e-3 * math.exp(log),
                                            baseline_noise=QUIET, candidate_noise=QUIET)
                          for _ in range(6)]  # fmt: skip
                study.pairs.append(sens.StudyPair(
                    index=r * pairs + j, repeat=r, pair=j, effect=effect,
                    candidate_size="tiny" if effect == 1.0 else f"tiny*{effect:g}",
                    position=pos, status="ok", log_ratio=log, hog=on, seconds=2.0,
                    pair_seconds=10.0, started_at="2026-01-01T00:00:00+00:00", rounds=rounds,
                ))  # fmt: skip
        mine = [p for p in study.pairs if p.repeat == r]
        for effect in settings.effects:
            study.repeats.append(sens.judge(mine, effect, settings))
    return study


def test_a_repeat_is_judged_over_its_pairs_with_one_look():
    study = synthetic_study()
    st = study.settings
    rep = next(r for r in study.repeats if r.repeat == 1 and r.effect == 1.05)
    logs = [p.log_ratio for p in study.pairs if p.repeat == 1 and p.effect == 1.05]
    est = verdicts.estimate_paired(logs, (0, 0), st.threshold, st.alpha)
    assert rep.ratio == pytest.approx(est.ratio)
    assert (rep.ci_low, rep.ci_high) == pytest.approx((est.ci_low, est.ci_high))
    assert rep.verdict == est.verdict and rep.pairs == 6 and not rep.hog
    # time to the verdict: per pair, the worker start (10 - 2 * 2 s) plus this effect's case
    assert rep.seconds == pytest.approx(6 * (10.0 - 4.0 + 2.0))


def test_a_repeat_whose_candidate_cpu_share_changes_between_pairs_is_unstable():
    study = synthetic_study(repeats=1)
    for p in study.pairs:
        if p.pair >= 3:
            p.rounds = [r.model_copy(update={"candidate_noise": {"cpu_share": 0.8}})
                        for r in p.rounds]  # fmt: skip
    rep = sens.judge(study.pairs, 1.05, study.settings)
    assert rep.verdict == "unstable" and "between pairs" in rep.advice
    # A change of both sides alike is cancelled by interleaving: the verdict stands.
    for p in study.pairs:
        p.rounds = [r.model_copy(update={"baseline_noise": r.candidate_noise}) for r in p.rounds]
    rep = sens.judge(study.pairs, 1.05, study.settings)
    assert rep.verdict != "unstable"


def test_summary_pools_pairs_and_counts_verdicts_with_intervals(tmp_path):
    study = synthetic_study()
    tables = sens.summarize([study])
    reps, pairs = tables["repeats"].set_index("effect"), tables["pairs"].set_index("effect")
    assert list(tables["repeats"]["scenario"]) == ["quiet", "quiet"]
    for effect in (1.0, 1.05):
        logs = np.asarray([p.log_ratio for p in study.pairs if p.effect == effect])
        row = pairs.loc[effect]
        assert row["pairs"] == 18 and row["hog"] == "off"
        assert row["reference"] == pytest.approx(math.exp(logs.mean()))
        q = sps.t.ppf(0.975, 17) * logs.std(ddof=1) / math.sqrt(18)
        assert row["ref_low"] == pytest.approx(math.exp(logs.mean() - q))
        assert row["sd_log"] == pytest.approx(logs.std(ddof=1))
        d = study.settings.design
        assert row["detectable_80"] == pytest.approx(
            design_detectable(row["sd_log"], d.pairs, d.alpha_per_look, 0.02, 0.8)
        )
        assert row["detectable_95_cap"] == pytest.approx(
            design_detectable(row["sd_log"], d.max_pairs, d.alpha_per_look, 0.02, 0.95)
        )
        mine = [r for r in study.repeats if r.effect == effect]
        dev = [abs(r.ratio - row["reference"]) * 100 for r in mine]
        assert reps.loc[effect, "abs_dev_max_pp"] == pytest.approx(max(dev))
        assert reps.loc[effect, "abs_dev_median_pp"] == pytest.approx(np.median(dev))
        assert reps.loc[effect, "median_seconds"] == pytest.approx(6 * 8.0)
        for v in verdicts.VERDICTS:
            k = sum(r.verdict == v for r in mine)
            assert reps.loc[effect, v].startswith(f"{k}/3 = ")
    assert "0/3 = 0% [0%, 71%]" in reps.loc[1.0, "slower"]  # exact interval of 0 of 3
    # the model: a 5 % slowdown against a 2 % threshold with sd 0.02 over 6 pairs
    slower, faster = sens.model_calls(math.log(1.05), 0.02, 6, 0.02, 0.05)
    assert 0.5 < slower < 1 and faster < 1e-6
    assert reps.loc[1.05, "model_slower"] > 0.5 > reps.loc[1.0, "model_slower"]


def test_hog_repeats_are_a_scenario_and_hog_pairs_a_row_of_their_own():
    quiet, hog = synthetic_study(), synthetic_study("20260102T000000Z-11111111", hog=True, seed=1)
    tables = sens.summarize([quiet, hog])
    reps = tables["repeats"]
    assert set(zip(reps["effect"], reps["scenario"], strict=True)) == {
        (1.0, "quiet"),
        (1.0, "hog"),
        (1.05, "quiet"),
        (1.05, "hog"),
    }
    pairs = tables["pairs"].set_index(["effect", "hog"])
    assert pairs.loc[(1.0, "off"), "pairs"] == 18 + 9 and pairs.loc[(1.0, "on"), "pairs"] == 9
    quiet_logs = [p.log_ratio for s in (quiet, hog) for p in s.pairs
                  if p.effect == 1.0 and not p.hog]  # fmt: skip
    ref = reps.set_index(["effect", "scenario"]).loc[(1.0, "hog"), "reference"]
    assert ref == pytest.approx(math.exp(np.mean(quiet_logs)))


def test_studies_of_other_settings_are_not_pooled():
    a, b = synthetic_study(), synthetic_study(pairs=4)
    with pytest.raises(ValueError, match=r"b.json: settings.schedule differs from a.json"):
        sens.summarize([a, b], ["a.json", "b.json"])


def test_summarize_command_reads_files_and_refuses_old_ones(tmp_path):
    path = sens.save(tmp_path, synthetic_study())
    assert path.name == "sensitivity-20260101T000000Z-00000000.json"
    data = json.loads(path.read_text())
    assert data["kind"] == "sensitivity" and data["schema_version"] == 2
    assert {"effect", "log_ratio", "hog", "seconds", "rounds"} <= set(data["pairs"][0])
    assert {"baseline_median_s", "candidate_noise"} <= set(data["pairs"][0]["rounds"][0])
    assert {"ratio", "ci_low", "ci_high", "verdict", "advice"} <= set(data["repeats"][0])
    out = tmp_path / "summary.md"
    result = runner.invoke(sens.app, ["summarize", str(path), "--markdown", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "### Repeats (verdicts)" in text and "| effect | scenario | repeats |" in text
    assert "| 1.05 | quiet | 3 |" in text
    old = tmp_path / "sensitivity-20261130T215156Z.json"
    old.write_text(json.dumps({"started_at": "2026-11-30", "rows": []}))
    result = runner.invoke(sens.app, ["summarize", str(old)])
    assert result.exit_code == 2
    assert "not a sensitivity study of the pair-pool design" in result.output


def test_hog_starts_busy_processes_and_stops_them():
    hog = sens.Hog(1)
    hog.start()
    try:
        assert hog.on
        pids = [p.pid for p in hog.procs]
        time.sleep(0.2)
        assert all(p.poll() is None for p in hog.procs)
    finally:
        hog.stop()
    assert not hog.on
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_run_refuses_bad_input(tmp_path):
    for args, message in ((["--effects", "x"], "--effects"), (["--repeats", "0"], "--repeats"),
                          (["--rounds", "2"], "--rounds"), (["-s", "huge"], "huge"),
                          (["-w", "loop"], "a study times one case, 6 are selected"),
                          (["-w", "loop", "--param", "trip=64", "--param", "width=64", "--scale",
                            "body"],
                           "--scale 'body'"),
                          (["-w", "loop", "--param", "trip=1048576", "--param", "width=64",
                            "--scale", "trip"],
                           "trip must be")):  # fmt: skip
        result = runner.invoke(sens.app, ["run", *args, "-o", str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert message in result.output
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_tiny_study_runs_and_summarizes(tmp_path):
    args = ["run", "--repeats", "1", "--pairs", "2", "--max-pairs", "2", "--rounds", "6",
            "--calls-per-block", "2", "-s", "tiny", "-o", str(tmp_path)]  # fmt: skip
    result = runner.invoke(sens.app, args)
    assert result.exit_code == 0, result.output
    (path,) = tmp_path.glob("sensitivity-*.json")
    study = sens.load(path)
    assert study.complete and study.jax
    assert len(study.pairs) == 2 * 3 and len(study.repeats) == 3
    assert {p.effect for p in study.pairs} == {1.0, 1.03, 1.05}
    assert all(p.status == "ok" and len(p.rounds) == 6 for p in study.pairs)
    assert {p.candidate_size for p in study.pairs} == {"tiny", "tiny*1.03", "tiny*1.05"}
    assert all(r.pairs == 2 and r.seconds > 0 for r in study.repeats)
    assert "### Pairs (pool)" in result.output


def test_an_effect_scales_an_integer_parameter_of_another_workload():
    st = sens.new_study(1, (1.0, 1.03), workload="loop", params={"trip": 1000, "body": "at_set",
                        "mode": "plain", "dtype": "float32"}, scale="trip").settings  # fmt: skip
    assert sens.candidate("py", st, 1.0).params == {}
    assert sens.candidate("py", st, 1.03).params == {"trip": 1030}
    small = sens.new_study(1, (1.05,)).settings
    assert sens.candidate("py", small, 1.05).params == {"size": "small*1.05"}
