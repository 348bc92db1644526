"""``jaxbench drift --workload``: a user workload's own step saved once, then checked by tolerance.

The factories live in a module written per test onto ``sys.path`` (as ``test_user_workloads``).
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from jaxbench.cli import app
from jaxbench.drift.tolerance import tolerance
from jaxbench.store.drift import DriftRow, ReferenceManifest
from jaxbench.workloads import user

FACTORIES = """
import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def mlp(n: int = 8, length: int = 0):
    w = jax.ShapeDtypeStruct((n, n), jnp.float32)
    x = jax.ShapeDtypeStruct((4, n), jnp.float32)
    idx = jnp.arange(4, dtype=jnp.int32) % 2

    def step(params, x, idx):
        h = jnp.tanh(x @ params["w"])
        return {"h": h, "pooled": jax.ops.segment_sum(h, idx, num_segments=2)}

    return Step(fn=jax.jit(step), args=({"w": w}, x, idx), reduction_length=length or None)


def half(n: int = 8):
    return Step(fn=jax.jit(lambda a: (a * 2).astype(jnp.bfloat16)),
                args=(jax.ShapeDtypeStruct((n,), jnp.float32),))


def counts(n: int = 8):
    idx = jnp.arange(n, dtype=jnp.int32)
    return Step(fn=jax.jit(lambda i, x: {"big": i + 5_000_000, "sum": x.sum()}),
                args=(idx, jax.ShapeDtypeStruct((n,), jnp.float32)))


def brackets():
    raise ValueError("shape [n, 4] must be square :smile:")


def refuses(n: int = 8):
    if n != 8:
        raise ValueError(f"n must be 8, got {n}")
    return mlp(n)
