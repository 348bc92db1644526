"""NVML facts of a GPU record, through a stand-in ``pynvml`` on the CPU; ``None`` without one."""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass

import pandas as pd
import pytest

from jaxbench.analysis.conditions import condition_fields
from jaxbench.analysis.frames import record_row
from jaxbench.measure import TimingConfig
from jaxbench.measure.gpu import GpuWatch, device_facts
from jaxbench.store import Record
from jaxbench.tables import records_table


class NVMLError(Exception):
    pass


def fake_nvml(reasons_after: int = 0x0, others: tuple[int, ...] = ()) -> types.ModuleType:
    """A ``pynvml`` with one H200 at physical index 5; clock events change after one read."""
    nvml = types.ModuleType("pynvml")
    state = {"reads": 0}
    handles = {5: "h5"}

    def unsupported(*_):
        raise NVMLError("Not Supported")

    def reasons(handle):
        state["reads"] += 1
        return 0x1 if state["reads"] == 1 else reasons_after  # idle before, then as given

    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM, nvml.NVML_TEMPERATURE_GPU = 1, 2, 0
    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetHandleByIndex = lambda i: handles[i]
    nvml.nvmlDeviceGetHandleByUUID = unsupported
    nvml.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nvml.nvmlSystemGetDriverVersion = lambda: "580.65"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 13000
    nvml.nvmlDeviceGetPersistenceMode = lambda h: 1
    nvml.nvmlDeviceGetComputeMode = lambda h: 3
    nvml.nvmlDeviceGetMigMode = lambda h: [0, 0]
    nvml.nvmlDeviceGetPowerManagementLimit = lambda h: 700_000
    nvml.nvmlDeviceGetApplicationsClock = unsupported
    nvml.nvmlDeviceGetMaxClockInfo = lambda h, kind: {1: 1980, 2: 3201}[kind]
    nvml.nvmlDeviceGetClockInfo = lambda h, kind: {1: 1755, 2: 3201}[kind]
    nvml.nvmlDeviceGetPowerUsage = lambda h: 412_500
    nvml.nvmlDeviceGetTemperature = lambda h, kind: 51
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = reasons
    nvml.nvmlDeviceGetComputeProcesses = lambda h: [
        types.SimpleNamespace(pid=p) for p in (os.getpid(), *others)
    ]
    return nvml


@dataclass
class FakeDevice:
    platform: str = "gpu"
    id: int = 1


@pytest.fixture
def visible(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")  # JAX's device 1 is NVML's GPU 5


def test_device_facts_come_from_nvml_of_the_device_jax_uses(monkeypatch, visible):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    facts = device_facts(FakeDevice())
    assert facts == {
        "name": "NVIDIA H200",
        "driver_version": "580.65",
        "cuda_driver_version": 13000,
        "persistence_mode": 1,
        "compute_mode": 3,
        "mig_mode": 0,
        "power_limit_w": 700.0,
        "applications_sm_clock_mhz": None,  # not supported: that one fact is unknown
        "max_sm_clock_mhz": 1980,
        "max_mem_clock_mhz": 3201,
    }


def test_a_quiet_gpu_is_neither_throttled_nor_shared(monkeypatch, visible):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    seen = GpuWatch.start(FakeDevice()).stop()
    assert seen["gpu_before"]["throttle_reasons"] == ["gpu_idle"]
    assert seen["gpu_after"] == {
        "sm_clock_mhz": 1755,
        "mem_clock_mhz": 3201,
        "power_w": 412.5,
        "temperature_c": 51,
        "throttle_reasons": [],
        "other_processes": [],  # this process is not "another"
    }
    assert seen["gpu_throttled"] is False and seen["gpu_shared"] is False


def test_a_throttled_or_shared_gpu_is_marked_and_kept_apart(monkeypatch, visible):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(reasons_after=0x20 | 0x4, others=(77,)))
    seen = GpuWatch.start(FakeDevice()).stop()
    assert seen["gpu_after"]["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert seen["gpu_after"]["other_processes"] == [77]
    assert seen["gpu_throttled"] is True and seen["gpu_shared"] is True

    def record(noise):
        params = {"dtype": "float32"}
        return Record(run_id="r", benchmark="train_step", params=params, status="ok",
                      samples_s=[1e-3], noise=noise, env={"jax": "0.12.0.1"})  # fmt: skip

    quiet, slowed = record({"wall_s": 1.0}), record({"wall_s": 1.0, **seen})
    frame = pd.DataFrame([record_row(quiet, "a"), record_row(slowed, "b")])
    fields = condition_fields(frame, ("shared", "gpu_throttled"), env_vars=False)
    assert fields.iloc[0].tolist() != fields.iloc[1].tolist()
    assert fields.iloc[1].tolist() == ["other processes on the GPU", "GPU clocks held down"]
    names = [str(c) for c in records_table([quiet, slowed], "t").columns[0]._cells]
    assert names == ["train_step", "train_step (GPU throttled) (GPU shared)"]


def test_without_nvml_or_on_a_cpu_there_are_no_facts_and_no_error(monkeypatch, visible):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    assert device_facts(FakeDevice()) is None
    assert GpuWatch.start(FakeDevice()).stop() == {}
    broken = fake_nvml()
    broken.nvmlInit = lambda: (_ for _ in ()).throw(NVMLError("Driver Not Loaded"))
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    assert device_facts(FakeDevice()) is None
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    assert device_facts(FakeDevice(platform="cpu")) is None  # a CPU device asks no GPU


def test_a_cpu_record_says_it_has_no_gpu_facts():
    from jaxbench.cases import Case
    from jaxbench.runner import measure_case

    case = Case("loop", {"trip": 8, "body": "at_set", "mode": "plain", "dtype": "float32"})
    timing = TimingConfig(budget_s=0.0, min_samples=3, max_samples=3, warmup_calls=1)
    rec = measure_case(case, "cpu", timing, "r")
    assert rec.status == "ok" and rec.env.gpu is None
    assert not {"gpu_before", "gpu_throttled"} & set(rec.noise.model_dump())
