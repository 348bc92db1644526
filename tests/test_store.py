"""The record store: every kind through one writer and one loader, one bad-line policy."""

import errno
import importlib.util
import json
import os

import pytest
from analysis_data import record, write, write_versions
from conftest import ROOT
from test_calibrate import record as calibration_record
from typer.testing import CliRunner

from jaxbench.analysis import load_results
from jaxbench.analysis.frames import samples_frame
from jaxbench.cli import app
from jaxbench.store import (
    KINDS,
    Appender,
    CaseComparison,
    DriftRow,
    PairRun,
    Record,
    ReferenceManifest,
    Round,
    StoreFormatError,
    SweepManifest,
    load,
    read_file,
    read_model,
    scan,
    write_json,
    write_jsonl,
)
from jaxbench.store import files as store_files
from jaxbench.store.drift import ReferenceInfo
from jaxbench.store.record import SCHEMA_VERSION


def make_record(**overrides) -> Record:
    fields = {
        "run_id": "r1",
        "benchmark": "train_step",
        "params": {"size": "tiny", "dtype": "float32"},
        "status": "ok",
        "samples_s": [0.1, 0.2, 0.3],
        "env": {"jax": "0.12.0", "jaxlib": "0.12.0", "backend": "cpu", "device_kind": "cpu"},
    }
    return Record(**(fields | overrides))


def comparison() -> CaseComparison:
    rounds = [Round(order="AB", baseline_s=[1e-3, 1.1e-3], candidate_s=[1e-3, 1.2e-3])]
    pair = PairRun(index=0, rounds=rounds, started_at="2026-01-01T00:00:00+00:00")
    return CaseComparison(mode="interleaved", workload="train_step", params={"size": "tiny"},
                          schedule={"pairs": 1}, pairs=[pair],
                          started_at="2026-01-01T00:00:00+00:00")  # fmt: skip


def drift_row() -> DriftRow:
    ref = ReferenceInfo(path="ref", created_at="2026", jax="0.12.0", jaxlib="0.12.0",
                        backend="cpu", device_kind="cpu")  # fmt: skip
    return DriftRow(run_id="d1", checked_at="2026", workload="train_step", dtype="float32",
                    set="standard", output="loss", rtol=1e-5, atol=1e-6, within_tolerance=True,
                    env={"jax": "0.12.0"}, reference=ref)  # fmt: skip


def manifest() -> SweepManifest:
    return SweepManifest(sweep_id="s1", created_at="2026", profile_path=None,
                         profile={"executor": "local"}, backend="cpu", timing={}, worker_env={},
                         env_root="envs", tasks=[])  # fmt: skip


def reference() -> ReferenceManifest:
    return ReferenceManifest(created_at="2026", size="tiny", env={}, tolerances={}, sets=[])


def test_every_kind_is_written_and_read_back_by_the_one_loader(tmp_path):
    with Appender(tmp_path / "run.jsonl") as out:
        out.write(make_record())
        out.write(make_record(run_id="r2"))
    write_jsonl(tmp_path / "interleave-x.jsonl", [comparison()])
    write_jsonl(tmp_path / "drift-x.jsonl", [drift_row()])
    write_json(tmp_path / "calibration-x.json", calibration_record())
    write_json(tmp_path / "sweep" / "sweep.json", manifest())
    write_json(tmp_path / "sweep" / "records" / "case.json", make_record(run_id="r3"))
    write_json(tmp_path / "ref" / "reference.json", reference())
    loaded = load(tmp_path)
    assert loaded.problems == []
    assert {i.kind for i in loaded.items} == KINDS
    assert [r.run_id for r in loaded.models("record")] == ["r1", "r2", "r3"]
    assert loaded.models("live-comparison") == [comparison()]
    assert loaded.models("jaxbench-drift") == [drift_row()]
    assert loaded.models("calibration") == [calibration_record()]
    assert loaded.models("sweep") == [manifest()]
    assert [i.line for i in loaded.of("record")] == [1, 2, None]
    only = load(tmp_path, kinds={"jaxbench-drift"})
    assert [i.kind for i in only.items] == ["jaxbench-drift"] and not only.problems


