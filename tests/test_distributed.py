"""One program over several JAX processes (``jax.distributed``): two local processes, a lone one.

The Slurm job of two tasks is in ``test_slurm.py``. Each process here has one CPU device, so a
mesh of two devices spans both processes and its all-reduce goes through the CPU collectives.
"""

from __future__ import annotations

import io

import pytest
from conftest import run_cli
from rich.console import Console

from jaxbench import analysis
from jaxbench.distributed import ProcessGroup, free_port, from_slurm, local_groups
from jaxbench.store import read_file
from jaxbench.store.scan import store_files
from jaxbench.tables import records_table

TWO = ["-w", "collectives", "--param", "op=all_reduce", "--param", "devices=2",
       "--param", "bytes=4096", "--warmup", "1", "--min-samples", "4"]  # fmt: skip


@pytest.mark.slow
def test_two_processes_run_one_all_reduce_and_process_0_writes_its_record(tmp_path):
    out = run_cli("run", "-o", str(tmp_path), *TWO, "--jax-processes", "2", "--trace")
    assert out.returncode == 0, out.stderr
    (rec,) = read_file(store_files([tmp_path])[0][0], strict=True).models("record")
    assert rec.status == "ok", rec.error  # the gate gathered the output from both processes
    group = rec.env.jax_processes
    assert (group.count, group.index) == (2, 0) and group.coordinator.startswith("127.0.0.1:")
    assert rec.env.device_count == 2 and rec.metrics.mesh["axes"] == {"x": 2}
    # every process makes the same calls: exactly --min-samples samples, the budget set to 0
    assert len(rec.samples_s) == 4 and rec.env.timing["budget_s"] == 0
    assert "every process takes exactly --min-samples 4 samples" in out.stderr
    assert "[Gloo]" not in out.stderr
    # the records table marks it (rendered here at a fixed width: in one fresh-clone CI run,
    # run's own table came out as "..." on its stdout; the cause was not found)
    table = Console(width=200, record=True, file=io.StringIO())
    table.print(records_table([rec], title="run"))
    assert "(2 JAX processes)" in table.export_text()
    # only process 0 saves what its record names
    assert [p.name for p in (tmp_path / "traces").iterdir()] == [f"{rec.trace.file}.xplane.pb.gz"]
    assert [p.name for p in (tmp_path / "programs").iterdir()] == [f"{rec.programs}.json.gz"]


