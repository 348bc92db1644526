"""jaxbench.analysis: version order, loading with problems, conditions, statistics, comparisons.

Comparisons are judged over processes (distinct ``run_id``s here): :func:`processes` writes
several, each with its own offset (log sd :data:`analysis_data.PROCESS_SD`).
"""

import json
import math
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_data import (
    BASE_ENV,
    CALL_SD,
    PROCESS_SD,
    VERSIONS,
    forward_records,
    lognormal,
    record,
    write,
)
from scipy import stats as sps

from jaxbench import analysis
from jaxbench.analysis.compare import BASIS, COMPILE, STEADY_STATE

ROOT = Path(__file__).resolve().parent.parent


def processes(version, median, k=4, n=100, seed=0, process_sd=PROCESS_SD, **fields):
    """``k`` records of ``version``, each its own process (run), with a process offset each."""
    rng = np.random.default_rng([seed, k, n])
    recs = []
    for p in range(k):
        scale = math.exp(process_sd * rng.standard_normal())
        samples = lognormal(median * scale, n, seed=int(rng.integers(1 << 30)), sigma=CALL_SD)
        recs.append(record(version, samples, run_id=f"{version}-{seed}-p{p}", **fields))
    return recs


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


def test_an_integer_parameter_other_records_lack_stays_an_integer(tmp_path):
    from jaxbench.analysis.scaling import exponents_frame

    recs = [record(params={"heads": 4, "trip": t, "scale": 0.5}, benchmark="mine",
                   samples=lognormal(1e-3 * t, 5, seed=t)) for t in (1, 2, 4)]  # fmt: skip
    frame = load(tmp_path, [*recs, record(params={"size": "tiny"})])
    assert frame["param.heads"].tolist() == [4, 4, 4, None]
    assert frame["param.scale"].dtype.kind == "f"  # floats are floats
    (row,) = exponents_frame(frame[frame["benchmark"] == "mine"]).itertuples()
    assert row.params == "heads=4 scale=0.5" and row.swept == "trip"


def test_loaded_frame_and_summaries_keep_version_order(tmp_path):
    recs = [record(v, lognormal(1e-3, 20, seed=i)) for i, v in enumerate(reversed(VERSIONS))]
    frame = load(tmp_path, recs)
    assert list(frame["version"].cat.categories) == VERSIONS
    summary = analysis.case_summary(analysis.steady_state_samples(frame))
    assert list(summary["version"].astype(str)) == VERSIONS
    assert analysis.compare_to_previous(frame, "0.4.36").baseline == ("0.4.36.dev20241122")


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
    assert named["corrupt.jsonl"].startswith("line 2: not JSON (cut short?): ")
    assert named["corrupt.jsonl"].endswith("; 1 loaded")
    not_ours = "not a jaxbench object (no 'kind', "
    assert named["foreign.jsonl"].startswith(f"2 bad lines (1, 2; first: {not_ours}")
    assert named["foreign.jsonl"].endswith("); nothing loaded")
    assert named["foreign.json"].startswith(not_ours)
    assert named["garbage.json"].startswith("not UTF-8 text: ")
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


