"""The cluster runner without Slurm: profiles, plans, the worker, records, the local executor."""

import json
import multiprocessing
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import submitit
from conftest import ROOT, fake_pip, run_cli

from jaxbench.cases import Case
from jaxbench.cluster import dispatch, jobstate, preflight, worker
from jaxbench.cluster.executors import (
    FLOOR_MIN,
    is_requeueable,
    sbatch_script,
    time_limit_min,
)
from jaxbench.cluster.profile import ProfileError, load_profile
from jaxbench.cluster.sweep import CaseSpec, Sweep, shard
from jaxbench.cluster.worker import JaxImportedTooEarly, ShardTask, local_gpu
from jaxbench.store import Record, read_file, read_model, write_json

TINY = CaseSpec(
    workload="train_step",
    params={"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True},
)
TIMING = {"budget_s": 0.0, "min_samples": 3, "max_samples": 3, "warmup_calls": 1}


def _profile(tmp_path, text, name="p.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# --- profiles -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cpu", "gpu", "local", "test-cluster"])
def test_shipped_profiles_load(name):
    profile = load_profile(name)
    assert profile.name == name
    assert (profile.slurm is None) == (profile.executor == "local")


def test_profile_with_unknown_key_names_it(tmp_path):
    path = _profile(tmp_path, '[slurm]\npartition = "cpu"\npartiton = "x"\n')
    path.write_text('executor = "slurm"\n' + path.read_text())
    with pytest.raises(ProfileError, match=r"unknown key 'slurm\.partiton'"):
        load_profile(str(path))


def test_profile_with_wrong_type_names_key_and_value(tmp_path):
    path = _profile(
        tmp_path, 'executor = "slurm"\n[slurm]\npartition = "gpu"\ngpus_per_node = "two"\n'
    )
    with pytest.raises(ProfileError, match=r"slurm\.gpus_per_node: .*integer.*'two'"):
        load_profile(str(path))


def test_slurm_profile_needs_a_slurm_table(tmp_path):
    path = _profile(tmp_path, 'executor = "slurm"\n')
    with pytest.raises(ProfileError, match=r"\[slurm\] table"):
        load_profile(str(path))


def test_a_sweep_pins_jax_to_the_cpu_only_so_an_absent_accelerator_skips_its_cases(tmp_path):
    for backend, pinned in (("cpu", "cpu"), ("tpu", None), ("cuda", None), ("default", None)):
        path = _profile(tmp_path, f'executor = "local"\n[worker]\nbackend = "{backend}"\n',
                        name=f"{backend}.toml")  # fmt: skip
        assert dispatch.worker_env(load_profile(str(path))).get("JAX_PLATFORMS") == pinned
    path = _profile(tmp_path, 'executor = "local"\n[worker]\nbackend = "cpu"\n'
                    '[worker.env]\nJAX_PLATFORMS = "cuda,cpu"\n', name="own.toml")  # fmt: skip
    assert dispatch.worker_env(load_profile(str(path)))["JAX_PLATFORMS"] == "cuda,cpu"


def test_profile_with_unknown_backend_is_rejected(tmp_path):
    path = _profile(tmp_path, 'executor = "local"\n[worker]\nbackend = "npu"\n')
    with pytest.raises(ProfileError, match="worker: unknown backend 'npu'; choose from") as err:
        load_profile(str(path))
    assert "--backend" not in str(err.value)  # the profile's key, not run's option


def test_missing_profile_lists_the_known_ones():
    with pytest.raises(ProfileError, match=r"'nope' not found.*gpu.*local"):
        load_profile("nope")


# --- plans: shards, time limits, the sbatch script ------------------------------------------


def test_gpu_profile_sbatch_script_matches_golden_file():
    script = sbatch_script(
        load_profile("slurm/gpu.toml"),
        Path("/shared/sweeps/SWEEP/submitit/%j"),
        "/shared/sweeps/envs/jax-0.12.0.1-cuda12-py3.12/bin/python",
        n_tasks=12,
        limit_min=25,
        job_name="jaxbench-golden",
    )
    assert script == (ROOT / "tests/golden/gpu.sbatch").read_text()


def test_the_step_is_given_the_jobs_cpus_unless_the_profile_says_otherwise():
    from jaxbench.cluster.executors import slurm_parameters

    profile = load_profile("slurm/cpu.toml")
    assert slurm_parameters(profile, 10, "j")["srun_args"] == ["--cpus-per-task=16"]
    slurm = profile.slurm.model_copy(update={"srun_args": ["--cpu-bind=cores", "-c", "4"]})
    profile = profile.model_copy(update={"slurm": slurm})
    assert slurm_parameters(profile, 10, "j")["srun_args"] == ["--cpu-bind=cores", "-c", "4"]


def test_a_task_bound_to_fewer_cpus_than_asked_warns_and_says_so(monkeypatch):
    import jaxbench.measure.noise as noise

    monkeypatch.setattr(noise, "usable_cpus", lambda: 1)
    placement = worker.cpu_placement({"SLURM_CPUS_PER_TASK": "2"})
    assert placement["cpus_asked"] == 2 and placement["cpus_usable"] == 1
    assert "asked for 2 CPUs per task (SLURM_CPUS_PER_TASK) but this task can use 1" in (
        placement["cpu_mismatch"])  # fmt: skip
    assert worker.cpu_placement({"SLURM_CPUS_PER_TASK": "1"})["cpu_mismatch"] is None
    assert worker.cpu_placement({})["cpus_asked"] is None


def test_shards_are_consecutive_and_cover_every_case():
    cases = [CaseSpec(workload="w", params={"i": i}) for i in range(10)]
    shards = shard(cases, 4)
    assert [len(s) for s in shards] == [4, 4, 2]
    assert [c for s in shards for c in s] == cases
    with pytest.raises(ValueError, match="per task"):
        shard(cases, 0)


