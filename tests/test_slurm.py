"""The cluster runner against a real single-node Slurm (with accounting) started by the tests.

Skipped with the reason where the cluster cannot run (no root, packages missing), except when
``JAXBENCH_REQUIRE_SLURM=1`` (set by ``.ci/run``), where that is a failure.
"""

import os
import shutil
import subprocess
import time
from datetime import datetime

import pytest
from conftest import ROOT, run_cli
from slurm_local import MAX_ARRAY_SIZE, cluster_fixture

from jaxbench.cluster import dispatch, preflight
from jaxbench.cluster.executors import sbatch_script
from jaxbench.cluster.profile import load_profile
from jaxbench.cluster.sweep import Sweep
from jaxbench.store import Record, read_model

pytestmark = pytest.mark.slow

FAST = ["--budget", "0", "--min-samples", "3", "--warmup", "1"]
SIXTEEN_CASES = [
    "-w", "forward", "-s", "tiny", "--wrt", "input", "-k", "1", "-k", "2", "-k", "4", "-k", "8",
    "--strategy", "linearize", "--strategy", "vmap_jvp", "--strategy", "jvp_loop",
    "--strategy", "linearize_apply",
]  # fmt: skip


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    yield from cluster_fixture(tmp_path_factory, os.environ.get("JAXBENCH_REQUIRE_SLURM") == "1")


def _submit(slurm, tmp_path, *args, profile="test-cluster", env=None):
    env = {**slurm.env(), **(env or {})}
    proc = run_cli("submit", "-p", profile, "--sweeps-dir", str(tmp_path), *args, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sweep_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("sweep-")]
    return Sweep(sweep_dir)


def _variant(tmp_path, old, new):
    """slurm/test-cluster.toml with one setting changed, as a new profile file."""
    text = (ROOT / "slurm/test-cluster.toml").read_text()
    assert old in text
    path = tmp_path / "variant.toml"
    path.write_text(text.replace(old, new))
    return path


def _wait_for(predicate, timeout_s, what):
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            pytest.fail(f"{what}: not after {timeout_s} s")
        time.sleep(1)


def _max_overlap(intervals):
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = best = 0
    for _, step in events:
        running += step
        best = max(best, running)
    return best


def test_sixteen_tasks_go_in_two_arrays_under_max_array_size_and_return_every_record(
    slurm, tmp_path
):
    assert preflight.max_array_size() == MAX_ARRAY_SIZE == 10
    sweep = _submit(slurm, tmp_path, *SIXTEEN_CASES, *FAST)
    manifest = sweep.load()
    assert len(manifest.tasks) == 16
    states = dispatch.wait(sweep, poll_s=2, timeout_s=900)
    assert [s.state for s in states] == ["completed"] * 16, states
    result = sweep.collect(sweep.load())
    assert not result.missing and not result.unreadable
    assert len(result.records) == 16 and all(r.status == "ok" for r in result.records)
    assert len({(r.benchmark, r.params["k"]) for r in result.records}) == 16
    jobs = manifest.latest_jobs()
    arrays = list(dict.fromkeys(jobs[t.index].split("_")[0] for t in manifest.tasks))
    assert len(arrays) == 2  # tasks 0-9, then 10-15
    tasks = sorted(
        (r.env.slurm["SLURM_ARRAY_JOB_ID"], int(r.env.slurm["SLURM_ARRAY_TASK_ID"]))
        for r in result.records
    )
    assert tasks == sorted([(arrays[0], i) for i in range(10)] + [(arrays[1], i) for i in range(6)])

    def spans():
        out = slurm.run("sacct", "-j", ",".join(arrays), "-X", "-n", "-P", "-o", "Start,End")
        return [line.split("|") for line in out.stdout.splitlines() if "Unknown" not in line]

    _wait_for(lambda: len(spans()) == 16, 60, "accounting of all 16 tasks")
    spans = [tuple(map(datetime.fromisoformat, span)) for span in spans()]
    assert len(spans) == 16
    assert _max_overlap(spans) >= 8  # they did write into one folder at the same time

    submitted = (sweep.submitit_dir / arrays[0] / f"{arrays[0]}_submission.sh").read_text()
    task = manifest.tasks[0]
    expected = sbatch_script(
        load_profile("test-cluster"),
        sweep.submitit_dir / "%j",
        task.python,
        10,
        task.time_limit_min,
        f"jaxbench-{manifest.sweep_id[-8:]}",
    )
    assert submitted == expected


