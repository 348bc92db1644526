"""jaxbench.analysis: version order, loading with problems, conditions, statistics, comparisons."""

import json
import math
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_data import BASE_ENV, VERSIONS, forward_records, lognormal, record, write
from scipy import stats as sps

from jaxbench import analysis
from jaxbench.analysis.compare import BASIS_TESTS, BASIS_THRESHOLD, COMPILE, STEADY_STATE

ROOT = Path(__file__).resolve().parent.parent


def load(tmp_path, records, name="run.jsonl"):
    write(tmp_path / name, records)
    frame, problems = analysis.load_results(tmp_path)
    assert problems == []
    return frame


# -- versions ----------------------------------------------------------------------------------


def test_versions_sort_as_versions_not_text():
    shuffled = VERSIONS[:]
    random.Random(1).shuffle(shuffled)
    assert analysis.sort_versions([*shuffled, "0.4.9", None]) == VERSIONS
    cat = analysis.version_categorical(shuffled)
    assert list(cat.categories) == VERSIONS
    assert list(pd.Series(cat).sort_values()) == VERSIONS
    assert analysis.previous_version(shuffled, "0.4.36") == "0.4.36.dev20241122"
    assert analysis.previous_version(shuffled, "0.4.10") == "0.4.9"
    assert analysis.previous_version(shuffled, "0.4.9") is None


def test_non_pep440_versions_sort_last_and_are_kept():
    assert analysis.sort_versions(["deadbeef", "0.4.10", "0.4.9"]) == [
        "0.4.9",
        "0.4.10",
        "deadbeef",
    ]


def test_loaded_frame_and_summaries_keep_version_order(tmp_path):
    recs = [record(v, lognormal(1e-3, 20, seed=i)) for i, v in enumerate(reversed(VERSIONS))]
    frame = load(tmp_path, recs)
    assert list(frame["version"].cat.categories) == VERSIONS
    summary = analysis.case_summary(analysis.steady_state_samples(frame), n_resamples=200)
    assert list(summary["version"].astype(str)) == VERSIONS
    assert analysis.compare_to_previous(frame, "0.4.36", n_resamples=200).baseline == (
        "0.4.36.dev20241122"
    )


# -- loading -----------------------------------------------------------------------------------


def test_corrupt_and_foreign_files_are_named_and_the_rest_loads(tmp_path):
    good = record("0.4.30", lognormal(1e-3, 10, seed=1))
    write(tmp_path / "good.jsonl", [good])
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(good.model_dump_json() + "\n{not json\n")
    (tmp_path / "foreign.json").write_text(json.dumps({"hello": "world"}))
    (tmp_path / "foreign.jsonl").write_text('{"event": "login"}\n{"event": "logout"}\n')
    (tmp_path / "garbage.json").write_bytes(b"\x00\xff not json")
    (tmp_path / "sweep-rec.json").write_text(good.model_dump_json())  # one sweep record
    asv = tmp_path / "asv"
    shutil.copytree(ROOT / "results" / "asv", asv)

    frame, problems = analysis.load_results(tmp_path)

    named = {Path(p.path).name: p.reason for p in problems}
    assert set(named) == {"corrupt.jsonl", "foreign.json", "foreign.jsonl", "garbage.json"}
    assert "line 2" in named["corrupt.jsonl"] and "1 records loaded" in named["corrupt.jsonl"]
    assert "2 lines" in named["foreign.jsonl"] and "nothing loaded" in named["foreign.jsonl"]
    assert "neither a jaxbench record nor an asv result" in named["foreign.json"]
    by_file = frame.groupby(frame["file"].map(lambda f: Path(f).name)).size()
    assert by_file["good.jsonl"] == 1 and by_file["corrupt.jsonl"] == 1
    assert by_file["sweep-rec.json"] == 1
    assert set(frame["source"]) == {"jaxbench", "asv"}
    assert (frame["source"] == "asv").sum() > 100


def test_missing_path_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        analysis.load_results(tmp_path / "nope")


def test_committed_results_load_without_problems():
    frame, problems = analysis.load_results(ROOT / "results")
    assert problems == []
    assert {"jaxbench", "asv"} <= set(frame["source"])
    cats = list(frame["version"].cat.categories)
    assert cats == analysis.sort_versions(cats)


def test_steady_state_drops_recompiled_and_compile_times_drop_cache_hits(tmp_path):
    recs = [
        record("0.4.30", [1.0, 1.0], compile_s=2.0),
        record("0.4.30", [9.0], status="recompiled", compile_s=3.0),
        record("0.4.30", [1.0], compile_s=0.01, compilation_cache={"cache_hits": 1}),
    ]
    frame = load(tmp_path, recs)
    assert list(analysis.steady_state_samples(frame)["latency_s"]) == [1.0, 1.0, 1.0]
    assert sorted(analysis.compile_times(frame)["compile_s"]) == [2.0, 3.0]


