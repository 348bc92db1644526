"""Program artifacts saved with every timed record: content-hashed, bounded, checked on reading."""

from __future__ import annotations

import gzip
import json

import jax
import jax.numpy as jnp
import pandas as pd
import pytest

from jaxbench.cases import select_cases
from jaxbench.measure.harness import CompileTarget, compile_targets
from jaxbench.runner import run
from jaxbench.store import ArtifactError, load_programs, save_programs
from jaxbench.store.programs import MAX_CASE_TEXT_CHARS, artifact_path, bound
from tests.conftest import run_cli

LOOP = {"trip": [64], "body": ["at_set"], "mode": ["plain"], "width": [64]}


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """One real run of one loop case: its folder and its record."""
    from jaxbench.measure import TimingConfig

    folder = tmp_path_factory.mktemp("run")
    cases = select_cases(["loop"], overrides=LOOP)
    timing = TimingConfig(budget_s=0.0, min_samples=3, max_samples=3, warmup_calls=1)
    (record,) = run(cases, folder, backend="cpu", timing=timing).records
    return folder, record


def test_a_timed_record_names_its_programs_and_they_hold_every_level(saved_run):
    folder, record = saved_run
    assert record.status == "ok" and record.schema_version == 5
    assert artifact_path(folder, record.programs).is_file()
    (program,) = load_programs(folder, record.programs)
    assert program["name"] == "plain"
    assert "while" in program["hlo"] and "stablehlo" in program["stablehlo"]
    assert "{ lambda" in program["jaxpr"] and "not traced" not in program["jaxpr"]
    assert "phases_s" not in program  # nothing timed: one program, one artifact
    phases = record.compile_phases_s["plain"]
    assert set(phases) == {"trace", "lower", "backend_compile"} and phases["backend_compile"] > 0
    assert program["flags"]["jax_enable_x64"] is False
    assert program["cost"]["flops"] == record.flops
    assert program["memory"] == record.memory


def test_a_saved_program_holds_no_folder_of_the_measuring_machine(saved_run):
    import sys

    from jaxbench.measure.programs import source_name
    from tests.conftest import ROOT

    folder, record = saved_run
    raw = gzip.decompress(artifact_path(folder, record.programs).read_bytes()).decode()
    assert "jaxbench/workloads/loops.py" in raw  # the metadata still names the source file
    for machine in {str(ROOT), sys.prefix, sys.base_prefix}:
        assert machine not in raw
    assert (
        source_name("/opt/venv/lib/python3.13/site-packages/jax/_src/lax.py") == "jax/_src/lax.py"
    )
    assert source_name("/home/u/jaxbench/jaxbench/workloads/mlp.py") == "jaxbench/workloads/mlp.py"
    assert source_name("/home/u/project/model.py") == "model.py"


def test_the_file_is_named_by_the_hash_of_its_content_and_stored_once(saved_run, tmp_path):
    folder, record = saved_run
    programs = load_programs(folder, record.programs)
    assert save_programs(tmp_path, programs) == record.programs
    assert save_programs(tmp_path, programs) == record.programs
    # a live worker's programs carry its compile timings (explain -o): one program, one file
    timed = [p | {"phases_s": {"trace": 0.01 * i, "lower": 0.02}} for i, p in enumerate(programs)]
    assert save_programs(tmp_path, timed) == record.programs
    assert len(list((tmp_path / "programs").iterdir())) == 1


def test_an_artifact_is_bounded_and_says_what_it_cut():
    big, small = "x" * 5_000_000, "y" * 1000
    programs = [{"name": "a", "jaxpr": small, "stablehlo": big, "hlo": big, "truncated": []},
                {"name": "b", "jaxpr": small, "stablehlo": small, "hlo": big}]  # fmt: skip
    bound(programs)
    texts = [v for p in programs for k, v in p.items() if k != "name" and isinstance(v, str)]
    assert MAX_CASE_TEXT_CHARS - 3 <= sum(map(len, texts)) <= MAX_CASE_TEXT_CHARS
    assert programs[0]["jaxpr"] == small and programs[1]["stablehlo"] == small  # short ones whole
    assert programs[0]["truncated"] == ["hlo", "stablehlo"] and programs[1]["truncated"] == ["hlo"]
    assert len(programs[0]["hlo"]) == len(programs[1]["hlo"])  # one common cut