def test_scancel_keeps_finished_records_and_resume_completes_without_duplicates(slurm, tmp_path):
    args = ["-w", "forward", "-s", "tiny", "--wrt", "input", "--strategy", "linearize"]
    args += ["-k", "1", "-k", "2", "-k", "4", "-k", "8", "-k", "16", "-k", "32"]
    args += ["--cases-per-task", "3", "--budget", "4", "--min-samples", "3"]
    sweep = _submit(slurm, tmp_path, *args)
    manifest = sweep.load()
    victim = manifest.tasks[1]
    job_id = manifest.latest_jobs()[1]
    _wait_for(
        lambda: any(sweep.has_ok_record(c, None) for c in victim.cases),
        300,
        "a first record of task 1",
    )
    slurm.run("scancel", job_id, check=True)
    states = dispatch.wait(sweep, poll_s=2, timeout_s=300)
    assert states[0].state == "completed" and states[0].ok == 3
    assert states[1].state == "cancelled", states[1]
    assert 1 <= states[1].ok < 3 and states[1].other == 0
    kept = {
        c.file_stem(None): read_model(sweep.record_path(c, None), Record).started_at
        for c in victim.cases
        if sweep.has_ok_record(c, None)
    }

    proc = run_cli("submit", "--resume", str(sweep.root), env=slurm.env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = sweep.load()
    assert list(manifest.submissions[-1].job_ids) == [1]  # only the task with missing cases
    states = dispatch.wait(sweep, poll_s=2, timeout_s=300)
    assert [s.state for s in states] == ["completed", "completed"]
    result = sweep.collect(manifest)
    assert not result.missing
    assert sorted(r.params["k"] for r in result.records) == [1, 2, 4, 8, 16, 32]
    assert len(list(sweep.records_dir.glob("*.json"))) == 6
    for case in victim.cases:
        if case.file_stem(None) in kept:  # not run again
            stem = case.file_stem(None)
            assert read_model(sweep.record_path(case, None), Record).started_at == kept[stem]

    again = run_cli("submit", "--resume", str(sweep.root), env=slurm.env())
    assert again.returncode == 0 and "nothing to submit" in again.stdout


def test_task_over_its_time_limit_is_reported_timed_out_with_its_records(slurm, tmp_path):
    """Ten cases of 15 s need over 150 s; the limit is 2 min, signalled 30-90 s in."""
    ks = [str(2**i) for i in range(10)]
    args = ["-w", "forward", "-s", "tiny", "--wrt", "input", "--strategy", "vmap_jvp"]
    args += [a for k in ks for a in ("-k", k)]
    args += ["--cases-per-task", "10", "--budget", "15", "--time-limit", "2"]
    sweep = _submit(slurm, tmp_path, *args)
    (state,) = dispatch.wait(sweep, poll_s=2, timeout_s=400)
    assert state.state == "timed out", state
    assert 1 <= state.ok < 10 and state.other == 0
    result = sweep.collect(sweep.load())
    assert len(result.records) == state.ok and len(result.missing) == 10 - state.ok
    status = run_cli("status", str(sweep.root), env=slurm.env())
    assert "timed out" in status.stdout


def test_gpu_partition_tasks_get_one_placeholder_gpu_each(slurm, tmp_path):
    profile = _variant(tmp_path, 'partition = "cpu"', 'partition = "gpu"\ngpus_per_node = 1')
    sweeps = tmp_path / "sweeps"
    sweep = _submit(
        slurm, sweeps, "-w", "train_step", "-s", "tiny", "--optimizer", "sgd", *FAST,
        profile=str(profile),
    )  # fmt: skip
    states = dispatch.wait(sweep, poll_s=2, timeout_s=300)
    assert [s.state for s in states] == ["completed", "completed"]
    records = sweep.collect(sweep.load()).records
    assert {r.env.env_vars["CUDA_VISIBLE_DEVICES"] for r in records} <= {"0", "1"}
    assert {r.env.slurm["SLURM_JOB_PARTITION"] for r in records} == {"gpu"}
    assert {r.env.backend for r in records} == {"cpu"}  # JAX_PLATFORMS=cpu from the profile


def test_a_job_of_two_tasks_runs_one_program_over_both_and_task_0_writes_the_record(
    slurm, tmp_path
):
    """Each Slurm task is one JAX process (jax.distributed from the Slurm environment)."""
    profile = _variant(tmp_path, "cpus_per_task = 1", "cpus_per_task = 1\ntasks_per_node = 2")
    sweep = _submit(
        slurm, tmp_path / "sweeps", "-w", "collectives", "--param", "op=all_reduce",
        "--param", "devices=2", "--param", "bytes=4096", *FAST, profile=str(profile),
    )  # fmt: skip
    states = dispatch.wait(sweep, poll_s=2, timeout_s=300)
    assert [s.state for s in states] == ["completed"]
    (record,) = sweep.collect(sweep.load()).records  # one record, though two tasks measured
    assert record.status == "ok", record.error
    assert (record.env.jax_processes.count, record.env.jax_processes.index) == (2, 0)
    assert record.env.jax_processes.coordinator  # the address JAX found from the Slurm step
    assert record.env.device_count == 2 and record.env.slurm["SLURM_NTASKS"] == "2"


@pytest.mark.parametrize(
    ("slurm_table", "message"),
    [
        ('partition = "a100"', "partition 'a100' does not exist (sinfo lists: cpu, gpu)"),
        ('partition = "gpu"\ngpus_per_node = 3', "partition 'gpu' has at most 2 per node"),
    ],
)
def test_profile_the_cluster_cannot_serve_is_refused_before_submission(
    slurm, tmp_path, slurm_table, message
):
    profile = tmp_path / "bad.toml"
    profile.write_text(f'executor = "slurm"\n[slurm]\n{slurm_table}\n')
    proc = run_cli(
        "submit", "-p", str(profile), "-w", "train_step", "-s", "tiny", "--sweeps-dir",
        str(tmp_path / "s"), env=slurm.env(),
    )  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not list((tmp_path / "s").glob("sweep-*"))
    queue = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=slurm.env())
    assert queue.stdout.strip() == ""


