"""Scaling exponents over processes: seeded simulations with a known exponent."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jaxbench.inference.scaling import compare_exponents, fit_exponent

X = [1.0, 2.0, 4.0, 8.0, 16.0]


def simulate(rng, exponent, processes, process_sd=0.05, slope_sd=0.02, point_sd=0.02):
    """Processes timing every x: a process-wide speed factor, a little slope noise per process,
    and noise per point, all on the log scale (the model of :mod:`jaxbench.inference.scaling`)."""
    out = {}
    for p in range(processes):
        a = math.log(1e-4) + rng.normal(0, process_sd)
        b = exponent + rng.normal(0, slope_sd)
        t = np.exp(a + b * np.log(X) + rng.normal(0, point_sd, len(X)))
        out[f"p{p}"] = (X, t.tolist())
    return out


def test_the_interval_over_processes_covers_the_true_exponent_at_its_level():
    rng = np.random.default_rng(0)
    covered = 0
    trials = 400
    for _ in range(trials):
        e = fit_exponent(simulate(rng, 1.0, processes=4))
        assert e.basis == "processes" and e.processes == 4 and e.df == 3
        covered += e.ci_low <= 1.0 <= e.ci_high
    # 95 % intervals: 380 expected; 3 binomial standard deviations (13) either side.
    assert 367 <= covered <= 393, covered


def test_a_process_wide_speed_factor_does_not_move_the_exponent():
    rng = np.random.default_rng(1)
    fast_and_slow = simulate(rng, 2.0, processes=3, process_sd=1.0, slope_sd=0.0, point_sd=0.0)
    e = fit_exponent(fast_and_slow)
    assert e.exponent == pytest.approx(2.0, abs=1e-9)


def test_a_a_exponents_are_rarely_called_changed_and_linear_to_quadratic_always():
    rng = np.random.default_rng(2)
    verdicts = {"aa": [], "quadratic": []}
    for _ in range(300):
        base = fit_exponent(simulate(rng, 1.0, processes=3))
        verdicts["aa"].append(compare_exponents(base, fit_exponent(simulate(rng, 1.0, 3))).verdict)
        change = compare_exponents(base, fit_exponent(simulate(rng, 2.0, processes=3)))
        verdicts["quadratic"].append(change.verdict)
        assert change.ci_low < 1.0 < change.ci_high or change.verdict == "changed"
    assert verdicts["aa"].count("changed") <= 300 * 0.025 + 3 * math.sqrt(300 * 0.025)
    assert verdicts["quadratic"].count("changed") == 300
    assert verdicts["aa"].count("same") > 0  # A/A with 3 processes a side can show equivalence


def test_one_process_has_an_interval_of_its_points_and_never_a_change():
    rng = np.random.default_rng(3)
    one = fit_exponent(simulate(rng, 1.0, processes=1))
    assert one.basis == "points of one process" and one.df == len(X) - 2
    assert one.ci_low < one.exponent < one.ci_high
    quadratic = fit_exponent(simulate(rng, 2.0, processes=1))
    change = compare_exponents(one, quadratic)
    assert change.difference == pytest.approx(1.0, abs=0.2)
    assert change.verdict == "inconclusive" and "at least 2 processes" in change.reason


def test_too_few_points_give_no_exponent_and_bad_values_are_named():
    assert fit_exponent({"p": ([1, 2, 2], [1e-3, 2e-3, 2e-3])}) is None
    assert fit_exponent({}) is None
    with pytest.raises(ValueError, match="process p: x and latencies must be positive"):
        fit_exponent({"p": ([0, 1, 2], [1e-3, 2e-3, 3e-3])})
    base = fit_exponent(simulate(np.random.default_rng(4), 1.0, processes=2))
    with pytest.raises(ValueError, match="threshold must be > 0"):
        compare_exponents(base, base, threshold=0)


# -- from records: the frame, the changes and the report section --------------------------------


def _loop_records(version, exponent, processes=3, seed=0):
    from analysis_data import lognormal, record

    rng = np.random.default_rng(seed)
    recs = []
    for p in range(processes):
        scale = math.exp(rng.normal(0, 0.05))  # the process's speed
        for n in (10, 20, 40, 80):
            median = scale * 1e-5 * n**exponent
            recs.append(record(version, lognormal(median, 15, seed=seed + 97 * p + n, sigma=0.02),
                               benchmark="loop", params={"n": n, "mode": "plain", "donate": True},
                               run_id=f"{version}-{p}"))  # fmt: skip
    return recs


def test_exponents_frame_fits_each_version_and_flags_linear_becoming_quadratic(tmp_path):
    from analysis_data import write

    from jaxbench.analysis import load_results
    from jaxbench.analysis.scaling import exponent_changes, exponents_frame, swept_params

    write(tmp_path / "a.jsonl", _loop_records("0.4.30", 1.0, seed=1))
    write(tmp_path / "b.jsonl", _loop_records("0.4.31", 2.0, seed=2))
    frame, _ = load_results([tmp_path])
    assert swept_params(frame) == ["n"]  # the flag and the text parameter are not swept
    exps = exponents_frame(frame).set_index("jax")
    assert exps.loc["0.4.30", "exponent"] == pytest.approx(1.0, abs=0.05)
    assert exps.loc["0.4.31", "exponent"] == pytest.approx(2.0, abs=0.05)
    assert set(exps["processes"]) == {3} and set(exps["points"]) == {4}
    assert set(exps["params"]) == {"mode=plain donate=True"}
    (change,) = exponent_changes(exps.reset_index(), [("0.4.30", "0.4.31")]).itertuples()
    assert change.verdict == "changed" and change.ci_low > 0.9


def test_the_report_has_a_scaling_section_only_where_something_is_swept(tmp_path):
    from analysis_data import record, write

    from jaxbench.analysis.report import write_report

    write(tmp_path / "r" / "a.jsonl", _loop_records("0.4.30", 1.0, seed=1))
    write(tmp_path / "r" / "b.jsonl", _loop_records("0.4.31", 2.0, seed=2))
    text = write_report([tmp_path / "r"], tmp_path / "out").read_text()
    section = text.split("## Scaling exponents", 1)[1].split("\n## ", 1)[0]
    assert "1 `changed` of 1" in section and "0.4.30 → 0.4.31" in section
    write(tmp_path / "flat" / "a.jsonl", [record("0.4.30"), record("0.4.31", run_id="x")])
    text = write_report([tmp_path / "flat"], tmp_path / "out2").read_text()
    assert "## Scaling exponents" not in text


def test_compare_prints_the_change_of_exponent_of_two_result_paths(tmp_path):
    from analysis_data import write
    from typer.testing import CliRunner

    from jaxbench.cli import app

    write(tmp_path / "a" / "run.jsonl", _loop_records("0.4.30", 1.0, seed=1))
    write(tmp_path / "b" / "run.jsonl", _loop_records("0.4.30", 2.0, seed=2))
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 1, result.output  # the larger sizes are slower
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("scaling:")]
    assert "loop mode=plain donate=True: exponent of latency in n 1.00 -> 2.00" in line
    assert line.endswith(": changed")


def test_records_a_log_log_fit_cannot_take_are_left_out_not_raised(tmp_path):
    """An ``ok`` record without samples (asv's ``track_*``, or a hand-edited line) and a swept
    value of 0 give no point; the other points are still fitted, and ``compare`` decides."""
    from analysis_data import write
    from typer.testing import CliRunner

    from jaxbench.analysis import load_results
    from jaxbench.analysis.scaling import exponents_frame
    from jaxbench.cli import app

    for side, exponent in (("a", 1.0), ("b", 2.0)):
        recs = _loop_records("0.4.30", exponent, seed=3)
        recs[0] = recs[0].model_copy(update={"samples_s": []})
        zero = recs[1].model_copy(update={"params": {**recs[1].params, "n": 0}})
        write(tmp_path / side / "run.jsonl", [*recs, zero])
    frame, _ = load_results([tmp_path / "a"])
    (fit,) = exponents_frame(frame).itertuples()
    assert fit.points == 4 and fit.exponent == pytest.approx(1.0, abs=0.05)
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 1, result.output  # slower, not a crash
    assert any(ln.startswith("scaling:") for ln in result.output.splitlines())
