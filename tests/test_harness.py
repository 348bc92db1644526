"""The measurement core: blocking, sample counts, compile counting, recompile detection."""

import dataclasses
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from jaxbench.measure import TimingConfig, compile_events, compile_targets, measure
from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads import mlp


class SlowLeaf:
    """A stand-in array whose computation finishes only when blocked on (after ``delay_s``)."""

    def __init__(self, delay_s: float):
        self.delay_s = delay_s
        self.blocked = False

    def block_until_ready(self):
        import time

        time.sleep(self.delay_s)
        self.blocked = True
        return self


def test_every_sample_blocks_on_the_whole_output_pytree():
    leaves = []

    def call(_):
        leaf = SlowLeaf(0.02)
        leaves.append(leaf)
        return {"fast": jnp.zeros(()), "nested": [1, (leaf,)]}

    cfg = TimingConfig(budget_s=0.0, min_samples=5, max_samples=5, warmup_calls=0)
    m = measure(call, None, cfg)
    assert all(leaf.blocked for leaf in leaves)
    assert min(m.samples_s) >= 0.02  # time.sleep sleeps at least this long


def test_sample_count_has_a_floor_and_a_ceiling():
    f = jax.jit(lambda x: x + 1)
    x = jnp.ones(3)
    assert len(measure(f, x, TimingConfig(budget_s=0.0, min_samples=20)).samples_s) == 20
    cfg = TimingConfig(budget_s=10.0, min_samples=3, max_samples=7)
    assert len(measure(f, x, cfg).samples_s) == 7


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget_s": -1},
        {"min_samples": 0},
        {"min_samples": 5, "max_samples": 4},
        {"warmup_calls": -1},
    ],
)
def test_timing_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        TimingConfig(**kwargs)


def test_weak_type_change_inside_timed_region_is_flagged():
    f = jax.jit(lambda x, s: x * s)
    x = jnp.ones(4)
    # The first call sees jnp.float32 (strong); every later call a Python float (weak type).
    cfg = TimingConfig(min_samples=5, budget_s=0, warmup_calls=0)
    m = measure(lambda s: f(*s), (x, jnp.float32(2.0)), cfg, next_state=lambda s, out: (s[0], 2.0))
    assert m.recompiled and m.compiles_timed >= 1
    assert m.recompile_cause == "the arguments changed: [1]: float32[] -> Python float 2.0"
    grows = jax.jit(lambda x: jnp.ones(x.shape[0] + 1))
    m = measure(grows, jnp.ones(4), cfg, next_state=lambda s, out: out)
    assert m.recompiled and len(m.samples_s) == 1
    assert m.recompile_cause == "the arguments changed: (root): float32[4] -> float32[5]"
    # The same PyTree throughout: no compile at all after warm-up.
    f2 = jax.jit(lambda x, s: x * s)
    m = measure(lambda s: f2(*s), (x, 2.0), TimingConfig(min_samples=5, budget_s=0))
    assert not m.recompiled and m.compiles_timed == 0 and m.compiles_setup == 1


class Config:
    """A static argument without __eq__/__hash__: it hashes by identity."""

    scale = 3.0


def test_identity_hashed_static_argument_is_flagged():
    f = jax.jit(lambda x, cfg: x * cfg.scale, static_argnums=1)
    x = jnp.ones(4)
    m = measure(lambda s: f(s, Config()), x, TimingConfig(min_samples=5, budget_s=0))
    assert m.recompiled
    assert m.compiles_timed == 1  # sampling stops at the first recompiling call
    assert len(m.samples_s) == 1
    assert m.recompile_cause.startswith("the arguments kept their shapes, dtypes, weak types")


def test_donated_train_step_100_steps_compile_once_in_warm_up():
    step = jax.jit(mlp.sgd_step, donate_argnums=0)  # a fresh jit object: nothing cached
    k1, k2 = jax.random.split(jax.random.key(0))
    params = mlp.init(k1, (8, 16, 4))
    batch = mlp.make_batch(k2, 16, 8, 4, jnp.float32)
    first = params[0]["w"]
    cfg = TimingConfig(budget_s=0.0, min_samples=100, max_samples=100, warmup_calls=3)
    m = measure(lambda s: step(*s), (params, batch), cfg, next_state=lambda s, o: (o[0], s[1]))
    assert m.compiles_setup == 1
    assert m.compiles_timed == 0 and m.traces_timed == 0
    assert len(m.samples_s) == 100
    assert first.is_deleted()  # donated, and never reused


def test_a_program_jax_already_compiled_under_another_key_is_reused_not_cold():
    """A user's module-level jit, built again by another case (a fresh key): JAX serves it."""
    f = jax.jit(lambda x: jnp.cos(x) @ x.T + 3.0)
    x = jnp.ones((8, 8))
    first = compile_targets([CompileTarget("f", object(), f, (x,))])
    again = compile_targets([CompileTarget("f", object(), f, (x,))])
    assert not first.reused and again.reused
    other = compile_targets([CompileTarget("f", object(), f, (jnp.ones((4, 4)),))])
    assert not other.reused  # another shape: a real compile