def test_drawn_samples_keep_every_call_of_a_small_group_and_the_quantiles_of_a_large_one(
    tmp_path,
):
    rng = np.random.default_rng(7)
    many = list(rng.lognormal(size=5_000))
    few = [3.0, 1.0, 2.0]
    recs = [
        record("0.4.30", many[:2_000], run_id="p1"),
        record("0.4.30", many[2_000:], run_id="p2"),
        record("0.4.31", few),
        record("0.4.31", [9.0], status="recompiled"),
    ]
    frame = load(tmp_path, recs)
    frame.at[1, "samples_s"] = [*frame.at[1, "samples_s"], math.nan]  # as a frame may hold
    by = ["case", "version"]
    drawn = analysis.drawn_samples(frame, by, most=100)
    assert list(drawn.columns) == [*by, "latency_s"]
    assert drawn["version"].dtype == frame["version"].dtype  # still in version order
    large = drawn.loc[drawn["version"] == "0.4.30", "latency_s"].to_numpy()
    assert len(large) == 100  # of 5,000 calls (the nan left out) in two records
    assert (large[0], large[-1]) == (min(many), max(many))
    # every latency's ECDF differs from the whole group's by at most 1 / (most - 1)
    whole = np.sort(many)
    at = np.concatenate([whole, whole * (1 - 1e-9)])
    gap = np.abs(
        np.searchsorted(whole, at, side="right") / whole.size
        - np.searchsorted(large, at, side="right") / large.size
    )
    assert gap.max() <= 1 / 99
    small = drawn.loc[drawn["version"] == "0.4.31", "latency_s"]
    assert list(small) == [1.0, 2.0, 3.0]  # all kept; not the recompiled record's
    assert analysis.drawn_samples(frame[frame["status"] == "recompiled"], by, 100).empty
    with pytest.raises(ValueError, match="most must be at least 2, got 1"):
        analysis.drawn_samples(frame, by, most=1)


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

    cmp = analysis.compare_versions(frame, "0.4.30", "0.4.31")
    steady = cmp.table[cmp.table["metric"] == STEADY_STATE]
    assert len(steady) == 1  # only the matching condition is compared, the others never pooled
    assert steady["n_candidate"].item() == 1 and steady["calls_candidate"].item() == 100
    assert steady["verdict"].item() == "inconclusive"  # one process a side: no interval
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


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_another_backends_runtime_variables_do_not_split_a_series(backend, tmp_path):
    """A local sweep's task gets ``CUDA_VISIBLE_DEVICES=""`` from submitit and a plain run none:
    on the CPU that is one condition; on a GPU, which devices were visible is a condition."""
    base = {"backend": backend, "env_vars": {**BASE_ENV["env_vars"], "LIBTPU_INIT_ARGS": "--x"}}
    swept = {**base, "env_vars": {**base["env_vars"], "CUDA_VISIBLE_DEVICES": ""}}
    frame = load(tmp_path, [record("0.4.30", env=base), record("0.4.31", env=swept)])
    assert frame["condition"].nunique() == (1 if backend == "cpu" else 2)
    fields = analysis.conditions.condition_fields(frame)
    assert "env.LIBTPU_INIT_ARGS" not in fields  # a TPU runtime's variable, on neither backend
    assert ("env.CUDA_VISIBLE_DEVICES" in fields) == (backend == "gpu")


def test_split_series_reuses_the_loaded_labels_and_says_the_same(tmp_path, monkeypatch):
    from jaxbench.analysis import conditions

    extra = {"env_vars": {**BASE_ENV["env_vars"], "OMP_NUM_THREADS": "1"}}
    recs = [record("0.4.30"), record("0.4.31"), record("0.4.31", env=extra),
            record("0.4.31", env={"device_kind": "NVIDIA H100"})]  # fmt: skip
    frame = load(tmp_path, recs)
    assert frame.attrs[conditions.LABELLED_WITH] == (conditions.DEFAULT_FIELDS, True)
    bare = frame.copy()
    bare.attrs = {}
    read = []
    original = conditions.condition_fields

    def counting(rows, *args, **kwargs):
        read.append(len(rows))
        return original(rows, *args, **kwargs)

    monkeypatch.setattr(conditions, "condition_fields", counting)
    reused, fresh = conditions.split_series(frame), conditions.split_series(bare)
    assert read == [3, 4]  # one row per condition, then every row
    assert reused.reasons == fresh.reasons and len(reused.reasons) == 2
    pd.testing.assert_frame_equal(reused.conditions, fresh.conditions)
    assert list(reused.frame["condition"]) == list(fresh.frame["condition"])
    # other fields than the labels were made with: every row is read again
    read.clear()
    conditions.split_series(frame, [f for f in conditions.DEFAULT_FIELDS if f != "machine"])
    assert read == [4]


def test_unknown_condition_field_is_named(tmp_path):
    frame = load(tmp_path, [record()])
    with pytest.raises(KeyError, match="colour"):
        analysis.condition_fields(frame, ["colour"])


# -- statistics --------------------------------------------------------------------------------