def test_a_case_under_the_bound_is_kept_whole():
    programs = [{"name": "a", "hlo": "z" * 100, "truncated": []}]
    bound(programs, limit=100)
    assert programs == [{"name": "a", "hlo": "z" * 100, "truncated": []}]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: p.unlink(), "missing"),
        (lambda p: p.write_bytes(p.read_bytes()[:40]), "cut short"),
        (lambda p: p.write_bytes(b"junk, not gzip"), "not a gzip file"),
        (lambda p: p.write_bytes(gzip.compress(b'[{"name": "edited"}]')), "does not match"),
    ],
)
def test_a_damaged_artifact_is_named(tmp_path, damage, reason):
    digest = save_programs(tmp_path, [{"name": "step", "hlo": "HloModule m"}])
    path = artifact_path(tmp_path, digest)
    damage(path)
    with pytest.raises(ArtifactError, match=reason) as err:
        load_programs(tmp_path, digest)
    assert err.value.path == path and str(path) in str(err.value)


def _programs(fn):
    x, w = jnp.ones((8, 16)), jnp.ones((16, 4))
    return compile_targets([CompileTarget("plain", object(), jax.jit(fn), (x, w))]).programs


def _result_set(folder, src, cases):
    """A copy of the run in ``src`` as ``folder``: one record per ``{trip: programs}`` item."""
    folder.mkdir()
    (path,) = src.glob("*.jsonl")
    template = json.loads(path.read_text().splitlines()[0])
    lines = [json.dumps(template | {"params": {**template["params"], "trip": trip},
                                    "programs": save_programs(folder, programs)})
             for trip, programs in cases.items()]  # fmt: skip
    (folder / path.name).write_text("\n".join(lines) + "\n")
    return folder


def test_two_result_sets_are_explained_from_their_saved_programs(saved_run, tmp_path):
    folder, _ = saved_run
    a = _result_set(tmp_path / "a", folder, {64: _programs(lambda x, w: x @ w)})
    b = _result_set(tmp_path / "b", folder, {64: _programs(lambda x, w: jnp.tanh(x) @ w)})
    out = run_cli("explain", str(a), str(b), "--verdict", "slower")
    assert out.returncode == 0, out.stderr
    assert "loop/at_set body=at_set dtype=float32 mode=plain trip=64 width=64" in out.stdout
    assert "optimized HLO differ" in out.stdout and "op:tanh: 0 -> 1 (+1)" in out.stdout
    assert "compile phases, s" in out.stdout


def test_a_corrupt_artifact_is_named_and_the_other_cases_go_on(saved_run, tmp_path):
    folder, _ = saved_run
    plain, tanh = _programs(lambda x, w: x @ w), _programs(lambda x, w: jnp.tanh(x) @ w)
    a = _result_set(tmp_path / "a", folder, {64: plain, 65: plain})
    b = _result_set(tmp_path / "b", folder, {64: tanh, 65: plain})
    path = artifact_path(b, save_programs(b, tanh))
    path.write_bytes(b"not gzip at all")
    out = run_cli("explain", str(a), str(b))
    assert out.returncode == 0, out.stderr
    assert f"not explained: {path}: not a gzip file" in out.stdout
    assert "trip=65 width=64\nplain: identical programs" in out.stdout
    out = run_cli("explain", str(a), str(b), "-w", "loop", "--param", "trip=64", "--param",
                  "body=at_set", "--param", "mode=plain", "--param", "width=64")  # fmt: skip
    assert out.returncode == 1 and "trip=65" not in out.stdout  # the one selected: unexplained


def test_explain_refuses_a_result_set_against_a_version(saved_run):
    folder, _ = saved_run
    out = run_cli("explain", str(folder), "0.12.0.1")
    assert out.returncode == 2
    assert "give two result sets, or two interpreters or versions" in out.stderr


def _report_of(tmp_path, base_programs, cand_programs, slowdown=1.5):
    """A report of two versions whose one case is ``slower``; each side names its programs."""
    from jaxbench.analysis.report import write_report
    from tests.analysis_data import write_processes

    folder = tmp_path / "results"
    folder.mkdir()
    for version, median, programs in (("0.11.2", 1e-3, base_programs),
                                      ("0.12.0.1", 1e-3 * slowdown, cand_programs)):  # fmt: skip
        write_processes(folder, version, median, programs=save_programs(folder, programs))
    return write_report([folder], tmp_path / "report").read_text(), folder


def _section(text):
    return text.split("## Explanations", 1)[1].split("\n## ", 1)[0]


def test_the_report_explains_each_verdict_that_holds_from_the_saved_programs(tmp_path):
    text, _ = _report_of(tmp_path, _programs(lambda x, w: x @ w),
                         _programs(lambda x, w: jnp.tanh(x) @ w))  # fmt: skip
    section = _section(text)
    assert "0.11.2 -> 0.12.0.1, slower (recorded steady state)" in section
    assert "optimized HLO differ" in section and "op:tanh: 0 -> 1 (+1)" in section
    assert text.index("## Explanations") < text.index("## Versions")  # verdicts first


