"""Profiler traces of a case and the op-level diff of two sides (measure.trace, explain.ops)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.explain.ops import OpTable, op_diff, op_lines, op_report
from jaxbench.measure.trace import OpTime, _self_times, op_table, take_trace

X = jnp.ones((64, 64))
W = jnp.full((64, 64), 0.01)


def _program(trip: int):
    """A matmul, then a loop of ``trip`` matrix-vector products (XLA runs it as one ``call``)."""

    def step(x, w):
        y = x @ w
        z = jax.lax.fori_loop(0, trip, lambda i, v: jnp.tanh(w @ v), y[0])
        return y.sum() + z.sum()

    f = jax.jit(step)
    f(X, W).block_until_ready()
    return f


def _tables(trip: int, processes: int) -> list[list[OpTime]]:
    f = _program(trip)

    def step():
        return jax.block_until_ready(f(X, W))

    return [op_table(take_trace(step, calls=3).xspace, 3) for _ in range(processes)]


def test_a_trace_holds_the_ops_xla_runs_with_their_time_per_call():
    (table,) = _tables(50, 1)
    names = [r.name for r in table]
    assert any(n.startswith("call") for n in names), names  # the loop
    assert all(r.count == 3 and r.per_call_s > 0 for r in table)
    assert sum(r.share for r in table) == pytest.approx(1.0)
    assert not any(n.startswith(("end: ", "ThunkExecutor", "PjitFunction")) for n in names)


def test_the_op_made_slower_carries_most_of_the_change():
    """The loop runs 500 times as many iterations in the candidate: its op takes the change."""
    changes = op_diff(_tables(2, 3), _tables(1000, 3))
    top = changes[0]
    assert top.name.startswith("call") and top.change_s > 0
    assert top.share is not None and top.share > 0.5 and top.beyond_noise
    assert op_lines(changes)[1].lstrip().startswith(top.name)


def test_no_change_gives_no_op_beyond_its_noise():
    """Seeded per-process tables of one program, noise of 5 % a process: nothing is called."""
    rng = np.random.default_rng(7)
    means = {"call.1": 3e-4, "ynn_fusion": 1e-4, "copy.7": 2e-6, "reduce_add_fusion": 1e-6}

    def side():
        return [[OpTime(n, 3, 3 * m * f, m * f, 0.0) for n, m in means.items()
                 for f in [np.exp(0.05 * rng.standard_normal())]] for _ in range(6)]  # fmt: skip

    changes = op_diff(side(), side())
    assert all(c.beyond_noise is False for c in changes), changes
    assert "4 op(s) moved within their noise" in op_lines(changes)[-1]
    moved = op_diff(side(), [[OpTime(o.name, 3, 0, o.per_call_s * (2 if o.name == "call.1"
                                     else 1), 0) for o in t] for t in side()])  # fmt: skip
    assert [c.name for c in moved if c.beyond_noise] == ["call.1"]


def test_ops_beyond_the_limit_are_counted_before_the_ones_within_their_noise():
    """ "... 13 more" came after "5 op(s) moved within their noise", and read as 13 more of
    those."""
    from jaxbench.explain.ops import OpChange

    def op(i, low):
        return OpChange(f"fusion.{i}", 1e-4, 2e-4, 1e-4, None, low, low + 0.1, "both")

    moved, quiet = [op(i, 1.9) for i in range(5)], [op(i, 0.95) for i in range(5, 7)]
    lines = op_lines([*moved, *quiet], limit=2)
    assert lines[-2:] == ["  ... 3 more like these, smaller", "  2 op(s) moved within their noise"]


def test_ops_on_one_side_only_are_named_and_one_process_has_no_interval():
    a = [[OpTime("fusion.1", 1, 1e-3, 1e-3, 1.0)]]
    b = [[OpTime("fusion.2", 1, 2e-3, 2e-3, 1.0)]]
    changes = op_diff(a, b)
    assert {c.side for c in changes} == {"baseline", "candidate"}
    lines = op_lines(changes)
    assert "no interval" in lines[1] and "(only in the candidate)" in lines[2]


def test_a_damaged_trace_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="not a profiler trace"):
        op_table(b"not an xspace", 3)
    with pytest.raises(ValueError, match="at least one process"):
        op_diff([], [[]])


def test_an_op_nested_in_another_counts_once_as_its_own_time():
    """A loop's thunk (0-100 ns) holds two body thunks, one of which holds another."""
    events = [("while.1", 0, 100), ("fusion.a", 10, 20), ("fusion.b", 40, 30),
              ("copy.1", 45, 10), ("copy.2", 100, 5)]  # fmt: skip
    own = dict(_self_times(events))
    assert own == {"while.1": 50, "fusion.a": 20, "fusion.b": 20, "copy.1": 10, "copy.2": 5}
    assert sum(own.values()) == 105  # the line's busy time, counted once


def test_a_trace_says_what_the_profiler_cost_the_calls():
    f = _program(5)
    taken = take_trace(lambda: jax.block_until_ready(f(X, W)), calls=3)
    assert taken.untraced_s > 0 and taken.traced_s > 0 and taken.xspace
    table = OpTable(op_table(taken.xspace, 3), taken.untraced_s, taken.traced_s)
    assert table.slowdown == taken.traced_s / taken.untraced_s