def test_summary_figures_match_their_definitions():
    groups = [lognormal(2e-3 * f, 101, seed=i, sigma=0.3) for i, f in enumerate((0.9, 1.0, 1.1))]
    x = np.concatenate(groups)
    owners = np.repeat([0, 1, 2], 101)
    s = analysis.summarize_samples(x, owners)
    p25, p50, p75, p95 = np.percentile(x, [25, 50, 75, 95])
    assert s["n"] == 303 and s["processes"] == 3
    assert s["p50"] == pytest.approx(p50) and s["p95"] == pytest.approx(p95)
    assert s["iqr"] == pytest.approx(p75 - p25)
    assert s["mad"] == pytest.approx(np.median(np.abs(x - np.median(x))))
    # The interval is over processes: the t interval of the mean log per-process median.
    logs = np.log([np.median(g) for g in groups])
    half = sps.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert s["ci_low"] == pytest.approx(math.exp(logs.mean() - half))
    assert s["ci_high"] == pytest.approx(math.exp(logs.mean() + half))
    one = analysis.summarize_samples(x)  # no processes given: one process, no interval
    assert one["processes"] == 1 and math.isnan(one["ci_low"]) and math.isnan(one["ci_high"])
    assert analysis.summarize_samples([])["n"] == 0


def test_case_summary_counts_processes(tmp_path):
    frame = load(tmp_path, processes("0.4.30", 1e-3, k=3, n=20))
    (row,) = analysis.case_summary(analysis.steady_state_samples(frame)).to_dict("records")
    assert row["n"] == 60 and row["processes"] == 3
    assert row["ci_low"] < row["p50"] < row["ci_high"]


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        ((1.05, 1.15), "slower"),  # wholly above 1.02
        ((1.01, 1.15), "slower"),  # a change shown (above 1), its estimate beyond 1.02
        ((0.99, 1.15), "inconclusive"),  # no change shown
        ((1.001, 1.025), "inconclusive"),  # a change shown, but its estimate under 1.02
        ((0.99, 1.01), "same"),  # wholly within (1/1.02, 1.02)
        ((1.005, 1.015), "same"),  # a real change, but smaller than the threshold
        ((0.85, 0.95), "faster"),
        ((0.90, 1.10), "inconclusive"),
        ((math.nan, math.nan), "inconclusive"),  # no interval
    ],
)
def test_verdict_rule(interval, expected):
    assert analysis.decide(*interval, threshold=0.02) == expected