def test_time_limit_grows_with_the_shard_and_has_a_floor():
    one = time_limit_min([TINY], {"budget_s": 0.1}, startup_s=0)
    assert one == FLOOR_MIN
    many = time_limit_min([TINY] * 40, {"budget_s": 10.0}, startup_s=30)
    assert many == 2 + -(-(30 + 40 * 15) * 2 // 60)
    big = CaseSpec(workload="train_step", params={"size": "xl"})
    assert time_limit_min([big], {"budget_s": 1}, 0) > time_limit_min([TINY], {"budget_s": 1}, 0)


def test_tasks_under_ten_minutes_are_not_requeueable():
    assert not is_requeueable(3)
    assert not is_requeueable(10)
    assert is_requeueable(11)


def test_case_record_files_are_distinct_per_case_and_jax_version():
    other = CaseSpec(workload=TINY.workload, params={**TINY.params, "dtype": "bfloat16"})
    stems = {c.file_stem(v) for c in (TINY, other) for v in (None, "0.11.2", "0.12.0.1")}
    assert len(stems) == 6
    assert all("/" not in s for s in stems)


def test_cases_whose_names_would_be_alike_or_too_long_get_files_of_their_own(tmp_path):
    cases = [CaseSpec(workload="m:f", params={"tag": t}) for t in ("a b", "a_b", "a/b")]
    assert len({c.file_stem(None) for c in cases}) == 3
    long = CaseSpec(workload="m:f", params={f"a_very_long_parameter_name_{i}": i for i in range(9)})
    assert len(long.file_stem("0.12.1") + ".json") < 255
    # a sweep made before the digest: its files are read, and only as the case's own record
    sweep = Sweep(tmp_path / "old")
    sweep.records_dir.mkdir(parents=True)
    legacy = sweep.records_dir / f"{cases[2].legacy_file_stem(None)}.json"
    assert legacy.name == "jax-env__m_f__tag-a_b.json"  # the name all three shared
    write_json(
        legacy, Record(run_id="r", benchmark="m:f", params={"tag": "a/b"}, status="ok", env={})
    )
    assert sweep.has_ok_record(cases[2], None)
    assert not sweep.has_ok_record(cases[0], None) and not sweep.has_ok_record(cases[1], None)


# --- records written by many processes at once ----------------------------------------------


def _write_many(folder, worker, n, template):
    record = Record.model_validate_json(template)
    for i in range(n):
        record.params = {"worker": worker, "i": i}
        write_json(Path(folder) / f"w{worker}-{i}.json", record)
        write_json(Path(folder) / f"shared-{i}.json", record)  # all workers, same file


def test_sixteen_processes_writing_one_folder_leave_every_record_readable(tmp_path):
    template = Record(
        run_id="r", benchmark="b", params={}, status="ok", samples_s=[1e-3] * 2000, env={}
    ).model_dump_json()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(tmp_path, w, 20, template)) for w in range(16)]
    for p in procs:
        p.start()
    seen_partial = 0
    while any(p.is_alive() for p in procs):  # read while they write
        for f in tmp_path.glob("shared-*.json"):
            try:
                read_model(f, Record)
            except Exception:
                seen_partial += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    files = sorted(tmp_path.iterdir())
    assert len(files) == 16 * 20 + 20  # no temporary file left behind
    for f in files:
        assert read_model(f, Record).samples_s == [1e-3] * 2000
    assert seen_partial == 0


# --- the worker -----------------------------------------------------------------------------


