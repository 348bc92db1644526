"""Noise indicators and the process as the unit: probe, process ids, affinity, frame columns."""

import dataclasses
import gc
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_data import record, write

from jaxbench import analysis
from jaxbench.analysis.conditions import DEFAULT_FIELDS, NOT_RECORDED, condition_fields
from jaxbench.measure import noise
from jaxbench.measure.noise import NOISE_KEYS, NoiseProbe
from jaxbench.store import SweepManifest, read_file, write_json

ROOT = Path(__file__).resolve().parent.parent
TYPES = {
    "wall_s": float,
    "cpu_s": float,
    "cpu_share": float,
    "ctx_involuntary": int,
    "ctx_voluntary": int,
    "gc_collections": int,
    "loadavg_start": (float, type(None)),
    "loadavg_end": (float, type(None)),
    "steal_share": (float, type(None)),
    "usable_cpus": int,
}


def _busy(n: int = 200_000) -> int:
    return sum(i * i for i in range(n))


# -- the probe ---------------------------------------------------------------------------------


def test_probe_gives_every_key_with_its_type_and_a_positive_cpu_share():
    probe = NoiseProbe.start()
    _busy()
    facts = probe.stop()
    assert tuple(facts) == NOISE_KEYS
    for key, kind in TYPES.items():
        assert isinstance(facts[key], kind), (key, facts[key])
    assert facts["wall_s"] > 0 and facts["cpu_s"] > 0 and facts["cpu_share"] > 0
    assert facts["ctx_involuntary"] >= 0 and facts["ctx_voluntary"] >= 0
    assert facts["usable_cpus"] == len(os.sched_getaffinity(0))
    assert json.loads(json.dumps(facts)) == facts  # plain JSON


def test_gc_collections_count_collections_inside_the_region_only():
    callbacks = list(gc.callbacks)
    enabled = gc.isenabled()
    gc.disable()  # no automatic collection can add to the count
    try:
        garbage = [[i] for i in range(1000)]  # collected by the probe's gc.collect() at start
        del garbage
        probe = NoiseProbe.start()
        gc.collect()
        gc.collect()
        assert probe.stop()["gc_collections"] == 2
        with NoiseProbe.start() as quiet:
            pass
        assert quiet.facts["gc_collections"] == 0
    finally:
        if enabled:
            gc.enable()
    assert gc.callbacks == callbacks  # the probe's callback is gone


def test_a_probe_stops_once():
    probe = NoiseProbe.start()
    probe.stop()
    with pytest.raises(RuntimeError, match="stopped twice"):
        probe.stop()


def test_absent_proc_stat_and_loadavg_read_as_none(monkeypatch, tmp_path):
    monkeypatch.setattr(noise, "_PROC_STAT", tmp_path / "no-stat")

    def no_loadavg():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", no_loadavg)
    facts = NoiseProbe.start().stop()
    assert facts["steal_share"] is None
    assert facts["loadavg_start"] is None and facts["loadavg_end"] is None


@pytest.mark.parametrize(
    ("start", "end", "share"),
    [((0, 1000), (10, 1100), 0.1), ((0, 1000), (1, 1010), None), (None, (10, 1100), None)],
)
def test_steal_share_is_stolen_over_all_ticks_and_none_over_too_few(monkeypatch, start, end, share):
    readings = iter([start, end])
    monkeypatch.setattr(noise, "cpu_times", lambda: next(readings))
    assert NoiseProbe.start().stop()["steal_share"] == share