def test_verdict_rejects_bad_settings():
    with pytest.raises(ValueError, match="threshold"):
        analysis.decide(1.0, 1.1, threshold=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        analysis.estimate_independent([[1.0], [1.1]], [[1.0], [1.2]], alpha=1.5)


# -- comparisons -------------------------------------------------------------------------------


def test_a_ten_percent_shift_is_slower_with_an_interval_holding_1_10(tmp_path):
    recs = processes("0.4.30", 1e-3, seed=11) + processes("0.4.31", 1.10e-3, seed=12)
    frame = load(tmp_path, recs)
    row = analysis.compare_versions(frame, "0.4.30", "0.4.31").table.iloc[0]
    assert row["metric"] == STEADY_STATE and row["basis"] == BASIS
    assert row["n_baseline"] == row["n_candidate"] == 4
    assert row["calls_baseline"] == row["calls_candidate"] == 400
    assert row["verdict"] == "slower"
    assert 1.02 < row["ci_low"] <= 1.10 <= row["ci_high"]
    assert row["p_value"] < 0.05 and 0 < row["detectable"] < 0.10
    back = analysis.compare_versions(frame, "0.4.31", "0.4.30").table.iloc[0]
    assert back["verdict"] == "faster"
    assert back["ci_low"] <= 1 / 1.10 <= back["ci_high"] < 1 / 1.02


def test_cases_are_listed_with_their_numbers_in_numeric_order(tmp_path):
    recs = []
    for i, k in enumerate((16, 2, 256)):
        params = {"size": "tiny", "dtype": "float32", "k": k}
        for version in ("0.4.30", "0.4.31"):
            recs += processes(version, 1e-3, seed=20 + i, params=params, benchmark="forward")
    frame = load(tmp_path, recs)
    table = analysis.compare_versions(frame, "0.4.30", "0.4.31").table
    steady = table[table["metric"] == STEADY_STATE]
    assert [c.split()[2] for c in steady["case"]] == ["k=2", "k=16", "k=256"]


def test_many_calls_in_one_process_a_side_settle_nothing(tmp_path):
    """The process is the unit: 4000 calls in one process a side give no interval."""
    recs = [
        record("0.4.30", lognormal(1e-3, 4000, seed=13, sigma=0.01), run_id="a"),
        record("0.4.31", lognormal(1.10e-3, 4000, seed=14, sigma=0.01), run_id="b"),
    ]
    row = analysis.compare_versions(load(tmp_path, recs), "0.4.30", "0.4.31").table.iloc[0]
    assert row["ratio"] == pytest.approx(1.10, rel=0.01)
    assert row["verdict"] == "inconclusive" and math.isnan(row["ci_low"])
    assert "gives no interval" in row["advice"]


def test_an_a_a_pair_is_same_never_slower_or_faster(tmp_path):
    recs = processes("0.4.30", 1e-3, k=6, seed=21) + processes("0.4.31", 1e-3, k=6, seed=22)
    frame = load(tmp_path, recs)
    row = analysis.compare_versions(frame, "0.4.30", "0.4.31").table.iloc[0]
    assert row["verdict"] == "same"
    assert 1 / 1.02 < row["ci_low"] <= 1 <= row["ci_high"] < 1.02


def test_a_real_shift_below_the_threshold_is_same(tmp_path):
    recs = processes("0.4.30", 1e-3, k=8, n=400, seed=31, process_sd=0.001)
    recs += processes("0.4.31", 1.01e-3, k=8, n=400, seed=32, process_sd=0.001)
    frame = load(tmp_path, recs)
    row = analysis.compare_versions(frame, "0.4.30", "0.4.31").table.iloc[0]
    assert row["ci_low"] > 1 and row["p_value"] < 1e-3  # the 1 % is real ...
    assert row["verdict"] == "same"  # ... but smaller than the 2 % that matters
    loose = analysis.compare_versions(frame, "0.4.30", "0.4.31", threshold=0.005)
    assert loose.table.iloc[0]["verdict"] == "slower"


def test_an_interval_reaching_past_the_threshold_is_inconclusive_with_advice(tmp_path):
    recs = processes("0.4.30", 1e-3, k=2, seed=41, process_sd=0.03)
    recs += processes("0.4.31", 1.03e-3, k=2, seed=42, process_sd=0.03)
    row = analysis.compare_versions(load(tmp_path, recs), "0.4.30", "0.4.31").table.iloc[0]
    assert row["verdict"] == "inconclusive"
    assert row["ci_low"] < 1.02 < row["ci_high"]
    assert re.search(r"run about \d+ more processes a side|will not settle it", row["advice"])
    assert row["detectable"] > 0.02


def test_one_outlying_process_is_named_as_why_a_comparison_is_inconclusive(tmp_path):
    """A process twice as slow as the rest of its side widens the interval: the row says so."""
    recs = processes("0.4.30", 1e-3, k=5, seed=43, process_sd=0.005)
    recs += processes("0.4.31", 1e-3, k=5, seed=44, process_sd=0.005)
    slow = recs[7]  # the candidate's third process, as if a disturbance had slowed it
    recs[7] = slow.model_copy(update={"samples_s": [2 * x for x in slow.samples_s]})
    row = analysis.compare_versions(load(tmp_path, recs), "0.4.30", "0.4.31").table.iloc[0]
    assert row["verdict"] == "inconclusive"
    advice = row["advice"]
    assert advice.startswith("candidate process 2 (run:0.4.31-44-p2) stands out: 1.99x the median")
    assert "without it: same (1.002 [0.993, 1.010])" in advice and "(otherwise: run about" in advice
    # without it, nothing stands out: the advice is the usual one
    kept = [r for i, r in enumerate(recs) if i != 7]
    (tmp_path / "kept").mkdir()
    clean = analysis.compare_versions(load(tmp_path / "kept", kept), "0.4.30", "0.4.31")
    assert "stands out" not in clean.table.iloc[0]["advice"]


def test_compile_time_is_compared_apart_from_steady_state(tmp_path):
    recs = processes("0.4.30", 1e-3, seed=51) + processes("0.4.31", 1e-3, seed=52)
    for i, rec in enumerate(recs):  # one compile per process, 30 % slower in 0.4.31
        slower = 1.30 if rec.env.jax == "0.4.31" else 1.0
        recs[i] = rec.model_copy(update={"compile_s": slower * (1 + 0.01 * (i % 4))})
    table = analysis.compare_versions(load(tmp_path, recs), "0.4.30", "0.4.31").table
    by_metric = table.set_index("metric")
    assert by_metric.loc[STEADY_STATE, "verdict"] in ("same", "inconclusive")
    assert by_metric.loc[COMPILE, "verdict"] == "slower"
    assert by_metric.loc[COMPILE, "n_baseline"] == by_metric.loc[COMPILE, "calls_baseline"] == 4
    assert by_metric.loc[COMPILE, "ci_low"] <= 1.30 <= by_metric.loc[COMPILE, "ci_high"]


def test_one_compile_a_side_is_inconclusive_not_judged_on_the_threshold(tmp_path):
    recs = [
        record("0.4.30", compile_s=1.00, run_id="a"),
        record("0.4.31", compile_s=1.30, run_id="b"),
    ]
    table = analysis.compare_versions(load(tmp_path, recs), "0.4.30", "0.4.31").table
    row = table[table["metric"] == COMPILE].iloc[0]
    assert row["ratio"] == pytest.approx(1.30)
    assert row["verdict"] == "inconclusive" and math.isnan(row["ci_low"])


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


def test_forward_table_takes_the_median_of_every_steady_state_call_of_its_records(tmp_path):
    (lin, vmap) = forward_records(ks=(4,))
    recs = [
        lin.model_copy(update={"samples_s": [5.0, 1.0, 3.0]}),
        lin.model_copy(update={"samples_s": [2.0], "run_id": "p2", "metrics": {}}),
        lin.model_copy(update={"samples_s": [99.0, 99.0], "status": "recompiled"}),
        lin.model_copy(update={"samples_s": [], "status": "failed"}),
        vmap.model_copy(update={"samples_s": [4.0, 6.0]}),
    ]
    table = analysis.forward_table(load(tmp_path, recs)).set_index("benchmark")
    # 1, 2, 3, 5: even, so the mean of the middle two; the recompiled calls are not steady state
    assert table.loc["forward/linearize", ["p50_s", "n"]].tolist() == [2.5, 4]
    assert table.loc["forward/linearize", "held_bytes"] == 1 << 20  # the largest recorded
    assert table.loc["forward/vmap_jvp", ["p50_s", "n"]].tolist() == [5.0, 2]


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


def test_forward_records_without_wrt_are_tabled_not_a_key_error(tmp_path):
    """Records from before ``wrt`` existed group under ``n/a`` (``report`` once raised here)."""
    recs = forward_records()
    for r in recs:
        r.params.pop("wrt")
    table = analysis.forward_table(load(tmp_path, recs))
    assert len(table) == 8 and set(table["param.wrt"]) == {"n/a"}


def test_records_sharing_an_environment_keep_their_own_per_record_conditions(tmp_path):
    from jaxbench.analysis.conditions import FIELD_GETTERS, PER_RECORD, condition_fields

    recs = [record("0.4.30"), record("0.4.30", noise={"gpu_throttled": True}),
            record("0.4.30", metrics={"mesh": {"data": 2}}),
            record("0.4.30", compilation_cache={"dir": "/cache"})]  # fmt: skip
    frame, _ = analysis.load_results(write(tmp_path / "run.jsonl", recs))
    assert frame["env"].map(id).nunique() == 1  # one environment model, read once
    fields = condition_fields(frame)
    assert fields["gpu_throttled"].tolist()[:2] == ["(not recorded)", "GPU clocks held down"]
    assert fields["mesh"].nunique() == 2 and fields["cache_dir"].nunique() == 2
    assert frame["condition"].nunique() == 4
    # every other field reads the environment alone: one value for all four records
    for name in set(FIELD_GETTERS) - PER_RECORD:
        assert [FIELD_GETTERS[name](row) for _, row in frame.iterrows()].count(
            FIELD_GETTERS[name](frame.iloc[0])) == 4, name  # fmt: skip


def test_a_side_whose_values_are_all_zero_is_not_compared_and_the_rest_is():
    """A compile time of 0 s on every baseline process has no log: that one row is named as
    not compared, and every other row is still estimated (it used to stop the comparison)."""
    from jaxbench.analysis.frames import records_frame
    from jaxbench.store import Item

    items, sides = [], ("0.4.30", "0.4.31")
    for version in sides:
        for p in range(3):
            for k in (1, 2):
                compile_s = 0.0 if (version, k) == (sides[0], 2) else 0.1 * (1 + p)
                samples = lognormal(1e-3 * k, 20, seed=100 * p + k)
                params = {"size": "tiny", "dtype": "float32", "k": k}
                rec = record(version, samples, run_id=f"{version}-{p}", params=params,
                             compile_s=compile_s)  # fmt: skip
                items.append(Item(rec, Path(f"{version}-{p}.jsonl"), None))
    result = analysis.compare_versions(records_frame(items), *sides)
    rows = result.table.groupby("metric")["case"].apply(set)
    assert len(rows[STEADY_STATE]) == 2 and len(rows[COMPILE]) == 1
    (note,) = [u for u in result.unmatched if "no positive value" in u]
    assert note.startswith(f"{COMPILE} train_step ") and "k=2" in note


def test_a_comparison_of_many_processes_is_each_cases_estimate_over_its_processes():
    """The comparison takes every process's median at once; each row must be what the
    estimate over that case's processes gives, with nan, inf, empty and not-ok records, two
    records of one case in one process, and rows in any order."""
    from jaxbench.analysis.compare import compare_versions
    from jaxbench.analysis.frames import records_frame
    from jaxbench.inference import verdicts
    from jaxbench.store import Item

    rng = np.random.default_rng(7)
    items = []
    for version, slower in (("0.4.30", 1.0), ("0.4.31", 1.04)):
        for p in range(6):
            for k in (1, 2, 3):
                samples = lognormal(1e-3 * k * slower, 30, seed=int(rng.integers(1 << 20)))
                status = "recompiled" if (p, k) == (3, 1) else "ok"
                params = {"size": "tiny", "dtype": "float32", "k": k}
                for again in range(2 if (p, k) == (4, 2) else 1):  # twice in one process
                    rec = record(version, samples if not again else samples[:10], params=params,
                                 run_id=f"{version}-{p}", status=status,
                                 compile_s=0.1 * (1 + p) if k != 1 else None)  # fmt: skip
                    # a frame may hold what a record file may not: set after validation
                    if (p, k) == (1, 2):
                        rec.samples_s[4] = math.nan  # left out
                    if (p, k) == (2, 3):
                        rec.samples_s[0] = math.inf  # not a latency: left out of the estimate
                    items.append(Item(rec, Path(f"{version}-{p}.jsonl"), None))
    frame = records_frame(items).sample(frac=1.0, random_state=1)
    table = compare_versions(frame, "0.4.30", "0.4.31").table
    assert len(table) == 5  # three cases in steady state, two with a compile time
    for row in table.itertuples():
        sides = []
        for version in ("0.4.30", "0.4.31"):
            rows = frame[(frame["case"] == row.case) & (frame["version"] == version)]
            if row.metric == STEADY_STATE:
                rows = rows[rows["status"] == "ok"]
                per = {p: [x for s in g["samples_s"] for x in s if not math.isnan(x)]
                       for p, g in rows.groupby("process")}  # fmt: skip
            else:
                per = {p: g["compile_s"].dropna().tolist() for p, g in rows.groupby("process")}
            sides.append([np.asarray(v, dtype=float) for v in per.values() if v])
        want = verdicts.estimate_independent(*sides)
        assert (row.ratio, row.ci_low, row.ci_high, row.n_baseline, row.calls_candidate) == (
            want.ratio,
            want.ci_low,
            want.ci_high,
            want.units_baseline,
            want.calls_candidate,
        )


def test_cases_whose_parameters_differ_only_in_type_keep_their_own_labels(tmp_path):
    params = ({"flag": 1}, {"flag": True}, {"scale": 2}, {"scale": 2.0})
    recs = [record(benchmark="mywl:step", params=p) for p in params]
    frame, _ = analysis.load_results(write(tmp_path / "run.jsonl", recs))
    assert frame["case"].tolist() == ["mywl:step flag=1", "mywl:step flag=True",
                                      "mywl:step scale=2", "mywl:step scale=2.0"]  # fmt: skip


def test_the_forward_table_takes_a_frame_whose_index_repeats(tmp_path):
    frame, _ = analysis.load_results(write(tmp_path / "run.jsonl", forward_records(ks=(1, 2))))
    doubled = pd.concat([frame, frame])  # the index repeats: 0, 1, ..., 0, 1, ...
    table = analysis.forward_table(doubled)
    assert (table["n"] == 2 * analysis.forward_table(frame)["n"]).all()
