"""``run --trace``: a trace per case after its samples, saved and named; op diffs of result sets."""

from __future__ import annotations

import gzip
import hashlib
import re
from types import SimpleNamespace

import pytest
from conftest import importable
from typer.testing import CliRunner

from jaxbench.cli import app
from jaxbench.store import ArtifactError, load_trace, read_file, save_trace
from jaxbench.store.traces import MAX_TRACE_BYTES, trace_path

FACTORIES = """
import os

import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def loop(n: int = 2000):
    # JAXBENCH_TEST_SLOW=1 runs the loop 16 times as long: the same case, a slower op.
    trip = n * (16 if os.environ.get("JAXBENCH_TEST_SLOW") == "1" else 1)

    def body(i, x):  # a whole-vector op each step: some 20 µs a call at n = 2000, so a hiccup
        at = i % x.shape[0]  # in one traced call cannot widen the op's interval past 16x
        return (x * 1.0000001).at[at].set(x[at] * 0.5 + 1.0)

    return Step(fn=jax.jit(lambda x: jax.lax.fori_loop(0, trip, body, x)), args=(jnp.ones(64),),
                next_args=lambda args, out: args)
"""
TIMING = ["--budget", "0", "--min-samples", "5", "--warmup", "2"]
runner = CliRunner()


@pytest.fixture
def module(tmp_path, monkeypatch):
    return importable(tmp_path, monkeypatch, "traced", FACTORIES)


@pytest.mark.slow
@pytest.mark.alone  # the op intervals are over 3 processes: a busy machine widens them past 16x
def test_traced_runs_keep_op_tables_and_traces_and_explain_names_the_slower_op(
    module, tmp_path, monkeypatch
):
    for side, slow in (("base", "0"), ("cand", "1")):
        monkeypatch.setenv("JAXBENCH_TEST_SLOW", slow)
        for _ in range(3):  # three worker processes a side: the unit of the op intervals
            result = runner.invoke(app, ["run", "-w", f"{module}:loop", "--trace", *TIMING,
                                         "-o", str(tmp_path / side)])  # fmt: skip
            assert result.exit_code == 0, result.output
    (path, *_) = sorted((tmp_path / "base").glob("*.jsonl"))
    (record,) = read_file(path, strict=True).models("record")
    assert record.status == "ok" and record.schema_version == 5 and len(record.samples_s) == 5
    trace = record.trace
    assert trace.calls == 5 and trace.error is None and trace.ops
    assert {"name", "count", "total_s", "per_call_s", "share"} <= set(trace.ops[0])
    assert abs(sum(op["share"] for op in trace.ops) - 1) < 1e-9
    saved = trace_path(tmp_path / "base", trace.file)
    assert hashlib.sha256(gzip.decompress(saved.read_bytes())).hexdigest() == trace.file
    assert len(load_trace(tmp_path / "base", trace.file)) == trace.bytes

    result = runner.invoke(app, ["explain", str(tmp_path / "base"), str(tmp_path / "cand")])
    assert result.exit_code == 0, result.output
    ops = result.stdout[result.stdout.index("ops (profiler traces): ") :].splitlines()
    share = re.search(r"(\d+)% of the change\)$", ops[1])
    assert share and int(share.group(1)) >= 50, ops  # most of the change on one op


@pytest.mark.slow
def test_explain_says_which_side_has_no_trace(module, tmp_path):
    for side, extra in (("base", ["--trace"]), ("cand", [])):
        result = runner.invoke(app, ["run", "-w", f"{module}:loop", *extra, *TIMING,
                                     "-o", str(tmp_path / side)])  # fmt: skip
        assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "cand").glob("*.jsonl")
    assert read_file(path, strict=True).models("record")[0].trace is None
    result = runner.invoke(app, ["explain", str(tmp_path / "base"), str(tmp_path / "cand")])
    assert "ops: no trace on the candidate side (run it with --trace)" in result.stdout


def test_a_damaged_or_missing_trace_is_named(tmp_path):
    digest = save_trace(tmp_path, b"\x0a\x03abc")
    assert load_trace(tmp_path, digest) == b"\x0a\x03abc"
    path = trace_path(tmp_path, digest)
    path.write_bytes(gzip.compress(b"edited"))
    with pytest.raises(ArtifactError, match="does not match its name"):
        load_trace(tmp_path, digest)
    path.write_bytes(b"not gzip")
    with pytest.raises(ArtifactError, match="not a gzip file"):
        load_trace(tmp_path, digest)
    with pytest.raises(ArtifactError, match="missing"):
        load_trace(tmp_path, "0" * 64)
    with pytest.raises(ValueError, match="above the"):
        save_trace(tmp_path, b"x" * (MAX_TRACE_BYTES + 1))


def test_a_trace_that_cannot_be_taken_leaves_the_samples(monkeypatch):
    from jaxbench import runner as runner_module
    from jaxbench.measure import trace as trace_module

    def busy(step, calls):
        raise RuntimeError("the profiler wrote no .xplane.pb (is another trace running?)")

    monkeypatch.setattr(trace_module, "take_trace", busy)
    prepared = SimpleNamespace(call_once=lambda: None, devices=1)  # a prepared case's share
    trace = runner_module._trace(prepared, 5, None)
    assert trace.calls == 5 and trace.ops is None
    assert trace.error == "no trace: the profiler wrote no .xplane.pb (is another trace running?)"


@pytest.mark.slow
@pytest.mark.alone  # the op intervals are over 3 pairs: a busy machine widens them past 16x
def test_a_live_comparison_traces_each_pairs_workers_and_names_the_slower_op(
    module, tmp_path, monkeypatch
):
    """The candidate's loop runs 16 times as many iterations; its op carries the change."""
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "src"))  # the live workers find it too
    result = runner.invoke(app, ["compare", "current", "current", "--interleave", "-w",
                                 f"{module}:loop", "--set-b", "n=32000", "--pairs", "3",
                                 "--max-pairs", "3", "--trace", "-o", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 1, result.output  # slower
    ops = result.stdout[result.stdout.index("ops (profiler traces): ") :].splitlines()
    share = re.search(r"(\d+)% of the change\)$", ops[1])
    assert share and int(share.group(1)) >= 50, ops
    assert "the traced calls took x" in result.stdout
    (path,) = tmp_path.glob("interleave-*.jsonl")
    (comparison,) = read_file(path, strict=True).models("live-comparison")
    assert comparison.schedule["trace_calls"] == 5
    for pair in comparison.pairs:  # each pair's worker on each side: one trace, its op table
        assert pair.baseline.trace.ops and pair.candidate.trace.traced_s > 0


@pytest.mark.parametrize("mode", [["--back-to-back", "-w", "loop"], []])
def test_compare_trace_is_refused_without_interleave_in_one_line(tmp_path, mode):
    result = runner.invoke(app, ["compare", "current", "current", *mode, "--trace",
                                 "-o", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2
    assert "--trace applies to --interleave" in result.output


def test_explain_processes_without_trace_is_refused_in_one_line():
    result = runner.invoke(app, ["explain", "current", "current", "-w", "loop", "--processes",
                                 "5"])  # fmt: skip
    assert result.exit_code == 2
    assert "--processes 5 applies to --trace" in result.output
