"""The transformer LM family: gated against the op-by-op step, its FLOP formula, its figures."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from analysis_data import record

from jaxbench.analysis.derived import record_figures
from jaxbench.prepared import prepare
from jaxbench.tables import records_table
from jaxbench.workloads import GateFailure, get_workload, lm, transformer
from jaxbench.workloads.lm import LMSize


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tiny_passes_its_gate_and_records_tokens_and_formula_flop(dtype):
    case = prepare("transformer", {"size": "tiny", "dtype": dtype}, "cpu", keep=False)
    gate = case.gate
    assert gate["loss_after"] < gate["loss_before"]
    # Uniform random tokens and a near-zero initial logit: the loss starts near ln V.
    assert abs(gate["loss_before"] - gate["ln_vocab"]) < 0.1
    size = transformer.LM_SIZES["tiny"]
    assert case.metrics["tokens"] == size.batch * size.seq_len == 256
    assert case.metrics["model_flops"] == size.model_flops()
    state, loss = case.call_once()
    assert loss.dtype == jnp.float32 and state.params["embed"].dtype == jnp.float32
    # XLA adds the elementwise work (norms, softmax, AdamW) to the formula's matmuls.
    assert 1.0 < case.stats.flops / size.model_flops() < 1.15


def test_the_formula_counts_every_matmul():
    toy = LMSize("toy", d_model=4, n_layers=1, n_heads=2, seq_len=3, batch=2, vocab=5,
                 device="cpu")  # fmt: skip
    # qkv 4x12 + out 4x4 + up 4x16 + down 16x4 = 192 per layer, unembed 4x5 = 20.
    assert toy.matmul_params == 212
    assert toy.params_count == 212 + (5 + 3) * 4 + 3 * 4
    assert toy.model_flops() == (6 * 212 + 12 * 1 * 4 * 3) * 6
    params = lm.init(jax.random.key(0), toy)
    assert sum(a.size for a in jax.tree.leaves(params)) == toy.params_count


def _wrong(scale):
    plain = transformer._plain_step(transformer.LM_SIZES["tiny"], "float32")

    def step(state, tokens):
        new, loss = plain(state, tokens)
        return new, loss * scale

    return jax.jit(step)


def test_a_wrong_jitted_step_or_a_silent_bad_shape_fails_the_gate(monkeypatch):
    spec = get_workload("transformer")
    monkeypatch.setattr(transformer, "jitted_step", lambda size, dtype: _wrong(1.001))
    with pytest.raises(GateFailure, match=r"loss \(plain vs jit\): leaf \(root\) differs"):
        spec.build({"size": "tiny", "dtype": "float32"}).check()

    def lenient(state, tokens):
        return state, jnp.float32(0.0)

    monkeypatch.setattr(transformer, "jitted_step", lambda size, dtype: jax.jit(lenient))
    with pytest.raises(GateFailure, match="wrong dtype did not raise TokenShapeError"):
        spec.build({"size": "tiny", "dtype": "float32"}).check()


def test_bad_tokens_and_parameters_are_named():
    spec = get_workload("transformer")
    with pytest.raises(ValueError, match="unknown size 'huge'; choose from tiny, small"):
        spec.validate({"size": "huge", "dtype": "float32"})
    with pytest.raises(ValueError, match="unknown dtype 'float16'"):
        spec.validate({"size": "tiny", "dtype": "float16"})
    params = lm.init(jax.random.key(0), transformer.LM_SIZES["tiny"])
    with pytest.raises(lm.TokenShapeError, match=r"expected \(batch, T \+ 1\) integers"):
        lm.check_tokens(params, jnp.zeros((2, 66), jnp.int32))
    assert spec.meant_for({"size": "1b"}) == "gpu" and spec.meant_for({"size": "tiny"}) == "cpu"


def test_tokens_per_second_and_formula_mfu_are_derived_and_shown():
    samples = [0.5, 0.5, 0.5]
    env = {"device_kind": "NVIDIA H200"}
    rec = record(samples=samples, benchmark="transformer/train_step", env=env,
                 params={"size": "tiny", "dtype": "bfloat16"}, flops=2e14,
                 metrics={"tokens": 1000, "model_flops": 1e14})  # fmt: skip
    figures = record_figures(rec)
    assert figures["tokens_per_s"] == pytest.approx(2000)
    assert figures["model_mfu"] == pytest.approx(1e14 / 0.5 / 989.5e12)
    assert figures["mfu"] == pytest.approx(2 * figures["model_mfu"])
    headers = [c.header for c in records_table([rec], "t").columns]
    assert headers[-2:] == ["tokens/s", "MFU (formula)"]
    plain = record(samples=samples)
    assert "tokens/s" not in [c.header for c in records_table([plain], "t").columns]
