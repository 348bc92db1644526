"""Bring your own workload: factories by ``module:factory`` and by entry point, on every path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from typer.testing import CliRunner

from jaxbench.analysis import load_results
from jaxbench.cases import select_cases
from jaxbench.cli import app
from jaxbench.store import read_file
from jaxbench.workloads import GateFailure, UserWorkload

FACTORIES = """
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def matmul(n: int = 8, wrong: bool = False, scale=1.0):
    a = jax.ShapeDtypeStruct((n, n), jnp.float32)
    reference = (lambda a: a @ a * scale + 1.0) if wrong else None
    return Step(fn=jax.jit(lambda a: a @ a * scale), args=(a,), reference=reference,
                flops=2 * n**3)


def raises(n: int = 3):
    raise ValueError(f"n={n} is not a power of two")


def wrong_return():
    return 42


def optional(n: Optional[int] = None, m: int | None = None):
    return Step(fn=jax.jit(lambda a: a * 2.0), args=(jnp.ones((n or 4, m or 2)),))


def exits(n: int = 3):
    import sys
    sys.exit(n)


NOT_A_FACTORY = 3


def typed(dtype: str = "float32", n: int = 8):
    return Step(fn=jax.jit(lambda a: a * 2), args=(jnp.ones(n, dtype=dtype),))


def not_jitted():
    return Step(fn=lambda a: a, args=(jnp.ones(3),))


def needs(n):
    return matmul(n)


def donating():
    return Step(fn=jax.jit(lambda a: a + 1.0, donate_argnums=0), args=(jnp.ones(4),))


def stale_next_args(wrong: bool = False):
    step = jax.jit(lambda a: (a + 1.0, a.sum()), donate_argnums=0)
    keep = (lambda args, out: out) if wrong else (lambda args, out: args)
    return Step(fn=step, args=(jnp.ones(4),), next_args=keep)


def shaped(n: int = 2, shape=(4, 4), dtype=jnp.float32):
    return Step(fn=jax.jit(lambda a: a * n), args=(jax.ShapeDtypeStruct(shape, dtype),))


def brackets():
    def fails(a):
        raise ValueError("bad [/x] tag and [n, 4] shape")
    return Step(fn=jax.jit(fails), args=(jnp.ones(3),))


def slow(seconds: float = 0.5):
    import time
    time.sleep(seconds)
    return matmul(4)


def turns_nan(after: int = 1):
    # Finite on the gate's call; from call after + 1 on, out * nan.
    step = jax.jit(lambda a, k: (a * jnp.where(k >= after, jnp.nan, 1.0), k + 1))
    return Step(fn=step, args=(jnp.ones(4), jnp.zeros((), jnp.int32)),
                next_args=lambda args, out: (args[0], out[1]))
"""
runner = CliRunner()


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``user_factories`` importable here (sys.path) and in child processes (PYTHONPATH)."""
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "user_factories.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])
    )
    yield "user_factories"
    sys.modules.pop("user_factories", None)


def test_params_come_from_the_factory_signature_and_param_texts_are_typed(user_module):
    cases = select_cases([f"{user_module}:matmul"], texts={"n": ["4", "16"], "scale": ["0.5"]})
    assert [c.params for c in cases] == [
        {"n": 4, "wrong": False, "scale": 0.5},
        {"n": 16, "wrong": False, "scale": 0.5},
    ]
    (case,) = select_cases([f"{user_module}:matmul"], texts={"wrong": ["yes"]})
    assert case.params["wrong"] is True and case.params["n"] == 8


def test_optional_annotations_type_param_texts_as_their_one_type(user_module):
    """``Optional[int]`` and ``int | None``, as text under ``from __future__ import annotations``
    too, type ``--param n=16`` as the int 16 (not the text '16')."""
    (case,) = select_cases([f"{user_module}:optional"], texts={"n": ["16"], "m": ["3"]})
    assert case.params == {"n": 16, "m": 3}


def test_a_workload_named_twice_is_selected_once(user_module):
    name = f"{user_module}:matmul"
    assert len(select_cases([name, name], texts={"n": ["4", "8"]})) == 2
    # one value written two ways is one case, not two timings of it
    (case,) = select_cases([name], texts={"scale": ["0.5", "5e-1"], "n": ["4", "04"]})
    assert case.params["scale"] == 0.5 and case.params["n"] == 4
    with pytest.raises(ValueError, match=r"\(.*:not_jitted takes no --param\)"):
        select_cases([f"{user_module}:not_jitted"], texts={"n": ["4"]})


