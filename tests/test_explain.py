"""``jaxbench explain``: programs compared level by level, names and metadata set aside."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re

import jax
import jax.numpy as jnp
import pytest
from typer.testing import CliRunner

from jaxbench.cli import app
from jaxbench.explain import BELOW_HLO, diff_programs, explain_lines, hlo_counts
from jaxbench.explain.normalize import normalize_hlo
from jaxbench.interleave.worker import serve
from jaxbench.measure import programs as program_module
from jaxbench.measure.harness import CompileTarget, compile_targets
from tests.conftest import run_cli

X = jnp.ones((8, 16), jnp.float32)
W = jnp.ones((16, 4), jnp.float32)


def _capture(fn, name="step"):
    """The programs as a run saves them: described at compile (a fresh key: never reused)."""
    return compile_targets([CompileTarget(name, object(), jax.jit(fn), (X, W))]).programs


def plain(x, w):
    return x @ w


def plain_again(x, w):  # the same body, another name and source line
    return x @ w


def test_a_changed_expression_differs_and_the_new_fusion_is_named():
    diffs = diff_programs(_capture(plain), _capture(lambda x, w: jnp.tanh(x) @ w))
    (d,) = diffs
    assert d.identical == {"jaxpr": False, "stablehlo": False, "hlo": False}
    assert d.first_difference == "jaxpr"
    assert d.counts["fusion:kLoop"] == (0, 1) and d.counts["op:tanh"] == (0, 1)
    text = "\n".join(explain_lines(diffs))
    assert "fusion:kLoop: 0 -> 1 (+1)" in text
    assert any(line.strip().startswith("+") and "tanh" in line for line in d.hlo_diff)
    assert "  jaxpr, normalised (unified diff):" in text  # the first level's diff, then HLO's
    assert any(line.startswith("+") and "tanh" in line for line in d.first_diff)


def test_the_cost_of_a_sharded_program_is_said_to_be_one_devices_share():
    a = _capture(plain)
    sharded = [dict(a[0], hlo=a[0]["hlo"].replace("\n", ", num_partitions=2\n", 1),
                    cost={**a[0]["cost"], "flops": a[0]["cost"]["flops"] / 2})]  # fmt: skip
    (d,) = diff_programs(a, sharded)
    assert d.partitions == (1, 2)
    line = next(x for x in explain_lines([d]) if "XLA flops" in x)
    assert line.endswith("one device's share of a program split over 1 -> 2 devices")
    (same,) = diff_programs(_capture(plain), _capture(lambda x, w: jnp.tanh(x) @ w))
    assert same.partitions == (1, 1)
    assert not any("device's share" in x for x in explain_lines([same]))


def test_the_same_program_under_another_name_and_line_is_identical():
    a, b = _capture(plain), _capture(plain_again, name="step")
    assert a[0]["hlo"] != b[0]["hlo"]  # the metadata names the function and its line
    (d,) = diff_programs(a, b)
    assert d.first_difference is None and not d.counts and not d.hlo_diff
    assert explain_lines([d])[0].endswith("identical programs (jaxpr, StableHLO and optimized "
                                          "HLO, names and metadata set aside)")  # fmt: skip


def test_identical_programs_that_time_differently_point_below_hlo_never_at_it():
    lines = explain_lines(diff_programs(_capture(plain), _capture(plain_again)), "slower")
    assert lines[-1] == f"The case is slower, yet {BELOW_HLO}"
    assert not any("differ" in line for line in lines)
    assert (
        explain_lines(diff_programs(_capture(plain), _capture(plain_again)), "same")[-1]
        != (lines[-1])
    )


def test_a_change_made_by_xla_alone_is_put_down_to_its_passes():
    a = _capture(lambda x, w: jnp.tanh(x) @ w)
    b = json.loads(json.dumps(a))
    b[0]["hlo"] = b[0]["hlo"].replace(" tanh(", " exponential(")  # as if XLA rewrote it
    (d,) = diff_programs(a, b)
    assert d.identical == {"jaxpr": True, "stablehlo": True, "hlo": False}
    assert d.counts["op:tanh"] == (1, 0) and d.counts["op:exponential"] == (0, 1)
    assert (
        "First at optimized HLO: the same StableHLO was optimized differently"
        in (explain_lines([d])[0])
    )


def test_a_jaxpr_that_lowers_to_the_same_stablehlo_is_context_not_the_cause():
    """JAX 0.11.2 against 0.12.1 printed ``out_sharding=None`` in the jaxpr and lowered to an
    identical StableHLO that XLA then optimized differently: explain said "First at jaxpr: JAX
    traced a different program"."""
    a = _capture(lambda x, w: jnp.tanh(x) @ w)
    b = json.loads(json.dumps(a))
    b[0]["jaxpr"] = b[0]["jaxpr"].replace("tanh", "tanh[out_sharding=None]")
    b[0]["hlo"] = b[0]["hlo"].replace(" tanh(", " exponential(")
    (d,) = diff_programs(a, b)
    assert d.identical == {"jaxpr": False, "stablehlo": True, "hlo": False}
    (first, *_) = explain_lines([d])
    assert ("First at optimized HLO (the jaxpr differs too, but leads to an identical StableHLO: "
            "context): the same StableHLO was optimized differently") in first, first  # fmt: skip
    assert not d.first_diff  # no jaxpr diff shown as if it were the cause