def test_identical_programs_under_a_verdict_point_below_hlo_in_the_report(tmp_path):
    text, _ = _report_of(tmp_path, _programs(lambda x, w: x @ w), _programs(lambda x, w: x @ w))
    section = _section(text)
    assert "identical programs" in section and "the cause is below HLO" in section
    assert "First at" not in section


def test_a_corrupt_artifact_is_named_in_the_report_and_the_report_is_written(tmp_path):
    plain = _programs(lambda x, w: x @ w)
    tanh = _programs(lambda x, w: jnp.tanh(x) @ w)
    _, folder = _report_of(tmp_path, plain, tanh)
    path = artifact_path(folder, save_programs(folder, tanh))
    path.write_bytes(path.read_bytes()[:50])
    from jaxbench.analysis.report import write_report

    text = write_report([folder], tmp_path / "report").read_text()
    assert f"Not explained: {path}: cut short (the gzip stream ends early)" in _section(text)
    problems = text.split("## Problems", 1)[1].split("\n## ", 1)[0]
    assert str(path) in problems and "its cases are not explained" in problems


def test_no_verdict_that_holds_means_no_explanations_section(tmp_path):
    text, _ = _report_of(tmp_path, _programs(lambda x, w: x @ w),
                         _programs(lambda x, w: x @ w), slowdown=1.0)  # fmt: skip
    assert "## Explanations" not in text


def test_the_programs_frame_reads_each_artifact_once_and_names_a_corrupt_one(tmp_path):
    from jaxbench.analysis.frames import load_results
    from jaxbench.analysis.programs import programs_frame
    from tests.analysis_data import PROCESSES

    plain, tanh = _programs(lambda x, w: x @ w), _programs(lambda x, w: jnp.tanh(x) @ w)
    _, folder = _report_of(tmp_path, plain, tanh)
    frame = programs_frame(load_results(folder)[0]).set_index("jax")
    assert list(frame["records"]) == [PROCESSES, PROCESSES] and list(frame["target"]) == [
        "plain",
        "plain",
    ]
    assert frame.loc["0.12.0.1", "instructions"] > frame.loc["0.11.2", "instructions"]
    assert frame.loc["0.11.2", "flops"] == plain[0]["cost"]["flops"]
    path = artifact_path(folder, save_programs(folder, tanh))
    path.write_bytes(b"")
    frame = programs_frame(load_results(folder)[0]).set_index("jax")
    assert (
        frame.loc["0.12.0.1", "problem"]
        == f"{path}: its content does not match its name (cut or edited)"
    )
    assert pd.isna(frame.loc["0.11.2", "problem"])


def test_two_processes_compiling_one_program_save_one_artifact(tmp_path):
    args = ["run", "-w", "loop", "--param", "trip=8", "--param", "body=at_set", "--param",
            "mode=plain", "--param", "width=64", "--budget", "0", "--min-samples", "2", "-o",
            str(tmp_path)]  # fmt: skip
    for _ in range(2):
        assert run_cli(*args).returncode == 0
    from jaxbench.store import load

    records = load(tmp_path).models("record")
    assert len(records) == 2 and records[0].env.pid != records[1].env.pid
    assert records[0].programs == records[1].programs
    assert records[0].compile_phases_s != records[1].compile_phases_s  # timings are per process
    assert len(list((tmp_path / "programs").iterdir())) == 1


