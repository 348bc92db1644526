"""``jaxbench calibrate``: the A/A statistics, the record and its loader, the command."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps
from scipy.stats import binomtest
from typer.testing import CliRunner

from jaxbench.analysis import load_results
from jaxbench.calibrate import (
    default_design,
    design_detectable,
    load_calibrations,
    proportion_interval,
    summarize_calibration,
    summarized,
    write_calibration,
)
from jaxbench.cli import app
from jaxbench.inference.sequential import looks_at, nominal_level
from jaxbench.interleave import Schedule
from jaxbench.store import Calibration, CalibrationComparison
from jaxbench.store.calibration import CalibrationCase, newest_calibration, partial_note

runner = CliRunner()


def aa_logs(comparisons=4, pairs=10, sd=0.02, seed=0):
    rng = np.random.default_rng(seed)
    return [list(sd * rng.standard_normal(pairs)) for _ in range(comparisons)]


def test_summary_counts_false_alarms_with_an_exact_interval():
    logs = aa_logs()
    s = summarize_calibration(logs, ["slower", "same", "faster", "inconclusive"])
    assert (s.comparisons, s.pairs, s.false_alarms) == (4, 40, 2)
    assert s.verdicts == {"slower": 1, "faster": 1, "same": 1, "inconclusive": 1, "unstable": 0}
    ci = binomtest(2, 4).proportion_ci(method="exact")
    assert s.false_alarm_rate == 0.5
    assert (s.false_alarm_ci_low, s.false_alarm_ci_high) == pytest.approx((ci.low, ci.high))
    assert proportion_interval(0, 4) == pytest.approx((0.0, 1 - 0.025 ** (1 / 4)))


def _nct_shift(q: float, df: float, power: float) -> float:
    """The noncentrality at which a t statistic of ``df`` passes ``q`` with ``power``."""
    return optimize.brentq(lambda d: sps.nct.sf(q, df, d) - power, 0.0, 100.0)


def test_summary_spread_and_detectable_follow_the_verdicts_formula():
    logs = aa_logs(sd=0.03)
    s = summarize_calibration(logs, ["same"] * 4, pair_seconds=[10.0, 12.0, 14.0])
    flat = np.concatenate(logs)
    assert s.sd_log == pytest.approx(flat.std(ddof=1))
    assert s.ratio == pytest.approx(math.exp(flat.mean()))
    d = default_design()
    defaults = Schedule()
    assert (d.pairs, d.max_pairs, d.looks) == (defaults.pairs, defaults.max_pairs, defaults.looks)
    a = d.alpha_per_look  # the repeated-CI level of the last look
    assert a == pytest.approx(
        nominal_level(looks_at(d.max_pairs, d.pairs, defaults.pairs_step, d.max_pairs),
                      d.max_pairs, 0.05))  # fmt: skip
    for pairs, got80, got95 in ((d.pairs, s.detectable_80, s.detectable_95),
                                (d.max_pairs, s.detectable_80_max_pairs,
                                 s.detectable_95_max_pairs)):  # fmt: skip
        for power, got in ((0.8, got80), (0.95, got95)):
            df = pairs - 1
            q, zp = sps.t.ppf(1 - a / 2, df), sps.t.ppf(power, df)
            # the shift at which the t statistic passes q with that power (noncentral t; from
            # 3 degrees of freedom on, q + t_power)
            shift = q + zp if df >= 3 else _nct_shift(q, df, power)
            se = s.sd_log / math.sqrt(pairs)  # shown (lower end above 1) and at least 1.02
            want = max(shift * se, math.log(1.02) + zp * se)
            assert got == pytest.approx(math.expm1(want))
    assert s.detectable_95 > s.detectable_80 > s.detectable_80_max_pairs > 0.02
    assert s.seconds_per_pair == 12.0
    assert s.seconds_to_verdict == 12.0 * d.pairs
    assert s.seconds_to_verdict_max == 12.0 * d.max_pairs


def test_summary_judges_the_comparisons_itself_without_verdicts():
    logs = aa_logs(comparisons=3, sd=0.005)
    logs.append([0.2 + x for x in logs[0]])  # a comparison that is far off: a false alarm
    s = summarize_calibration(logs)
    assert s.verdicts["same"] == 3 and s.verdicts["slower"] == 1
    assert s.false_alarms == 1


def test_summary_without_spread_has_no_detectable_figures():
    s = summarize_calibration([[0.01]], ["inconclusive"])
    assert s.sd_log is None and s.detectable_80 is None and s.seconds_per_pair is None
    assert math.isnan(design_detectable(0.02, 1, 0.05, 0.02, 0.8))
    with pytest.raises(ValueError, match="2 verdicts for 1 comparisons"):
        summarize_calibration([[0.0, 0.1]], ["same", "same"])


def record(run_id="20260101T000000Z-00000000", hostname="box", size="tiny", started="2026-01-01"):
    logs = aa_logs(comparisons=2, pairs=3)
    comparisons = [
        CalibrationComparison(index=i, seed=i, verdict="inconclusive", ratio=1.0, ci_low=0.9,
                              ci_high=1.1, advice="", pair_log_ratios=c, pair_seconds=[5.0] * 3,
                              started_at=started)
        for i, c in enumerate(logs)
    ]  # fmt: skip
    params = {"size": size, "dtype": "float32", "optimizer": "sgd", "donate": True}
    label = "train_step " + " ".join(f"{k}={params[k]}" for k in sorted(params))
    return summarized(
        Calibration(
            run_id=run_id,
            started_at=started,
            complete=True,
            requested=2,
            case=CalibrationCase(workload="train_step", params=params, label=label),
            backend="cpu",
            python="python",
            host={"hostname": hostname},
            jax="0.12.0.1",
            schedule={"pairs": 3},
            threshold=0.02,
            alpha=0.05,
            comparisons=comparisons,
            summary=summarize_calibration([]),
        )
    )


def test_record_round_trips_and_bad_files_are_named(tmp_path):
    rec = record()
    path = write_calibration(tmp_path / "nested", rec)
    assert path.name == f"calibration-{rec.run_id}.json"
    data = json.loads(path.read_text())
    assert data["kind"] == "calibration" and data["schema_version"] == 1
    assert data["summary"]["pairs"] == 6 and len(data["comparisons"][0]["pair_log_ratios"]) == 3
    (tmp_path / "calibration-broken.json").write_text("{not json")
    (tmp_path / "calibration-other.json").write_text(json.dumps({"kind": "drift"}))
    found, problems = load_calibrations([tmp_path])
    assert found == [rec]
    reasons = {p.path.rsplit("/", 1)[-1]: p.reason for p in problems}
    assert set(reasons) == {"calibration-broken.json", "calibration-other.json"}
    assert "not JSON" in reasons["calibration-broken.json"]
    assert "kind 'drift' is not one this jaxbench reads" in reasons["calibration-other.json"]
    # the records loader passes over calibrations, and names the same bad files
    frame, record_problems = load_results([tmp_path])
    assert frame.empty and record_problems == problems


def test_the_newest_calibration_is_chosen_by_host_and_case(tmp_path):
    old = record("20260101T000000Z-aaaaaaaa", started="2026-01-01T00:00:00+00:00")
    new = record("20260201T000000Z-bbbbbbbb", started="2026-02-01T00:00:00+00:00")
    other_host = record("20260301T000000Z-cccccccc", "elsewhere", started="2026-03-01")
    small = record("20260401T000000Z-dddddddd", size="small", started="2026-04-01")
    for r in (old, new, other_host, small):
        write_calibration(tmp_path, r)
    found = load_calibrations([tmp_path])[0]
    assert newest_calibration(found) == small
    assert newest_calibration(found, host="box", case=old.case.label) == new
    assert newest_calibration(found, host="nobody") is None
    # an interrupted one, though newer, gives way to a complete one, and is said where cited
    cut = record("20260501T000000Z-eeeeeeee", started="2026-05-01").model_copy(
        update={"complete": False, "requested": 5}
    )
    assert newest_calibration([*found, cut], host="box", case=old.case.label) == new
    assert newest_calibration([cut], host="box") == cut
    assert partial_note(cut) == " (interrupted: 2 of 5 comparisons)" and partial_note(new) == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-s", "tiny", "-s", "small"], "2 are selected: give one value of --size/-s"),
        (["-w", "forward"], "give one value of --k/-k, --strategy"),
        (["-w", "loop"], "give one value of --param trip=VALUE, --param width=VALUE"),
        (["--comparisons", "0"], "--comparisons must be >= 1"),
        (["--rounds", "2"], "--rounds must be >= 6"),
        (["--alpha", "2"], "--alpha"),
        (["--threshold", "nan"], "--threshold: threshold must be a number >= 0, got nan"),
        (["--pairs", "1"], "--pairs 1: a comparison of fewer than 2 pairs has no interval and "
                           "can never alarm; use --pairs 2 or more"),
    ],
)  # fmt: skip
def test_calibrate_refuses_bad_input_with_one_line_and_exit_2(args, message, tmp_path):
    result = runner.invoke(app, ["calibrate", *args, "-o", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert message in result.output
    assert not list(tmp_path.glob("calibration-*"))


@pytest.mark.slow
def test_calibrate_end_to_end_writes_a_record_that_loads(tmp_path):
    args = ["calibrate", "-s", "tiny", "--comparisons", "1", "--pairs", "2", "--rounds", "6",
            "--calls-per-block", "2", "-o", str(tmp_path)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (rec,), problems = load_calibrations([tmp_path])
    assert not problems
    assert rec.complete and rec.requested == 1 and len(rec.comparisons) == 1
    assert rec.case.params["size"] == "tiny" and rec.case.params["dtype"] == "float32"
    assert rec.jax and rec.host["hostname"]
    assert all(len(c.pair_log_ratios) == 2 and len(c.pair_seconds) == 2 for c in rec.comparisons)
    assert rec.summary.pairs == 2 and rec.summary.sd_log is not None
    assert rec.summary.seconds_per_pair > 0
    assert f"wrote {tmp_path}" in " ".join(result.output.split())


def test_compare_cites_a_calibration_of_the_same_case_and_host_only(tmp_path, monkeypatch, capsys):
    from jaxbench.cli import compare as compare_cli
    from jaxbench.env import host

    monkeypatch.chdir(tmp_path)  # no results/ here but the folder given
    write_calibration(tmp_path / "cal", record(hostname=host()["hostname"], size="small"))
    calibrated = record(size="small").case.label
    compare_cli._cite_calibration([tmp_path / "cal"], {"transformer dtype=float32 size=tiny"})
    out = capsys.readouterr().out
    assert "calibration: none of these cases" in out and "size=small" not in out
    compare_cli._cite_calibration([tmp_path / "cal"], {calibrated})
    out = capsys.readouterr().out
    assert f"calibration of {calibrated}" in " ".join(out.split())
    # Another host's calibration of the same case is not cited either.
    write_calibration(tmp_path / "other", record(hostname="elsewhere", size="small"))
    compare_cli._cite_calibration([tmp_path / "other"], {calibrated})
    assert "calibration: none of these cases" in capsys.readouterr().out


def test_an_interrupted_calibration_says_the_pairs_it_dropped(tmp_path, monkeypatch):
    """Ctrl-C inside a comparison: its pairs are not kept (a calibration keeps whole
    comparisons), and the line says so rather than "after 0 pairs" alone."""
    import jaxbench.interleave as interleave
    from jaxbench.calibrate import run_calibration
    from jaxbench.interleave import LiveStopped

    def stopped(*args, **kwargs):
        raise LiveStopped(None, 2, KeyboardInterrupt())

    monkeypatch.setattr(interleave, "run_live", stopped)
    with pytest.raises(LiveStopped) as info:
        run_calibration("train_step", {"size": "tiny"}, tmp_path, comparisons=2)
    assert info.value.line() == (
        "interrupted after 0 process pair(s) (of whole comparisons; the 2 of comparison 1 are "
        "dropped: a calibration keeps whole comparisons only); nothing was saved"
    )