def test_proc_stat_cpu_line_is_read_as_steal_and_total(monkeypatch, tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 1 5 100 2 0 3 7 4 0\ncpu0 5 0 2 50 1 0 1 3 2 0\n")
    monkeypatch.setattr(noise, "_PROC_STAT", stat)
    assert noise.cpu_times() == (7, 10 + 1 + 5 + 100 + 2 + 0 + 3 + 7)  # guest not counted twice


def test_harness_and_worker_block_carry_the_noise_of_the_timed_calls():
    from jaxbench.interleave.worker import serve

    requests = io.StringIO(
        '{"op": "prepare", "workload": "train_step", "backend": "cpu", "warmup": 1, '
        '"params": {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": true}}\n'
        '{"op": "block", "calls": 3}\n{"op": "quit"}\n'
    )
    answers = io.StringIO()
    serve(requests, answers)
    prepared, block = map(json.loads, answers.getvalue().splitlines())
    assert prepared["ok"], prepared
    assert prepared["env"]["process_id"] == _env().process_id()
    assert block["ok"] and len(block["samples_s"]) == 3
    assert tuple(block["noise"]) == NOISE_KEYS
    assert block["noise"]["wall_s"] >= sum(block["samples_s"])


# -- the process -------------------------------------------------------------------------------


def _env():
    from jaxbench import env

    return env


PRINT_IDS = """
import os, sys
from jaxbench import env
print(env.process_id(), flush=True)
read, write = os.pipe()
if os.fork() == 0:
    os.write(write, env.process_id().encode())
    os._exit(0)
os.wait()
print(os.read(read, 64).decode())
"""


def test_the_cpu_clock_policy_is_read_where_linux_exposes_it_and_warned_of(
    tmp_path, monkeypatch, capsys
):
    from jaxbench import env
    from jaxbench.cli import run as run_cmd

    assert env.cpu_frequency_policy(tmp_path) == {"governor": None, "turbo": None}
    cpu = min(os.sched_getaffinity(0))
    (tmp_path / f"cpu{cpu}" / "cpufreq").mkdir(parents=True)
    (tmp_path / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text("powersave\n")
    (tmp_path / "cpufreq").mkdir()
    (tmp_path / "cpufreq" / "boost").write_text("1\n")
    assert env.cpu_frequency_policy(tmp_path) == {"governor": "powersave", "turbo": True}
    (tmp_path / "intel_pstate").mkdir()
    (tmp_path / "intel_pstate" / "no_turbo").write_text("1\n")  # intel_pstate's word wins
    assert env.cpu_frequency_policy(tmp_path)["turbo"] is False
    monkeypatch.setattr(env, "CPU_SYSFS", tmp_path)
    run_cmd._warn_cpu_clock()
    err = capsys.readouterr().err
    assert "the CPU frequency governor is powersave, not performance" in err
    assert "turbo" not in err  # no_turbo is 1
    assert env.collect()["host"]["governor"] == "powersave"


def test_process_id_is_one_per_process_forked_children_included():
    env = _env()
    assert env.process_id() == env.process_id() and len(env.process_id()) == 32
    runs = [
        subprocess.run(
            [sys.executable, "-c", PRINT_IDS], capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    ids = [i for run in runs for i in run]
    assert len(set(ids)) == 4, runs  # two processes, each with a forked child
    assert env.process_id() not in ids


def test_records_of_one_run_share_its_process_and_carry_noise_and_timing(tmp_path, fast_timing):
    from jaxbench.cases import Case
    from jaxbench.runner import run

    cases = [
        Case("train_step", {"size": "tiny", "dtype": d, "optimizer": "sgd", "donate": True})
        for d in ("float32", "bfloat16")
    ]
    result = run(cases, tmp_path, backend="cpu", timing=fast_timing)
    back = read_file(result.path, strict=True).models("record")
    assert [r.status for r in back] == ["ok", "ok"]
    assert back == result.records  # noise and env round-trip through the file
    assert {r.env.process_id for r in back} == {_env().process_id()}
    assert {r.env.pid for r in back} == {os.getpid()}
    for rec in back:
        assert set(rec.noise.model_dump()) == set(NOISE_KEYS)
        assert rec.noise.wall_s >= sum(rec.samples_s)
        blocked = {k: v for k, v in dataclasses.asdict(fast_timing).items() if k != "pipeline"}
        assert rec.env.timing == blocked  # recorded without it, as before pipelining existed
        host = rec.env.host
        assert host.affinity == sorted(os.sched_getaffinity(0))
        assert host.usable_cpus == len(host.affinity)


# -- the frame ---------------------------------------------------------------------------------


def test_process_column_uses_process_id_else_one_unit_per_process(tmp_path):
    write(
        tmp_path / "runs.jsonl",
        [
            record("0.4.30", env={"process_id": "p1"}),
            record("0.4.30", env={"process_id": "p1"}),
            record("0.4.30"),  # an old record: its run is its process
        ],
    )
    sweep = {"sweep": {"task": 3}, "slurm": {"SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "2"}}
    write_json(tmp_path / "s" / "a.json", record("0.4.31", env=sweep))
    write_json(tmp_path / "s" / "b.json", record("0.4.31", env={"sweep": {"task": 3}}))
    asv = tmp_path / "asv"
    shutil.copytree(ROOT / "results" / "asv", asv)
    frame, problems = analysis.load_results(tmp_path)
    assert problems == []
    by_file = frame.groupby(frame["file"].map(lambda f: Path(f).name))["process"].agg(list)
    assert by_file["runs.jsonl"] == ["p1", "p1", "run:run-0.4.30"]
    assert by_file["a.json"] == ["run-0.4.31/task:7_2"]
    assert by_file["b.json"] == ["run-0.4.31/task:index-3"]
    asv_rows = frame[frame["source"] == "asv"]
    assert (asv_rows["process"] == "asv:" + asv_rows["file"]).all()
    assert asv_rows["process"].nunique() == len(list((asv / "vm").glob("*-*.json")))


def _sweep(folder: Path) -> Path:
    """A sweep folder as ``jaxbench collect`` leaves it: records/ and results.jsonl alike."""
    recs = [record("0.4.30", params={"size": s, "dtype": "float32"}) for s in ("tiny", "small")]
    (folder / "records").mkdir(parents=True)
    manifest = SweepManifest(sweep_id="sweep-1", created_at="2026", profile_path=None,
                             profile={"executor": "local"}, backend="cpu", timing={},
                             worker_env={}, env_root="envs", tasks=[])  # fmt: skip
    write_json(folder / "sweep.json", manifest)  # a real manifest: read by content, not name
    for rec in recs:
        write_json(folder / "records" / f"{rec.params['size']}.json", rec)
    write(folder / "results.jsonl", recs)
    return folder


def test_a_sweep_folder_counts_each_record_once(tmp_path):
    folder = _sweep(tmp_path / "sweeps" / "sweep-1")
    for paths in (
        [folder],
        [tmp_path],
        [folder, folder / "results.jsonl"],
        [folder / "records", tmp_path / "sweeps"],
    ):
        frame, problems = analysis.load_results(paths)
        assert problems == [] and len(frame) == 2, paths
        assert {Path(f).parent.name for f in frame["file"]} == {"records"}, paths
    alone, _ = analysis.load_results(folder / "results.jsonl")  # named alone: it loads
    assert len(alone) == 2


def test_records_without_a_jax_version_are_kept_and_reported(tmp_path):
    write(tmp_path / "run.jsonl", [record("0.4.30"), record("0.4.30", env={"jax": None})])
    frame, problems = analysis.load_results(tmp_path)
    assert len(frame) == 2 and frame["version"].isna().sum() == 1
    (problem,) = problems
    assert problem.path.endswith("run.jsonl") and "1 record without a JAX version" in str(problem)


# -- conditions --------------------------------------------------------------------------------


def test_usable_cpus_and_asv_fields_are_default_conditions(tmp_path):
    assert {"usable_cpus", "asv_number", "asv_benchmark_version"} <= set(DEFAULT_FIELDS)
    write(
        tmp_path / "run.jsonl",
        [
            record("0.4.30", env={"host": {"hostname": "box", "usable_cpus": 1}}),
            record("0.4.30", env={"host": {"hostname": "box", "usable_cpus": 2}}),
            record("0.4.30"),
        ],
    )
    frame, _ = analysis.load_results(tmp_path)
    table = condition_fields(frame)
    assert list(table["usable_cpus"]) == ["1", "2", NOT_RECORDED]
    assert set(table["asv_number"]) == set(table["asv_benchmark_version"]) == {NOT_RECORDED}
    assert frame["condition"].nunique() == 3


def test_asv_rows_carry_the_benchmark_version():
    path = next((ROOT / "results" / "asv" / "vm").glob("*jax0.11.2*.json"))
    data = json.loads(path.read_text())
    at = data["result_columns"].index("version")
    expected = {name: row[at] for name, row in data["results"].items()}
    records = read_file(path).models("record")
    assert records and all(r.metrics.benchmark_version == expected[r.benchmark] for r in records)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
    reason="needs taskset (util-linux) and two usable CPUs",
)
def test_runs_on_one_and_two_cpus_are_kept_apart_naming_usable_cpus(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    for name, allowed in (("one", cpus[:1]), ("two", cpus)):
        cmd = [
            "taskset", "-c", ",".join(map(str, allowed)), sys.executable, "-m", "jaxbench",
            "run", "-w", "train_step", "-s", "tiny", "-d", "float32", "--budget", "0.05",
            "--min-samples", "5", "-b", "cpu", "-o", str(tmp_path / name),
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    frame, problems = analysis.load_results([tmp_path / "one", tmp_path / "two"])
    assert problems == [] and len(frame) == 2
    by_cpus = {len(row["env"].host.affinity): row for row in frame.to_dict("records")}
    assert sorted(by_cpus) == [1, 2]
    for n, row in by_cpus.items():
        assert row["env"].host.usable_cpus == row["noise"].usable_cpus == n
        assert row["env"].timing["budget_s"] == 0.05
        assert row["process"] == row["env"].process_id
    assert frame["process"].nunique() == 2
    split = analysis.split_series(frame)
    assert len(split.conditions) == 2
    (reason,) = split.reasons
    assert "usable_cpus '1' vs '2'" in reason or "usable_cpus '2' vs '1'" in reason