# -- conditions --------------------------------------------------------------------------------


def test_rows_under_different_conditions_are_never_pooled(tmp_path):
    base = lognormal(1e-3, 100, seed=1)
    recs = [
        record("0.4.30", base),
        record("0.4.31", lognormal(1e-3, 100, seed=2)),
        # Same case and version, but XLA_FLAGS differ: a separate series.
        record("0.4.31", lognormal(5e-4, 100, seed=3), env={"env_vars": {"XLA_FLAGS": "--x"}}),
        # Another device: another series, and with no 0.4.30 counterpart.
        record("0.4.31", lognormal(1e-4, 100, seed=4), env={"device_kind": "NVIDIA H100"}),
    ]
    frame = load(tmp_path, recs)
    assert frame["condition"].nunique() == 3

    split = analysis.split_series(frame)
    text = "\n".join(split.reasons)
    assert "env.XLA_FLAGS '--x' vs '--xla_cpu_multi_thread_eigen=true'" in text
    assert "device_kind 'NVIDIA H100' vs 'cpu'" in text
    assert len(split.reasons) == 2

    cmp = analysis.compare_versions(frame, "0.4.30", "0.4.31", n_resamples=500)
    steady = cmp.table[cmp.table["metric"] == STEADY_STATE]
    assert len(steady) == 1  # only the matching condition is compared, the others never pooled
    assert steady["n_candidate"].item() == 100
    assert steady["verdict"].item() == "unchanged"
    (unmatched,) = cmp.unmatched
    assert "NVIDIA H100@box" in unmatched and "conditions differ" in unmatched
    assert any("XLA_FLAGS" in r for r in cmp.kept_apart)


def test_a_jaxlib_other_than_jax_is_its_own_condition(tmp_path):
    recs = [record("0.4.30"), record("0.4.31"), record("0.4.31", env={"jaxlib": "0.4.30"})]
    frame = load(tmp_path, recs)
    cond = dict(zip(frame["jaxlib"], frame["condition"], strict=True))
    assert frame["condition"].nunique() == 2
    assert cond["0.4.30"] != cond["0.4.31"]


def test_condition_labels_do_not_depend_on_the_other_rows(tmp_path):
    # One row records a variable the others do not: the frame gains an env.OMP_NUM_THREADS
    # column, which must not rename the others' condition (a pair and the whole frame agree).
    extra = {"env_vars": {**BASE_ENV["env_vars"], "OMP_NUM_THREADS": "1"}}
    frame = load(tmp_path, [record("0.4.30"), record("0.4.31"), record("0.4.31", env=extra)])
    alone = analysis.add_conditions(frame.iloc[:2].drop(columns="condition"))
    assert list(alone["condition"]) == list(frame["condition"].iloc[:2])
    assert frame["condition"].nunique() == 2
    split = analysis.split_series(frame)
    assert "env.OMP_NUM_THREADS '1' vs '(not recorded)'" in split.reasons[0]


def test_unknown_condition_field_is_named(tmp_path):
    frame = load(tmp_path, [record()])
    with pytest.raises(KeyError, match="colour"):
        analysis.condition_fields(frame, ["colour"])


# -- statistics --------------------------------------------------------------------------------


def test_summary_figures_match_their_definitions():
    x = np.array(lognormal(2e-3, 301, seed=7, sigma=0.3))
    s = analysis.summarize_samples(x, n_resamples=1000)
    p25, p50, p75, p95 = np.percentile(x, [25, 50, 75, 95])
    assert s["n"] == 301
    assert s["p50"] == pytest.approx(p50) and s["p95"] == pytest.approx(p95)
    assert s["iqr"] == pytest.approx(p75 - p25)
    assert s["mad"] == pytest.approx(np.median(np.abs(x - np.median(x))))
    assert s["ci_low"] < p50 < s["ci_high"]
    # The interval of a median of 301 lognormal(sigma=0.3) values is a few percent wide.
    assert 0.01 < (s["ci_high"] - s["ci_low"]) / p50 < 0.15
    assert analysis.summarize_samples(x, n_resamples=1000) == s  # seeded: repeats exactly
    assert analysis.summarize_samples([])["n"] == 0
    assert math.isnan(analysis.median_ci([1.0])[0])