def test_schema_1_files_without_kind_still_load(tmp_path):
    old = make_record().model_dump(exclude={"kind", "noise"}) | {"schema_version": 1}
    live = comparison().model_dump(exclude={"kind", "schema_version"})
    sweep = manifest().model_dump(exclude={"kind", "schema_version"})
    (tmp_path / "run.jsonl").write_text(json.dumps(old) + "\n")
    (tmp_path / "interleave-old.jsonl").write_text(json.dumps(live) + "\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "sweep.json").write_text(json.dumps(sweep))
    loaded = load(tmp_path)
    assert loaded.problems == []
    (rec,) = loaded.models("record")
    assert rec.schema_version == 1 and rec.noise.model_dump() == {} and rec.kind == "record"
    assert loaded.models("live-comparison")[0].schema_version == 1
    assert read_model(tmp_path / "s" / "sweep.json", SweepManifest).sweep_id == "s1"
    assert SCHEMA_VERSION == 5 and json.loads(make_record().model_dump_json())["kind"] == "record"


def damaged(folder):
    """A run whose last line is cut short, a foreign JSON file, a line of a future schema."""
    run = folder / "run.jsonl"
    with Appender(run) as out:
        out.write(make_record())
        out.write(make_record(run_id="r2"))
    whole = run.read_bytes()
    future = make_record(run_id="r3").model_dump() | {"schema_version": SCHEMA_VERSION + 1}
    run.write_bytes(whole + json.dumps(future).encode() + b"\n" + whole.splitlines()[0][:40])
    (folder / "notes.json").write_text(json.dumps({"title": "not ours"}))
    return run


def test_a_cut_line_a_foreign_file_and_a_future_schema_are_named_and_the_rest_loads(tmp_path):
    run = damaged(tmp_path)
    loaded = load(tmp_path)
    assert [r.run_id for r in loaded.models("record")] == ["r1", "r2"]
    reasons = {p.path: p.reason for p in loaded.problems}
    assert set(reasons) == {str(run), str(tmp_path / "notes.json")}
    assert "2 bad lines (3, 4;" in reasons[str(run)] and "2 loaded" in reasons[str(run)]
    assert f"schema_version {SCHEMA_VERSION + 1} of kind 'record' is newer" in reasons[str(run)]
    assert "not a jaxbench object" in reasons[str(tmp_path / "notes.json")]
    with pytest.raises(StoreFormatError, match=rf"{run}:3: schema_version {SCHEMA_VERSION + 1}"):
        load(run, strict=True)


def test_a_cut_last_line_alone_says_so(tmp_path):
    run = tmp_path / "run.jsonl"
    with Appender(run) as out:
        out.write(make_record())
    run.write_bytes(run.read_bytes() + b'{"kind": "record", "run_id": "r2", "benchm')
    (problem,) = load(run).problems
    assert problem.reason.startswith("line 2: not JSON (cut short?)")
    assert problem.reason.endswith("1 loaded")


def test_a_schema_version_that_is_not_a_known_number_is_not_called_newer(tmp_path):
    line = make_record().model_dump() | {"schema_version": "2"}
    (tmp_path / "run.jsonl").write_text(json.dumps(line) + "\n")
    (problem,) = load(tmp_path).problems
    assert problem.reason.startswith("line 1: schema_version '2' of kind 'record' is not one")
    assert "newer" not in problem.reason


def test_a_study_file_is_passed_over_and_named_for_what_it_holds(tmp_path):
    study = tmp_path / "sensitivity-x.json"
    study.write_text(json.dumps({"kind": "sensitivity", "schema_version": 2, "rows": []}))
    assert load(tmp_path).problems == [] and load(tmp_path).items == []
    (named,) = load(study, kinds={"record"}).problems
    assert named.reason == "holds no record (it holds sensitivity)"


def test_an_unknown_kind_and_a_file_of_another_kind_named_explicitly(tmp_path):
    (tmp_path / "x.jsonl").write_text(json.dumps({"kind": "telemetry"}) + "\n")
    write_jsonl(tmp_path / "interleave-x.jsonl", [comparison()])
    (unknown,) = load(tmp_path / "x.jsonl").problems
    assert "kind 'telemetry' is not one this jaxbench reads" in unknown.reason
    (other,) = load(tmp_path / "interleave-x.jsonl", kinds={"record"}).problems
    assert other.reason == "holds no record (it holds live-comparison)"
    assert load(tmp_path, kinds={"record"}).problems == [unknown]  # found in a folder: passed over
    with pytest.raises(ValueError, match="unknown kinds"):
        load(tmp_path, kinds={"records"})
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load(tmp_path / "nowhere")


def test_show_cuts_a_long_history_to_the_last_records_and_says_so(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for i, name in enumerate(("aaa", "bbb", "ccc")):
        write_jsonl(folder / f"run-{i}.jsonl", [record(benchmark=name, run_id=f"r{i}")])
    runner = CliRunner()
    cut = runner.invoke(app, ["show", "--limit", "2", str(folder)])
    assert cut.exit_code == 0, cut.output
    assert "showing the last 2 of 3 records; --limit 0 shows all" in cut.output
    assert "aaa" not in cut.output and "ccc" in cut.output  # the newest kept
    whole = runner.invoke(app, ["show", "--limit", "0", str(folder)])
    assert whole.exit_code == 0 and "aaa" in whole.output
    assert "showing the last" not in whole.output
    bad = runner.invoke(app, ["show", "--limit", "-1", str(folder)])
    assert bad.exit_code == 2 and "--limit" in bad.output


def test_show_compare_and_report_name_the_same_problems_and_use_the_rest(tmp_path):
    folder = write_versions(tmp_path / "results", n=20)
    run = damaged(folder)
    runner = CliRunner()
    show = runner.invoke(app, ["show", str(run)])
    assert show.exit_code == 0, show.output
    assert "skipped:" in show.output and ":3" not in show.output.split("skipped:")[0]
    assert f"schema_version {SCHEMA_VERSION + 1}" in show.output and "train_step" in show.output
    strict = runner.invoke(app, ["show", "--strict", str(run)])
    assert (
        strict.exit_code == 2
        and f"run.jsonl:3: schema_version {SCHEMA_VERSION + 1}" in strict.output
    )
    compare = runner.invoke(app, ["compare", "0.4.9", "0.4.10", "--results", str(folder)])
    assert compare.exit_code in (0, 1), compare.output
    assert (
        f"schema_version {SCHEMA_VERSION + 1}" in compare.output and "notes.json" in compare.output
    )
    report = runner.invoke(app, ["report", str(folder), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert f"schema_version {SCHEMA_VERSION + 1}" in text and "notes.json" in text


def test_round_trip_into_frames(tmp_path):
    path = tmp_path / "run.jsonl"
    with Appender(path) as w:
        w.write(make_record())
        w.write(make_record(status="failed", samples_s=[], error="boom",
                            params={"size": "small", "dtype": "bfloat16"}))  # fmt: skip
    assert [r.status for r in read_file(path).models("record")] == ["ok", "failed"]
    frame, problems = load_results(tmp_path)
    assert problems == [] and list(frame["param.size"]) == ["tiny", "small"]
    assert list(frame["source"]) == ["jaxbench", "jaxbench"]
    samples = samples_frame(frame)
    assert list(samples["latency_s"]) == [0.1, 0.2, 0.3]
    assert list(samples["sample"]) == [0, 1, 2]


def test_bad_status_is_rejected():
    with pytest.raises(ValueError):
        make_record(status="great")


@pytest.mark.parametrize(
    ("sample", "reason"),
    [(-1.0, "greater than or equal to 0"), ("NaN", "a finite number"), ("Infinity", "finite")],
)
def test_a_record_with_an_impossible_latency_is_named_with_its_line(tmp_path, sample, reason):
    run = tmp_path / "run.jsonl"
    with Appender(run) as out:
        out.write(make_record())
    line = make_record(run_id="r2").model_dump_json().replace('"samples_s":[0.1,', "X")
    bad = line.replace("X", f'"samples_s":[{sample},')
    assert bad != line.replace("X", "")  # the samples were found and replaced
    run.write_bytes(run.read_bytes() + bad.encode() + b"\n")
    (problem,) = load(run).problems
    assert problem.reason.startswith("line 2: not a valid record: samples_s.0: ")
    assert reason in problem.reason and problem.reason.endswith("1 loaded")


@pytest.mark.parametrize("field", ["compile_s", "lower_s", "first_call_s"])
def test_a_record_with_a_negative_duration_is_named_with_its_line(tmp_path, field):
    run = tmp_path / "run.jsonl"
    good = json.loads(make_record().model_dump_json())
    run.write_text(json.dumps(good) + "\n" + json.dumps(good | {field: -1.0}) + "\n")
    (problem,) = load(run).problems
    assert problem.reason.startswith(f"line 2: not a valid record: {field}: ")
    assert "greater than or equal to 0" in problem.reason


def test_a_results_file_removed_or_replaced_while_written_keeps_every_line(tmp_path):
    """``rm`` or ``mv`` over the file a run appends to would take its records along: the lines
    are copied whole to a new file, at the path if it is free, else beside it."""
    removed = tmp_path / "run.jsonl"
    with Appender(removed) as out:
        out.write(make_record(run_id="r1"))
        removed.unlink()
        out.write(make_record(run_id="r2"))
        out.write(make_record(run_id="r3"))
    assert out.path == removed and out.moved_from == removed
    assert [i.model.run_id for i in load(removed).items] == ["r1", "r2", "r3"]

    replaced = tmp_path / "other.jsonl"
    with Appender(replaced) as out:
        out.write(make_record(run_id="r1"))
        (tmp_path / "new").write_text('{"someone": "else"}\n')
        (tmp_path / "new").replace(replaced)
        out.write(make_record(run_id="r2"))
    assert out.moved_from == replaced and out.path == tmp_path / "other-kept.jsonl"
    assert [i.model.run_id for i in load(out.path).items] == ["r1", "r2"]
    assert replaced.read_text() == '{"someone": "else"}\n'  # not written over


def test_appends_from_two_writers_never_interleave_lines(tmp_path):
    path = tmp_path / "run.jsonl"
    big = make_record(samples_s=[0.001] * 20000)
    with Appender(path) as a, Appender(path) as b:
        for _ in range(5):
            a.write(big)
            b.write(make_record())
    assert len(read_file(path, strict=True).models("record")) == 10


def test_a_short_write_is_retried_and_a_write_that_takes_nothing_raises(tmp_path, monkeypatch):
    real = os.write
    calls = []

    def short(fd, data):
        calls.append(len(data))
        return real(fd, bytes(data[:7]))  # a few bytes at a time, as a full pipe or disk may

    monkeypatch.setattr(store_files.os, "write", short)
    path = tmp_path / "run.jsonl"
    with Appender(path) as out:
        out.write(make_record())
    write_json(tmp_path / "one.json", make_record(run_id="r2"))
    assert len(calls) > 2
    assert read_file(path, strict=True).models("record") == [make_record()]
    assert read_model(tmp_path / "one.json", Record).run_id == "r2"
    monkeypatch.setattr(store_files.os, "write", lambda fd, data: 0)
    with pytest.raises(OSError) as err, Appender(path) as out:
        out.write(make_record())
    assert err.value.errno == errno.ENOSPC and "short write" in str(err.value)
    with pytest.raises(OSError, match="short write"):
        write_json(tmp_path / "one.json", make_record(run_id="r3"))
    monkeypatch.setattr(store_files.os, "write", real)
    assert read_model(tmp_path / "one.json", Record).run_id == "r2"  # the old file stands
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_line_cut_short_by_a_full_disk_is_cut_off_and_the_file_ends_whole(tmp_path, monkeypatch):
    real = os.write
    path = tmp_path / "run.jsonl"
    with Appender(path) as out:
        out.write(make_record(run_id="kept"))
        sent = []

        def full_disk(fd, data):
            if sent:
                raise OSError(errno.ENOSPC, "No space left on device")
            sent.append(1)
            return real(fd, bytes(data[:20]))  # part of the line goes out, then the disk is full

        monkeypatch.setattr(store_files.os, "write", full_disk)
        with pytest.raises(OSError) as err:
            out.write(make_record(run_id="lost"))
        assert err.value.errno == errno.ENOSPC and err.value.written == 20
    monkeypatch.setattr(store_files.os, "write", real)
    assert path.read_bytes().endswith(b"\n")
    assert [r.run_id for r in read_file(path, strict=True).models("record")] == ["kept"]


def test_a_run_that_cannot_write_stops_and_says_which_file(tmp_path, monkeypatch, fast_timing):
    from jaxbench.cases import select_cases
    from jaxbench.runner import run

    cases = select_cases(["train_step"], overrides={"size": ["tiny"], "dtype": ["float32"]})
    real = store_files.Appender.write
    calls = []

    def second_fails(self, model):
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, model)

    monkeypatch.setattr(store_files.Appender, "write", second_fails)
    result = run(cases * 3, tmp_path, backend="cpu", timing=fast_timing)
    assert len(result.records) == 1 and len(calls) == 2
    assert result.write_error == f"{result.path}: No space left on device"
    assert len(read_file(result.path, strict=True).models("record")) == 1


def test_a_parameter_added_later_is_implied_for_older_records_at_its_grid_value():
    from jaxbench.store import case_label
    from jaxbench.store.record import IMPLIED_PARAMS, with_implied
    from jaxbench.workloads import WORKLOADS

    for key, implied in IMPLIED_PARAMS.items():
        family = WORKLOADS[key.split("/")[0]]
        for name, value in implied.items():
            assert value in family.grid(True)[name] and value in family.grid(False)[name]
    old = {"trip": 64, "body": "at_set", "mode": "plain", "dtype": "float32"}
    assert case_label("loop/at_set", old) == case_label("loop/at_set", old | {"width": 64})
    assert case_label("loop/at_set", old) != case_label("loop/at_set", old | {"width": 1})
    assert with_implied("scatter/gather", {"n": 1}) == {"n": 1}
    tiny = {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True}
    assert case_label("train_step", tiny).endswith("mesh=none optimizer=sgd size=tiny")


def test_a_sweep_folder_counts_each_record_once(tmp_path):
    sweep = tmp_path / "sweep"
    write_json(sweep / "sweep.json", manifest())
    write_json(sweep / "records" / "a.json", record(run_id="s"))
    write_jsonl(sweep / "results.jsonl", [record(run_id="s")])
    assert len(load(tmp_path).models("record")) == 1
    assert len(load([sweep / "results.jsonl"]).models("record")) == 1


def test_a_folder_scan_leaves_out_hidden_folders_and_virtual_environments(tmp_path):
    """``-r sweeps`` walked the per-version environments under ``sweeps/envs`` and warned of
    every package's JSON file (22 lines before the table)."""
    write_json(tmp_path / "sweep" / "records" / "a.json", record(run_id="s"))
    env = tmp_path / "envs" / "jax-0.11.2-py3.13"
    (env / "lib").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "lib" / "package.json").write_text('{"name": "x"}')
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "b.json").write_text("{}")
    assert [p.name for p, _ in scan.store_files([tmp_path])] == ["a.json"]
    assert not load(tmp_path).problems


def test_a_record_missing_a_needed_nested_field_is_named_on_load(tmp_path):
    env = {"backend": "cpu", "device_kind": "cpu"}  # no env.jax: the axis of a comparison
    lines = [make_record(), make_record(env=env, params={"size": "small"})]
    (tmp_path / "run.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in lines))
    frame, problems = load_results(tmp_path)
    assert len(frame) == 2  # kept
    (problem,) = problems
    assert problem.path == str(tmp_path / "run.jsonl")
    assert "env.jax not recorded" in problem.reason
    assert "line 2, train_step mesh=none size=small" in problem.reason


def test_nested_parts_keep_unknown_fields_and_write_back_what_they_were_given():
    raw = make_record(noise={"cpu_share": 1, "new_indicator": [1, 2]}, metrics={"ops": 3})
    rec = Record.model_validate_json(raw.model_dump_json())
    assert rec.noise.cpu_share == 1 and rec.noise.new_indicator == [1, 2]
    assert rec.metrics.ops == 3 and rec.metrics.tokens is None
    written = json.loads(rec.model_dump_json())
    assert written["noise"] == {"cpu_share": 1, "new_indicator": [1, 2]}
    assert written["env"] == make_record().env.model_dump()  # no unrecorded field as null
    assert "host" not in written["env"] and rec.env.host.hostname is None


def test_the_store_scale_script_writes_records_the_loader_accepts(tmp_path):
    spec = importlib.util.spec_from_file_location("store_scale", ROOT / "scripts/store_scale.py")
    store_scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(store_scale)
    made = store_scale.generate(tmp_path, records=40, cases=10, samples=3)
    assert made["records"] == 40 and made["files"] == 4  # two processes a side
    loaded = load(tmp_path, strict=True)
    assert len(loaded.models("record")) == 40 and loaded.problems == []
    frame, problems = load_results([tmp_path / "A", tmp_path / "B"])
    assert problems == [] and set(frame["jax"]) == set(store_scale.VERSIONS)
    assert frame["process"].nunique() == 4 and frame["condition"].nunique() == 1
    # its results file is a kind the loader passes over, not a bad file
    (tmp_path / "store-scale-x.json").write_text(json.dumps({"kind": "store-scale", "rows": []}))
    again = load(tmp_path)
    assert again.problems == [] and "store-scale" in again.passed_over


def test_records_of_one_file_that_recorded_one_environment_share_its_model(tmp_path):
    path = write(tmp_path / "run.jsonl", [record("0.4.30"), record("0.4.30"),
                                          record("0.4.31"), record("0.4.30")])  # fmt: skip
    envs = [item.model.env for item in load(path).of("record")]
    assert envs[0] is envs[1]  # the same environment: one model
    assert envs[2] is not envs[1] and envs[2].jax == "0.4.31"  # another: its own
    assert envs[3] == envs[0] and envs[3].jax == "0.4.30"


def test_an_error_of_many_lines_keeps_its_first_line_and_what_was_raised():
    from jaxbench.store.record import error_text

    wrapped = ("INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
               '  File "/x/step.py", line 3, in callback\n    raise ValueError(text)\n'
               "ValueError: late boom line one\nline two")  # fmt: skip
    assert error_text(RuntimeError(wrapped)) == (
        "RuntimeError: INTERNAL: CpuCallback error calling callback: Traceback (most recent "
        "call last): ... ValueError: late boom line one"
    )
    assert error_text(ValueError("first\n\n  second\nlast ")) == "ValueError: first ... last"
    assert error_text(ValueError("one line")) == "ValueError: one line"
