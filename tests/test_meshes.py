"""Meshes: the ``mesh`` text, the sharded MLP train step on 4 forced host devices, its records."""

from __future__ import annotations

import textwrap

import pytest

from jaxbench.analysis.derived import record_figures
from jaxbench.cases import select_cases
from jaxbench.store import read_file
from jaxbench.store.scan import store_files
from jaxbench.workloads import meshes, train_step
from jaxbench.workloads.sizes import get_size
from tests.conftest import FORCE_4, forced_json, run_cli


def test_a_mesh_text_is_axes_and_sizes_in_layout_order():
    assert meshes.parse_mesh("none") == {}
    assert meshes.parse_mesh("tensor:2,fsdp:2") == {"fsdp": 2, "tensor": 2}
    assert list(meshes.parse_mesh("tensor:2,data:2")) == ["data", "tensor"]
    assert meshes.device_count("data:2,fsdp:2,tensor:2") == 8 and meshes.device_count("none") == 1
    for bad in ("data", "data:0", "pipe:2", "data:2,data:2", "data:x", "", "data:\u00b2"):
        with pytest.raises(ValueError, match=f"mesh {bad!r}: expected none or axis:size"):
            meshes.parse_mesh(bad)


def test_two_spellings_of_one_mesh_are_one_case_spelled_in_layout_order():
    assert meshes.spelled("tensor:2,data:02") == "data:2,tensor:2"
    assert meshes.spelled("none") == "none" and meshes.spelled("pipe:2") == "pipe:2"
    for family in ("train_step", "transformer"):
        cases = select_cases([family], texts={"size": ["tiny"], "dtype": ["float32"],
                                              "mesh": ["data:2", "data:02", "none"]})  # fmt: skip
        assert [c.params["mesh"] for c in cases] == ["data:2", "none"]
    (case,) = select_cases(["train_step"], texts={"size": ["tiny"], "dtype": ["float32"],
                                                  "mesh": ["tensor:2,data:2"]})  # fmt: skip
    assert case.params["mesh"] == "data:2,tensor:2"


def test_the_specs_split_what_each_axis_means():
    axes = {"data": 2, "fsdp": 2, "tensor": 2}
    assert tuple(meshes.leaf_spec(2, axes)) == ("fsdp", "tensor")
    assert tuple(meshes.leaf_spec(3, axes)) == ("fsdp", None, "tensor")
    assert tuple(meshes.leaf_spec(1, axes)) == ("tensor",)
    assert tuple(meshes.leaf_spec(0, axes)) == ()
    assert tuple(meshes.leaf_spec(2, {"data": 4})) == (None, None)
    assert tuple(meshes.batch_spec(axes)) == (("data", "fsdp"), None)
    assert tuple(meshes.batch_spec({"tensor": 4}, ndim=1)) == (None,)


def test_a_mesh_that_does_not_divide_the_model_is_named_before_anything_runs():
    tiny = get_size("tiny")
    train_step.check_mesh_fits("data:4,tensor:2", tiny)
    with pytest.raises(ValueError, match=r"--param mesh=data:3: mesh 'data:3' splits the batch"):
        select_cases(["train_step"], texts={"mesh": ["data:3"], "size": ["tiny"]})
    with pytest.raises(
        ValueError,
        match=r"mesh 'tensor:3' splits params/0/w \(32, \d+\) of the "
        r"tiny MLP over tensor:3, which does not divide",
    ):
        train_step.check_mesh_fits("tensor:3", tiny)
    with pytest.raises(ValueError, match="expected none or axis:size"):
        select_cases(["train_step"], texts={"mesh": ["pipe:2"]})


def test_more_devices_than_present_is_skipped_with_the_flag_to_set(fast_timing):
    from jaxbench.cases import Case
    from jaxbench.runner import measure_case

    params = {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True,
              "mesh": "data:8"}  # fmt: skip
    rec = measure_case(Case("train_step", params), "cpu", fast_timing, "r")
    assert rec.status == "skipped" and "needs 8 cpu devices" in rec.error
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=8" in rec.error