HLO_TEXT = """HloModule jit_f, entry_computation_layout={(f32[2]{0})->f32[2]{0}}

FileNames
1 "a.py"

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%fused_add (param_0.1: f32[2]) -> f32[2] {
  %param_0.1 = f32[2]{0} parameter(0)
  ROOT %add.3 = f32[2]{0} add(%param_0.1, %param_0.1), metadata={op_name="jit(f)/add" a="}"}
}

ENTRY %main.7 (x.1: f32[2]) -> f32[2] {
  %x.1 = f32[2]{0} parameter(0), metadata={op_name="x"}
  ROOT %fusion = f32[2]{0} fusion(%x.1), kind=kLoop, calls=%fused_add
}
"""


def test_normalising_drops_metadata_stack_frames_and_names_and_keeps_the_program():
    lines = normalize_hlo(HLO_TEXT).splitlines()
    add, entry = (re.fullmatch(r"(?:ENTRY )?(%c[0-9a-f]{8}) \(f32\[2\]\) -> f32\[2\] \{", lines[i])
                  for i in (1, 5))  # fmt: skip
    assert add and entry and add.group(1) != entry.group(1)
    assert lines == [
        "HloModule _, entry_computation_layout={(f32[2]{0})->f32[2]{0}}",
        f"{add.group(1)} (f32[2]) -> f32[2] {{",
        "  %0 = f32[2]{0} parameter(0)",
        "  ROOT %1 = f32[2]{0} add(%0, %0)",
        "}",
        f"ENTRY {entry.group(1)} (f32[2]) -> f32[2] {{",
        "  %0 = f32[2]{0} parameter(0)",
        f"  ROOT %1 = f32[2]{{0}} fusion(%0), kind=kLoop, calls={add.group(1)}",
        "}",
    ]
    counts = hlo_counts(HLO_TEXT)
    assert counts["instructions"] == 4 and counts["fusion:kLoop"] == 1 and counts["op:add"] == 1
    renumbered = HLO_TEXT.replace("fused_add", "fused_add.12").replace("main.7", "main.9")
    assert normalize_hlo(renumbered) == normalize_hlo(HLO_TEXT)


def test_a_computation_xla_inserts_first_changes_its_own_lines_and_its_callers_only():
    inserted = HLO_TEXT.replace(
        "%fused_add (",
        "%fused_neg (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n"
        "  ROOT %n = f32[2]{0} negate(%p)\n}\n\n%fused_add (",
    ).replace(
        "  ROOT %fusion = f32[2]{0} fusion(%x.1), kind=kLoop, calls=%fused_add",
        "  %fusion = f32[2]{0} fusion(%x.1), kind=kLoop, calls=%fused_add\n"
        "  ROOT %neg = f32[2]{0} fusion(%fusion), kind=kLoop, calls=%fused_neg",
    )  # fmt: skip
    (d,) = diff_programs(
        [{"name": "f", "hlo": HLO_TEXT}], [{"name": "f", "hlo": inserted}]
    )  # fmt: skip
    changed = [line for line in d.hlo_diff if line[:1] in "+-" and line[:3] not in "---+++"]
    assert [line[0] for line in changed] == ["+"] * 4 + ["-", "+", "-", "+", "+"], changed
    assert "negate(" in changed[2] and " add(" not in "".join(changed)
    assert d.counts["op:negate"] == (0, 1) and d.counts["op:fusion"] == (1, 2)