def test_unpickling_a_shard_task_does_not_import_jax(tmp_path):
    task = ShardTask(str(tmp_path), 0, [TINY], None, "cpu", TIMING)
    blob = tmp_path / "task.pkl"
    blob.write_bytes(pickle.dumps(task))
    code = (
        "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read()); "
        "print('jax' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(blob)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_worker_sets_its_environment_before_jax_starts(tmp_path):
    """XLA_FLAGS only take effect if set before JAX initialises its CPU backend."""
    sweep = Sweep(tmp_path / "s")
    task = ShardTask(
        str(sweep.root),
        0,
        [TINY],
        None,
        "cpu",
        TIMING,
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=3", "JAX_PLATFORMS": "cpu"},
    )
    blob = tmp_path / "task.pkl"
    blob.write_bytes(pickle.dumps(task))
    code = "import pickle, sys; print(pickle.loads(open(sys.argv[1], 'rb').read())())"
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env |= {"SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    subprocess.run([sys.executable, "-c", code, str(blob)], env=env, check=True, timeout=300)
    record = read_model(sweep.record_path(TINY, None), Record)
    assert record.status == "ok"
    assert record.env.device_count == 3
    # Task 1 of four on a node keeps the second listed GPU, set before JAX started.
    assert record.env.env_vars["CUDA_VISIBLE_DEVICES"] == "5"
    assert record.env.sweep.pinned == {"CUDA_VISIBLE_DEVICES": "5"}
    assert record.env.sweep.task_started_at <= record.started_at
    assert record.env.env_vars["XLA_FLAGS"] == "--xla_force_host_platform_device_count=3"
    assert record.env.sweep.task == 0 and record.env.sweep.timing == TIMING


def test_each_local_id_keeps_its_own_listed_gpu():
    eight = ",".join(str(i) for i in range(8))
    picked = {local_gpu({"SLURM_LOCALID": str(i), "CUDA_VISIBLE_DEVICES": eight})[
        "CUDA_VISIBLE_DEVICES"] for i in range(8)}  # fmt: skip
    assert picked == {str(i) for i in range(8)}
    assert local_gpu({"SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == {
        "CUDA_VISIBLE_DEVICES": "5"
    }
    assert local_gpu({"SLURM_LOCALID": "2", "SLURM_STEP_GPUS": "0,3"}) == {
        "CUDA_VISIBLE_DEVICES": "0"
    }
    assert local_gpu({"CUDA_VISIBLE_DEVICES": "4,5"}) == {}  # not a Slurm task
    assert local_gpu({"SLURM_LOCALID": "3", "CUDA_VISIBLE_DEVICES": "6"}) == {}  # one already
    with pytest.raises(ValueError, match="SLURM_LOCALID='x'"):
        local_gpu({"SLURM_LOCALID": "x", "CUDA_VISIBLE_DEVICES": "0,1"})


def test_worker_refuses_to_run_after_jax_was_imported(tmp_path):
    import jax  # noqa: F401

    task = ShardTask(str(tmp_path), 0, [TINY], None, "cpu", TIMING, env={"XLA_FLAGS": "x"})
    with pytest.raises(JaxImportedTooEarly, match="XLA_FLAGS"):
        task()


def test_worker_skips_cases_that_already_have_an_ok_record(tmp_path, monkeypatch):
    sweep = Sweep(tmp_path)
    done = Record(run_id="earlier", benchmark="train_step", params=TINY.params, status="ok", env={})
    write_json(sweep.record_path(TINY, None), done)
    monkeypatch.setattr(
        "jaxbench.runner.measure_case", lambda *a: pytest.fail("an ok case was measured again")
    )
    summary = ShardTask(str(tmp_path), 0, [TINY], None, "cpu", TIMING)()
    assert summary["statuses"] == {Case(TINY.workload, TINY.params).label: "ok (earlier)"}
    assert read_model(sweep.record_path(TINY, None), Record).run_id == "earlier"


@pytest.mark.parametrize("failures", [worker.REQUEUE_TRIES - 1, worker.REQUEUE_TRIES])
def test_requeue_survives_a_sigterm_and_is_tried_again_when_scontrol_fails(monkeypatch, failures):
    """The pre-emption's ``SIGTERM`` reaches ``scontrol requeue`` too: it must be ignored there
    (a child inherits ``SIG_IGN``), and a failing ``scontrol`` is tried again, up to a limit."""
    monkeypatch.setattr(worker, "REQUEUE_RETRY_S", 0.0)
    sigterm_seen = []

    def submitit_handler(signum, frame):
        sigterm_seen.append(signal.getsignal(signal.SIGTERM))
        if len(sigterm_seen) <= failures:
            raise subprocess.CalledProcessError(1, ["scontrol", "requeue", "7"])
        raise SystemExit(-1)  # what submitit does once it has requeued

    gives_up = failures == worker.REQUEUE_TRIES
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(subprocess.CalledProcessError if gives_up else SystemExit):
            worker._requeue_or_end(submitit_handler, signal.SIGUSR2)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert sigterm_seen == [signal.SIG_IGN] * worker.REQUEUE_TRIES


def test_a_failed_job_is_detailed_by_its_exception_line_with_its_module():
    trace = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "subprocess.CalledProcessError: Command 'scontrol requeue 7' died with SIGTERM.\n"
    )
    failed = submitit.core.utils.FailedJobError(
        f"Job (task=0) failed during processing with trace:\n---\n{trace}---\nYou can check"
    )
    job = type("Job", (), {"exception": lambda self: failed})()
    assert jobstate._from_result(job) == (
        "failed", "subprocess.CalledProcessError: Command 'scontrol requeue 7' died with SIGTERM."
    )  # fmt: skip


# --- collect --------------------------------------------------------------------------------


def _manifest(tmp_path, cases, jax=None):
    profile = load_profile("local")
    request = dispatch.SweepRequest(profile, cases, TIMING, [], sweeps_dir=tmp_path)
    sweep, manifest = dispatch.plan(request)
    for task in manifest.tasks:
        task.jax = jax
    sweep.save(manifest)
    return sweep, manifest


def test_status_and_collect_of_a_missing_folder_or_a_file_say_which(tmp_path):
    (tmp_path / "afile").write_text("")
    for command in ("status", "collect"):
        for where, what in (("nope", "no such folder"), ("afile", "a file")):
            done = run_cli(command, str(tmp_path / where))
            assert done.returncode == 2
            assert (
                done.stderr.strip() == f"error: {tmp_path / where}: {what} (expected a sweep "
                "folder)"
            )


def test_collect_reports_missing_and_corrupt_records_and_keeps_the_rest(tmp_path):
    cases = [CaseSpec(workload="w", params={"i": i}) for i in range(3)]
    sweep, manifest = _manifest(tmp_path, cases)
    ok = Record(run_id="r", benchmark="w", params={"i": 0}, status="ok", env={})
    write_json(sweep.record_path(cases[0], None), ok)
    sweep.record_path(cases[1], None).write_text('{"schema_version": 1, "run_id": ')
    result = sweep.collect(manifest)
    assert [r.params for r in result.records] == [{"i": 0}]
    assert [c.params for _, c in result.missing] == [{"i": 2}]
    assert (
        len(result.unreadable) == 1
        and sweep.record_path(cases[1], None).name in (result.unreadable[0])
    )
    assert [r.params for r in read_file(sweep.results_path, strict=True).models("record")] == [
        {"i": 0}
    ]
    assert result.written
    sweep.record_path(cases[1], None).unlink()
    assert sweep.collect(manifest).written  # idempotent: rewritten, not appended
    assert len(read_file(sweep.results_path, strict=True).models("record")) == 1
    done = run_cli("collect", str(sweep.root))  # the summary and the error count alike
    assert done.returncode == 1
    assert "1 record(s) in " in done.stdout
    assert "; 2 case(s) without a readable record" in done.stdout.replace("\n", "")
    assert "error: 2 case(s) without a readable record, 0 failed" in done.stderr
    assert "no record: task 0: w i=1\nno record: task 0: w i=2" in done.stdout
    assert "`jaxbench submit --resume" in done.stderr


def test_resume_runs_the_cases_that_never_ran_before_those_that_failed(tmp_path):
    cases = [CaseSpec(workload="w", params={"i": i}) for i in range(4)]
    sweep, manifest = _manifest(tmp_path, cases)
    for case, status in ((cases[0], "failed"), (cases[2], "ok")):
        write_json(
            sweep.record_path(case, None),
            Record(run_id="r", benchmark="w", params=case.params, status=status, env={}),
        )
    (task,) = manifest.tasks
    assert [c.params["i"] for c in sweep.missing_cases(task)] == [1, 3, 0]


def test_a_local_tasks_progress_counts_only_the_records_this_submission_wrote(tmp_path):
    cases = [CaseSpec(workload="w", params={"i": i}) for i in range(3)]
    sweep, manifest = _manifest(tmp_path, cases)
    for case in cases[:2]:  # a resumed task: two records from before, one failed
        path = sweep.record_path(case, None)
        write_json(path, Record(run_id="r", benchmark="w", params=case.params, status="failed",
                                env={}))  # fmt: skip
        os.utime(path, (1e9, 1e9))
    (task,) = manifest.tasks
    before = dispatch._record_stamps(sweep, task)  # what the submission finds there
    assert dispatch._recorded(sweep, task, before) == 0
    write_json(
        sweep.record_path(cases[0], None),
        Record(run_id="r", benchmark="w", params=cases[0].params, status="ok", env={}),
    )
    assert dispatch._recorded(sweep, task, before) == 1  # the one written again


def test_show_of_a_sweep_is_one_table_of_its_records(tmp_path):
    cases = [CaseSpec(workload="train_step", params={**TINY.params, "i": i}) for i in range(3)]
    sweep, _ = _manifest(tmp_path, cases)
    for case in cases:
        record = Record(run_id="r", benchmark="train_step", params=case.params, status="ok",
                        samples_s=[1e-3, 2e-3], env={})  # fmt: skip
        write_json(sweep.record_path(case, None), record)
    done = run_cli("show", str(sweep.root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(str(sweep.root)) == 1 and "records/" not in done.stdout
    assert all(f"i={i}" in done.stdout for i in range(3))


def test_collect_while_a_task_runs_says_to_collect_again_not_to_resume(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from jaxbench.cli import app

    cases = [CaseSpec(workload="w", params={"i": i}) for i in range(2)]
    sweep, manifest = _manifest(tmp_path, cases)
    (task,) = dispatch.status(sweep, manifest)
    monkeypatch.setattr(dispatch, "status", lambda *a: [replace(task, state="running")])
    done = CliRunner().invoke(app, ["collect", str(sweep.root)])
    assert done.exit_code == 1
    assert done.stderr.strip() == ("error: 2 case(s) without a readable record, 0 failed: 1 "
                                   "task(s) still running: collect again once they end "
                                   "(`jaxbench status`)")  # fmt: skip


def test_collect_keeps_results_while_a_collected_record_file_is_unreadable(tmp_path):
    """A record collected once stays in results.jsonl when its file is later cut short: the
    file is named, results.jsonl is left as it was, and collect exits 1. The sweep's path is
    long, as a cluster's shared folders are: the line naming it is not broken."""
    cases = [CaseSpec(workload="w", params={"i": i}) for i in range(2)]
    sweep, manifest = _manifest(tmp_path / ("shared-" * 20), cases)
    for case in cases:
        record = Record(run_id="r", benchmark="w", params=case.params, status="ok", env={})
        write_json(sweep.record_path(case, None), record)
    assert len(sweep.collect(manifest).records) == 2
    before = sweep.results_path.read_bytes()
    sweep.record_path(cases[1], None).write_text('{"schema_version": 1, "run_id": ')
    result = sweep.collect(manifest)
    assert not result.written and len(result.unreadable) == 1
    assert sweep.results_path.read_bytes() == before
    done = run_cli("collect", str(sweep.root))
    assert done.returncode == 1 and sweep.results_path.read_bytes() == before
    said = f"{sweep.results_path} left as it was, since a record file is unreadable; 1 case(s)"
    assert said in done.stdout
    from jaxbench.cluster import dispatch

    (task,) = dispatch.status(sweep, manifest)  # status names it too, counted as missing
    assert (task.ok, task.missing) == (1, 1)
    assert "unreadable: " in task.detail and sweep.record_path(cases[1], None).name in task.detail


# --- preflight with a stand-in sinfo --------------------------------------------------------


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(
        "#!/bin/sh\nprintf 'cpu|(null)|infinite\\ngpu|gpu:2|1-00:00:00\\n"
        "gpu|gpu:h100:1(S:0)|1-00:00:00\\n'\n"
    )
    for name in ("sinfo", "sbatch", "srun", "scontrol"):
        path = bin_dir / name
        if not path.exists():
            path.write_text("#!/bin/sh\nexit 1\n")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def _slurm_profile(tmp_path, **slurm):
    lines = ['executor = "slurm"', "[slurm]"] + [f"{k} = {json.dumps(v)}" for k, v in slurm.items()]
    return load_profile(str(_profile(tmp_path, "\n".join(lines) + "\n")))


def test_preflight_reads_partitions_from_sinfo(fake_slurm):
    parts = preflight.slurm_partitions()
    assert parts["cpu"] == preflight.Partition("cpu", 0, None)
    assert parts["gpu"] == preflight.Partition("gpu", 2, 1440, (("h100", 1),))


def test_preflight_rejects_unknown_partition(fake_slurm, tmp_path):
    with pytest.raises(
        preflight.PreflightError, match=r"partition 'a100' does not exist.*cpu, gpu"
    ):
        preflight.check_slurm(_slurm_profile(tmp_path, partition="a100"), 5)


def test_preflight_rejects_more_gpus_than_the_partition_has(fake_slurm, tmp_path):
    profile = _slurm_profile(tmp_path, partition="gpu", gpus_per_node=4)
    with pytest.raises(preflight.PreflightError, match=r"4 GPU\(s\) per node.*at most 2"):
        preflight.check_slurm(profile, 5)
    profile = _slurm_profile(tmp_path, partition="cpu", gres="gpu:1")
    with pytest.raises(preflight.PreflightError, match=r"1 GPU\(s\).*'cpu' has at most 0"):
        preflight.check_slurm(profile, 5)


def test_preflight_rejects_a_time_limit_over_the_partitions(fake_slurm, tmp_path):
    profile = _slurm_profile(tmp_path, partition="gpu", max_time_min=5000)
    with pytest.raises(preflight.PreflightError, match="limit of partition 'gpu'"):
        preflight.check_slurm(profile, 2000)


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("30", 30), ("1:30:00", 90), ("2-00:00:00", 2880), ("05:30", 6), ("infinite", None)],
)
def test_slurm_time_limits_parse(text, minutes):
    assert preflight.parse_time_limit(text) == minutes


def test_no_slurm_here_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(preflight.PreflightError, match=r"not a Slurm login node.*--profile local"):
        preflight.slurm_partitions()


# --- the command, on the local executor -----------------------------------------------------


@pytest.mark.slow
def test_local_sweep_end_to_end_then_status_from_another_process(tmp_path):
    proc = run_cli(
        "submit", "-p", "local", "-w", "train_step", "-s", "tiny", "-d", "float32",
        "--optimizer", "sgd", "--sweeps-dir", str(tmp_path), "--budget", "0", "--min-samples",
        "3", "--wait",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (sweep_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("sweep-")]
    (record,) = read_file(sweep_dir / "results.jsonl", strict=True).models("record")
    assert record.status == "ok" and record.run_id == sweep_dir.name
    status = run_cli("status", str(sweep_dir))
    assert status.returncode == 0
    assert "completed" in status.stdout
    again = run_cli("submit", "--resume", str(sweep_dir))
    assert again.returncode == 0 and "nothing to submit" in again.stdout


@pytest.mark.slow
def test_a_sweep_whose_every_case_was_skipped_measured_nothing_and_exits_1(tmp_path):
    """A profile's backend that no node has: each case is skipped, and so the whole sweep."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "wl.py").write_text(textwrap.dedent("""\
        import jax, jax.numpy as jnp
        from jaxbench.workloads import Step

        def tanh(n: int = 4):
            return Step(fn=jax.jit(jnp.tanh), args=(jnp.ones(n),))
        """))  # fmt: skip
    profile = _profile(tmp_path, 'executor = "local"\n[worker]\nbackend = "tpu"\n')
    proc = run_cli("submit", "-p", str(profile), "-w", "wl:tanh", "--sweeps-dir", str(tmp_path),
                   "--budget", "0", "--min-samples", "3", cwd=work)  # fmt: skip
    assert proc.returncode == 1, proc.stderr + proc.stdout
    said = "error: nothing was measured: none of the 1 case(s) is ok (1 skipped); the first: "
    assert said in proc.stderr and "tpu" in proc.stderr.split(said)[1]
    (sweep_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("sweep-")]
    collected = run_cli("collect", str(sweep_dir))
    assert collected.returncode == 1 and said in collected.stderr
    (record,) = read_file(sweep_dir / "results.jsonl", strict=True).models("record")
    assert record.status == "skipped"


def test_a_local_submit_whose_case_failed_says_how_it_ended_and_exits_1(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "wl.py").write_text(textwrap.dedent("""\
        import jax, jax.numpy as jnp
        from jaxbench.workloads import Step

        def nan(n: int = 4):
            return Step(fn=jax.jit(lambda a: a * jnp.nan), args=(jnp.ones(n),))
        """))  # fmt: skip
    proc = run_cli("submit", "-p", "local", "-w", "wl:nan", "--sweeps-dir", str(tmp_path),
                   "--budget", "0", "--min-samples", "3", cwd=work)  # fmt: skip
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert "ended: 1 of 1 case(s) recorded" in proc.stdout and "completed" in proc.stdout
    assert "0 case(s) without a record, 1 failed: `jaxbench submit --resume" in proc.stderr
    # resumed from a folder where its workload does not import: refused, as a new submit is
    (sweep_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("sweep-")]
    again = run_cli("submit", "--resume", str(sweep_dir), cwd=tmp_path)
    assert again.returncode == 2 and "--workload 'wl:nan': cannot import wl" in again.stderr
    assert len(Sweep(sweep_dir).load().submissions) == 1  # nothing submitted


@pytest.mark.slow
def test_ctrl_c_of_a_terminal_during_a_local_task_is_one_line_and_no_traceback(tmp_path):
    """A terminal's Ctrl-C goes to the whole foreground process group: submitit's local
    controller too, which died with a ``KeyboardInterrupt`` traceback under the one line."""
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxbench", "submit", "-p", "local", "-w", "forward", "-s",
         "tiny", "--strategy", "linearize", "-k", "16", "-k", "32", "--budget", "30",
         "--sweeps-dir", str(tmp_path), "--wait"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own group, signalled as a terminal signals its foreground
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("sweep-*/submitit/*/*_0_log.out")):  # the task has started
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.5)
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted: the task running was stopped" in " ".join(err.split()), err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert list(tmp_path.glob(f"sweep-*/submitit/{dispatch.CONTROLLER_LOG}"))  # where it went
    assert not list(tmp_path.glob("sweep-*/submitit/%j"))  # submitit's staging folder, removed


def test_ctrl_c_while_local_tasks_run_in_turn_says_what_was_kept(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from jaxbench.cli import app

    def interrupted(sweep, manifest, on_progress):
        sweep.root.mkdir(parents=True)
        raise KeyboardInterrupt  # as wait_reporting raises it, after cancelling the task

    monkeypatch.setattr(dispatch, "submit", interrupted)
    result = CliRunner().invoke(app, ["submit", "-p", "local", "-w", "train_step", "-s", "tiny",
                                      "--sweeps-dir", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 130, result.output
    (sweep,) = tmp_path.glob("sweep-*")
    assert (f"interrupted: the task running was stopped; the cases recorded so far are in "
            f"{sweep}; `jaxbench submit --resume {sweep}` runs the rest") in " ".join(
        result.output.split())  # fmt: skip


@pytest.mark.slow
def test_local_task_over_its_time_limit_is_timed_out_and_keeps_its_records(tmp_path):
    """The local executor signals the task 5 s before its one-minute limit (the profile's
    ``signal_delay_s``): 6 cases of at least 10 s each are over it, the first (10 s plus set-up)
    is inside it even on a busy machine; its job can still read FINISHED. (At k >= 16 a call
    takes over 0.1 ms, so the 100,000-sample ceiling does not cut a 10 s budget short.)"""
    profile = _profile(tmp_path, """\
        executor = "local"
        [local]
        max_time_min = 60
        signal_delay_s = 5
        [worker]
        cases_per_task = 1000
        """)  # fmt: skip
    proc = run_cli(
        "submit", "-p", str(profile), "-w", "forward", "-s", "tiny", "--strategy", "linearize",
        "-k", "16", "-k", "32", "-k", "64", "-k", "128", "-k", "256", "-k", "512",
        "--sweeps-dir", str(tmp_path), "--budget", "10", "--time-limit", "1", "--wait",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout
    (sweep_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("sweep-")]
    sweep = Sweep(sweep_dir)
    (state,) = dispatch.status(sweep, sweep.load())
    assert state.state == "timed out", state
    assert 1 <= state.ok < 6 and state.other == 0
    kept = read_file(sweep.results_path, strict=True).models("record")
    assert len(kept) == state.ok and all(r.status == "ok" for r in kept)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "nope"], "--profile 'nope': not found (a TOML file, or one of: cpu"),
        (["-p", "local", "--jax", ","], "--jax ',': expected JAX versions separated by commas"),
        (["-p", "local", "--jax", "0.11.2,,0.12.0.1"], "none empty"),
        (["-p", "local", "--jax", "banana"], "--jax: 'banana' is not a JAX version (e.g. 0.12.1)"),
        ([], "--profile is required"),
        (
            ["-p", "local", "--sweeps-dir", "/dev/null/sweeps"],
            "--sweeps-dir '/dev/null/sweeps' is not writable",
        ),
        (["-p", "local", "-w", "nope"], "nope"),
        (["-p", "local", "--cases-per-task", "0"], "per task must be >= 1"),
        (["-p", "local", "--time-limit", "500"], "over the profile's max_time_min"),
        (["-p", "local", "--time-limit", "0"], "--time-limit must be >= 1"),
        (["-p", "cpu"], "not a Slurm login node"),
    ],
)
def test_bad_submit_input_is_one_line_and_nothing_is_submitted(tmp_path, args, message):
    env = {"PATH": str(Path(sys.executable).parent)}  # no sinfo/sbatch: not a Slurm host
    if "--sweeps-dir" not in args:
        args = [*args, "--sweeps-dir", str(tmp_path / "s")]
    proc = run_cli("submit", *args, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not list((tmp_path / "s").glob("sweep-*/sweep.json"))


@pytest.mark.slow
def test_a_jax_version_the_index_lacks_is_an_error_before_submission(tmp_path):
    proc = run_cli(
        "submit", "-p", "local", "--jax", "0.12.0.1,99.0.0", "--sweeps-dir", str(tmp_path)
    )
    assert proc.returncode == 2
    assert "99.0.0" in proc.stderr and "not on the package index" in proc.stderr
    assert not list(tmp_path.glob("sweep-*"))


@pytest.mark.slow
def test_each_jax_version_runs_in_its_own_environment(tmp_path):
    proc = run_cli(
        "submit", "-p", "local", "--jax", "0.11.2,0.12.0.1", "-w", "train_step", "-s", "tiny",
        "-d", "float32", "--optimizer", "sgd", "--budget", "0", "--min-samples", "3",
        "--sweeps-dir", str(tmp_path), "--wait", timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sweep_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("sweep-")]
    manifest = Sweep(sweep_dir).load()
    pythons = {t.jax: Path(t.python) for t in manifest.tasks}
    assert set(pythons) == {"0.11.2", "0.12.0.1"}
    for version, python in pythons.items():
        assert python.is_relative_to(tmp_path / "envs") and version in str(python)
    records = read_file(sweep_dir / "results.jsonl", strict=True).models("record")
    assert sorted((r.env.jax, r.env.sweep.requested_jax) for r in records) == [
        ("0.11.2", "0.11.2"),
        ("0.12.0.1", "0.12.0.1"),
    ]
    assert all(r.status == "ok" for r in records)
    # One after the other: the second version's task started after the first one's ended.
    first, second = sorted(records, key=lambda r: r.env.jax)
    (task,) = [t for t in manifest.tasks if t.jax == "0.11.2"]
    job = submitit.LocalJob(
        Sweep(sweep_dir).submitit_dir / "%j", manifest.latest_jobs()[task.index]
    )
    assert second.env.sweep.task_started_at >= job.result()["finished_at"]
    assert first.env.sweep.exclusive is True and "in turn" in proc.stdout


def _fake(bin_dir: Path, name: str, script: str) -> None:
    (bin_dir / name).write_text("#!/bin/sh\n" + textwrap.dedent(script))
    (bin_dir / name).chmod(0o755)


def _loop_cases(n):
    return [
        CaseSpec(workload="loop", params={"trip": t, "body": "at_set", "mode": "plain",
                                          "dtype": "float32"})
        for t in range(1, n + 1)
    ]  # fmt: skip


def _plan(tmp_path, profile, n_cases):
    request = dispatch.SweepRequest(
        profile, _loop_cases(n_cases), TIMING, [], cases_per_task=1, sweeps_dir=tmp_path / "s"
    )
    return dispatch.plan(request)


def test_a_shard_over_the_profiles_cap_is_split_unless_the_user_chose_its_size(tmp_path):
    profile = load_profile("local")  # cases_per_task 1000, max_time_min 60
    cases = _loop_cases(30)  # a minute of set-up each (no size): one task would need 64 min
    _, manifest = dispatch.plan(dispatch.SweepRequest(profile, cases, TIMING, [],
                                                      sweeps_dir=tmp_path / "s"))  # fmt: skip
    assert [len(t.cases) for t in manifest.tasks] == [15, 15]
    assert max(t.time_limit_min for t in manifest.tasks) <= profile.max_time_min
    chosen = dispatch.SweepRequest(profile, cases, TIMING, [], cases_per_task=30,
                                   sweeps_dir=tmp_path / "s")  # fmt: skip
    with pytest.raises(preflight.PreflightError, match="use fewer --cases-per-task"):
        dispatch.plan(chosen)


def test_a_version_over_max_array_size_goes_in_several_arrays(fake_slurm, tmp_path):
    bin_dir = tmp_path / "bin"
    _fake(bin_dir, "scontrol", "printf 'ClusterName = x\\nMaxArraySize            = 3\\n'\n")
    _fake(
        bin_dir,
        "sbatch",
        """\
        for last; do :; done
        n=$(cat "$0.count" 2>/dev/null || echo 100); n=$((n + 1)); echo $n > "$0.count"
        sed -n 's/^#SBATCH --array=//p' "$last" | grep . >> "$0.log" || echo none >> "$0.log"
        echo "Submitted batch job $n"
        """,
    )
    assert preflight.max_array_size() == 3
    sweep, manifest = _plan(tmp_path, _slurm_profile(tmp_path, partition="cpu"), 7)
    submission = dispatch.submit(sweep, manifest)
    arrays = (bin_dir / "sbatch.log").read_text().split()
    assert arrays == ["0-2%3", "0-2%3", "none"], arrays  # 3 + 3 tasks, then 1 (no array)
    ids = [submission.job_ids[t.index] for t in manifest.tasks]
    assert [i.split("_")[0] for i in ids] == ["101"] * 3 + ["102"] * 3 + ["103"]
    assert sweep.load().latest_jobs() == dict(enumerate(ids))


def test_a_refused_submission_leaves_no_sweep_folder(fake_slurm, tmp_path):
    _fake(
        tmp_path / "bin",
        "sbatch",
        "echo 'sbatch: error: Invalid job array specification' >&2\nexit 1\n",
    )
    sweep, manifest = _plan(tmp_path, _slurm_profile(tmp_path, partition="cpu"), 2)
    with pytest.raises(Exception, match="Invalid job array"):
        dispatch.submit(sweep, manifest)
    assert not sweep.root.exists()
    assert list((tmp_path / "s").iterdir()) == []


@pytest.mark.parametrize(
    ("profile", "warning"),
    [
        ({"partition": "gpu", "gpus_per_node": 1}, "without exclusive = true"),
        ({"partition": "gpu", "gres": "gpu:h100:1"}, "without exclusive = true"),
        ({"partition": "gpu", "gpus_per_node": 1, "exclusive": True}, None),
        ({"partition": "cpu"}, None),
    ],
)
def test_gpu_tasks_that_may_share_a_node_are_warned_of(tmp_path, profile, warning):
    found = preflight.sharing_warnings(_slurm_profile(tmp_path, **profile))
    assert found == [] if warning is None else warning in found[0]
    assert preflight.exclusive(_slurm_profile(tmp_path, **profile)) == ("exclusive" in profile)


def test_submit_warns_of_a_gpu_profile_without_exclusive_before_anything_is_sent(
    fake_slurm, tmp_path
):
    profile = _profile(tmp_path, 'executor = "slurm"\n[slurm]\npartition = "gpu"\n'
                       "gpus_per_node = 1\n")  # fmt: skip
    proc = run_cli("submit", "-p", str(profile), "-w", "train_step", "-s", "tiny", "-d",
                   "float32", "--sweeps-dir", str(tmp_path / "s" / "t"), "--dry-run")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning:" in proc.stderr and "without exclusive = true" in proc.stderr
    assert "nothing submitted" in proc.stdout
    assert not (tmp_path / "s").exists()  # the probe of the folders is undone: nothing written


def test_a_concurrent_local_profile_warns_and_shares_out_its_gpus(tmp_path):
    assert preflight.sharing_warnings(load_profile("local")) == []
    assert preflight.exclusive(load_profile("local"))
    path = _profile(tmp_path, 'executor = "local"\n[local]\nconcurrent = true\n'
                    "gpus_per_node = 1\nvisible_gpus = [2, 3]\n")  # fmt: skip
    (warning,) = preflight.sharing_warnings(load_profile(str(path)))
    assert "concurrent = true starts every task at once" in warning
    sweep, manifest = _plan(tmp_path, load_profile(str(path)), 3)
    tasks = [dispatch._shard_task(sweep, manifest, t, None, False) for t in manifest.tasks]
    assert [t.env["CUDA_VISIBLE_DEVICES"] for t in tasks] == ["2", "3", "2"]
    assert {t.exclusive for t in tasks} == {False}


def test_a_gpu_type_the_partition_lacks_is_refused(fake_slurm, tmp_path):
    preflight.check_slurm(_slurm_profile(tmp_path, partition="gpu", gres="gpu:h100:1"), 5)
    with pytest.raises(preflight.PreflightError, match=r"type 'a100'.*at most 0 \(types: h100\)"):
        preflight.check_slurm(_slurm_profile(tmp_path, partition="gpu", gres="gpu:a100:1"), 5)


def test_gpus_per_node_and_gres_together_are_refused(tmp_path):
    with pytest.raises(ProfileError, match="set gpus_per_node or gres, not both"):
        _slurm_profile(tmp_path, partition="gpu", gpus_per_node=1, gres="gpu:2")


def test_a_repeated_jax_version_is_planned_once(tmp_path, monkeypatch):
    monkeypatch.setattr("jaxbench.cluster.pyenvs.check_versions", lambda python, versions: None)
    request = dispatch.SweepRequest(
        load_profile("local"), [TINY], TIMING, ["0.11.2", "0.11.2"], sweeps_dir=tmp_path
    )
    _, manifest = dispatch.plan(request)
    assert [t.jax for t in manifest.tasks] == ["0.11.2"]


def test_a_corrupt_manifest_is_named(tmp_path):
    manifest = tmp_path / "sweep.json"
    manifest.write_text('{"sweep_id": 3}')
    with pytest.raises(ValueError, match=r"^not a valid sweep manifest: .*sweep\.json: not a jaxb"):
        Sweep(tmp_path).load()
    manifest.write_text('{"kind": "sweep", "sweep_id": 3}')
    with pytest.raises(ValueError) as info:
        Sweep(tmp_path).load()
    assert str(info.value) == (
        f"not a valid sweep manifest: {manifest}: not a valid sweep: sweep_id: "
        "Input should be a valid string"
    )
    proc = run_cli("status", str(tmp_path))
    assert proc.returncode == 2 and "not a valid sweep manifest" in proc.stderr


def test_resume_takes_no_selection_or_profile():
    proc = run_cli("submit", "--resume", "/nonexistent", "-w", "forward", "--budget", "3")
    assert proc.returncode == 2
    assert "drop --workload, --budget" in proc.stderr


def test_an_environment_built_before_the_dependencies_changed_is_rebuilt(tmp_path, monkeypatch):
    from jaxbench.cluster import pyenvs

    calls = fake_pip(monkeypatch, "0.11.2")
    build = ["python", "python -m venv", "pip install jax==0.11.2", "import jax"]
    python = pyenvs.ensure_env(tmp_path, "0.11.2", "/usr/bin/python3")
    assert [what for _, what in calls] == build
    marker = python.parent.parent / pyenvs.MARKER
    assert json.loads(marker.read_text())["dependencies"] == pyenvs.dependencies_digest()
    calls.clear()
    pyenvs.ensure_env(tmp_path, "0.11.2", "/usr/bin/python3")
    assert [what for _, what in calls] == ["python"]  # built for these dependencies: as it is
    marker.write_text(json.dumps({"jax": "0.11.2", "extra": None}))  # an older build's marker
    calls.clear()
    pyenvs.ensure_env(tmp_path, "0.11.2", "/usr/bin/python3")
    assert [what for _, what in calls] == build


def test_an_environment_that_fails_to_build_leaves_no_folder(tmp_path, monkeypatch):
    from jaxbench.cluster import pyenvs

    fake_pip(monkeypatch, "0.11.1")  # pip "installed" another JAX than asked
    with pytest.raises(pyenvs.PyEnvError, match=r"imports jax 0\.11\.1, not 0\.11\.2"):
        pyenvs.ensure_env(tmp_path, "0.11.2", "/usr/bin/python3")
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


def test_a_gpu_or_nightly_environment_pins_the_plugin_and_asks_the_other_index(
    tmp_path, monkeypatch
):
    from jaxbench.cluster import pyenvs

    calls = fake_pip(monkeypatch, "0.12.1.dev20261201", "0.12.1.dev20261201, 0.12.0.1")
    nightly = "https://example.org/jax-nightly/simple/"
    envs = pyenvs.VersionEnvs(tmp_path, "cuda13", nightly)
    offered = envs.offered("/usr/bin/python3")
    commands = [c for c, _ in calls]
    asked = [c[5] for c in commands]
    assert asked == ["jax", "jaxlib", "jax-cuda13-plugin"] and len(offered) == 3
    assert all(c[-3:] == ["--extra-index-url", nightly, "--pre"] for c in commands)
    calls.clear()
    python = envs.python("0.12.1.dev20261201", "/usr/bin/python3")
    (install,) = [c for c, _ in calls if "install" in c]
    assert "jax[cuda13]==0.12.1.dev20261201" in install and "--pre" not in install
    assert install[install.index("--extra-index-url") + 1] == nightly
    assert python.parent.parent.name == "jax-0.12.1.dev20261201-cuda13-py3.13"
    with pytest.raises(ValueError, match="--jax-extra 'rocm': expected one of cuda12"):
        pyenvs.VersionEnvs(tmp_path, "rocm")


def test_a_sweep_record_and_a_run_record_validate_against_one_schema(tmp_path):
    """The worker and ``jaxbench run`` build a record's env, noise and metrics in one place."""
    from jaxbench.cases import Case
    from jaxbench.measure import TimingConfig
    from jaxbench.runner import run
    from jaxbench.store import Env

    sweep = Sweep(tmp_path / "s")
    ShardTask(str(sweep.root), 0, [TINY], None, "cpu", TIMING)()  # in this process: env empty
    ran = run([Case(TINY.workload, TINY.params)], tmp_path / "run", "cpu", TimingConfig(**TIMING))
    by_sweep = sweep.record_path(TINY, None).read_text()
    (by_run,) = ran.path.read_text().splitlines()
    a, b = Record.model_validate_json(by_sweep), Record.model_validate_json(by_run)
    assert a.status == b.status == "ok"
    # asv: records converted from asv only; workload_source: user workloads only; jax_processes:
    # programs over several JAX processes only
    typed = set(Env.model_fields) - {"sweep", "asv", "workload_source", "jax_processes"}
    assert a.env.model_fields_set & set(Env.model_fields) == typed | {"sweep"}
    assert b.env.model_fields_set & set(Env.model_fields) == typed
    assert a.env.model_extra.keys() == b.env.model_extra.keys()  # numpy, gpu, ...
    assert a.noise.model_fields_set == b.noise.model_fields_set
    assert a.metrics.model_dump().keys() == b.metrics.model_dump().keys()
    assert a.env.sweep.task == 0 and b.env.sweep is None


def test_a_local_task_in_turn_says_each_case_recorded_and_the_time_left(monkeypatch):
    import time as time_mod

    from jaxbench.cluster import dispatch

    class Job:
        looks = 0

        def done(self):
            self.looks += 1
            return self.looks > 4

        def wait(self):
            self.waited = True

    clock = iter([0.0, 10.0, 40.0, 50.0])
    monkeypatch.setattr(time_mod, "monotonic", lambda: next(clock))
    monkeypatch.setattr(time_mod, "sleep", lambda s: None)
    counts = iter([0, 0, 1, 1, 4, 4])  # before, four looks, at the end
    said, job = [], Job()
    dispatch.wait_reporting(job, lambda: next(counts), 4, said.append)
    assert said == ["1 of 4 case(s) recorded, 10 s so far, about 30 s left",
                    "4 of 4 case(s) recorded, 40 s so far",
                    "ended: 4 of 4 case(s) recorded, in 50 s"]  # fmt: skip
    assert job.waited
    # a resumed task: the 2 recorded before are not counted as this wait's work
    clock = iter([0.0, 10.0, 20.0, 30.0])  # the last for the Ctrl-C below
    counts = iter([2, 2, 3, 3, 3, 3])
    said = []
    dispatch.wait_reporting(Job(), lambda: next(counts), 4, said.append)
    assert said == ["3 of 4 case(s) recorded, 10 s so far, about 10 s left",
                    "ended: 3 of 4 case(s) recorded, in 20 s"]  # fmt: skip

    class Interrupted(Job):
        def done(self):
            raise KeyboardInterrupt  # Ctrl-C reached the command while it waited

        def cancel(self, check=True):
            self.cancelled = True

    job = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        dispatch.wait_reporting(job, lambda: 0, 4, said.append)
    assert job.cancelled  # the running task is stopped too, not left to run on


def test_resume_of_what_is_not_a_sweep_names_the_option(tmp_path):
    (tmp_path / "afile").write_text("")
    (tmp_path / "empty").mkdir()
    for where, what in (("nope", "no such folder"), ("afile", "a file"),
                        ("empty", "is not a sweep folder: it has no sweep.json")):  # fmt: skip
        done = run_cli("submit", "--resume", where, cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr.startswith(f"error: --resume {where}: ") and what in done.stderr


def test_an_interpreter_that_fails_silently_is_said_so():
    """`/bin/false` prints nothing: the error says so, not a message that ends in a colon."""
    from jaxbench.cluster import pyenvs

    with pytest.raises(pyenvs.PyEnvError) as caught:
        pyenvs.imported_jax(shutil.which("false"))
    assert str(caught.value) == "import jax failed (exit 1), printing nothing"


def test_a_full_disk_is_said_in_one_line_naming_the_folder_and_the_option(tmp_path, monkeypatch):
    """CI's disk filled while pip installed an environment: the error said only pip's noise."""
    from jaxbench.cluster import pyenvs

    calls = fake_pip(monkeypatch, "0.11.2")
    faked = pyenvs._run

    def run(cmd: list[str], what: str) -> str:
        if what.startswith("pip install"):
            faked(cmd, what)  # recorded
            raise pyenvs.PyEnvError(
                f"{what} failed (exit 1):\nERROR: Could not install packages"
                " due to an OSError: [Errno 28] No space left on device"
            )
        return faked(cmd, what)

    monkeypatch.setattr(pyenvs, "_run", run)
    with pytest.raises(pyenvs.PyEnvError) as caught:
        pyenvs.ensure_env(tmp_path, "0.11.2", "/usr/bin/python3")
    said = str(caught.value)
    assert "\n" not in said and said.startswith(f"environments under {tmp_path}: no space left")
    assert "GiB free" in said and "--env-root" in said
    assert "pip install jax==0.11.2" in [what for _, what in calls]
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


def test_pips_warnings_do_not_crowd_its_error_out_of_the_message(tmp_path):
    """A pip configured with absent index folders warns once per package before its error."""
    from jaxbench.cluster import pyenvs

    noisy = tmp_path / "noisy"
    warnings = "".join(f"echo 'WARNING: Location {i} is ignored' >&2; " for i in range(12))
    noisy.write_text(f"#!/bin/sh\n{warnings}echo 'ERROR: the real reason' >&2; exit 1\n")
    noisy.chmod(0o755)
    with pytest.raises(pyenvs.PyEnvError) as caught:
        pyenvs.imported_jax(str(noisy))
    assert str(caught.value) == "import jax failed (exit 1):\nERROR: the real reason"


def test_a_version_environment_is_said_built_now_or_reused_with_its_folder(
    tmp_path, monkeypatch, capsys
):
    """The user-model trial: a second 666 MB environment was built behind "(built once)"."""
    from jaxbench.cli.options import pythons_for
    from jaxbench.cluster import pyenvs

    fake_pip(monkeypatch, "0.11.2")
    monkeypatch.setattr(pyenvs, "check_versions", lambda *a, **k: None)
    envs = pyenvs.VersionEnvs(tmp_path, requirements=("-e", str(tmp_path / "pkg")))
    folder = pyenvs.env_dir(tmp_path, "0.11.2", None, "3.13", envs.requirements)
    pythons_for((("baseline", "0.11.2"),), envs)
    first = " ".join(capsys.readouterr().err.split())
    assert (
        f"baseline: JAX 0.11.2 environment {folder} (its own: it installs the workload's " in first
    )
    assert first.endswith(
        "packages): building it now, once (jax, jaxlib and jaxbench's dependencies)"
    )
    pythons_for((("baseline", "0.11.2"),), envs)
    assert " ".join(capsys.readouterr().err.split()).endswith("packages): reused")