def test_a_slow_factory_while_selecting_cases_is_said_not_waited_in_silence(
    user_module, monkeypatch, capsys
):
    from jaxbench.cli import selection

    monkeypatch.setattr(selection, "SLOW_SELECTION_S", 0.1)
    assert len(selection.Selection(workload=[f"{user_module}:slow"]).cases()) == 1
    assert "selecting cases: a workload's factory has run for 0.1 s" in capsys.readouterr().err
    quick = selection.Selection(workload=[f"{user_module}:slow"], param=["seconds=0"])
    assert len(quick.cases()) == 1
    assert "selecting cases" not in capsys.readouterr().err  # a quick one says nothing


def test_a_factory_calling_sys_exit_is_one_line_and_exit_2(user_module):
    done = run_cli("run", "-w", f"{user_module}:exits", "--param", "n=3")  # PYTHONPATH set
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the factory called sys.exit(3)" in done.stderr


def test_a_refused_case_is_recorded_failed_where_review_asks_and_the_rest_run(
    user_module, tmp_path
):
    """review's screen runs `run --record-refused` under each side's JAX: a factory that refuses
    a case under one version only is that side's failed record, not exit 2 for every case."""
    args = ["run", "-w", f"{user_module}:raises", "-w", f"{user_module}:matmul", "--param", "n=4",
            "--budget", "0", "--min-samples", "3", "-o", str(tmp_path)]  # fmt: skip
    refused = run_cli(*args)
    assert refused.returncode == 2 and "n=4 is not a power of two" in refused.stderr
    assert not list(tmp_path.glob("*.jsonl"))
    done = run_cli(*args, "--record-refused")
    assert done.returncode == 1, done.stdout + done.stderr
    (path,) = tmp_path.glob("*.jsonl")
    by = {r.benchmark: r for r in read_file(path, strict=True).models("record")}
    assert by[f"{user_module}:matmul"].status == "ok"
    assert by[f"{user_module}:raises"].status == "failed"
    assert "n=4 is not a power of two" in by[f"{user_module}:raises"].error


def test_a_dtype_jax_truncates_fails_the_case_not_recorded_under_the_dtype_asked(user_module):
    """float64 while jax_enable_x64 is off: JAX makes float32 arrays and warns; a record would
    have said float64 and measured float32. Refused as bad input, with JAX's own reason."""
    done = run_cli("run", "-w", f"{user_module}:typed", "--param", "dtype=float64",
                   env={"JAX_ENABLE_X64": "0"})  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "Explicitly requested dtype float64" in line and "truncated to dtype float32" in line
    assert "JAX_ENABLE_X64" in line
    (case,) = select_cases([f"{user_module}:typed"], texts={"dtype": ["float32"]})  # as before
    assert case.params["dtype"] == "float32"


def test_a_name_that_is_no_factory_says_what_it_is(user_module):
    with pytest.raises(ValueError) as info:
        select_cases([f"{user_module}:NOT_A_FACTORY"])
    assert str(info.value) == (f"--workload '{user_module}:NOT_A_FACTORY': not a factory but 3 "
                               "(of type int)")  # fmt: skip


def test_set_a_and_set_b_are_typed_as_param_is(user_module):
    """``--set-b scale=0.5`` reaches the factory as the float ``--param scale=0.5`` would."""
    import typer

    from jaxbench.cli.options import side_params

    cases = select_cases([f"{user_module}:matmul"], texts={"n": ["4"]})
    assert side_params(cases, ["scale=0.5", "wrong=true"], "--set-b") == {
        "scale": 0.5,
        "wrong": True,
    }
    with pytest.raises(typer.Exit) as bad:
        side_params(cases, ["scale=fast"], "--set-b")
    assert bad.value.exit_code == 2
    with pytest.raises(typer.Exit) as twice:  # one side, one value: not the last one silently
        side_params(cases, ["scale=0.5", "scale=0.7"], "--set-b")
    assert twice.value.exit_code == 2
    loops = select_cases(["loop"], texts={"trip": ["64"]})
    assert side_params(loops, ["trip=128"], "--set-a") == {"trip": 128}
    train = select_cases(["train_step"], overrides={"size": ["tiny"]})
    assert side_params(train, ["size=tiny*1.5"], "--set-b") == {"size": "tiny*1.5"}