@pytest.mark.slow
def test_a_mesh_takes_an_equal_share_of_every_processs_devices(tmp_path):
    """Two processes of two host devices each: a 4-device mesh spans both; 2 over 3 cannot."""
    forced = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    four = [a.replace("devices=2", "devices=4") for a in TWO]
    out = run_cli("run", "-o", str(tmp_path), *four, "--jax-processes", "2", env=forced)
    assert out.returncode == 0, out.stderr
    assert "warning" not in out.stderr  # the workload has a mesh to span the processes
    (rec,) = read_file(store_files([tmp_path])[0][0], strict=True).models("record")
    assert rec.status == "ok", rec.error
    ids = rec.metrics.mesh["device_ids"]
    assert len(ids) == 4 and rec.env.device_count == 4
    assert len({i // 1024 for i in ids}) == 2  # JAX numbers each process's CPU devices apart
    out = run_cli("run", "-o", str(tmp_path / "three"), *TWO, "--jax-processes", "3",
                  env=forced)  # fmt: skip
    (rec,) = read_file(store_files([tmp_path / "three"])[0][0], strict=True).models("record")
    assert rec.status == "skipped"
    assert "a mesh of 2 devices cannot take an equal share of each of the 3" in rec.error


def test_a_process_whose_peer_never_joins_is_one_line_naming_the_coordinator():
    from jaxbench.interleave import WorkerError
    from jaxbench.measure import TimingConfig
    from jaxbench.supervised import Supervised

    lone = ProcessGroup(f"127.0.0.1:{free_port()}", 2, 0, timeout_s=2)
    # a case time-out far beyond the join time-out: a hang would say "timed out" instead
    watched = Supervised("cpu", TimingConfig(min_samples=3), case_timeout_s=120, groups=[lone])
    with watched, pytest.raises(WorkerError) as failed:
        watched.platform()
    message = str(failed.value)
    assert "\n" not in message and "timed out" not in message
    assert message.startswith(
        f"the 2 JAX processes did not all meet at {lone.coordinator} "
        "within 2 s (--join-timeout): process 0 gave up and was killed"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jax-processes", "0"], "--jax-processes must be a whole number >= 1, got 0"),
        # each a whole JAX runtime: 100,000 of them ran the machine out of memory
        (["--jax-processes", "100000"], "--jax-processes 100000: at most "),
        (["--jax-processes", "2", "--join-timeout", "0"],
         "--join-timeout must be a whole number of seconds >= 1, got 0"),
        (["--jax-processes", "2", "--in-process"], "--jax-processes 2 needs a worker per process"),
        (["--join-timeout", "5"], "--join-timeout 5 applies with --jax-processes N > 1 only"),
        (["--in-process", "--case-timeout", "5"], "--case-timeout 5: a case in this process "
         "cannot be killed"),
    ],
)  # fmt: skip
def test_bad_process_options_are_one_line_and_exit_2(tmp_path, args, message):
    out = run_cli("run", "-o", str(tmp_path), *TWO, *args)
    assert out.returncode == 2 and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_groups_come_from_the_count_or_from_a_slurm_step_of_several_tasks():
    groups = local_groups(3, timeout_s=5)
    assert [g.index for g in groups] == [0, 1, 2] and len({g.coordinator for g in groups}) == 1
    step = {"SLURM_JOB_ID": "7", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1"}
    assert from_slurm(step) == ProcessGroup(None, 2, 1)
    assert from_slurm({**step, "SLURM_STEP_NUM_TASKS": "1"}) is None
    assert from_slurm({"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1"}) is None  # no job
    with pytest.raises(ValueError, match="SLURM_PROCID='x'"):
        from_slurm({**step, "SLURM_PROCID": "x"})
    with pytest.raises(ValueError, match="count >= 2"):
        ProcessGroup("h:1", 1, 0)
    with pytest.raises(ValueError, match="whole number of seconds >= 1"):
        ProcessGroup("h:1", 2, 0, timeout_s=0.5)


def test_records_of_different_process_counts_are_never_pooled(tmp_path):
    from analysis_data import record, write

    group = {"count": 2, "index": 0, "coordinator": "127.0.0.1:1234"}
    two = record(run_id="two", env={"jax_processes": group})
    write(tmp_path / "a.jsonl", [record(run_id="one"), two])
    frame, _ = analysis.load_results(tmp_path)
    split = analysis.split_series(frame)
    assert len(split.conditions) == 2
    assert any("jax_processes" in reason for reason in split.reasons)


def test_a_case_that_failed_in_any_process_is_never_recorded_ok():
    from analysis_data import record

    from jaxbench.supervised import _of_all_processes

    ok, bad = record(), record(status="failed", samples=[], error="GateFailure: leaf 0 differs")
    assert _of_all_processes([ok, ok]) is ok
    merged = _of_all_processes([ok, ok, bad])
    assert merged.status == "failed" and merged.samples_s == []
    assert merged.error == "JAX process 2 of 3: failed: GateFailure: leaf 0 differs"
    assert _of_all_processes([bad, ok]) is bad


CRASHING = """
import os

import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def step(crash: int = 0):
    if crash and jax.process_index() == 1:
        os.abort()
    return Step(fn=jax.jit(lambda a: a * 2.0), args=(jnp.ones(4),))
"""


@pytest.mark.slow
def test_a_process_that_dies_fails_its_case_by_index_and_the_next_case_runs(tmp_path):
    """Process 1 aborts while building; the next case, on each process's own device, is ok."""
    (tmp_path / "crashing.py").write_text(CRASHING)
    out = run_cli("run", "-o", str(tmp_path / "out"), "-w", "crashing:step", "--param", "crash=1",
                  "--param", "crash=0", "--min-samples", "3", "--jax-processes", "2",
                  env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert out.returncode == 1, out.stderr
    (path,) = (tmp_path / "out").glob("*.jsonl")
    crashed, calm = read_file(path, strict=True).models("record")
    assert crashed.status == "failed"
    assert crashed.error.startswith("JAX process 1 of 2: its process was killed by SIGABRT")
    assert calm.status == "ok" and calm.env.jax_processes.count == 2