SHARDED = textwrap.dedent(
    """
    import json, jax
    from jaxbench.prepared import prepare
    out = {}
    for optimizer in ("sgd", "adam"):
        for mesh in ("data:4", "fsdp:2,tensor:2", "data:2,tensor:2"):
            case = prepare("train_step", {"size": "tiny", "dtype": "float32",
                                          "optimizer": optimizer, "donate": True,
                                          "mesh": mesh}, "cpu", keep=False)
            for _ in range(3):  # timed calls thread the stepped state into the next
                case.call_once()
            specs = sorted({str(leaf.sharding.spec) for leaf in jax.tree.leaves(case.state[0])})
            x = case.state[1][0]
            out[f"{optimizer}/{mesh}"] = {
                "gate": case.gate["max_abs_err_state"], "specs": specs,
                "state_devices": sorted({len(l.sharding.device_set)
                                         for l in jax.tree.leaves(case.state[0])}),
                "batch": str(x.sharding.spec), "mesh": case.metrics["mesh"]["axes"],
            }
    # small Adam on two devices: its sharded gradient sums over 128 rows in another order,
    # beyond the fixed float32 tolerance (1.8e-6 against 1e-6), within the sum's own
    small = prepare("train_step", {"size": "small", "dtype": "float32", "optimizer": "adam",
                                   "donate": True, "mesh": "data:2"}, "cpu", keep=False)
    out["adam small/data:2"] = {"gate": small.gate["max_abs_err_state"]}
    lm = prepare("transformer", {"size": "tiny", "dtype": "float32", "mesh": "fsdp:2,tensor:2"},
                 "cpu", keep=False)
    lm.call_once()
    out["transformer"] = {
        "gate": lm.gate["max_abs_err_params"],
        "specs": sorted({str(l.sharding.spec) for l in jax.tree.leaves(lm.state[0])}),
        "devices": lm.metrics["devices"],
    }
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_sharded_train_steps_pass_the_gate_against_one_device_and_stay_sharded():
    out = forced_json(SHARDED)
    for optimizer in ("sgd", "adam"):
        data = out[f"{optimizer}/data:4"]
        assert not any(axis in s for s in data["specs"] for axis in meshes.AXES), data
        assert "'data'" in data["batch"] and data["state_devices"] == [4]
        both = out[f"{optimizer}/fsdp:2,tensor:2"]
        assert any("'fsdp', 'tensor'" in s for s in both["specs"]), both
        assert both["state_devices"] == [4] and both["mesh"] == {"fsdp": 2, "tensor": 2}
        assert all(v["gate"] < 1e-4 for k, v in out.items() if k != "transformer")
    assert "adam small/data:2" in out  # its gate passed (prepare raises where it fails)
    lm = out["transformer"]
    assert lm["devices"] == 4 and any("'fsdp'" in s and "'tensor'" in s for s in lm["specs"])


@pytest.mark.slow
def test_run_records_the_mesh_and_per_device_figures(tmp_path):
    out = run_cli("run", "-o", str(tmp_path), "-w", "train_step", "-s", "tiny", "-d", "float32",
                  "--param", "mesh=fsdp:2,tensor:2", "--budget", "0", "--min-samples", "5",
                  env=FORCE_4)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (rec,) = read_file(store_files([tmp_path])[0][0], strict=True).models("record")
    assert rec.status == "ok", rec.error
    assert rec.params["mesh"] == "fsdp:2,tensor:2" and rec.metrics.devices == 4
    assert rec.metrics.mesh["axes"] == {"fsdp": 2, "tensor": 2}
    assert rec.metrics.mesh["device_ids"] == [0, 1, 2, 3]
    assert "'fsdp', 'tensor'" in rec.metrics.partition_specs["weights"]
    assert record_figures(rec)["n"] >= 5


def test_tokens_per_second_per_device_divide_by_the_mesh():
    from analysis_data import record

    mesh = {"axes": {"data": 4}, "device_ids": [0, 1, 2, 3], "device_kinds": ["cpu"],
            "platform": "cpu"}  # fmt: skip
    sharded = record_figures(record(samples=[0.5] * 3, metrics={"tokens": 1000, "mesh": mesh}))
    assert sharded["tokens_per_s"] == 2000 and sharded["tokens_per_s_per_device"] == 500
    plain = record_figures(record(samples=[0.5] * 3, metrics={"tokens": 1000}))
    assert plain["tokens_per_s"] == 2000 and plain["tokens_per_s_per_device"] is None


def test_a_sharded_programs_flop_rate_and_mfu_count_every_devices_share():
    """XLA counts one device's share of a partitioned program: FLOP/s and MFU take the mesh's."""
    from analysis_data import record

    mesh = {"axes": {"data": 4}, "device_ids": [0, 1, 2, 3], "device_kinds": ["NVIDIA H200"],
            "platform": "gpu"}  # fmt: skip
    env = {"device_kind": "NVIDIA H200"}
    one = record(samples=[1.0] * 3, flops=4e14, params={"dtype": "bfloat16"}, env=env)
    four = record(samples=[1.0] * 3, flops=1e14, params={"dtype": "bfloat16"}, env=env,
                  metrics={"mesh": mesh, "model_flops": 4e14})  # fmt: skip
    a, b = record_figures(one), record_figures(four)
    assert b["flops_per_s"] == a["flops_per_s"] == 4e14  # the same program, split four ways
    assert b["mfu"] == pytest.approx(a["mfu"] / 4)  # per device: four devices' peak
    assert b["model_mfu"] == pytest.approx(b["mfu"])  # the formula agrees with XLA's count


def test_records_of_different_meshes_are_kept_apart(tmp_path):
    from analysis_data import record, write

    from jaxbench import analysis

    mesh = {"axes": {"data": 4}, "device_ids": [0, 1, 2, 3], "device_kinds": ["cpu"],
            "platform": "cpu"}  # fmt: skip
    write(
        tmp_path / "a.jsonl", [record(run_id="one"), record(run_id="four", metrics={"mesh": mesh})]
    )
    frame, _ = analysis.load_results(tmp_path)
    split = analysis.split_series(frame)
    assert len(split.conditions) == 2
    assert any(reason.startswith("mesh ") or " mesh " in reason for reason in split.reasons)


USER_SHARDED = textwrap.dedent(
    """
    import json, jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    from jaxbench import workloads
    from jaxbench.cases import Case
    from jaxbench.measure import TimingConfig
    from jaxbench.runner import measure_case
    from jaxbench.workloads import Step, UserWorkload

    def matmul(sharded: bool = True, one: bool = False):
        mesh = jax.make_mesh((4,), ("data",))
        rows = NamedSharding(mesh, P("data", None)) if sharded else None
        if one:  # a NamedSharding of one device, not the default one
            import numpy as np
            rows = NamedSharding(jax.sharding.Mesh(np.array(jax.devices()[1:2]), ("data",)), P())
        x = jax.ShapeDtypeStruct((64, 32), jnp.float32, sharding=rows)
        w = jax.ShapeDtypeStruct((32, 16), jnp.float32)
        return Step(fn=jax.jit(lambda x, w: jnp.tanh(x @ w)), args=(x, w))

    workloads.WORKLOADS["sharded_user"] = UserWorkload("sharded_user", matmul)
    timing = TimingConfig(budget_s=0.0, min_samples=3, max_samples=3, warmup_calls=1)
    out = {}
    for name, params in (("True", {"sharded": True}), ("False", {"sharded": False}),
                         ("one", {"sharded": False, "one": True})):
        rec = measure_case(Case("sharded_user", params), "cpu", timing, "r")
        state = workloads.WORKLOADS["sharded_user"].build(params).first_args()
        from jaxbench.prepared import prepare
        timed = prepare("sharded_user", params, keep=False).state  # what the samples call
        out[name] = {"status": rec.status, "error": rec.error, "mesh": rec.metrics.mesh,
                     "specs": getattr(rec.metrics, "partition_specs", None),
                     "devices": len(state[0].sharding.device_set),
                     "ids": sorted(d.id for d in state[0].sharding.device_set),
                     "timed_ids": sorted(d.id for d in timed[0].sharding.device_set)}
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_a_user_steps_sharded_argument_arrives_sharded_and_is_recorded():
    out = forced_json(USER_SHARDED)
    sharded, plain = out["True"], out["False"]
    assert sharded["status"] == plain["status"] == "ok", (sharded["error"], plain["error"])
    assert sharded["devices"] == 4 and plain["devices"] == 1
    assert sharded["mesh"]["axes"] == {"data": 4} and plain["mesh"] is None
    assert list(sharded["specs"]) == ["0"] and "'data'" in sharded["specs"]["0"]
    one = out["one"]  # a single device given by a NamedSharding: it runs there, and says so
    assert one["status"] == "ok", one["error"]
    assert one["ids"] == [1] and one["mesh"]["device_ids"] == [1] and one["specs"] == {"0": "P()"}
    assert one["timed_ids"] == [1] and sharded["timed_ids"] == [0, 1, 2, 3]
