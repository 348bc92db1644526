"""Records: schema, durable appends, loading into frames, and clear errors for bad lines."""

import json

import pytest

from jaxbench.results import (
    SCHEMA_VERSION,
    Record,
    ResultsFormatError,
    ResultsWriter,
    load_records,
    read_records,
    samples_frame,
)


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


def test_required_top_level_fields_are_in_every_line(tmp_path):
    path = tmp_path / "run.jsonl"
    with ResultsWriter(path) as w:
        w.write(make_record())
    line = json.loads(path.read_text().splitlines()[0])
    for key in (
        "schema_version",
        "run_id",
        "benchmark",
        "params",
        "status",
        "error",
        "samples_s",
        "lower_s",
        "compile_s",
        "first_call_s",
        "compiles_timed",
        "flops",
        "device_peak_bytes",
        "env",
    ):
        assert key in line
    assert line["schema_version"] == SCHEMA_VERSION
    assert line["device_peak_bytes"] is None  # n/a, never 0


def test_round_trip_and_tidy_frames(tmp_path):
    path = tmp_path / "run.jsonl"
    with ResultsWriter(path) as w:
        w.write(make_record())
        w.write(
            make_record(
                status="failed",
                samples_s=[],
                error="boom",
                params={"size": "small", "dtype": "bfloat16"},
            )
        )
    assert [r.status for r in read_records(path)] == ["ok", "failed"]
    frame = load_records(tmp_path)
    assert list(frame["param.size"]) == ["tiny", "small"]
    assert list(frame["jax"]) == ["0.12.0", "0.12.0"]
    samples = samples_frame(frame)
    assert list(samples["latency_s"]) == [0.1, 0.2, 0.3]
    assert list(samples["sample"]) == [0, 1, 2]


def test_bad_status_is_rejected():
    with pytest.raises(ValueError):
        make_record(status="great")


def test_corrupt_line_names_file_and_line(tmp_path):
    path = tmp_path / "run.jsonl"
    with ResultsWriter(path) as w:
        w.write(make_record())
    with open(path, "a") as fh:
        fh.write('{"schema_version": 1, "run_id": "r1", "benchm\n')
    with pytest.raises(ResultsFormatError, match=rf"{path}:2: "):
        read_records(path)
    with pytest.warns(UserWarning, match=":2: "):
        assert len(read_records(path, errors="warn")) == 1


def test_foreign_schema_version_is_named(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"schema_version": 99}) + "\n")
    with pytest.raises(ResultsFormatError, match="schema_version 99"):
        read_records(path)


def test_appends_from_two_writers_never_interleave_lines(tmp_path):
    path = tmp_path / "run.jsonl"
    big = make_record(samples_s=[0.001] * 20000)
    with ResultsWriter(path) as a, ResultsWriter(path) as b:
        for _ in range(5):
            a.write(big)
            b.write(make_record())
    assert len(read_records(path)) == 10


def test_noise_round_trips_and_an_old_line_without_it_loads(tmp_path):
    noise = {"wall_s": 0.5, "cpu_s": 0.9, "cpu_share": 1.8, "steal_share": None}
    path = tmp_path / "run.jsonl"
    with ResultsWriter(path) as w:
        w.write(make_record(noise=noise))
    old = json.loads(path.read_text())
    del old["noise"]  # a line written before records had noise (still schema 1)
    with open(path, "a") as fh:
        fh.write(json.dumps(old) + "\n")
    new, older = read_records(path)
    assert new.noise == noise and older.noise == {}
    assert older.schema_version == SCHEMA_VERSION == 1