def test_collectives_are_counted_once_and_named_by_opcode():
    text = HLO_TEXT.replace(
        "  ROOT %fusion = f32[2]{0} fusion(%x.1), kind=kLoop, calls=%fused_add",
        "  %fusion = f32[2]{0} fusion(%x.1), kind=kLoop, calls=%fused_add\n"
        "  %ar = f32[2]{0} all-reduce(%fusion), replica_groups={{0,1}}, to_apply=%fused_add\n"
        "  %s = f32[2]{0} all-gather-start(%ar), dimensions={0}\n"
        "  %d = f32[2]{0} all-gather-done(%s)\n"
        "  ROOT %cp = f32[2]{0} collective-permute(%d), source_target_pairs={{0,1},{1,0}}",
    )
    counts = hlo_counts(text)
    assert counts["collectives"] == 3 and counts["op:all-reduce"] == 1
    assert counts["op:collective-permute"] == 1 and "collectives" not in hlo_counts(HLO_TEXT)


def test_ops_inside_a_while_body_are_counted():
    def loop(x, w):
        return jax.lax.fori_loop(0, 5, lambda i, c: jnp.tanh(c) * 1.01, x)

    counts = hlo_counts(_capture(loop)[0]["hlo"])
    assert counts["op:while"] == 1 and counts["in while bodies"] > 0


def test_a_text_over_the_limit_is_cut_and_says_so(monkeypatch):
    monkeypatch.setattr(program_module, "MAX_TEXT_CHARS", 200)
    (p,) = _capture(plain)
    assert {"stablehlo", "hlo"} <= set(p["truncated"])  # each is over 200 characters
    assert all(len(p[level]) <= 200 for level in ("jaxpr", "stablehlo", "hlo"))
    assert p["cost"]["flops"] > 0 and p["memory"]["argument_size_in_bytes"] == (8 * 16 + 16 * 4) * 4


def test_a_worker_asked_for_programs_before_a_case_answers_an_error():
    answers = io.StringIO()
    serve(io.StringIO('{"op": "programs"}\n{"op": "quit"}\n'), answers)
    answer = json.loads(answers.getvalue())
    assert answer == {"ok": False, "error": "RuntimeError: programs before prepare: send a "
                      "prepare request first"}  # fmt: skip


def test_a_report_stopped_part_way_says_how_many_cases_it_holds():
    from jaxbench.cli.explain import _report

    one = [("case a", ["h1", "h2"], ["line"])]
    assert "1 of the 3 case(s) selected (stopped before the rest)." in _report("t", one, 3)


