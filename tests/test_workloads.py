"""Workloads prove themselves: gates, shape errors, forward-mode agreement and held bytes."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.workloads import GateFailure, NotApplicable, get_workload, mlp
from jaxbench.workloads.base import AsvSuite, Workload, check_close
from jaxbench.workloads.forward_mode import (
    STRATEGIES,
    TangentShapeError,
    linearization_held_bytes,
    tanh_stack,
)
from jaxbench.workloads.regression import SET_NAMES, DriftSets, row_variant
from jaxbench.workloads.sizes import SIZES


def test_init_uses_one_subkey_per_layer_and_lecun_scale():
    params = mlp.init(jax.random.key(0), (256, 512, 4))
    w0, w1 = params[0]["w"], params[1]["w"]
    assert w0.shape == (256, 512) and params[0]["b"].shape == (512,)
    assert not np.allclose(w0[:4, :4], w1[:4, :4])  # independent draws
    assert np.std(np.asarray(w0)) == pytest.approx(1 / np.sqrt(256), rel=0.05)
    assert float(jnp.abs(params[0]["b"]).max()) == 0.0


def test_init_rejects_bad_sizes():
    with pytest.raises(ValueError, match="sizes"):
        mlp.init(jax.random.key(0), (8,))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_train_step_gate_passes_and_records_tolerance(dtype):
    built = get_workload("train_step").build(
        {"size": "tiny", "dtype": dtype, "optimizer": "sgd", "donate": True}
    )
    gate = built.check()
    assert gate["rtol"] > 0 and gate["atol"] > 0
    assert gate["loss_after"] < gate["loss_before"]


def test_train_step_gate_with_adam():
    pytest.importorskip("optax")
    built = get_workload("train_step").build(
        {"size": "tiny", "dtype": "float32", "optimizer": "adam", "donate": True}
    )
    assert built.check()["loss_after"] < built.check()["loss_before"]


def test_wrong_batch_shape_and_dtype_raise_naming_the_expected_shape():
    params = mlp.init(jax.random.key(0), (8, 16, 4))
    x, y = mlp.make_batch(jax.random.key(1), 5, 8, 4, jnp.float32)
    with pytest.raises(mlp.BatchShapeError, match=r"expected shape \(5, 8\)"):
        jax.jit(mlp.sgd_step)(params, (x[:, :7], y))
    with pytest.raises(mlp.BatchShapeError, match="dtype float32"):
        mlp.sgd_step(params, (x.astype(jnp.bfloat16), y))


def test_gate_fails_a_jitted_step_that_disagrees_with_the_plain_one(monkeypatch):
    from jaxbench.workloads import train_step

    def wrong_step(params, batch, lr=0.05):
        new, loss = mlp.sgd_step(params, batch, lr)
        return jax.tree.map(lambda p: p * 1.01, new), loss

    monkeypatch.setattr(train_step, "jitted_step", lambda *a: jax.jit(wrong_step))
    built = train_step.TrainStep().build(
        {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": False}
    )
    with pytest.raises(GateFailure, match="plain vs jit"):
        built.check()


def test_a_bfloat16_adam_step_with_half_its_gradient_fails_by_its_moments(monkeypatch):
    """Moments of 1e-4 pass bfloat16's tolerance element by element; in norm they do not."""
    import optax

    from jaxbench.workloads import train_step

    def halved(state, batch, lr=1e-3):  # the loss is right, the gradient half what it is
        value, grads = jax.value_and_grad(mlp.loss)(state.params, batch)
        grads = jax.tree.map(lambda g: g / 2, grads)
        updates, opt_state = mlp.adam(lr).update(grads, state.opt_state, state.params)
        return mlp.AdamState(optax.apply_updates(state.params, updates), opt_state), value

    params = {"size": "tiny", "dtype": "bfloat16", "optimizer": "adam", "donate": False}
    assert train_step.TrainStep().build(params).check()["max_update_err"] < 0.125  # right: passes
    monkeypatch.setattr(train_step, "jitted_step", lambda *a: jax.jit(halved))
    with pytest.raises(GateFailure, match=r"Adam moments .*'s update is 50\.0% off the reference"):
        train_step.TrainStep().build(params).check()