def test_a_profiler_that_slowed_one_side_more_is_said_not_passed_as_the_programs():
    ops = [OpTime("call.1", 3, 3e-3, 1e-3, 1.0)]
    calm = [OpTable(ops, 1e-3, 1.1e-3), OpTable(ops, 1e-3, 1.2e-3)]
    slowed = [OpTable(ops, 1e-3, 30e-3), OpTable(ops, 1e-3, 28e-3)]
    lines = op_report(calm, calm)
    assert "x1.15 (baseline) and x1.15 (candidate)" in lines[-1]
    lines = op_report(slowed, calm)
    assert "x29 (baseline) and x1.15 (candidate)" in lines[-2]
    assert "the profiler's own cost is in these op times" in lines[-1]
    old = [OpTable(ops)]  # traces recorded before the cost was measured: nothing said
    assert op_report(old, old) == op_lines(op_diff([ops], [ops]), processes=(1, 1))
    assert "fewer than two processes on a side (baseline 1, candidate 1)" in op_report(old, old)[1]


def test_ops_are_matched_by_their_place_in_the_normalised_program_not_their_name():
    """XLA numbered one instruction differently on each side: it is still the same op."""
    from jaxbench.explain.normalize import instruction_keys, programs_keys

    text = _program(3).lower(X, W).compile().as_text()
    (name,) = {m for m in re.findall(r"%(tanh[\w.]*) = ", text)}
    renamed = re.sub(rf"%{re.escape(name)}\b", "%tanh.99", text)
    keys_a, keys_b = instruction_keys(text), instruction_keys(renamed)
    assert keys_a[name] == keys_b["tanh.99"] and "tanh.99" not in keys_a
    a = [[OpTime(name, 3, 3e-3, 1e-3, 1.0)]] * 2
    b = [[OpTime("tanh.99", 3, 6e-3, 2e-3, 1.0)]] * 2
    (matched,) = op_diff(a, b, keys=(keys_a, keys_b))
    assert matched.side == "both" and matched.name == f"{name} -> tanh.99"
    assert {c.side for c in op_diff(a, b)} == {"baseline", "candidate"}  # by name: two ops
    changed = instruction_keys(text.replace("tanh(", "exponential("))  # its computation changed
    assert changed[name] != keys_a[name]
    (kept,) = op_diff(a, [[OpTime(name, 3, 6e-3, 2e-3, 1.0)]] * 2, keys=(keys_a, changed))
    assert kept.side == "both" and kept.name == f"{name} (its computation changed)"
    assert programs_keys([{"hlo": text}, {"hlo": renamed}])[name] == keys_a[name]


def test_a_gpu_shaped_trace_is_read_from_its_device_planes_op_line_alone():
    """Device ops win over the host's thunks; the modules line is not counted again."""
    from xspace_data import xspace

    ops = [("loop_fusion", 0, 10_000), ("gemm_fusion.2", 1_000, 2_000), ("copy.3", 20_000, 5_000)]
    data = xspace({
        "/device:GPU:0": {"XLA Modules": [("jit_step", 0, 30_000)], "XLA Ops": ops},
        "/host:CPU": {"python": [("copy.3", 0, 50_000), ("end: copy.3", 50_000, 10)]},
    })  # fmt: skip
    table = {r.name: r for r in op_table(data, calls=2)}
    assert set(table) == {"loop_fusion", "gemm_fusion.2", "copy.3"}
    assert table["loop_fusion"].total_s == pytest.approx(8e-6)  # its nested gemm left out
    assert table["copy.3"].per_call_s == pytest.approx(2.5e-6)  # the device's, not the host's
    assert sum(r.share for r in table.values()) == pytest.approx(1.0)
    host_only = xspace(
        {"/host:CPU": {"python": [("copy.3", 0, 50_000), ("end: copy.3", 50_000, 10)]}}
    )
    assert [r.name for r in op_table(host_only, calls=1)] == ["copy.3"]


def test_a_program_over_two_devices_has_each_ops_time_per_device():
    """Each device of a mesh runs its share of every op: the table's time per call is theirs."""
    from xspace_data import xspace

    ops = [("all-reduce.7", 0, 4_000), ("fusion.1", 5_000, 6_000)]
    data = xspace({"/device:GPU:0": {"XLA Ops": ops}, "/device:GPU:1": {"XLA Ops": ops}})
    one = {r.name: r for r in op_table(xspace({"/device:GPU:0": {"XLA Ops": ops}}), calls=2)}
    two = {r.name: r for r in op_table(data, calls=2, devices=2)}
    assert two["all-reduce.7"].count == 2 and two["all-reduce.7"].total_s == pytest.approx(8e-6)
    for name in one:  # the ops add up to one call's time, as on one device
        assert two[name].per_call_s == pytest.approx(one[name].per_call_s)
        assert two[name].share == pytest.approx(one[name].share)
    with pytest.raises(ValueError, match="devices must be >= 1"):
        op_table(data, calls=2, devices=0)
