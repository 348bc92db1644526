"""FLOP, MFU and memory figures, including the GPU-only branches (faked devices on CPU)."""

import jax
import jax.numpy as jnp
import pytest

from jaxbench.analysis.derived import PEAK_FLOPS, mfu, peak_flops, record_figures
from jaxbench.measure.costs import cost_analysis, memory_analysis
from jaxbench.measure.harness import device_peak_bytes
from jaxbench.store import Record


def test_cost_analysis_counts_matmul_flops():
    n = 64
    compiled = jax.jit(lambda a, b: a @ b).lower(jnp.ones((n, n)), jnp.ones((n, n))).compile()
    flops, accessed = cost_analysis(compiled)
    assert flops == 2 * n**3
    assert accessed >= 3 * n * n * 4
    assert memory_analysis(compiled)["output_size_in_bytes"] == n * n * 4


def test_cost_analysis_of_a_list_result_and_of_no_result():
    class Old:
        def cost_analysis(self):
            return [{"flops": 10.0, "bytes accessed": 4.0}]

    class Broken:
        def cost_analysis(self):
            raise NotImplementedError

        def memory_analysis(self):
            return None

    assert cost_analysis(Old()) == (10.0, 4.0)
    assert cost_analysis(Broken()) == (None, None)
    assert memory_analysis(Broken()) == {}


def test_mfu_only_for_known_devices():
    assert peak_flops("NVIDIA H200", "bfloat16") == pytest.approx(989.5e12)
    assert peak_flops("cpu", "float32") is None
    assert peak_flops("TPU v4", "float32") is None
    assert mfu(1e12, 1.0, 2e12) == 0.5
    assert mfu(1e12, 1.0, None) is None
    assert mfu(None, 1.0, 2e12) is None
    assert all(v > 1e13 for kinds in PEAK_FLOPS.values() for v in kinds.values())
    assert peak_flops("TPU v5p", "bfloat16") == peak_flops("TPU v5", "bfloat16") == 459e12


@pytest.mark.parametrize(
    ("flags", "variables", "peak"),
    [
        ({}, {}, 494.5e12),  # XLA's default: float32 dots as TF32
        ({"jax_default_matmul_precision": "highest"}, {}, 67e12),
        ({"jax_default_matmul_precision": "float32"}, {}, 67e12),
        ({"jax_default_matmul_precision": "tensorfloat32"}, {}, 494.5e12),
        ({}, {"NVIDIA_TF32_OVERRIDE": "0"}, 67e12),
    ],
)
def test_a_float32_mfu_uses_the_peak_of_the_precision_it_ran_at(flags, variables, peak):
    env = {"device_kind": "NVIDIA H200", "jax_flags": flags, "env_vars": variables}
    rec = Record(run_id="r", benchmark="train_step", params={"dtype": "float32"}, status="ok",
                 samples_s=[1.0], flops=1e12, env=env)  # fmt: skip
    assert record_figures(rec)["mfu"] == pytest.approx(1e12 / peak)
    bf16 = rec.model_copy(update={"params": {"dtype": "bfloat16"}})
    assert record_figures(bf16)["mfu"] == pytest.approx(1e12 / 989.5e12)  # not a float32 dot


class FakeGpu:
    def __init__(self, stats):
        self.stats = stats

    def memory_stats(self):
        if isinstance(self.stats, Exception):
            raise self.stats
        return self.stats


def test_device_peak_bytes_is_none_where_the_backend_has_none():
    assert device_peak_bytes(FakeGpu({"peak_bytes_in_use": 123, "bytes_in_use": 7})) == 123
    assert device_peak_bytes(FakeGpu(None)) is None
    assert device_peak_bytes(FakeGpu({"bytes_in_use": 7})) is None
    assert device_peak_bytes(FakeGpu(RuntimeError("unimplemented"))) is None
    assert device_peak_bytes(jax.devices("cpu")[0]) is None


def test_summary_percentiles_rate_and_mfu():
    rec = Record(
        run_id="r",
        benchmark="train_step",
        params={"dtype": "bfloat16"},
        status="ok",
        samples_s=[1.0, 2.0, 3.0, 4.0, 5.0],
        flops=989.5e12,
        env={"device_kind": "NVIDIA H200"},
    )
    s = record_figures(rec)
    assert (s["n"], s["p50_s"], s["iqr_s"]) == (5, 3.0, 2.0)
    assert s["p95_s"] == pytest.approx(4.8)
    assert s["flops_per_s"] == pytest.approx(989.5e12 / 3)
    assert s["mfu"] == pytest.approx(1 / 3)
    empty = record_figures(rec.model_copy(update={"samples_s": []}))
    assert empty["p50_s"] is None and empty["mfu"] is None