def test_a_bfloat16_transformer_step_without_a_gradient_fails_by_its_moments(monkeypatch):
    import optax

    from jaxbench.workloads import lm, transformer

    def dropped(state, tokens, n_heads, dtype):  # every layer's qkv gradient left out
        value, grads = jax.value_and_grad(lm.loss)(state.params, tokens, n_heads, dtype)
        grads = dict(grads, layers=[dict(g, qkv=jnp.zeros_like(g["qkv"]))
                                    for g in grads["layers"]])  # fmt: skip
        updates, opt_state = lm.adamw().update(grads, state.opt_state, state.params)
        return lm.TrainState(optax.apply_updates(state.params, updates), opt_state), value

    monkeypatch.setattr(transformer, "jitted_step", lambda size, dtype: jax.jit(functools.partial(
        dropped, n_heads=size.n_heads, dtype=jnp.dtype(dtype))))  # fmt: skip
    with pytest.raises(GateFailure, match=r"moments .*qkv's update is 100\.0% off"):
        transformer.transformer(size="tiny", dtype="bfloat16").check()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("wrt", ["input", "params"])
def test_every_forward_strategy_passes_its_gate(strategy, dtype, wrt):
    built = get_workload("forward").build(
        {"size": "tiny", "dtype": dtype, "k": 4, "strategy": strategy, "wrt": wrt}
    )
    gate = built.check()
    assert gate["reference_tangents"] == 4
    out = built.call(built.first_args())
    assert len(out) == 4


def test_the_forward_gate_widens_to_the_longest_sum_and_still_fails_a_one_percent_error(
    monkeypatch,
):
    from jaxbench.workloads import forward_mode

    params = {"size": "tiny", "dtype": "float32", "k": 4, "wrt": "params"}
    wide = get_workload("forward").build({**params, "strategy": "jacfwd"}).check()
    narrow = get_workload("forward").build({**params, "strategy": "vmap_jvp"}).check()
    assert wide["rtol"] > narrow["rtol"] >= 1e-5  # jacfwd contracts over every parameter
    real = forward_mode._call_jvp_loop
    monkeypatch.setattr(forward_mode, "_call_jvp_loop",
                        lambda fns: lambda *a: [y * 1.01 for y in real(fns)(*a)])  # fmt: skip
    with pytest.raises(GateFailure, match="jvp_loop vs plain jvp"):
        get_workload("forward").build({**params, "strategy": "jvp_loop"}).check()


def test_forward_strategies_agree_on_a_tanh_stack():
    f = functools.partial(tanh_stack, depth=5)
    x = jax.random.normal(jax.random.key(0), (3, 7))
    ts = jax.random.normal(jax.random.key(1), (6, 3, 7))
    _, f_lin = jax.linearize(f, x)
    lin = jnp.stack([f_lin(t) for t in ts])
    loop = jnp.stack([jax.jvp(f, (x,), (t,))[1] for t in ts])
    vmapped = jax.vmap(lambda t: jax.jvp(f, (x,), (t,))[1])(ts)
    jac = jax.jacfwd(f)(x)  # (3, 7, 3, 7)
    via_jac = jnp.einsum("abij,kij->kab", jac, ts)
    for got in (lin, loop, via_jac):
        np.testing.assert_allclose(got, vmapped, rtol=1e-5, atol=1e-6)


def test_linearization_holds_bytes_linear_in_depth():
    x = jnp.ones((16, 32), jnp.float32)
    one = linearization_held_bytes(functools.partial(tanh_stack, depth=1), x)
    many = linearization_held_bytes(functools.partial(tanh_stack, depth=64), x)
    assert one == x.nbytes
    assert many == 64 * one


