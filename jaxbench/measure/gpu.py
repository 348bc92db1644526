"""NVIDIA GPU facts from NVML (``nvidia-ml-py``): what the device was set to, and what it did.

Two kinds, read through the ``pynvml`` module of ``nvidia-ml-py`` (NVIDIA, "NVML API Reference
Manual"):

- :func:`device_facts` (in a record's ``env.gpu``): name, driver and CUDA driver versions,
  persistence mode, compute mode, MIG mode, the power limit (W), the application clocks and the
  maximum SM and memory clocks (MHz);
- :class:`GpuWatch` (in a record's ``noise``): ``gpu_before`` and ``gpu_after`` the timed
  region, each with SM and memory clocks (MHz), power draw (W), temperature (degrees C), the
  clock event (throttle) reasons by name, and the other processes on the device (PIDs); then
  ``gpu_throttled`` (a power, thermal or hardware slowdown reason at either end) and
  ``gpu_shared`` (another process on the device at either end). Analysis keeps such records
  apart (:mod:`jaxbench.analysis.conditions`).

Where the device is not an NVIDIA GPU, or ``nvidia-ml-py`` or the driver is missing, the facts
are ``None`` and the watch adds nothing: never an error. Each single query that the device does
not support is ``None`` in its place.
"""

from __future__ import annotations

import os
from typing import Any

THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""``nvmlClocksEventReasons`` bits (``nvml.h``, ``nvmlClocksThrottleReason*`` in older drivers)."""
SLOWDOWNS = frozenset(
    ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
     "hw_power_brake_slowdown")
)  # fmt: skip
"""Reasons that mean the clocks were held below what was asked: the record is kept apart."""
GPU_PLATFORMS = ("gpu", "cuda")


def _nvml() -> Any | None:
    """The initialised ``pynvml`` module, or ``None`` (not installed, or no driver)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return None
    return pynvml


def _ask(call: Any, *args: Any, scale: float = 1.0) -> Any:
    try:
        value = call(*args)
    except Exception:  # NVMLError_NotSupported and friends: this one fact is unknown
        return None
    if isinstance(value, bytes):
        return value.decode()
    return value / scale if scale != 1.0 and value is not None else value


def _handle(nvml: Any, device: Any) -> Any | None:
    """NVML's handle for a JAX device: CUDA numbers the ``CUDA_VISIBLE_DEVICES`` entries."""
    index = int(getattr(device, "id", 0))
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    if index < len(visible):
        entry = visible[index]
        if entry.startswith(("GPU-", "MIG-")):
            return _ask(nvml.nvmlDeviceGetHandleByUUID, entry)
        if entry.isdigit():
            index = int(entry)
    return _ask(nvml.nvmlDeviceGetHandleByIndex, index)


def _open(device: Any) -> tuple[Any, Any] | None:
    if getattr(device, "platform", None) not in GPU_PLATFORMS:
        return None
    nvml = _nvml()
    if nvml is None:
        return None
    handle = _handle(nvml, device)
    return None if handle is None else (nvml, handle)


def device_facts(device: Any) -> dict[str, Any] | None:
    """How the GPU behind a JAX device is set up; ``None`` where NVML cannot say.

    Args:
        device: A ``jax.Device`` (``platform`` ``gpu``/``cuda`` and ``id``).

    Returns:
        ``name``, ``driver_version``, ``cuda_driver_version`` (e.g. ``12040`` for 12.4),
        ``persistence_mode`` and ``compute_mode`` (NVML's numbers: 1 = on; 0 = default,
        2 = prohibited, 3 = exclusive process), ``mig_mode`` (current; 1 = on),
        ``power_limit_w``, ``applications_sm_clock_mhz``, ``max_sm_clock_mhz``,
        ``max_mem_clock_mhz``.
    """
    opened = _open(device)
    if opened is None:
        return None
    nvml, h = opened
    mig = _ask(nvml.nvmlDeviceGetMigMode, h)
    return {
        "name": _ask(nvml.nvmlDeviceGetName, h),
        "driver_version": _ask(nvml.nvmlSystemGetDriverVersion),
        "cuda_driver_version": _ask(nvml.nvmlSystemGetCudaDriverVersion),
        "persistence_mode": _ask(nvml.nvmlDeviceGetPersistenceMode, h),
        "compute_mode": _ask(nvml.nvmlDeviceGetComputeMode, h),
        "mig_mode": mig[0] if isinstance(mig, list | tuple) else mig,
        "power_limit_w": _ask(nvml.nvmlDeviceGetPowerManagementLimit, h, scale=1000.0),
        "applications_sm_clock_mhz": _ask(
            nvml.nvmlDeviceGetApplicationsClock, h, nvml.NVML_CLOCK_SM
        ),
        "max_sm_clock_mhz": _ask(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM),
        "max_mem_clock_mhz": _ask(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM),
    }


def _state(nvml: Any, h: Any) -> dict[str, Any]:
    newer = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)  # drivers >= 535
    bits = _ask(newer or nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)
    processes = _ask(nvml.nvmlDeviceGetComputeProcesses, h) or []
    others = sorted({int(p.pid) for p in processes} - {os.getpid()})
    return {
        "sm_clock_mhz": _ask(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
        "mem_clock_mhz": _ask(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM),
        "power_w": _ask(nvml.nvmlDeviceGetPowerUsage, h, scale=1000.0),
        "temperature_c": _ask(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU),
        "throttle_reasons": None
        if bits is None
        else [name for bit, name in THROTTLE_BITS.items() if bits & bit],
        "other_processes": others,
    }


class GpuWatch:
    """NVML's view of the GPU before and after a timed region (see the module docstring).

    Example::

        watch = GpuWatch.start(device)
        ...  # the timed calls
        noise |= watch.stop()  # {} where there is no NVML
    """

    def __init__(self, opened: tuple[Any, Any] | None):
        self._opened = opened
        self._before = _state(*opened) if opened is not None else None

    @classmethod
    def start(cls, device: Any) -> GpuWatch:
        """Read the GPU behind ``device`` now (nothing where it is not an NVIDIA GPU)."""
        return cls(_open(device))

    def stop(self) -> dict[str, Any]:
        """``gpu_before``, ``gpu_after``, ``gpu_throttled``, ``gpu_shared``; ``{}`` without NVML."""
        if self._opened is None or self._before is None:
            return {}
        after = _state(*self._opened)
        ends = (self._before, after)
        return {
            "gpu_before": self._before,
            "gpu_after": after,
            "gpu_throttled": any(SLOWDOWNS & set(s["throttle_reasons"] or ()) for s in ends),
            "gpu_shared": any(s["other_processes"] for s in ends),
        }