def test_parameters_whose_defaults_a_record_cannot_hold_keep_them(user_module, tmp_path):
    (case,) = select_cases([f"{user_module}:shaped"])
    assert case.params == {"n": 2}  # the tuple and the dtype object stay the factory's
    result = runner.invoke(app, ["run", "-w", f"{user_module}:shaped", "--budget", "0",
                                 "--min-samples", "3", "-o", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    bad = runner.invoke(app, ["run", "-w", f"{user_module}:shaped", "--param", "shape=3"])
    assert bad.exit_code == 2 and "--param shape: no selected workload has it" in bad.output


def test_a_user_workload_is_gated_timed_and_recorded(user_module, tmp_path):
    out = tmp_path / "r"
    args = ["run", "-w", f"{user_module}:matmul", "--param", "n=4", "--param", "n=8",
            "--budget", "0", "--min-samples", "3", "-o", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    frame, problems = load_results([out])
    assert not problems and list(frame["status"]) == ["ok", "ok"]
    assert set(frame["benchmark"]) == {f"{user_module}:matmul"}
    assert [p["n"] for p in frame["params"]] == [4, 8]
    assert all(g["reference"] == "jax.disable_jit" and g["rtol"] == 1e-5 for g in frame["gate"])
    assert [m.model_flops for m in frame["metrics"]] == [2 * 4**3, 2 * 8**3]


def test_a_step_whose_output_turns_nan_is_failed_naming_the_call(user_module, tmp_path):
    timing = ["--budget", "0", "--min-samples", "3", "--warmup", "0"]
    for after, status, error in ((1, "failed", "output of call 2 is not finite (leaf 0)"),
                                 (3, "failed", "output of call 6 is not finite (leaf 0)"),
                                 (10**6, "ok", None)):  # fmt: skip
        out = tmp_path / str(after)
        args = ["run", "-w", f"{user_module}:turns_nan", "--param", f"after={after}", *timing]
        result = runner.invoke(app, [*args, "-o", str(out)])
        assert result.exit_code == (0 if status == "ok" else 1), result.output
        (record,) = read_file(next(out.glob("*.jsonl")), strict=True).models("record")
        assert record.status == status, record.error
        if error is None:
            assert record.error is None and len(record.samples_s) >= 3
        else:
            assert (
                record.error
                == f"NonFiniteOutput: {error}; the last output of the warm-up "
                "and of each timed block is checked"
                and record.samples_s == []
            )


def test_a_donating_step_without_next_args_fails_its_gate_saying_so(user_module, tmp_path):
    result = runner.invoke(app, ["run", "-w", f"{user_module}:donating", "-o", str(tmp_path)])
    assert result.exit_code == 1, result.output
    (path,) = tmp_path.glob("*.jsonl")
    (record,) = read_file(path, strict=True).models("record")
    assert "donates argument leaves [0] but Step.next_args is None" in record.error
    for wrong, message in ((False, "returned argument leaves [0] that the call donated"),
                           (True, "next_args returned PyTreeDef((*, *)); expected")):  # fmt: skip
        out = tmp_path / str(wrong)
        args = ["run", "-w", f"{user_module}:stale_next_args", "--param", f"wrong={wrong}"]
        assert runner.invoke(app, [*args, "-o", str(out)]).exit_code == 1
        (record,) = read_file(next(out.glob("*.jsonl")), strict=True).models("record")
        assert message in record.error, record.error


def test_a_jitted_path_that_disagrees_with_its_reference_fails_its_gate(user_module, tmp_path):
    args = ["run", "-w", f"{user_module}:matmul", "--param", "wrong=true", "-o", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    (path,) = tmp_path.glob("*.jsonl")
    (record,) = read_file(path, strict=True).models("record")
    assert record.status == "failed" and record.samples_s == []
    assert record.error.startswith(f"correctness gate: {user_module}:matmul: jit vs reference")
    # the tolerance it failed against, and where, as fields of the record's gate
    assert record.gate["rtol"] == 1e-5 and record.gate["atol"] == 1e-6
    assert record.gate["leaf"] == "(root)" and record.gate["max_abs_err"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-w", "{m}:matmul", "--param", "m=3"], "--param m: no selected workload has it"),
        (["-w", "loop", "-s", "tiny"], "--size: no selected workload has it (loop takes"),
        (["-w", "{m}:matmul", "--param", "n=abc"], "--param n='abc': expected int"),
        (["-w", "{m}:matmul", "--param", "wrong=maybe"], "expected true or false"),
        (["-w", "{m}:matmul", "--param", "n"], "--param 'n': expected NAME=VALUE"),
        (["-w", "{m}:raises"], "'{m}:raises': ValueError: n=3 is not a power of two"),
        (["-w", "{m}:wrong_return"], "the factory returned int, expected jaxbench.workloads.Step"),
        (["-w", "{m}:not_jitted"], "Step.fn must be a jax.jit-wrapped function"),
        (["-w", "{m}:needs"], "needs --param n=VALUE"),
        (["-w", "{m}:absent"], "{m} has no attribute 'absent'"),
        (["-w", "no_such_module:f"], "cannot import no_such_module: ModuleNotFoundError"),
        (["-w", "/no/such/bench.py:f"], "not a file path (and there is no file /no/such/bench.py)"),
        (["-w", "nope"], "unknown workload 'nope'; choose from train_step, forward"),
        (["-w", "train_step", "--param", "size=huge"], "--param size=huge: unknown size 'huge'"),
        (["-w", "train_step", "--size", "huge"], "--size huge: unknown size 'huge'"),
        (["-w", "forward", "--param", "k=x"], "--param k='x': expected an integer"),
        (["-w", "train_step", "--param", "donate=maybe"], "donate='maybe': expected true or"),
    ],
)
def test_bad_user_workload_input_is_one_line_and_nothing_is_written(user_module, tmp_path, args,
                                                                     message):  # fmt: skip
    args = [a.format(m=user_module) for a in args]
    result = runner.invoke(app, ["run", *args, "-o", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message.format(m=user_module) in lines[0], result.output
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_module_in_the_current_folder_runs_from_the_installed_command(tmp_path, monkeypatch):
    """``.venv/bin/jaxbench`` (the console script), not ``python -m``: the current folder was
    not on its import path, so ``-w loose:step`` was "No module named 'loose'"."""
    (tmp_path / "loose.py").write_text(
        "import jax, jax.numpy as jnp\n"
        "from jaxbench.workloads.step import Step\n"
        "def step(n: int = 4):\n"
        "    return Step(fn=jax.jit(lambda a: a * 2.0), args=(jnp.ones(n),))\n"
    )
    script = Path(sys.executable).parent / "jaxbench"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([str(script), "run", "-w", "loose:step", "--budget", "0",
                          "--min-samples", "3", "-o", "r"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "loose:step n=4" in " ".join(out.stdout.split())
    # the file's path is not a workload's name: the message says which name is
    named = runner.invoke(app, ["run", "-w", f"{tmp_path / 'loose.py'}:step"])
    assert named.exit_code == 2
    assert f"not a file path: run from {tmp_path} with -w loose:step" in named.output
    monkeypatch.chdir(tmp_path)  # the file's name alone, without a factory
    bare = runner.invoke(app, ["run", "-w", "loose.py"])
    assert bare.exit_code == 2
    assert "not a file path: run from this folder with -w loose:FACTORY" in bare.output


def test_a_size_beyond_the_named_ones_is_run_not_a_crash(tmp_path):
    args = ["run", "-w", "train_step", "-s", "tiny*1.05", "-d", "float32", "--optimizer", "sgd",
            "--budget", "0", "--min-samples", "3", "-o", str(tmp_path)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output


# -- an installed package with entry points (examples/workloads), through every path ----------


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``examples/workloads`` built and installed into a folder; the environment that sees it."""
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
         str(ROOT / "examples" / "workloads")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_installed_workloads_are_listed_and_run(installed, tmp_path):
    listed = run_cli("list", env=installed)
    assert listed.returncode == 0, listed.stderr
    assert "example_attention" in listed.stdout and "d_model=32" in listed.stdout
    for name in ("example_regression", "example_equinox_mlp", "example_nnx_mlp"):
        assert name in listed.stdout
    proc = run_cli("run", "-w", "example_attention", "-w", "example_regression",
                   "-w", "example_equinox_mlp", "-w", "example_nnx_mlp",
                   "--param", "heads=4", "--budget", "0", "--min-samples", "3",
                   "-o", str(tmp_path), env=installed)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    frame, _ = load_results([tmp_path])
    assert list(frame["status"]) == ["ok"] * 4
    by_name = frame.set_index("benchmark")
    for framework in ("example_equinox_mlp", "example_nnx_mlp"):
        assert by_name.loc[framework, "gate"]["reference"] == "reference"
        assert by_name.loc[framework, "metrics"].model_flops == 6 * 64 * 3 * 64 * 64
    assert by_name.loc["example_attention", "params"]["heads"] == 4
    assert by_name.loc["example_regression", "gate"]["reference"] == "reference"
    assert by_name.loc["example_attention", "metrics"].tokens == 32
    # Its numerical drift, by the entry point's name: saved once, then checked clean, at the
    # tolerance of its widest sum (the MLP's down projection: 4 x d_model = 128 terms).
    ref, out = tmp_path / "ref", tmp_path / "drift"
    saved = run_cli("drift", "-w", "example_attention", "--save-reference", "--reference",
                    str(ref), env=installed)  # fmt: skip
    assert saved.returncode == 0, saved.stdout + saved.stderr
    checked = run_cli("drift", "-w", "example_attention", "--reference", str(ref), "-o", str(out),
                      env=installed)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (path,) = out.glob("drift-*.jsonl")
    rows = read_file(path, strict=True).models("jaxbench-drift")
    assert rows and all(r.within_tolerance and r.workload == "example_attention" for r in rows)
    assert {(r.rtol, r.atol) for r in rows} == {(4 * 128 * 2.0**-24, 128 * 2.0**-24)}


@pytest.mark.slow
def test_installed_workloads_go_through_interleave_and_a_local_sweep(installed, tmp_path):
    live = run_cli("compare", "current", "current", "--interleave", "-w", "example_regression",
                   "--pairs", "2", "--max-pairs", "2", "--rounds", "6", "--warmup-rounds", "1",
                   "-o", str(tmp_path / "live"), env=installed)  # fmt: skip
    assert live.returncode in (0, 1), live.stdout + live.stderr
    (path,) = (tmp_path / "live").glob("interleave-*.jsonl")
    (comparison,) = read_file(path, strict=True).models("live-comparison")
    assert comparison.status == "ok" and len(comparison.pairs) == 2
    assert comparison.baseline.benchmark == "example_regression"
    sweep = run_cli("submit", "-p", "local", "-w", "example_attention", "--param", "seq=8",
                    "--budget", "0", "--min-samples", "3", "--sweeps-dir", str(tmp_path / "s"),
                    "--wait", env=installed)  # fmt: skip
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    (folder,) = (tmp_path / "s").glob("sweep-*")
    records = read_file(folder / "results.jsonl", strict=True).models("record")
    assert [(r.benchmark, r.status, r.params["seq"]) for r in records] == [
        ("example_attention", "ok", 8)
    ]


def test_the_example_factories_check_their_parameters():
    sys.path.insert(0, str(ROOT / "examples" / "workloads"))
    try:
        from jaxbench_example_workloads import attention_block, regression_step
    finally:
        sys.path.remove(str(ROOT / "examples" / "workloads"))
    with pytest.raises(ValueError, match=r"d_model \(30\) must be a multiple of heads \(4\)"):
        attention_block(d_model=30, heads=4)
    with pytest.raises(ValueError, match="lr must be > 0"):
        regression_step(lr=0)


def test_a_missing_framework_is_one_line_naming_what_to_install(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "workloads"))
    from jaxbench_example_workloads import frameworks

    real = frameworks.importlib.import_module

    def without_flax(name):
        return real("no_such_module_here" if name == "flax.nnx" else name)

    monkeypatch.setattr(frameworks.importlib, "import_module", without_flax)
    spec = UserWorkload("example_nnx_mlp", frameworks.nnx_mlp)
    with pytest.raises(
        ValueError,
        match=r"^workload 'example_nnx_mlp': ModuleNotFoundError: this "
        r"workload needs flax: pip install 'jaxbench-example-workloads\[flax\]'$",
    ):
        spec.validate({"width": 8, "depth": 1, "batch": 4, "lr": 0.1})


def test_the_asv_template_times_the_example_workload(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "workloads"))
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "asv"))
    import bench_user_workload as template

    monkeypatch.setattr(template, "WORKLOAD", "jaxbench_example_workloads:regression_step")
    bench = template.UserStep()
    bench.setup(64, "cpu")
    bench.time_step(64, "cpu")
    assert bench.case.gate["reference"] == "reference"
    with pytest.raises(NotImplementedError, match="not present"):
        bench.setup(64, "gpu")


def _nnx_attention(monkeypatch, library="nnx", **changes):
    """An example attention block with AdamW (``nnx`` or ``equinox``), as a user workload,
    ``Step`` changed."""
    import dataclasses

    monkeypatch.syspath_prepend(str(ROOT / "examples" / "workloads"))
    from jaxbench_example_workloads import frameworks

    make = getattr(frameworks, f"{library}_attention")

    def factory(d_model: int = 32, heads: int = 4, seq: int = 8, batch: int = 4):
        step = make(d_model=d_model, heads=heads, seq=seq, batch=batch)
        made = {k: v(step) if callable(v) else v for k, v in changes.items()}
        return dataclasses.replace(step, **made)

    return UserWorkload(f"{library}_attention_adamw", factory)


@pytest.mark.slow
def test_an_equinox_attention_step_with_adamw_passes_the_gate_by_its_stated_tolerance(
    monkeypatch,
):
    facts = _nnx_attention(monkeypatch, "equinox").build({}).check()
    (stated,) = facts["leaf_tolerances"].values()
    assert stated["atol"] == 2e-3 and stated["leaves"] == 10
    # without it, the key projection's bias (a gradient within rounding of zero) fails, by name
    bare = _nnx_attention(monkeypatch, "equinox", tolerances={}).build({})
    with pytest.raises(GateFailure, match=r"leaf 0/0/key_proj/bias differs"):
        bare.check()


@pytest.mark.slow
def test_a_flax_nnx_attention_step_with_adamw_passes_the_gate_by_its_stated_tolerance(monkeypatch):
    facts = _nnx_attention(monkeypatch).build({}).check()
    (stated,) = facts["leaf_tolerances"].values()
    assert stated["atol"] == 2e-3 and "Adam step" in stated["reason"] and stated["leaves"] > 4
    # without it, the key bias (zero gradient) moves by +-lr either way and fails, by name
    bare = _nnx_attention(monkeypatch, tolerances={}).build({})
    with pytest.raises(GateFailure, match=r"leaf 0/attn/key/bias(/value)? differs"):
        bare.check()


@pytest.mark.slow
def test_a_wrong_jit_path_of_the_same_model_still_fails_the_gate_naming_the_leaf(monkeypatch):
    import jax

    def wrong(step):  # the jitted step sees the inputs doubled; the reference does not
        return jax.jit(lambda p, o, x, y: step.reference(p, o, 2 * x, y), donate_argnums=(0, 1))

    built = _nnx_attention(monkeypatch, fn=wrong).build({})
    # A weight moves by at most lr whatever its gradient, so AdamW's moments catch it.
    with pytest.raises(GateFailure, match=r"jit vs reference: leaf 1/0/mu/\S+ differs beyond"):
        built.check()


def test_a_tolerance_pattern_that_matches_no_leaf_fails_naming_the_leaves():
    import jax.numpy as jnp

    from jaxbench.workloads import LeafTolerance
    from jaxbench.workloads.base import check_close

    out = {"w": jnp.ones(3), "b": jnp.zeros(2)}
    tol = LeafTolerance(reason="left out on purpose", exclude=True)
    facts = check_close(
        "t", out, {"w": jnp.ones(3), "b": jnp.ones(2)}, "float32", leaves={"b": tol}
    )
    stated = {"reason": "left out on purpose", "rtol": None, "atol": None, "exclude": True}
    assert facts["leaf_tolerances"]["b"] == stated | {"leaves": 1}
    no_leaf = r"^t: tolerance pattern 'bias' matches no output leaf \(leaves: b, w\)$"
    with pytest.raises(GateFailure, match=no_leaf):
        check_close("t", out, out, "float32", leaves={"bias": tol})
    with pytest.raises(ValueError, match=r"LeafTolerance\.reason must say why"):
        LeafTolerance(reason=" ")


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e999"])
def test_a_float_parameter_that_is_not_finite_is_refused(text):
    """JSON stores inf and nan as null: the cases of limit=inf, -inf and nan would be recorded as
    one case with limit=None (and one of them `ok`), so the text is refused before any run."""
    from jaxbench.workloads.user import UserWorkload

    def clip(n: int = 4, limit: float = 1.0):
        raise AssertionError("not called")

    workload = UserWorkload("mod:clip", clip)
    assert workload.parse_param("limit", "2.5") == 2.5
    with pytest.raises(ValueError, match=rf"--param limit='{text}': expected a finite number"):
        workload.parse_param("limit", text)
    with pytest.raises(ValueError, match="expected int"):
        workload.parse_param("n", text)


def test_choosing_cases_leaves_no_step_of_a_user_factory_in_this_process(tmp_path, monkeypatch):
    """Selecting cases calls the factory to check its parameters; the Step it made (e.g. a
    model's parameters on a GPU) is dropped once the cases are chosen, since they run in a
    worker. In the worker, the factory runs under the case's device."""
    import gc
    import weakref

    import jax

    made, devices = [], []

    def big(n: int = 4):
        import jax.numpy as jnp

        from jaxbench.workloads import Step

        devices.append(jax.config.jax_default_device)
        weights = jnp.ones((n, n))
        made.append(weakref.ref(weights))
        return Step(fn=jax.jit(lambda a, w: a @ w), args=(jnp.ones((n, n)), weights))

    module = tmp_path / "bigmod.py"
    module.write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    import bigmod

    monkeypatch.setattr(bigmod, "big", big, raising=False)
    (case,) = select_cases(["bigmod:big"], texts={"n": ["4"]})
    gc.collect()
    assert len(made) == 1 and made[0]() is None  # the weights are gone
    from jaxbench.prepared import prepare

    prepare(case.workload, case.params, backend="cpu", keep=False)
    assert devices[-1] == jax.devices("cpu")[0]


def test_a_failure_whose_message_has_brackets_is_printed_as_it_is(user_module, tmp_path):
    """Rich would read `[/x]` as a closing tag (a MarkupError after the records were written)
    and drop `[n, 4]` as a style: the problem line prints the message as it is."""
    result = runner.invoke(app, ["run", "-w", f"{user_module}:brackets", "--budget", "0",
                                 "--min-samples", "3", "-o", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "bad [/x] tag and [n, 4] shape" in " ".join(result.output.split())


def test_a_step_that_gives_its_reduction_length_is_gated_within_what_its_sums_can_round():
    import jax
    import jax.numpy as jnp

    from jaxbench.workloads import Step

    def step(n):  # the jitted output is 2e-5 relative off its reference: sums rounded otherwise
        return Step(fn=jax.jit(lambda x: x), args=(jnp.full(4, 100.0),),
                    reference=lambda x: x * (1 + 2e-5), reduction_length=n)  # fmt: skip

    with pytest.raises(GateFailure, match=r"differs beyond rtol=1e-05, atol=1e-06 x scale 100"):
        step(None).check()
    with pytest.raises(GateFailure, match=r"differs beyond rtol=1e-05, atol=1e-06 x scale"):
        step(8).check()  # a short sum: the fixed float32 bound, which is wider
    facts = step(512).check()  # 512 terms: 4 n u relative, n u of the scale
    assert facts["rtol"] == 4 * 512 * 2.0**-24 and facts["atol"] == 512 * 2.0**-24
    with pytest.raises(GateFailure, match=r"rtol=0.00012207, atol=3.05176e-05 x scale 100 "):
        Step(
            fn=jax.jit(lambda x: 1.001 * x),
            args=(jnp.full(4, 100.0),),
            reference=lambda x: x,
            reduction_length=512,
        ).check()  # a real error still fails