def test_explaining_two_result_sets_names_a_changed_scaling_exponent(tmp_path, capsys):
    from tests.analysis_data import lognormal, record, write

    programs = _programs(lambda x, w: x @ w)
    for side, power in (("a", 1.0), ("b", 2.0)):  # latency ∝ n, then ∝ n²
        folder = tmp_path / side
        digest = save_programs(folder, programs)
        for p in range(3):
            recs = [record("0.12.0.1", lognormal(1e-4 * n**power, 30, seed=10 * p + n, sigma=0.01),
                           benchmark="user/attention", params={"n": n}, run_id=f"{side}{p}",
                           env={"process_id": f"{side}{p}"}, programs=digest)
                    for n in (16, 32, 64, 128)]  # fmt: skip
            write(folder / f"run-{p}.jsonl", recs)
    out = run_cli("explain", str(tmp_path / "a"), str(tmp_path / "b"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("identical programs") == 4
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("scaling:")]
    assert "exponent of latency in n 1.00 -> 2.00" in line and line.endswith("changed")
    # the cases outside a selection have no scaling line either, as in compare
    from jaxbench.cli.explain import explain_result_sets
    from jaxbench.cli.selection import RecordedSelection

    capsys.readouterr()
    n16 = RecordedSelection(frozenset({"user/attention"}), {"n": frozenset({16})})
    assert explain_result_sets(str(tmp_path / "a"), str(tmp_path / "b"), n16, None) == 0
    shown = capsys.readouterr().out
    assert "identical programs" in shown and "scaling:" not in shown, shown
    same = run_cli("explain", str(tmp_path / "a"), str(tmp_path / "a" / "."))  # one folder twice
    assert same.returncode == 0 and "warning: baseline and candidate are the same records" in (
        same.stderr
    )
    assert "same records" not in out.stderr


def test_explain_names_a_missing_side_an_artifact_given_as_a_side_and_an_empty_one(
    saved_run, tmp_path
):
    folder, record = saved_run
    cases = [
        (str(tmp_path / "nowhere"), "nowhere: no such file or folder"),
        (str(artifact_path(folder, record.programs)), "not a file of records (.jsonl or .json)"),
    ]
    for side, message in cases:
        out = run_cli("explain", str(folder), side)
        assert out.returncode == 2 and message in out.stderr, out.stderr
    out = run_cli("explain", str(folder), str(folder), "-w", "transformer")
    assert out.returncode == 2 and "matches the selection" in out.stderr
    (tmp_path / "empty").mkdir()
    out = run_cli("explain", str(folder), str(tmp_path / "empty"))
    assert out.returncode == 2 and "empty holds no timed records" in out.stderr


def test_cases_on_one_side_only_are_named(saved_run, tmp_path):
    folder, _ = saved_run
    plain = _programs(lambda x, w: x @ w)
    a = _result_set(tmp_path / "a", folder, {64: plain})
    b = _result_set(tmp_path / "b", folder, {64: plain, 65: plain})
    out = run_cli("explain", str(a), str(b))
    assert out.returncode == 0
    assert "only on the candidate side, not explained: loop/at_set" in out.stderr
    assert "trip=65" in out.stderr


def test_a_side_whose_records_name_several_programs_says_which_it_compared():
    from jaxbench.explain.saved import pick_artifact

    side = pick_artifact([("r/a.jsonl", "aa" * 32, None), ("r/b.jsonl", "bb" * 32, None),
                          ("r/c.jsonl", None, None)])  # fmt: skip
    assert (side.digest, side.records, side.distinct, side.total, side.tie) == (
        "aa" * 32, 1, 2, 2, True)  # fmt: skip
    assert pick_artifact([("r/a.jsonl", None, None)]) is None


def test_the_report_explains_op_by_op_where_the_records_hold_traces(tmp_path):
    """Each side's processes traced the case: the op that slowed carries the change's share."""
    from jaxbench.analysis.report import write_report
    from tests.analysis_data import write_processes

    folder = tmp_path / "results"
    folder.mkdir()
    programs = save_programs(folder, _programs(lambda x, w: x @ w))

    def trace(loop_s, copy_s):
        ops = [
            {"name": "call.1", "count": 5, "total_s": 5 * loop_s, "per_call_s": loop_s},
            {"name": "copy.7", "count": 5, "total_s": 5 * copy_s, "per_call_s": copy_s},
        ]
        return {"calls": 5, "ops": [op | {"share": 0.5} for op in ops]}  # fmt: skip

    for version, median, loop_s in (("0.11.2", 1e-3, 0.8e-3), ("0.12.0.1", 2e-3, 1.8e-3)):
        for p, path in enumerate(write_processes(folder, version, median, programs=programs)):
            lines = path.read_text().splitlines()  # each process's own trace, a little apart
            record = json.loads(lines[0]) | {"trace": trace(loop_s * (1 + p / 50), 1e-4)}
            path.write_text(json.dumps(record) + "\n")
    section = _section(write_report([folder], tmp_path / "report").read_text())
    assert "identical programs" in section
    ops = section[section.index("ops (profiler traces): ") :].splitlines()
    assert ops[1].lstrip().startswith("call.1: ") and "100% of the change" in ops[1]
    assert "copy.7" not in section  # unchanged: no op line of its own
    from jaxbench.analysis.frames import load_results
    from jaxbench.upgrade.summary import _explain

    frame = load_results(folder)[0]
    (case,) = set(frame["case"])
    said = _explain(frame, case, ("0.11.2", "0.12.0.1"), "slower")  # the terminal's answer
    assert said[-2].startswith("ops (profiler traces): ") and said[-1].startswith("call.1: ")