def test_mann_whitney_is_scipys():
    a, b = lognormal(1, 40, seed=1), lognormal(1.2, 40, seed=2)
    assert analysis.mann_whitney_p(a, b) == pytest.approx(sps.mannwhitneyu(a, b).pvalue)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((1.10, 1.05, 1.15, 0.001), "slower"),
        ((1.10, 0.99, 1.20, 0.001), "unchanged"),  # interval reaches 1
        ((1.01, 1.005, 1.015, 1e-9), "unchanged"),  # real but below the 2 % threshold
        ((1.10, 1.05, 1.15, 0.20), "unchanged"),  # rank test disagrees
        ((0.90, 0.85, 0.95, 0.001), "faster"),
        ((1.03, math.nan, math.nan, math.nan), "slower"),  # threshold only
        ((1 / 1.03, math.nan, math.nan, math.nan), "faster"),
        ((1.01, math.nan, math.nan, math.nan), "unchanged"),
    ],
)
def test_verdict_rule(args, expected):
    assert analysis.verdict(*args, threshold=0.02, alpha=0.05) == expected


def test_verdict_rejects_bad_settings():
    with pytest.raises(ValueError, match="threshold"):
        analysis.verdict(1.0, threshold=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        analysis.verdict(1.0, alpha=1.5)


# -- comparisons -------------------------------------------------------------------------------


def test_a_ten_percent_shift_is_slower_with_an_interval_holding_1_10(tmp_path):
    recs = [
        record("0.4.30", lognormal(1e-3, 400, seed=11)),
        record("0.4.31", lognormal(1.10e-3, 400, seed=12)),
    ]
    frame = load(tmp_path, recs)
    row = analysis.compare_versions(frame, "0.4.30", "0.4.31").table.iloc[0]
    assert row["metric"] == STEADY_STATE and row["basis"] == BASIS_TESTS
    assert row["verdict"] == "slower"
    assert 1 < row["ci_low"] <= 1.10 <= row["ci_high"]
    assert row["p_value"] < 0.05
    back = analysis.compare_versions(frame, "0.4.31", "0.4.30").table.iloc[0]
    assert back["verdict"] == "faster"
    assert back["ci_low"] <= 1 / 1.10 <= back["ci_high"] < 1


def test_an_a_a_pair_is_unchanged(tmp_path):
    recs = [
        record("0.4.30", lognormal(1e-3, 400, seed=21)),
        record("0.4.31", lognormal(1e-3, 400, seed=22)),
    ]
    frame = load(tmp_path, recs)
    row = analysis.compare_versions(frame, "0.4.30", "0.4.31").table.iloc[0]
    assert row["verdict"] == "unchanged"
    assert row["ci_low"] <= 1 <= row["ci_high"]


def test_a_significant_shift_below_the_threshold_is_unchanged(tmp_path):
    recs = [
        record("0.4.30", lognormal(1e-3, 4000, seed=31, sigma=0.01)),
        record("0.4.31", lognormal(1.01e-3, 4000, seed=32, sigma=0.01)),
    ]
    frame = load(tmp_path, recs)
    row = analysis.compare_versions(frame, "0.4.30", "0.4.31", n_resamples=500).table.iloc[0]
    assert row["ci_low"] > 1 and row["p_value"] < 1e-6
    assert row["verdict"] == "unchanged"
    loose = analysis.compare_versions(frame, "0.4.30", "0.4.31", threshold=0.005, n_resamples=500)
    assert loose.table.iloc[0]["verdict"] == "slower"


def test_compile_time_is_compared_apart_from_steady_state(tmp_path):
    same = lognormal(1e-3, 200, seed=41)
    recs = [
        record("0.4.30", same, compile_s=1.00),
        record("0.4.31", same, compile_s=1.30),
    ]
    frame = load(tmp_path, recs)
    table = analysis.compare_versions(frame, "0.4.30", "0.4.31", n_resamples=500).table
    by_metric = table.set_index("metric")
    assert by_metric.loc[STEADY_STATE, "verdict"] == "unchanged"
    assert by_metric.loc[COMPILE, "verdict"] == "slower"
    assert by_metric.loc[COMPILE, "basis"] == BASIS_THRESHOLD
    assert math.isnan(by_metric.loc[COMPILE, "ci_low"])
    assert by_metric.loc[COMPILE, "ratio"] == pytest.approx(1.30)


def test_repeated_compile_times_get_an_interval_and_a_test(tmp_path):
    recs = [record("0.4.30", compile_s=c) for c in lognormal(1.0, 8, seed=51, sigma=0.02)]
    recs += [record("0.4.31", compile_s=c) for c in lognormal(1.5, 8, seed=52, sigma=0.02)]
    frame = load(tmp_path, recs)
    table = analysis.compare_versions(frame, "0.4.30", "0.4.31", n_resamples=500).table
    row = table[table["metric"] == COMPILE].iloc[0]
    assert row["n_baseline"] == row["n_candidate"] == 8
    assert row["basis"] == BASIS_TESTS and row["verdict"] == "slower"
    assert row["ci_low"] <= 1.5 <= row["ci_high"]


def test_comparing_an_absent_version_names_the_ones_present(tmp_path):
    frame = load(tmp_path, [record("0.4.30")])
    with pytest.raises(ValueError, match=r"0\.4\.99.*0\.4\.30"):
        analysis.compare_versions(frame, "0.4.30", "0.4.99")


# -- forward mode ------------------------------------------------------------------------------


def test_forward_table_and_crossover(tmp_path):
    frame = load(tmp_path, forward_records())
    table = analysis.forward_table(frame)
    assert len(table) == 8
    lin = table[table["benchmark"] == "forward/linearize"].set_index("k")
    assert lin.loc[16, "p50_s"] == pytest.approx(20e-4) and lin.loc[16, "held_bytes"] == 1 << 20
    k_x = analysis.crossover_k(table)
    # r(4) = 8/8 = 1 (not cheaper), r(16) = 20/32 < 1: crossover between 4 and 16, at K = 4 here.
    assert k_x == pytest.approx(4.0)
    assert analysis.crossover_k(table, cheaper="forward/vmap_jvp", than="forward/linearize") is None


def test_crossover_between_measured_ks_is_interpolated(tmp_path):
    # r(2) = 6/4 = 1.5, r(8) = 12/16 = 0.75; the true crossover is K = 4.
    frame = load(tmp_path, forward_records(ks=(1, 2, 8, 32)))
    k_x = analysis.crossover_k(analysis.forward_table(frame))
    assert 2 < k_x < 8 and k_x == pytest.approx(4.0, rel=0.2)


def test_crossover_table_per_series_and_version(tmp_path):
    recs = forward_records("0.4.10", ks=(1, 2, 8, 32)) + forward_records("0.4.9", ks=(1, 2, 8, 32))
    frame = load(tmp_path, recs)
    table = analysis.forward.crossover_table(frame)
    assert list(table["version"]) == ["0.4.9", "0.4.10"]
    assert list(table["k_max"]) == [32, 32]
    assert table["k_linearize_vs_vmap_jvp"].iloc[0] == pytest.approx(4.0, rel=0.2)
    assert table["k_linearize_vs_jvp_loop"].isna().all()  # no jvp_loop records: not measured
    never = analysis.forward.crossover_table(
        frame, {"k": ("forward/vmap_jvp", "forward/linearize")}
    )
    assert (never["k"] == math.inf).all()  # vmap_jvp never wins up to K = 32
    ((key, rows),) = analysis.forward.forward_series(frame)
    assert key[:3] == ("small", "float32", "input") and len(rows) == len(recs)


def test_crossover_needs_one_series(tmp_path):
    frame = load(tmp_path, forward_records("0.4.30") + forward_records("0.4.31"))
    with pytest.raises(ValueError, match="one series"):
        analysis.crossover_k(analysis.forward_table(frame))


def test_an_unrelated_warning_while_loading_is_not_a_bad_line(tmp_path, monkeypatch):
    """E.g. a ResourceWarning from garbage collection during the read: not the file's fault."""
    import warnings

    from jaxbench.analysis import frames

    real = frames.read_records

    def noisy(path, errors="raise"):
        warnings.warn("Unclosed socket", ResourceWarning, stacklevel=1)
        return real(path, errors=errors)

    monkeypatch.setattr(frames, "read_records", noisy)
    write(tmp_path / "run.jsonl", [record(v) for v in VERSIONS[:2]])
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.warns(ResourceWarning, match="Unclosed socket"):
        frame, problems = analysis.load_results(tmp_path)
    assert len(frame) == 2
    assert [Path(p.path).name for p in problems] == ["bad.jsonl"]


def test_two_compile_times_a_side_fall_back_to_the_threshold(tmp_path):
    """With two values a side the rank test's p is >= 1/3 whatever they are: it cannot agree."""
    from jaxbench.analysis.compare import BASIS_FEW
    from jaxbench.analysis.stats import smallest_rank_p

    assert smallest_rank_p(2, 2) == pytest.approx(1 / 3)
    assert smallest_rank_p(4, 4) < 0.05 <= smallest_rank_p(3, 4)
    recs = [record("0.4.30", compile_s=c) for c in (1.00, 1.02)]
    recs += [record("0.4.31", compile_s=c) for c in (1.30, 1.33)]
    table = analysis.compare_versions(load(tmp_path, recs), "0.4.30", "0.4.31").table
    row = table[table["metric"] == COMPILE].iloc[0]
    assert row["p_value"] >= 1 / 3 and row["ci_low"] > 1  # the test alone would say unchanged
    assert row["basis"] == BASIS_FEW and row["verdict"] == "slower"