def test_held_bytes_metric_per_strategy():
    wl = get_workload("forward")
    held = {
        s: wl.build(
            {"size": "tiny", "dtype": "float32", "k": 2, "strategy": s, "wrt": "input"}
        ).metrics["held_bytes"]
        for s in STRATEGIES
    }
    assert held["vmap_jvp"] == 0 and held["jvp_loop"] == 0
    assert held["linearize"] == held["linearize_apply"] > 0
    size = SIZES["tiny"]
    assert held["jacfwd"] == size.batch * size.d_out * size.d_in * 4


def test_wrong_tangent_shape_raises_naming_the_expected_shape():
    from jaxbench.workloads.forward_mode import jitted

    params = mlp.init(jax.random.key(0), (8, 16, 4))
    x = jnp.ones((5, 8))
    with pytest.raises(TangentShapeError, match=r"expected shape \('K', 5, 8\)"):
        jitted()["vmap_jvp"](params, x, jnp.ones((3, 5, 7)))
    with pytest.raises(TangentShapeError, match="dtype float32"):
        jitted()["jvp"](params, x, jnp.ones((5, 8), jnp.bfloat16))
    bad = jax.tree.map(jnp.zeros_like, params)
    bad[1]["b"] = jnp.zeros(3)
    with pytest.raises(TangentShapeError, match=r"tangent\[1\]\['b'\] has shape \(3,\)"):
        jitted("params")["jvp"](params, x, bad)


def test_jacfwd_too_large_is_not_applicable():
    with pytest.raises(NotApplicable, match="MiB"):
        get_workload("forward").build(
            {"size": "xl", "dtype": "float32", "k": 1, "strategy": "jacfwd", "wrt": "input"}
        )
    with pytest.raises(NotApplicable, match="MiB"):
        get_workload("forward").build(
            {"size": "small", "dtype": "float32", "k": 1, "strategy": "jacfwd", "wrt": "params"}
        )


@pytest.mark.parametrize(
    ("workload", "params", "match"),
    [
        (
            "train_step",
            {"size": "huge", "dtype": "float32", "optimizer": "sgd", "donate": True},
            "unknown size 'huge'",
        ),
        (
            "train_step",
            {"size": "tiny", "dtype": "int8", "optimizer": "sgd", "donate": True},
            "unknown dtype 'int8'",
        ),
        (
            "train_step",
            {"size": "tiny", "dtype": "float32", "optimizer": "lion", "donate": True},
            "unknown optimizer",
        ),
        (
            "forward",
            {"size": "tiny", "dtype": "float32", "k": 0, "strategy": "vmap_jvp", "wrt": "input"},
            "k .*1..65536",
        ),
        (
            "forward",
            {"size": "tiny", "dtype": "float32", "k": 2, "strategy": "hessian", "wrt": "input"},
            "unknown strategy",
        ),
    ],
)
def test_validate_names_the_bad_parameter(workload, params, match):
    with pytest.raises(ValueError, match=match):
        get_workload(workload).validate(params)


def test_check_close_scales_atol_to_the_output():
    big = jnp.array([1000.0, 1e-3])
    assert check_close("x", big + 5e-4, big, "float32")["max_abs_err"] > 0
    with pytest.raises(GateFailure, match="differs"):
        check_close("x", big * 1.001, big, "float32")
    with pytest.raises(GateFailure, match="not finite"):
        check_close("x", jnp.array([jnp.nan]), jnp.array([1.0]), "float32")


def test_an_output_without_an_array_fails_the_gate():
    """A step returning ``None`` passed its gate (nothing compared) and was timed ``ok``."""
    for empty in (None, (), {"a": None}):
        with pytest.raises(GateFailure, match="x: the output has no array"):
            check_close("x", empty, empty, "float32")