"""


def drift(*args: str):
    return CliRunner().invoke(app, ["drift", *args])


@pytest.fixture
def module(tmp_path, monkeypatch):
    folder = tmp_path / "src"
    folder.mkdir()
    name = f"drift_factories_{tmp_path.name.replace('-', '_')}"
    (folder / f"{name}.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(folder))
    yield name
    sys.modules.pop(name, None)
    for key in [k for k in user._FOUND if k.startswith(name)]:
        user._FOUND.pop(key)


def manifest_of(folder) -> ReferenceManifest:
    return ReferenceManifest.model_validate_json((folder / "reference.json").read_text())


def saved_with_edited_output(name: str, ref, output: str, edit) -> None:
    """Save ``name``'s reference in ``ref``; replace its one set's ``output`` by ``edit``."""
    assert drift("-w", name, "--save-reference", "--reference", str(ref)).exit_code == 0
    (entry,) = manifest_of(ref).sets
    npz = ref / entry.file
    with np.load(npz) as f:
        arrays = dict(f)
    arrays[f"output.{output}"] = edit(arrays[f"output.{output}"])
    np.savez(npz, **arrays)


def rows_in(out) -> list[DriftRow]:
    (path,) = out.glob("drift-*.jsonl")
    return [DriftRow.model_validate_json(line) for line in path.read_text().splitlines()]


def test_a_user_workload_is_saved_per_case_and_checks_clean_with_its_derived_tolerance(
    module, tmp_path
):
    ref, out = tmp_path / "ref", tmp_path / "out"
    name = f"{module}:mlp"
    saved = drift("-w", name, "--param", "n=8", "--param", "n=16", "--param", "length=4096",
                  "--save-reference", "--reference", str(ref))  # fmt: skip
    assert saved.exit_code == 0, saved.output
    assert "gives no Step.reduction_length" not in saved.stdout
    manifest = manifest_of(ref)
    assert manifest.size is None and manifest.schema_version == 2
    by_set = {e.set: e for e in manifest.sets}
    assert set(by_set) == {"standard length=4096 n=8", "standard length=4096 n=16"}
    entry = by_set["standard length=4096 n=16"]
    assert entry.params == {"n": 16, "length": 4096} and entry.reduction_length == 4096
    assert entry.workload == name and entry.dtype == "float32" and entry.expect_error is None
    inputs = {i.name: (i.shape, i.dtype) for i in entry.inputs}
    assert inputs == {"arg.0.w": ([16, 16], "float32"), "arg.1": ([4, 16], "float32"),
                      "arg.2": ([4], "int32")}  # fmt: skip
    assert {o.name: o.shape for o in entry.outputs} == {"out.h": [4, 16], "out.pooled": [2, 16]}
    assert all(":" not in e.file for e in manifest.sets)

    checked = drift("-w", name, "--reference", str(ref), "-o", str(out))
    assert checked.exit_code == 0, checked.output
    rows = rows_in(out)
    assert len(rows) == 4 and all(r.within_tolerance for r in rows)
    assert all(r.max_abs_err == 0.0 for r in rows)  # same program, same inputs, same machine
    assert {(r.rtol, r.atol) for r in rows} == {tuple(tolerance("float32", 4096).values())}
    assert tolerance("float32", 4096) == {"rtol": 2.0**-10, "atol": 2.0**-12}


def test_an_output_moved_past_its_bound_is_a_finding_and_exit_1(module, tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "out"
    name = f"{module}:mlp"
    atol = tolerance("float32")["atol"]  # no reduction_length: 64 terms
    saved_with_edited_output(
        name, ref, "out.pooled", lambda a: a + 3 * atol * max(1.0, float(np.abs(a).max()))
    )

    result = drift("-w", name, "--reference", str(ref), "-o", str(out))
    assert result.exit_code == 1, result.output
    assert f"finding: {name} float32 standard length=0 n=8 out.pooled" in result.stdout
    bad = [r for r in rows_in(out) if not r.within_tolerance]
    assert [r.output for r in bad] == ["out.pooled"] and bad[0].worst_ratio > 1


def test_the_default_reference_folder_the_dtype_and_the_length_note(module, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = f"{module}:half"
    saved = drift("-w", name, "--save-reference")
    assert saved.exit_code == 0, saved.output
    assert "gives no Step.reduction_length: its tolerance assumes sums of at most 64" in (
        saved.stdout.replace("\n", " ")
    )
    folder = tmp_path / "results" / "drift" / f"{module}-half"
    (entry,) = manifest_of(folder).sets
    assert entry.dtype == "bfloat16"  # the outputs' lowest precision, as the gate's rule
    checked = drift("-w", name, "-o", str(tmp_path / "out"))
    assert checked.exit_code == 0, checked.output
    assert {(r.rtol, r.atol) for r in rows_in(tmp_path / "out")} == {(2.0**-5, 2.0**-5)}


def test_a_factory_that_now_refuses_its_saved_parameters_is_a_finding(module, tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "out"
    name = f"{module}:refuses"
    assert drift("-w", name, "--save-reference", "--reference", str(ref)).exit_code == 0
    manifest = json.loads((ref / "reference.json").read_text())
    manifest["sets"][0]["params"] = {"n": 5}
    (ref / "reference.json").write_text(json.dumps(manifest))
    result = drift("-w", name, "--reference", str(ref), "-o", str(out))
    assert result.exit_code == 1
    rows = rows_in(out)
    assert rows and all(not r.within_tolerance for r in rows)
    assert "n must be 8, got 5" in rows[0].finding


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--param", "n=8"], "--param needs --workload"),
        (["-w", "train_step", "--save-reference"], "--workload train_step: a built-in family"),
        (["-w", "no_such_module_x:f", "--save-reference"], "cannot import no_such_module_x"),
        (["-w", "{m}:refuses", "--param", "n=3", "--save-reference"], "n must be 8, got 3"),
        (["-w", "{m}:mlp", "--param", "depth=2", "--save-reference"], "--param depth"),
        (["-w", "{m}:mlp"], "jaxbench drift --save-reference --workload {m}:mlp"),
        (["-w", "{m}:mlp", "--param", "n=4"], "--param applies with --save-reference"),
        (["-w", "train_step"], "--workload train_step: a built-in family"),
        # the names offered are of user workloads only: drift refuses a built-in family
        (["-w", "nosuch"], "unknown workload 'nosuch'; give package.module:factory"),
        (["-w", "no_such_module_x:f"], "cannot import no_such_module_x"),
        (["-w", "{m}:brackets", "--save-reference"], "shape [n, 4] must be square :smile:"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(module, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = drift(*(a.format(m=module) for a in args))
    assert result.exit_code == 2, result.output
    assert message.format(m=module) in result.stderr.replace("\n", " ")
    assert "Traceback" not in result.output


def test_a_reference_without_the_named_workload_is_refused(module, tmp_path):
    ref = tmp_path / "ref"
    assert drift("-w", f"{module}:mlp", "--save-reference", "--reference", str(ref)).exit_code == 0
    result = drift("-w", f"{module}:half", "--reference", str(ref), "-o", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert "holds no set of it" in result.stderr and not (tmp_path / "o").exists()


def test_a_reference_whose_workload_cannot_be_imported_here_is_a_setup_error(
    module, tmp_path, monkeypatch
):
    """Without -w, the import error was written as a drift row and exited 1, as drift."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert drift("-w", f"{module}:mlp", "--save-reference", "--reference", str(ref)).exit_code == 0
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path / "src")])
    sys.modules.pop(module, None)
    for key in [k for k in user._FOUND if k.startswith(module)]:
        user._FOUND.pop(key)
    result = drift("--reference", str(ref), "-o", str(out))
    assert result.exit_code == 2, result.output
    assert (f"--reference {ref}: it holds sets of {module}:mlp, which this interpreter cannot "
            f"load: cannot import {module}") in result.stderr.replace("\n", " ")  # fmt: skip
    assert not out.exists()


def test_an_integer_output_is_compared_exactly(module, tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "out"
    name = f"{module}:counts"

    def one_more(big):
        assert big.dtype == np.int32
        big[3] += 1  # 5000003 -> 5000004: far inside any scaled tolerance
        return big

    saved_with_edited_output(name, ref, "out.big", one_more)
    result = drift("-w", name, "--reference", str(ref), "-o", str(out))
    assert result.exit_code == 1, result.output
    rows = {r.output: r for r in rows_in(out)}
    big = rows["out.big"]
    assert not big.within_tolerance and (big.rtol, big.atol) == (0.0, 0.0)
    assert big.finding == "1 of 8 elements differ (an integer output, compared exactly)"
    assert rows["out.sum"].within_tolerance and rows["out.sum"].rtol > 0
