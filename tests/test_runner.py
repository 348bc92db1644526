"""The runner: selection, failures recorded case by case, absent backends skipped, reuse."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from jaxbench import workloads
from jaxbench.cases import Case, resolve_device, select_cases
from jaxbench.measure.harness import CompileTarget
from jaxbench.runner import measure_case, run
from jaxbench.store import read_file
from jaxbench.workloads import Step, Workload
from jaxbench.workloads.step import gate_tolerance


def test_quick_grid_selection_and_overrides():
    cases = select_cases(
        ["forward"], overrides={"size": ["tiny"], "k": [3], "strategy": ["vmap_jvp"]}
    )
    assert [c.params for c in cases] == [
        {"size": "tiny", "dtype": "float32", "k": 3, "strategy": "vmap_jvp", "wrt": "input"}
    ]
    families = {"train_step", "forward", "transformer", "loop", "scatter", "compile", "collectives"}
    assert {c.workload for c in select_cases()} == families
    twice = select_cases(["train_step"], overrides={"size": ["tiny", "tiny"], "dtype": ["float32"]})
    assert len(twice) == 1


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"workloads": ["nope"]}, "unknown workload 'nope'"),
        ({"overrides": {"size": ["huge"]}}, "unknown size 'huge'"),
        ({"workloads": ["train_step"], "overrides": {"k": [4]}}, "parameter 'k'"),
        ({"workloads": ["forward"], "overrides": {"k": [-1]}}, "k .*must be"),
    ],
)
def test_bad_selection_names_the_input(args, match):
    with pytest.raises(ValueError, match=match):
        select_cases(**args)


def test_unknown_backend_is_an_error_and_absent_backend_a_skip(tmp_path, fast_timing):
    with pytest.raises(ValueError, match="unknown backend 'quantum'"):
        resolve_device("quantum")
    if any(d.platform == "tpu" for d in jax.devices()):
        pytest.skip("a TPU is present")
    cases = select_cases(["train_step"], overrides={"size": ["tiny"], "dtype": ["float32"]})
    result = run(cases, tmp_path, backend="tpu", timing=fast_timing)
    assert [r.status for r in result.records] == ["skipped"]
    assert "not present" in result.records[0].error


def test_a_small_case_after_a_large_allocation_records_its_own_host_peak(fast_timing):
    import resource

    import numpy as np

    (case,) = select_cases(["train_step"], overrides={"size": ["tiny"], "dtype": ["float32"]})
    alone = measure_case(case, "cpu", fast_timing, "r")
    big = np.ones(2**28)  # 2 GiB, every page touched
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 >= 2**31  # it was there
    del big
    after = measure_case(case, "cpu", fast_timing, "r")
    assert alone.host_peak_scope == after.host_peak_scope == "case"
    assert after.host_peak_rss_bytes < 2 * alone.host_peak_rss_bytes
    assert (after.device_peak_scope is None) == (after.device_peak_bytes is None)
    from jaxbench.runner import _peak_scope

    assert [_peak_scope(None, 5), _peak_scope(5, 6), _peak_scope(6, 6), _peak_scope(6, None)] == [
        "case", "case", "process", None]  # fmt: skip


class ToyWorkload(Workload):
    """Two cases: one with a hashable static argument, one with an unhashable one."""

    name = "toy"
    param_names = ("static",)

    def grid(self, quick):
        return {"static": ["hashable", "unhashable"]}

    def validate(self, params):
        pass

    def benchmark(self, params):
        return "toy"

    @staticmethod
    def factory(static):
        f = jax.jit(lambda x, cfg: x * 2, static_argnums=1)
        cfg = {"a": 1} if static == "unhashable" else (1, 2)
        x = jnp.ones(3)
        return Step(
            fn=lambda x: f(x, cfg),
            args=(x,),
            programs=(CompileTarget("toy", ("toy", static), f, (x, cfg)),),
            gate=lambda: {"rtol": 0.0},
        )


def test_unhashable_static_argument_fails_that_case_only(tmp_path, fast_timing, monkeypatch):
    monkeypatch.setitem(workloads.WORKLOADS, "toy", ToyWorkload())
    result = run(select_cases(["toy"]), tmp_path, timing=fast_timing)
    by_case = {r.params["static"]: r for r in result.records}
    assert by_case["hashable"].status == "ok"
    assert by_case["unhashable"].status == "failed"
    assert "hash" in by_case["unhashable"].error.lower()
    assert len(read_file(result.path, strict=True).models("record")) == 2


def test_gate_failure_is_recorded_and_not_timed(tmp_path, fast_timing, monkeypatch):
    from jaxbench.workloads import GateFailure

    toy = ToyWorkload()

    def failing_build(params):
        step = ToyWorkload.build(toy, params)

        def gate():
            raise GateFailure("disagrees")

        return dataclasses.replace(step, gate=gate)

    monkeypatch.setattr(toy, "build", failing_build)
    monkeypatch.setitem(workloads.WORKLOADS, "toy", toy)
    rec = run([Case("toy", {"static": "gatefail"})], tmp_path, timing=fast_timing).records[0]
    assert rec.status == "failed" and rec.samples_s == []
    assert rec.error == "correctness gate: disagrees"


def test_ok_record_carries_compile_gate_env_and_flops(fast_timing):
    case = Case(
        "train_step", {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True}
    )
    rec = measure_case(case, "cpu", fast_timing, "r")
    assert rec.status == "ok", rec.error
    assert len(rec.samples_s) == 5 and rec.compiles_timed == 0
    assert rec.compile_s > 0 and rec.lower_s > 0 and rec.first_call_s > 0
    assert rec.flops > 0 and rec.bytes_accessed > 0
    assert rec.device_peak_bytes is None  # CPU has no memory_stats
    assert rec.host_peak_rss_bytes > 0
    # the tolerance of the longest sum behind an output: tiny's width, 64 terms
    assert rec.gate["rtol"] == gate_tolerance("float32", 64)["rtol"] > 1e-5
    for key in ("jax", "jaxlib", "python", "numpy", "backend", "device_kind", "host", "git"):
        assert key in rec.env.model_fields_set
    assert rec.compilation_cache["dir"] is None


def test_rebuilding_a_case_reuses_the_compiled_callable(fast_timing):
    from jaxbench.measure import compile_events

    case = Case(
        "forward",
        {"size": "tiny", "dtype": "float32", "k": 3, "strategy": "jvp_loop", "wrt": "params"},
    )
    first = measure_case(case, "cpu", fast_timing, "r")
    before = compile_events.snapshot()
    second = measure_case(case, "cpu", fast_timing, "r")
    assert compile_events.since(before).compiles == 0
    assert second.compilation_cache["compile_reused_in_process"]
    assert second.compile_s == first.compile_s


def test_env_records_timing_variables_and_hides_secrets(monkeypatch):
    from jaxbench.env import collect

    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    monkeypatch.setenv("JAX_API_KEY", "hunter2")
    monkeypatch.setenv("TF_TOKEN_app_terraform_io", "hunter2")
    env = collect()
    assert env["env_vars"]["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false"
    assert env["env_vars"]["JAX_API_KEY"] == "<redacted>"
    assert "TF_TOKEN_app_terraform_io" not in env["env_vars"]
    assert "hunter2" not in str(env)


def test_interrupt_keeps_the_records_written_so_far(tmp_path, fast_timing):
    cases = select_cases(["train_step"], overrides={"size": ["tiny"]})
    assert len(cases) == 2

    def stop_before_second(case):
        if case is cases[1]:
            raise KeyboardInterrupt

    result = run(cases, tmp_path, timing=fast_timing, on_case=stop_before_second)
    assert result.interrupted
    assert [r.params["dtype"] for r in read_file(result.path, strict=True).models("record")] == [
        "float32"
    ]


def test_a_run_interrupted_before_its_first_record_leaves_no_empty_file(tmp_path, fast_timing):
    cases = select_cases(["train_step"], overrides={"size": ["tiny"]})

    def stop(case):
        raise KeyboardInterrupt

    result = run(cases, tmp_path, timing=fast_timing, on_case=stop)
    assert result.interrupted and result.records == []
    assert not result.path.exists() and list(tmp_path.iterdir()) == []


def test_a_run_whose_file_is_removed_as_it_runs_keeps_every_record(tmp_path):
    """``rm results/*.jsonl`` while a run appends: its records are copied whole to a new file
    at the path, and the result says so (``jaxbench run`` warns)."""
    from jaxbench.store import Record

    cases = select_cases(["loop"], texts={"trip": ["8", "16", "32"]})
    made = []

    def measure(case, run_id, programs_dir):
        if len(made) == 1:  # the first record is on disk: take the file away
            for path in tmp_path.glob("*.jsonl"):
                path.unlink()
        made.append(case)
        return Record(run_id=run_id, benchmark=case.workload, params=dict(case.params),
                      status="ok", samples_s=[1e-3], env={})  # fmt: skip

    result = run(cases, tmp_path, measure=measure)
    assert result.moved_from == result.path and not result.write_error
    kept = [i.model.params for i in read_file(result.path).items]
    assert len(cases) > 2 and kept == [dict(c.params) for c in cases]