def test_check_close_names_the_failing_leaf_by_its_key_path():
    want = {"params": {"attn": {"key": {"bias": jnp.zeros(3), "kernel": jnp.ones(3)}}}, "n": 1.0}
    got = jax.tree.map(lambda a: a, want)
    got["params"]["attn"]["key"]["bias"] = jnp.full(3, 0.5)
    with pytest.raises(GateFailure, match="x: leaf params/attn/key/bias differs"):
        check_close("x", got, want, "float32")
    with pytest.raises(GateFailure, match=r"x: leaf 1/0 is not finite"):
        check_close("x", (1.0, [jnp.nan]), (1.0, [1.0]), "float32")


def test_the_train_step_formula_counts_every_matmul_and_xla_adds_only_elementwise_work():
    from jaxbench.prepared import prepare
    from jaxbench.workloads.sizes import MLPSize

    toy = MLPSize("toy", d_in=2, width=3, depth=1, d_out=1, batch=4, device="cpu")
    # Forward 2*4*(2*3 + 3*1), weight gradients the same, input gradients of layer 2 only.
    assert toy.train_step_flops() == 2 * 4 * 9 + 2 * 4 * 9 + 2 * 4 * 3
    params = {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True}
    case = prepare("train_step", params, "cpu")
    assert case.metrics["model_flops"] == SIZES["tiny"].train_step_flops()
    assert 1.0 < case.stats.flops / SIZES["tiny"].train_step_flops() < 1.1  # measured 1.036


def _doubling_outputs(inputs, dtype, device=None):
    if inputs["x"].ndim != 2:
        raise ValueError("x must be (rows, width)")
    return {"double": 2 * inputs["x"]}


def _doubling_variant(name, std):
    out = row_variant(name, std)
    if name == "invalid_shape":
        out["x"] = std["x"][0]
    return out


class _Doubling(Workload):
    """A family declared in one module: drift sets and an asv suite with itself."""

    name = "doubling"
    param_names = ("n",)
    drift = DriftSets(
        ("float32",),
        1,
        ValueError,
        lambda dtype: {"x": np.ones((8, 4), dtype)},
        _doubling_variant,
        _doubling_outputs,
    )
    asv = (AsvSuite("Doubling", {"n": [1, 2]}, method="time_double"),)  # fmt: skip

    def grid(self, quick):
        return {"n": [1]}

    def validate(self, params):
        return None

    def benchmark(self, params):
        return self.name

    def build(self, params):
        raise NotImplementedError


def test_a_family_registered_once_gets_its_drift_sets_and_asv_class(monkeypatch):
    from benchmarks.common import asv_classes
    from jaxbench.drift.check import set_method
    from jaxbench.drift.sets import families, regression_sets
    from jaxbench.workloads import WORKLOADS

    monkeypatch.setitem(WORKLOADS, "doubling", _Doubling())
    assert families()["doubling"] is _Doubling.drift
    sets = regression_sets(("doubling",))
    assert [s.name for s in sets] == list(SET_NAMES)
    assert sets[-1].expect_error is ValueError and sets[-1].inputs["x"].shape == (4,)
    assert sets[1].inputs["x"].shape == (1, 4)  # single
    method = set_method("doubling", {})
    assert method.compute is _doubling_outputs and method.reduction_length == 1
    (cls,) = asv_classes("benchmarks.bench_workloads").values()
    assert cls.__name__ == "Doubling" and hasattr(cls, "time_double")
    assert cls.params[0] == [1, 2] and cls.param_names == ("n", "backend")


def test_a_family_must_define_every_required_method():
    class Partial(Workload):
        name = "partial"
        param_names = ()

        def grid(self, quick):
            return {}

    with pytest.raises(TypeError, match="abstract"):
        Partial()
    assert _Doubling().parse_param("n", "3") == 3  # the defaults of the base class
    assert _Doubling().meant_for({"n": 1}) == "cpu"
