"""``jaxbench run`` measures in a watched worker: a hung case times out, a crash is a record."""

from __future__ import annotations

import os
import sys

import pytest
from conftest import importable
from typer.testing import CliRunner

from jaxbench.cli import app
from jaxbench.store import read_file
from jaxbench.supervised import with_import_path

FACTORIES = """
import os
import sys
import time

import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def fine(n: int = 4):
    print("a warning from the fine workload", file=sys.stderr)
    return Step(fn=jax.jit(lambda a: a * 2.0), args=(jnp.ones(n),))


def also_fine():
    return fine(8)


def _on_call(action, after):
    # A step whose calls after the first `after` (the gate's and warm-up's too) run `action`.
    count = [0]

    def callback(x):
        count[0] += 1
        if count[0] > after:
            action()
        return x

    shape = jax.ShapeDtypeStruct((4,), jnp.float32)
    step = jax.jit(lambda a: jax.pure_callback(callback, shape, a) + 1.0)
    return Step(fn=step, args=(jnp.ones(4),), next_args=lambda args, out: args)


def _abort():
    print("about to abort", file=sys.stderr, flush=True)
    os.abort()


def hangs_preparing():
    return _on_call(lambda: time.sleep(3600), 0)


def hangs_timing():
    return _on_call(lambda: time.sleep(3600), 20)


def aborts():
    return _on_call(_abort, 0)


def _boom():
    raise RuntimeError("boom in my step")


def raises_timing():
    return _on_call(_boom, 20)
"""
TIMING = ["--budget", "0", "--min-samples", "100", "--warmup", "0"]
runner = CliRunner()


@pytest.fixture
def module(tmp_path, monkeypatch):
    return importable(tmp_path, monkeypatch, "faulty", FACTORIES)


def records(out):
    (path,) = out.glob("*.jsonl")
    return read_file(path, strict=True).models("record")


@pytest.mark.slow
def test_a_hung_case_times_out_naming_its_phase_and_the_next_case_runs(module, tmp_path):
    out = tmp_path / "r"
    args = ["run", "-w", f"{module}:fine", "-w", f"{module}:hangs_preparing",
            "-w", f"{module}:hangs_timing", "--case-timeout", "30", *TIMING,
            "-o", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "2 of 3 cases failed" in result.stderr
    fine, building, timing = records(out)
    assert (fine.status, building.status, timing.status) == ("ok", "failed", "failed")
    # the stderr of the case that hung, not the warning the case before wrote in that worker
    assert building.error == ("timed out: no record within 30 s (--case-timeout); killed while "
                              "preparing; last stderr: nothing on stderr")  # fmt: skip
    assert timing.error.startswith("timed out: no record within 30 s (--case-timeout); "
                                   "killed while timing")  # fmt: skip
    assert building.benchmark == f"{module}:hangs_preparing" and building.env.process_id
    assert len(fine.samples_s) == 100
    # A hung worker was killed and the next case got a fresh one.
    assert fine.env.process_id == building.env.process_id != timing.env.process_id
    assert "a warning from the fine workload" in result.stderr  # the worker's stderr passed on


@pytest.mark.slow
def test_a_case_timeout_shorter_than_the_workers_start_times_out_the_case_not_the_start(
    module, tmp_path
):
    """--case-timeout 0.3: a worker takes longer to import JAX; the run ended before its first
    case with "no answer to 'facts'" and no record. Starting is no case's."""
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", "-w", f"{module}:hangs_preparing", "--case-timeout",
                                 "0.3", *TIMING, "-o", str(out)])  # fmt: skip
    assert result.exit_code == 1 and "'facts'" not in result.output, result.output
    (record,) = records(out)
    assert record.status == "failed" and record.error.startswith(
        "timed out: no record within 0.3 s (--case-timeout); killed while preparing"
    )