def test_compile_targets_measures_once_per_program_and_reuses_after():
    f = jax.jit(lambda x: jnp.sin(x) @ x.T)
    x = jnp.ones((8, 8))
    before = compile_events.snapshot()
    target = CompileTarget("f", ("test-compile-once", 8), f, (x,))
    first = compile_targets([target])
    assert compile_events.since(before).compiles == 1
    assert not first.reused and first.compile_s > 0 and first.flops and first.flops > 0
    assert first.memory["argument_size_in_bytes"] == 8 * 8 * 4
    again = compile_targets([dataclasses.replace(target, jitted=f)])
    assert again.reused and again.compile_s == first.compile_s
    f(x)
    assert compile_events.since(before).compiles == 1  # the timed callable reuses that compile


def test_calls_per_unit_scales_flops_and_setup_only_targets_are_not_counted():
    f = jax.jit(lambda x: x @ x)
    x = jnp.ones((16, 16))
    one = compile_targets([CompileTarget("f", ("scale", 1), f, (x,), 1)])
    many = compile_targets([CompileTarget("f", ("scale", 1), f, (x,), 5)])
    assert many.flops == 5 * one.flops
    setup_only = compile_targets([CompileTarget("f", ("scale", 1), f, (x,), 0)])
    assert setup_only.flops == 0 and setup_only.compile_s == 0


def _counting(fn):
    calls = []

    def call(state):
        calls.append(1)
        return fn(state)

    return call, calls


@pytest.mark.parametrize("chained", [False, True])
def test_pipelined_samples_dispatch_n_calls_and_block_once(monkeypatch, chained):
    f = jax.jit(lambda x: x + 1.0)
    call, calls = _counting(f)
    blocks = []
    real_block = jax.block_until_ready

    def block(tree):
        blocks.append(len(tree) if isinstance(tree, list) else 1)
        return real_block(tree)

    monkeypatch.setattr(jax, "block_until_ready", block)
    cfg = TimingConfig(budget_s=0.0, min_samples=3, max_samples=3, warmup_calls=1, pipeline=4)
    next_state = (lambda s, out: out) if chained else None
    m = measure(call, jnp.zeros(3), cfg, next_state)
    assert len(m.samples_s) == 3 and len(calls) == 1 + 1 + 3 * 4
    # First call and warm-up blocked one by one, then one block per sample: on all 4 outputs,
    # or on the last one where each output feeds the next call.
    assert blocks == [1, 1] + [1 if chained else 4] * 3
    if chained:
        assert float(m.final_state[0]) == 14.0  # every call's output fed the next


def test_pipeline_must_be_a_positive_integer_and_is_recorded_only_when_used():
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="pipeline must be an integer >= 1"):
            TimingConfig(pipeline=bad)
    assert "pipeline" not in TimingConfig().recorded()
    assert TimingConfig(pipeline=8).recorded()["pipeline"] == 8


def test_pipelined_and_blocked_records_are_never_pooled(tmp_path):
    from typer.testing import CliRunner

    from jaxbench import analysis
    from jaxbench.cli import app

    base = ["run", "-w", "train_step", "-s", "tiny", "-d", "float32", "--optimizer", "sgd",
            "--budget", "0", "--min-samples", "5"]  # fmt: skip
    for name, extra in (("blocked", []), ("pipelined", ["--pipeline", "4"])):
        result = CliRunner().invoke(app, [*base, *extra, "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert ("train_step (pipelined x4)" in result.output) == (name == "pipelined")
    frame, problems = analysis.load_results([tmp_path / "blocked", tmp_path / "pipelined"])
    assert not problems and list(frame["status"]) == ["ok", "ok"]
    timings = [env.timing for env in frame["env"]]
    assert "pipeline" not in timings[0] and timings[1]["pipeline"] == 4  # the donated step ran
    split = analysis.split_series(frame)
    assert len(split.conditions) == 2
    assert any("timing" in reason for reason in split.reasons), split.reasons
    bad = CliRunner().invoke(app, [*base, "--pipeline", "0", "-o", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "pipeline must be an integer >= 1" in bad.output


DEVICE_PROBE = """
import jax, jax.numpy as jnp
from jaxbench.measure import compile_targets
from jaxbench.measure.harness import CompileTarget, _TARGET_STATS

double = jax.jit(lambda x: x * 2)
for device in jax.devices():
    x = jax.device_put(jnp.ones(3), device)
    first, again = (compile_targets([CompileTarget("t", ("double",), double, (x,))])
                    for _ in range(2))
    print(first.reused, again.reused)
with jax.default_device(jax.devices()[1]):  # lazy arguments: the default device decides
    print(compile_targets([CompileTarget("t", ("double",), double, lambda: (jnp.ones(3),))]).reused)
print(len(_TARGET_STATS))
"""


def test_the_compile_figures_of_one_program_on_two_devices_are_two_entries():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "JAX_PLATFORMS": "cpu"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", DEVICE_PROBE], env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "False", "True", "True", "2"]
