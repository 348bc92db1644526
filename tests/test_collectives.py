"""The collectives family: NumPy references, nccl-tests' bandwidths, meshes of 1, 2, 4 devices."""

from __future__ import annotations

import textwrap

import jax
import numpy as np
import pytest

from jaxbench.analysis.derived import record_figures
from jaxbench.cases import Case, select_cases
from jaxbench.prepared import prepare
from jaxbench.runner import measure_case
from jaxbench.store import read_file
from jaxbench.store.scan import store_files
from jaxbench.workloads import GateFailure, collectives, get_workload
from tests.conftest import FORCE_4, forced_json, run_cli


def _params(op, n=1, size=256):
    return {"op": op, "bytes": size, "devices": n, "dtype": "float32"}


def _by_device(op: str, x: np.ndarray) -> np.ndarray:
    """Each collective written out device by device, the way nccl-tests states it."""
    n, m = x.shape
    rows = []
    for i in range(n):
        if op == "all_reduce":
            rows.append([sum(x[j] for j in range(n))])
        elif op == "all_gather":
            rows.append([x[j] for j in range(n)])
        elif op == "reduce_scatter":
            k = m // n
            rows.append([sum(x[j][i * k : (i + 1) * k] for j in range(n))])
        elif op == "all_to_all":
            k = m // n
            rows.append([np.concatenate([x[j][i * k : (i + 1) * k] for j in range(n)])])
        else:
            rows.append([x[(i - 1) % n]])
    return np.concatenate([np.stack(r) for r in rows])


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("op", collectives.OPS)
def test_the_reference_is_the_collective_device_by_device(op, n):
    x = np.random.default_rng(0).standard_normal(collectives.input_shape(op, 64 * n, n))
    np.testing.assert_allclose(collectives.reference(op, x), _by_device(op, x))


def test_bus_factors_are_nccl_tests():
    assert collectives.bus_factor("all_reduce", 4) == 2 * 3 / 4
    assert collectives.bus_factor("all_reduce", 1) == 0
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert collectives.bus_factor(op, 8) == 7 / 8
    assert collectives.bus_factor("permute", 8) == 1.0
    with pytest.raises(ValueError, match="unknown op 'broadcast'"):
        collectives.bus_factor("broadcast", 2)


@pytest.mark.parametrize("op", collectives.OPS)
def test_every_op_on_a_mesh_of_one_device_passes_its_gate(op):
    case = prepare("collectives", _params(op), "cpu", keep=False)
    assert case.gate["rtol"] == 1e-5
    metrics = case.metrics
    assert metrics["mesh"] == {"axes": {"x": 1}, "device_ids": [0],
                               "device_kinds": [jax.devices()[0].device_kind],
                               "platform": "cpu"}  # fmt: skip
    spec = str(jax.sharding.PartitionSpec("x"))
    assert metrics["message_bytes"] == 256 and metrics["partition_specs"]["input"] == spec


def test_a_wrong_collective_fails_the_gate(monkeypatch):
    doubled = jax.jit(lambda x: x * 2)
    monkeypatch.setattr(collectives, "jitted", lambda op, mesh: doubled)
    built = get_workload("collectives").build(_params("permute"))
    with pytest.raises(GateFailure, match=r"jit vs float64 NumPy\): leaf \(root\) differs"):
        built.check()


def test_more_devices_than_present_is_skipped_with_the_flag_to_set(fast_timing):
    assert jax.device_count("cpu") < 8
    rec = measure_case(Case("collectives", _params("all_reduce", 8, 1024)), "cpu", fast_timing,
                       "run")  # fmt: skip
    assert rec.status == "skipped"
    assert "needs 8 cpu devices" in rec.error
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=8" in rec.error


def test_bad_parameters_name_the_option():
    for texts, message in (
        ({"bytes": ["6"], "devices": ["2"]}, "--param bytes=6: bytes must be"),
        (
            {"bytes": ["12"], "devices": ["2"]},
            "bytes must be a multiple of 4 x devices = 8, "
            "got bytes=12 with devices=2; e.g. --param bytes=8",
        ),
        ({"devices": ["3"]}, "got bytes=1048576 with devices=3; e.g. --param bytes=1048572"),
        ({"devices": ["0"]}, "--param devices=0: devices must be an integer"),
        ({"op": ["broadcast"]}, "--param op=broadcast: unknown op 'broadcast'"),
    ):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            select_cases(["collectives"], texts=texts)


def test_meshes_of_different_sizes_are_different_cases():
    two, four = (Case("collectives", _params("all_reduce", n)) for n in (2, 4))
    assert two.label != four.label and "devices=2" in two.label


SCRIPT = textwrap.dedent(
    """
    import json, jax
    from jaxbench.prepared import prepare
    from jaxbench.workloads import GateFailure, collectives, get_workload
    out = {"devices": jax.device_count()}
    for n in (2, 4):
        for op in collectives.OPS:
            case = prepare("collectives", {"op": op, "bytes": 1024, "devices": n,
                                           "dtype": "float32"}, "cpu", keep=False)
            y = case.call_once()
            out[f"{op}/{n}"] = [len(case.state[0].sharding.device_set),
                                len(y.sharding.device_set), case.gate["max_abs_err"]]
    # An output gathered onto one device is caught by the gate's sharding check.
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    collectives.jitted = lambda op, mesh: (lambda x: jax.device_put(x, one))
    try:
        get_workload("collectives").build({"op": "permute", "bytes": 64, "devices": 4,
                                           "dtype": "float32"}).check()
    except GateFailure as exc:
        out["unsharded"] = str(exc)
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_two_and_four_forced_host_devices_stay_sharded_and_agree_with_numpy():
    out = forced_json(SCRIPT)
    assert out["devices"] == 4
    for n in (2, 4):
        for op in collectives.OPS:
            state_devices, output_devices, err = out[f"{op}/{n}"]
            assert state_devices == output_devices == n, op
            assert err < 1e-5
    spec = str(jax.sharding.PartitionSpec("x"))
    assert f"the output is not sharded {spec} over the 4 devices" in out["unsharded"]


@pytest.mark.slow
def test_run_records_the_mesh_and_the_bus_bandwidth(tmp_path):
    out = run_cli("run", "-o", str(tmp_path), "-w", "collectives", "--param", "devices=4",
                  "--param", "bytes=4096", "--budget", "0", "--min-samples", "5",
                  env=FORCE_4)  # fmt: skip
    assert out.returncode == 0, out.stderr
    records = read_file(store_files([tmp_path])[0][0], strict=True).models("record")
    assert sorted(r.params["op"] for r in records) == sorted(collectives.OPS)
    for rec in records:
        assert rec.status == "ok", rec.error
        assert rec.env.device_count == 4
        assert rec.metrics.mesh["axes"] == {"x": 4}
        assert rec.metrics.mesh["device_ids"] == [0, 1, 2, 3]
        figures = record_figures(rec)
        assert figures["algbw_Bps"] == pytest.approx(4096 / figures["p50_s"])
        factor = collectives.bus_factor(rec.params["op"], 4)
        assert figures["busbw_Bps"] == pytest.approx(figures["algbw_Bps"] * factor)
    assert "busbw" in out.stdout


def test_a_single_device_state_is_committed_to_the_cases_device():
    from jaxbench.prepared import place

    device = jax.devices("cpu")[0]
    placed = place({"a": np.ones(3), "b": jax.numpy.zeros(2)}, device)
    assert all(leaf.devices() == {device} for leaf in jax.tree.leaves(placed))