@pytest.mark.slow
def test_a_case_that_aborts_its_process_is_failed_with_the_signal_and_the_run_goes_on(
    module, tmp_path
):
    out = tmp_path / "r"
    args = ["run", "-w", f"{module}:fine", "-w", f"{module}:aborts", "-w", f"{module}:also_fine",
            *TIMING, "-o", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    first, aborted, after = records(out)
    assert (first.status, aborted.status, after.status) == ("ok", "failed", "ok")
    assert aborted.error.startswith("its process was killed by SIGABRT while preparing (the "
                                    "next case runs in a fresh one); last stderr: ")  # fmt: skip
    assert "about to abort" in aborted.error and "jaxbench-worker phase" not in aborted.error
    assert aborted.env.process_id == first.env.process_id != after.env.process_id
    assert after.benchmark == f"{module}:also_fine"


def test_in_process_measures_here_and_the_limit_is_checked(module, tmp_path, monkeypatch):
    from jaxbench import supervised

    def refuse(*args, **kwargs):
        raise AssertionError("no worker with --in-process")

    monkeypatch.setattr(supervised.Supervised, "_start", refuse)
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", "-w", f"{module}:fine", *TIMING, "--in-process",
                                 "-o", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    (record,) = records(out)
    from jaxbench.env import process_id

    assert record.status == "ok" and record.env.process_id == process_id()  # this process
    for bad in ("-1", "nan", "inf"):
        refused = runner.invoke(app, ["run", "-w", f"{module}:fine", "--case-timeout", bad])
        assert refused.exit_code == 2
        # (The factory, called here to check the case, warns before it.)
        assert refused.stderr.strip().splitlines()[-1] == (
            f"error: --case-timeout must be a number of seconds >= 0 (0: no limit), got "
            f"{float(bad)}")  # fmt: skip


def test_this_process_preallocates_no_device_memory_and_the_worker_gets_the_users_settings(
    monkeypatch,
):
    from jaxbench.supervised import PREALLOCATE_VAR, spare_the_device

    monkeypatch.delenv(PREALLOCATE_VAR, raising=False)
    before = spare_the_device()
    assert os.environ[PREALLOCATE_VAR] == "false" and PREALLOCATE_VAR not in before
    monkeypatch.setenv(PREALLOCATE_VAR, "true")  # the user's own setting stays, for both
    assert spare_the_device()[PREALLOCATE_VAR] == os.environ[PREALLOCATE_VAR] == "true"


def test_the_worker_gets_this_process_path_first():
    environ = with_import_path({"PYTHONPATH": "/b", "X": "1"}, ["/a", "", "/b"])
    assert environ == {"PYTHONPATH": os.pathsep.join(["/a", "/b"]), "X": "1"}


def _state(pid):
    """The state letter of ``pid`` in /proc (``Z``: dead, not reaped), ``None`` once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0]
    except FileNotFoundError:
        return None


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"),
                    reason="needs Linux's /proc/PID/task/TID/children")  # fmt: skip
def test_a_killed_run_leaves_no_worker_measuring_on(module, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path / "src"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    run = subprocess.Popen([sys.executable, "-m", "jaxbench", "run", "-w", f"{module}:hangs_timing",
                            *TIMING, "-o", str(tmp_path / "r")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        worker, deadline = None, time.monotonic() + 120
        while worker is None and time.monotonic() < deadline and run.poll() is None:
            with open(f"/proc/{run.pid}/task/{run.pid}/children") as f:
                worker = next(iter(f.read().split()), None)
            time.sleep(0.2)
        assert worker is not None, "the run started no worker"
        time.sleep(5)  # the worker is in the case now (its step hangs from call 21 on)
        assert _state(worker) not in (None, "Z")
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        deadline = time.monotonic() + 30
        while _state(worker) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _state(worker) in (None, "Z"), f"worker {worker} still runs after its run was killed"
    finally:
        if run.poll() is None:
            run.kill()


@pytest.mark.slow
def test_a_worker_ends_without_teardown_and_still_removes_its_fresh_cache(module, tmp_path):
    """The worker ends with ``os._exit`` after its last answer; its own cache folder goes too."""
    import subprocess
    import sys

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "jaxbench", "run", "-w", f"{module}:fine", *TIMING,
         "--compilation-cache", "fresh", "-o", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (record,) = records(tmp_path / "r")
    assert record.status == "ok" and record.compilation_cache["dir"].startswith(str(scratch))
    assert not list(scratch.glob("jaxbench-xla-cache-*"))  # the worker's and run's, removed


@pytest.mark.slow
def test_a_sweep_task_measures_in_a_watched_worker_so_an_abort_fails_one_case(module, tmp_path):
    from jaxbench.cluster.sweep import CaseSpec, Sweep
    from jaxbench.cluster.worker import ShardTask
    from jaxbench.store import Record, read_model

    sweep = Sweep(tmp_path / "sweep")
    specs = [CaseSpec(workload=f"{module}:{name}", params={})
             for name in ("also_fine", "aborts", "also_fine")]  # fmt: skip
    specs[2] = CaseSpec(workload=f"{module}:fine", params={"n": 4})
    timing = {"budget_s": 0.0, "min_samples": 5, "max_samples": 5, "warmup_calls": 1}
    summary = ShardTask(str(sweep.root), 0, specs, None, "cpu", timing)()
    first, aborted, after = (read_model(sweep.record_path(s, None), Record) for s in specs)
    assert (first.status, aborted.status, after.status) == ("ok", "failed", "ok")
    assert aborted.error.startswith("its process was killed by SIGABRT while preparing")
    assert aborted.env.sweep.task == 0 and after.env.sweep.task == 0  # placement kept
    assert aborted.env.process_id == first.env.process_id != after.env.process_id
    assert first.env.process_id != os.getpid()  # not measured in the task's own process
    assert list(summary["statuses"].values()) == ["ok", "failed", "ok"]


@pytest.mark.slow
def test_a_sweep_tasks_worker_ignores_the_schedulers_stop_signals(module, tmp_path):
    import signal
    import time

    from jaxbench.interleave.session import Worker

    with Worker(sys.executable, "cpu", ignore_signals=("SIGTERM", "SIGUSR2")) as worker:
        worker.request(op="facts", backend="cpu", timing={"budget_s": 0.0}, compilation_cache="off",
                       cache_min_compile_time_s=None)  # fmt: skip
        for sig in (signal.SIGTERM, signal.SIGUSR2):
            os.kill(worker._proc.pid, sig)
        time.sleep(0.5)
        assert worker._proc.poll() is None  # still serving: the task decides
        assert worker.request(
            op="facts",
            backend="cpu",
            timing={"budget_s": 0.0},
            compilation_cache="off",
            cache_min_compile_time_s=None,
        )["platform"]


def test_an_error_of_many_lines_is_recorded_as_one_and_shown_whole_on_stderr(module, tmp_path):
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", "-w", f"{module}:raises_timing", *TIMING, "--in-process",
                                 "-o", str(out)])  # fmt: skip
    assert result.exit_code == 1, result.output
    (failed,) = records(out)
    # JAX wraps the callback's exception, its traceback included, in a message of many lines
    assert failed.status == "failed" and "\n" not in failed.error
    assert " ... " in failed.error and failed.error.endswith("RuntimeError: boom in my step")
    assert "Traceback (most recent call last)" in result.stderr  # the whole message


@pytest.mark.slow
def test_a_sweep_case_that_hangs_is_ended_within_its_share_and_the_next_case_runs(module, tmp_path):
    from jaxbench.cluster.executors import case_timeouts_s
    from jaxbench.cluster.sweep import Sweep
    from jaxbench.cluster.worker import ShardTask
    from jaxbench.store import Record, read_model
    from jaxbench.store.sweep import CaseSpec

    timing = {"budget_s": 0.0, "min_samples": 5, "max_samples": 5, "warmup_calls": 0}
    hang, fine = (CaseSpec(workload=f"{module}:{f}", params={}) for f in ("hangs_preparing",
                                                                          "also_fine"))  # fmt: skip
    # a case's share: twice its expected time and a minute (a user case: 60 s of set-up) ...
    assert case_timeouts_s([hang], timing, 30, 30.0, 90.0) == [2 * 60.0 + 60.0]
    # ... cut where the shares add up to more than the task has, never below twice it
    tiny = CaseSpec(workload="train_step", params={"size": "tiny"})  # 5 s expected
    shares = case_timeouts_s([tiny] * 8, timing, 5, 30.0, 30.0)  # 8 x 70 s, 240 s to share
    assert shares == [pytest.approx(30.0)] * 8
    assert case_timeouts_s([hang] * 8, timing, 3, 30.0, 90.0) == [120.0] * 8
    sweep = Sweep(tmp_path / "s")
    sweep.records_dir.mkdir(parents=True)
    task = ShardTask(str(sweep.root), 0, [hang, fine], None, "cpu", timing,
                     case_timeouts_s=[5.0, 120.0])  # fmt: skip
    assert task()["statuses"] == {
        f"{module}:hangs_preparing": "failed",
        f"{module}:also_fine": "ok",
    }
    hung = read_model(sweep.record_path(hang, None), Record)
    assert hung.error.startswith("timed out: no record within 5 s (the case's share of the "
                                 "task's limit); killed while preparing")  # fmt: skip
    assert read_model(sweep.record_path(fine, None), Record).status == "ok"