def test_preempted_long_task_is_requeued_and_skips_its_finished_cases(slurm, tmp_path):
    """A ``SIGTERM`` that lands while ``scontrol requeue`` runs must not end the job: each
    signal reaches every process of the job, and it once killed the requeue (seen in CI).
    A slowed ``scontrol`` on the job's ``PATH`` holds that window open for 5 s."""
    slowed = tmp_path / "bin"
    slowed.mkdir()
    scontrol = slowed / "scontrol"
    scontrol.write_text(f'#!/bin/sh\nsleep 5\nexec {shutil.which("scontrol")} "$@"\n')
    scontrol.chmod(0o755)
    args = ["-w", "forward", "-s", "tiny", "--wrt", "input", "--strategy", "jvp_loop"]
    args += ["-k", "1", "-k", "2", "-k", "4", "-k", "8", "--cases-per-task", "4"]
    args += ["--budget", "5", "--time-limit", "15"]  # over 10 min: requeueable
    path = {"PATH": f"{slowed}{os.pathsep}{os.environ['PATH']}"}
    sweep = _submit(slurm, tmp_path / "sweeps", *args, env=path)
    (task,) = sweep.load().tasks
    assert task.requeueable
    job_id = sweep.load().latest_jobs()[0]
    _wait_for(lambda: sweep.has_ok_record(task.cases[0], None), 300, "the first record")
    first = read_model(sweep.record_path(task.cases[0], None), Record).started_at
    slurm.run("scancel", "--signal=TERM", job_id, check=True)  # what pre-emption sends first
    slurm.run("scancel", "--signal=USR2", job_id, check=True)

    def job_log():
        return "".join(p.read_text() for p in (sweep.submitit_dir / job_id).glob("*_log.*"))

    _wait_for(lambda: "this job is preempted" in job_log(), 60, "submitit's requeue handler")
    slurm.run("scancel", "--signal=TERM", job_id, check=True)  # during the slowed requeue
    (state,) = dispatch.wait(sweep, poll_s=2, timeout_s=600)
    log = job_log()
    assert state.state == "completed" and state.ok == 4, (state, log[-3000:])
    assert read_model(sweep.record_path(task.cases[0], None), Record).started_at == first
    assert "this job is preempted" in log and "Requeued job" in log, log[-2000:]


def test_array_task_cancelled_while_pending_is_lost_and_resumable(slurm, tmp_path):
    """It must not read as running for ever: ``lost`` when Slurm kept no accounting for it,
    ``cancelled`` when sacct did record the cancel (both happen on the same Slurm)."""
    profile = _variant(tmp_path, "array_parallelism = 16", "array_parallelism = 1")
    args = ["-w", "train_step", "-s", "tiny", "--optimizer", "sgd", "--budget", "2"]
    sweep = _submit(slurm, tmp_path / "sweeps", *args, "-d", "float32", "-d", "bfloat16",
                    profile=str(profile))  # fmt: skip
    job_id = sweep.load().latest_jobs()[1]
    assert dispatch.status(sweep, sweep.load())[1].state == "pending"
    slurm.run("scancel", job_id, check=True)
    states = dispatch.wait(sweep, poll_s=2, timeout_s=300)
    assert len(states) == 2 and states[0].state == "completed", states
    assert states[1].state in ("lost", "cancelled"), states
    proc = run_cli("submit", "--resume", str(sweep.root), "--wait", env=slurm.env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [s.state for s in dispatch.status(sweep, sweep.load())] == ["completed", "completed"]