def test_a_wider_candidate_is_explained_from_two_real_workers(tmp_path):
    out = run_cli("explain", "current", "current", "-w", "train_step", "-s", "tiny", "-d",
                  "float32", "--optimizer", "sgd", "--set-b", "size=tiny*1.5", "-o",
                  str(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    head = "train_step donate=True dtype=float32 mesh=none optimizer=sgd size=tiny: current (JAX "
    assert head in out.stdout
    assert "train_step: jaxpr, StableHLO, optimized HLO differ. First at jaxpr" in out.stdout
    assert "XLA flops: " in out.stdout and "optimized HLO, normalised (unified diff):" in out.stdout
    (report,) = tmp_path.glob("explain-*.md")
    assert head in report.read_text() and "XLA flops: " in report.read_text()
    assert "\n1 of the 1 case(s) selected (every one).\n" in report.read_text()
    sides = sorted(tmp_path.glob("programs/*.json.gz"))
    assert len(sides) == 2  # the sides differ, so two contents
    for path in sides:
        data = gzip.decompress(path.read_bytes())
        assert hashlib.sha256(data).hexdigest() == path.name.removesuffix(".json.gz")
        assert f"`programs/{path.name}`" in report.read_text()
        assert [p["name"] for p in json.loads(data)] == ["train_step"]


def test_explain_out_that_cannot_be_written_is_one_line_and_exit_1(tmp_path):
    """A full disk, or (here) ``programs`` a file where the folder goes: one line naming the
    file and the cause, not a traceback."""
    (tmp_path / "programs").write_text("not a folder")
    out = run_cli("explain", "current", "current", "-w", "train_step", "-s", "tiny", "-d",
                  "float32", "--optimizer", "sgd", "-o", str(tmp_path))  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.startswith("error: cannot write ") and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr


@pytest.mark.alone  # the op intervals are over 3 processes: a busy machine widens them past 60x
def test_a_traced_explain_puts_the_longer_loop_on_its_op():
    """Programs differ only in the loop's trip; the op diff names the loop's thunk.

    Three processes a side: over two, one loaded process can widen the interval (t with one
    degree of freedom) past a 50x change.
    """
    out = run_cli("explain", "current", "current", "-w", "loop", "--param", "trip=256",
                  "--set-b", "trip=16384", "--trace", "--processes", "3")  # fmt: skip
    assert out.returncode == 0, out.stderr
    ops = out.stdout[out.stdout.index("ops (profiler traces): ") :].splitlines()
    assert ops[1].lstrip().startswith("call") and "of the change" in ops[1], ops


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-w", "nope"], "unknown workload 'nope'"),
        (["--verdict", "worse"], "--verdict 'worse': expected slower, faster, same"),
        (["--set-b", "size"], "--set-b 'size': expected NAME=VALUE"),
        (["-w", "train_step", "--set-b", "trip=3"], "--set-b 'trip': train_step has no such"),
        (["--trace", "--processes", "0"], "--processes 0: expected at least 1"),
    ],
)
def test_bad_explain_input_is_one_line_and_exit_2(args, message):
    result = CliRunner().invoke(app, ["explain", "current", "current", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_an_unwritable_out_folder_is_refused_before_any_environment_is_built(tmp_path):
    args = ["explain", "0.11.2", "current", "-w", "train_step", "-o", "/proc/x",
            "--env-root", str(tmp_path)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "--out '/proc/x' is not writable" in result.output
    assert not list(tmp_path.iterdir())  # no environment was started


def test_identical_optimized_hlo_is_identical_where_it_runs_whatever_stablehlo_says():
    """A StableHLO that differs but optimizes to the same program is context, never the cause."""
    a = _capture(plain)
    b = json.loads(json.dumps(a))
    b[0]["stablehlo"] = b[0]["stablehlo"] + "\n// another lowering\nfunc.func private @x() {}"
    b[0]["cost"] = dict(b[0].get("cost", {}), **{"bytes accessed": 1.0})
    (d,) = diff_programs(a, b)
    assert d.identical["hlo"] and not d.identical["stablehlo"]
    lines = explain_lines([d], "slower")
    assert lines[0].startswith("step: identical where it runs") and "StableHLO differ" in lines[0]
    assert not any("lowering rules" in line for line in lines)
    assert any("bytes accessed" in line and "cost model" in line for line in lines)
    assert lines[-1] == f"The case is slower, yet {BELOW_HLO}"


def test_a_side_whose_case_fails_to_prepare_is_named(tmp_path, monkeypatch):
    """``worker (python): GateFailure: ...`` did not say which side failed."""
    from jaxbench.cli import app
    from jaxbench.interleave import WorkerError, session

    captured = _capture(plain)

    def capture(python, workload, params, backend):
        if params.get("optimizer") == "adam":
            raise WorkerError("worker (py): GateFailure: leaf w differs")
        return "0.0", captured

    monkeypatch.setattr(session, "capture_programs", capture)
    result = CliRunner().invoke(app, ["explain", "current", "current", "-w", "train_step", "-s",
                                      "tiny", "-d", "float32", "--optimizer", "sgd", "--set-b",
                                      "optimizer=adam"])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "candidate current optimizer=adam: worker (py): GateFailure" in " ".join(
        result.stderr.split()), result.stderr  # fmt: skip


def test_a_case_that_fails_on_one_side_is_said_and_the_next_case_is_explained(
    tmp_path, monkeypatch
):
    """The first case that failed a gate ended the command: the cases after it were never
    explained, and whether one was depended on the order of -w."""
    from jaxbench.cli import app
    from jaxbench.interleave import WorkerError, session

    captured = _capture(plain)

    def capture(python, workload, params, backend):
        if params.get("size") == "tiny" and python.endswith("candidate"):
            raise WorkerError("worker (py): GateFailure: leaf w differs")
        return "0.0", captured

    monkeypatch.setattr(session, "capture_programs", capture)
    monkeypatch.setattr("jaxbench.cli.explain.pythons_for",
                        lambda sides, envs, **k: ["py-baseline", "py-candidate"])  # fmt: skip
    out = tmp_path / "explained"
    result = CliRunner().invoke(app, ["explain", "current", "current", "-w", "train_step", "-s",
                                      "tiny", "-s", "small", "-d", "float32", "--optimizer",
                                      "sgd", "-o", str(out)])  # fmt: skip
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "size=tiny: not explained: candidate current: worker (py): GateFailure" in said
    assert "error: 1 of 2 case(s) not explained (above)" in said
    (report,) = out.glob("explain-*.md")
    assert "size=small" in report.read_text() and "size=tiny" not in report.read_text()
