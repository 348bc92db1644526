"""Numerical drift: reference saved once, checked by tolerance, findings, bad input, loader.

One reference is saved per module (the compiles are the cost); tests that edit it work on a copy.
The command runs in-process through typer's runner on the real ``jaxbench`` app.
"""

import dataclasses
import json
import shutil

import jax
import numpy as np
import pytest
from typer.testing import CliRunner

from jaxbench.analysis import load_results
from jaxbench.analysis.drift import drift_findings, load_drift
from jaxbench.cli import app
from jaxbench.drift import DRIFT_TOLERANCES, compare
from jaxbench.drift.check import set_method
from jaxbench.drift.reference import read_reference
from jaxbench.drift.sets import families
from jaxbench.drift.tolerance import tolerance
from jaxbench.store import Appender, Record, read_file
from jaxbench.store.drift import DriftRow, ReferenceManifest
from jaxbench.store.scan import store_files
from jaxbench.workloads import WORKLOADS as REGISTERED
from jaxbench.workloads import mlp
from jaxbench.workloads.regression import SET_NAMES, boundary_rows

WORKLOADS = ("train_step", "forward", "loop", "scatter", "transformer")
DTYPES = ("float32", "bfloat16")
ALL_SETS = {(w, d, s) for w in WORKLOADS for d in families()[w].dtypes for s in SET_NAMES}


def replace_outputs(monkeypatch, workload, outputs):
    """Compute ``workload``'s sets with ``outputs`` instead of its declared function."""
    family = REGISTERED[workload]
    monkeypatch.setattr(family, "drift", dataclasses.replace(family.drift, outputs=outputs))


def drift(*args: str):
    return CliRunner().invoke(app, ["drift", *args])


def rows_of(path) -> list[DriftRow]:
    return [DriftRow.model_validate_json(line) for line in path.read_text().splitlines()]


def the_drift_file(out_dir):
    files = sorted(out_dir.glob("drift-*.jsonl"))
    assert len(files) == 1, files
    return files[0]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("drift") / "reference"
    result = drift("--save-reference", "--reference", str(folder))
    assert result.exit_code == 0, result.output
    assert "drift reference saved" in result.stdout
    assert f"(jax {jax.__version__}, cpu)" in " ".join(result.stdout.split())  # "cpu" once
    return folder


@pytest.fixture
def ref(saved, tmp_path):
    """A copy of the saved reference that a test may edit."""
    return shutil.copytree(saved, tmp_path / "reference")


@pytest.fixture(scope="module")
def clean_check(saved, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    result = drift("--reference", str(saved), "-o", str(out))
    return result, the_drift_file(out)


def test_manifest_records_env_tolerances_and_every_set(saved):
    manifest = ReferenceManifest.model_validate_json((saved / "reference.json").read_text())
    assert manifest.env["jax"] == jax.__version__ and manifest.env["backend"] == "cpu"
    assert "device_kind" in manifest.env and "platform_version" in manifest.env
    assert manifest.tolerances == DRIFT_TOLERANCES
    got = {(e.workload, e.dtype, e.set) for e in manifest.sets}
    assert got == ALL_SETS
    by_key = {(e.workload, e.dtype, e.set): e for e in manifest.sets}
    train = by_key[("train_step", "bfloat16", "standard")]
    outs = {o.name: o for o in train.outputs}
    assert outs["loss"].shape == [] and outs["loss"].dtype == "float32"
    assert outs["grad.0.w"].shape == [32, 64] and outs["grad.0.w"].dtype == "bfloat16"
    assert "params_after.2.b" in outs
    loop = {o.name: o for o in by_key[("loop", "float32", "standard")].outputs}
    assert loop["plain.at_set"].shape == loop["linearize.scan_stack"].shape == [64, 64]
    assert loop["grad.at_set"].shape == [64] and ("loop", "bfloat16", "standard") not in by_key
    scat = by_key[("scatter", "float32", "standard")]
    assert {i.name: i.dtype for i in scat.inputs}["idx"] == "int32"
    assert {o.name: o.shape for o in scat.outputs} == {
        "scatter_add": [16, 64], "segment_sum": [16, 64], "gather": [64, 64],
        "embedding_grad": [16, 64]}  # fmt: skip
    lm_set = by_key[("transformer", "bfloat16", "boundary")]
    lm_in = {i.name: i for i in lm_set.inputs}
    assert lm_in["tokens"].shape == [4, 65] and lm_in["tokens"].dtype == "int32"
    assert lm_in["params.layers.1.qkv"].shape == [64, 192]
    assert lm_in["params.embed"].dtype == "float32"  # master weights in either compute dtype
    lm_out = {o.name: o for o in lm_set.outputs}
    assert lm_out["logits"].shape == [4, 64, 512] and lm_out["loss"].shape == []
    assert lm_out["grad.layers.0.down"].shape == [256, 64]
    assert lm_out["grad.embed"].dtype == "float32" and lm_set.reduction_length == 512
    assert by_key[("train_step", "float32", "zeros")].reduction_length == 64
    fwd = {o.name: o for o in by_key[("forward", "float32", "single")].outputs}
    assert fwd["primal"].shape == [1, 8]
    assert fwd["jvp"].shape == fwd["linearize"].shape == [3, 1, 8]
    invalid = by_key[("train_step", "float32", "invalid_shape")]
    assert invalid.outputs == [] and invalid.expect_error.endswith("mlp.BatchShapeError")
    assert invalid.raised.startswith("BatchShapeError: batch x has shape (32, 31)")


def test_saving_then_checking_here_is_within_tolerance_with_errors_recorded(clean_check):
    result, path = clean_check
    assert result.exit_code == 0, result.output
    assert "jaxbench drift" in result.stdout and "finding" not in result.stdout
    import jax  # the version checked is named beside the reference's

    assert f"checked: jax {jax.__version__}, cpu; reference: jax " in " ".join(
        result.stdout.split()
    )
    rows = rows_of(path)
    assert {(r.workload, r.dtype, r.set) for r in rows} == ALL_SETS
    assert all(r.within_tolerance and r.finding is None for r in rows)
    for r in rows:
        assert {"rtol": r.rtol, "atol": r.atol} == set_method(r.workload, {}).tolerance(r.dtype)
        assert r.env["jax"] == jax.__version__ and r.env["backend"] == "cpu"
        assert {"jaxlib", "device_kind", "platform_version"} <= set(r.env)
        assert r.reference.jax == jax.__version__
        if r.set != "invalid_shape":
            assert r.max_abs_err is not None and r.max_abs_err <= 1e-6  # same env: ~equal
            assert r.worst_ratio is not None and r.worst_ratio <= 1
    losses = [r for r in rows if r.output == "loss"]
    assert len(losses) == 2 * 2 * 4  # two workloads x two dtypes x four valid sets
    assert all(r.reference_value is not None and r.current_value is not None for r in losses)
    assert all(r.current_value == pytest.approx(r.reference_value, rel=1e-6) for r in losses)


def test_every_invalid_shape_set_raises_the_workloads_own_error(clean_check):
    _, path = clean_check
    raises = [r for r in rows_of(path) if r.set == "invalid_shape"]
    assert len(raises) == 8 and all(r.output == "raises" and r.raised for r in raises)
    want = {"train_step": "mlp.BatchShapeError", "forward": "forward_mode.TangentShapeError",
            "loop": "loops.LoopShapeError", "scatter": "scatter.ScatterShapeError",
            "transformer": "lm.TokenShapeError"}  # fmt: skip
    for r in raises:
        assert r.error_type.endswith(want[r.workload]) and r.expected_error == r.error_type
        assert "expected" in r.error_message


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("times_bound", "drifts"), [(2.0, True), (0.5, False)])
def test_a_perturbed_reference_loss_is_drift_only_beyond_the_tolerance(
    ref, tmp_path, dtype, times_bound, drifts
):
    npz = ref / f"train_step-{dtype}-standard.npz"
    with np.load(npz) as f:
        arrays = dict(f)
    loss = float(arrays["output.loss"])
    assert 0 < loss < 0.9  # so the scale of atol stays 1 after the perturbation
    tol = DRIFT_TOLERANCES[dtype]
    # The reference r = loss + delta with |r - loss| = k (atol + rtol |r|): k times its bound.
    delta = times_bound * (tol["atol"] + tol["rtol"] * loss) / (1 - times_bound * tol["rtol"])
    arrays["output.loss"] = np.asarray(loss + delta, np.float32)
    delta = float(arrays["output.loss"]) - loss  # as stored, rounded to float32
    np.savez(npz, **arrays)

    result = drift("--reference", str(ref), "-o", str(tmp_path / "out"))
    rows = rows_of(the_drift_file(tmp_path / "out"))
    key = ("train_step", dtype, "standard", "loss")
    (row,) = [r for r in rows if (r.workload, r.dtype, r.set, r.output) == key]
    assert row.reference_value == pytest.approx(loss + delta)
    assert row.max_abs_err == pytest.approx(delta, rel=1e-4)
    assert row.worst_ratio == pytest.approx(times_bound, rel=0.02)
    assert row.within_tolerance is not drifts
    others = [r for r in rows if r is not row]
    assert all(r.within_tolerance for r in others)
    if drifts:
        assert result.exit_code == 1, result.output
        assert f"finding: train_step {dtype} standard loss: max abs error" in result.stdout
        assert "1 of" in result.stderr and "findings" in result.stderr
        assert row.finding.startswith("max abs error")
    else:
        assert result.exit_code == 0, result.output
        assert row.finding is None


def _no_raise(inputs, dtype, device=None):
    """A stand-in workload that accepts the wrong-shape batch (and computes nothing)."""
    return {}


def _wrong_error(inputs, dtype, device=None):
    raise TypeError("dot_general requires contracting dimensions to have the same shape")


@pytest.mark.parametrize(
    ("stand_in", "finding", "raised"),
    [
        (_no_raise, "a wrong-shape input did not raise BatchShapeError", False),
        (_wrong_error, "raised TypeError, not BatchShapeError", True),
    ],
)
def test_an_invalid_shape_that_does_not_raise_the_own_error_is_a_finding(
    saved, tmp_path, monkeypatch, stand_in, finding, raised
):
    replace_outputs(monkeypatch, "train_step", stand_in)
    result = drift("--reference", str(saved), "-o", str(tmp_path))
    assert result.exit_code == 1, result.output
    rows = rows_of(the_drift_file(tmp_path))
    invalid = [r for r in rows if r.workload == "train_step" and r.set == "invalid_shape"]
    assert [r.finding for r in invalid] == [finding] * 2  # both dtypes
    assert all(r.raised is raised and not r.within_tolerance for r in invalid)
    # The stand-in computes no outputs either: each valid output is a finding, still written.
    valid = [r for r in rows if r.workload == "train_step" and r.set != "invalid_shape"]
    assert valid and all(not r.within_tolerance for r in valid)
    assert all(r.within_tolerance for r in rows if r.workload == "forward")
    assert finding in result.stdout


def test_an_edited_manifest_cannot_loosen_the_tolerance(ref, tmp_path):
    manifest = json.loads((ref / "reference.json").read_text())
    manifest["tolerances"]["float32"] = {"rtol": 1.0, "atol": 1.0}
    manifest["sets"][0]["workload"] = "retired"  # a workload this code no longer has
    (ref / "reference.json").write_text(json.dumps(manifest))
    npz = ref / "train_step-float32-single.npz"
    with np.load(npz) as f:
        arrays = dict(f)
    arrays["output.grad.0.b"] = arrays["output.grad.0.b"] + 1e-3  # far beyond 2^-16
    np.savez(npz, **arrays)

    result = drift("--reference", str(ref), "-o", str(tmp_path))
    assert result.exit_code == 1
    assert "note: float32: the reference was saved with tolerance" in result.stdout
    rows = rows_of(the_drift_file(tmp_path))
    (grad,) = [r for r in rows if (r.dtype, r.set, r.output) == ("float32", "single", "grad.0.b")]
    assert not grad.within_tolerance and grad.rtol == DRIFT_TOLERANCES["float32"]["rtol"]
    retired = [r for r in rows if r.workload == "retired"]
    assert retired and all(r.finding == "unknown workload 'retired'" for r in retired)


def test_a_changed_output_dtype_or_a_failing_set_is_a_finding(saved, tmp_path, monkeypatch):
    original = REGISTERED["train_step"].drift.outputs

    def widened(inputs, dtype, device=None):
        if inputs["x"].shape[0] == 1:  # the single sets fail, with brackets in the message
            raise RuntimeError("XLA [internal] broke")
        return {k: np.asarray(v, np.float32) for k, v in original(inputs, dtype, device).items()}

    replace_outputs(monkeypatch, "train_step", widened)
    result = drift("--reference", str(saved), "-o", str(tmp_path))
    assert result.exit_code == 1
    rows = [r for r in rows_of(the_drift_file(tmp_path)) if r.workload == "train_step"]
    grads = [r for r in rows if r.output == "grad.0.w" and r.set == "standard"]
    by_dtype = {r.dtype: r for r in grads}
    assert by_dtype["float32"].within_tolerance
    assert by_dtype["bfloat16"].finding == "dtype float32, reference bfloat16"
    assert by_dtype["bfloat16"].max_abs_err == 0.0  # same values, another dtype
    single = [r for r in rows if r.set == "single"]
    assert single and all(
        r.finding == "computing the set raised RuntimeError: XLA [internal] broke" for r in single
    )
    assert "XLA [internal] broke" in result.stdout


def test_saving_refuses_when_an_invalid_input_does_not_raise(tmp_path, monkeypatch):
    replace_outputs(monkeypatch, "forward", _no_raise)
    result = drift("--save-reference", "--reference", str(tmp_path / "ref"))
    assert result.exit_code == 1
    assert "cannot save a reference: forward float32 " in result.stderr
    assert not (tmp_path / "ref" / "reference.json").exists()


def test_no_reference_is_exit_2_saying_how_to_create_one(tmp_path):
    missing = tmp_path / "nowhere"
    result = drift("--reference", str(missing), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert f"no drift reference in {missing}" in result.stderr
    assert f"jaxbench drift --save-reference --reference {missing}" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    a_file = tmp_path / "afile"
    a_file.write_text("")
    for save in ([], ["--save-reference"]):  # not "create one there", which cannot work
        for where in (a_file, a_file / "ref"):
            result = drift(*save, "--reference", str(where))
            assert result.exit_code == 2
            assert result.stderr.strip() == (
                f"error: --reference {where}: a file is in the way, expected a reference folder"
            )
    # A folder that cannot be written is named before any set is computed.
    result = drift("--save-reference", "--reference", "/proc/nope/ref")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --reference '/proc/nope/ref' is not writable")


def test_saving_onto_a_reference_needs_force_and_leaves_it_untouched(ref):
    before = {p.name: p.read_bytes() for p in ref.iterdir()}
    result = drift("--save-reference", "--reference", str(ref))
    assert result.exit_code == 2
    assert f"a drift reference already exists in {ref}" in result.stderr
    assert "--force" in result.stderr
    assert {p.name: p.read_bytes() for p in ref.iterdir()} == before

    stale = ref / "old.npz"
    manifest = json.loads((ref / "reference.json").read_text())
    manifest["sets"][0]["file"] = stale.name  # an old reference's file, not in the new one
    (ref / "reference.json").write_text(json.dumps(manifest))
    stale.write_bytes(b"old")
    result = drift("--save-reference", "--force", "--reference", str(ref))
    assert result.exit_code == 0, result.output
    assert not stale.exists()
    assert (
        read_reference(ref).manifest.created_at
        != json.loads(before["reference.json"])["created_at"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--force"], "--force only applies with --save-reference"),
        (["--save-reference", "-o", "x"], "--out is for a check"),
        (["-b", "quantum"], "unknown backend 'quantum'"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(saved, tmp_path, args, message):
    result = drift("--reference", str(saved), *args)
    assert result.exit_code == 2 and message in result.stderr
    # The option is named before the reference is looked for: none here.
    result = drift("--reference", str(tmp_path / "none"), *args)
    assert result.exit_code == 2 and message in result.stderr


def _truncate(path):
    path.write_bytes(path.read_bytes()[:100])


def _drop_loss(path):
    with np.load(path) as f:
        arrays = {k: v for k, v in f.items() if k != "output.loss"}
    np.savez(path, **arrays)


def _reshape_x(path):
    with np.load(path) as f:
        arrays = dict(f)
    arrays["input.x"] = arrays["input.x"][:, :4]
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    ("file", "corrupt", "reason"),
    [
        ("train_step-float32-standard.npz", _truncate, "not a readable .npz file"),
        ("train_step-float32-standard.npz", _drop_loss, "array 'output.loss' listed in"),
        ("train_step-float32-standard.npz", _reshape_x, "array 'input.x' has shape (32, 4)"),
        ("forward-bfloat16-zeros.npz", lambda p: p.unlink(), "listed in reference.json but"),
        ("reference.json", lambda p: p.write_text("{not json"), "not a drift reference manifest"),
        (
            "reference.json",
            lambda p: p.write_text('{"kind": "x"}'),
            "kind 'x' is not one this jaxbench reads",
        ),
    ],
)
def test_a_corrupt_reference_file_is_named_and_exit_2(ref, tmp_path, file, corrupt, reason):
    corrupt(ref / file)
    result = drift("--reference", str(ref), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    message = result.stderr.replace("\n", "")
    assert str(ref / file) in message and reason in message, message
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_load_drift_names_bad_files_and_loads_the_rest(clean_check, tmp_path):
    _, good = clean_check
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(good, folder / good.name)
    (folder / "drift-corrupt.jsonl").write_bytes(bytes(range(128, 228)))
    partial = folder / "drift-partial.jsonl"
    lines = good.read_text().splitlines()
    partial.write_text("\n".join([*lines[:3], '{"kind": "jaxbench-drift"', *lines[3:5]]) + "\n")
    run = tmp_path / "run.jsonl"  # a results file named explicitly: foreign to the loader
    with Appender(run) as w:
        w.write(Record(run_id="r", benchmark="train_step", params={}, status="ok", env={}))

    frame, problems = load_drift([folder, run])
    by_file = {p.path: p.reason for p in problems}
    assert set(by_file) == {str(folder / "drift-corrupt.jsonl"), str(partial), str(run)}
    assert by_file[str(run)] == "holds no jaxbench-drift (it holds record)"
    assert by_file[str(partial)].startswith("line 4: not JSON (cut short?)")
    assert "5 loaded" in by_file[str(partial)]
    assert "not UTF-8" in by_file[str(folder / "drift-corrupt.jsonl")]
    # One row per (version, backend, device kind, workload, dtype, set, output): latest wins.
    assert len(frame) == len(lines)
    key = ["version", "backend", "device_kind", "workload", "dtype", "set", "output"]
    assert not frame.duplicated(key).any()
    assert set(frame["jax"]) == {jax.__version__} and list(frame["version"].cat.categories)
    assert set(frame["reference_jax"]) == {jax.__version__}
    assert drift_findings(frame).empty
    everything, _ = load_drift([folder], latest_only=False)
    assert len(everything) == len(lines) + 5


def test_drift_findings_are_the_rows_beyond_tolerance_or_missing_a_raise(
    saved, tmp_path, monkeypatch
):
    from jaxbench.drift.check import check_drift

    replace_outputs(monkeypatch, "forward", _no_raise)
    run = check_drift(saved, tmp_path)
    frame, problems = load_drift(run.path)
    found = drift_findings(frame)
    assert not problems and len(frame) == len(run.rows)
    assert len(found) == len(run.findings) > 0
    assert set(found["workload"]) == {"forward"}
    assert set(found["finding"]) == {
        "output not computed",
        "a wrong-shape input did not raise TangentShapeError",
    }
    assert found["raised"].eq(False).sum() == 2  # the two invalid_shape rows


def test_records_loads_pass_over_drift_files(clean_check, saved, tmp_path):
    _, good = clean_check
    shutil.copy(good, tmp_path / good.name)
    shutil.copytree(good.parent, tmp_path / "sub")
    shutil.copy(saved / "reference.json", tmp_path / "sub" / "reference.json")  # a manifest
    scanned = {f.relative_to(tmp_path).as_posix() for f, _ in store_files([tmp_path])}
    assert {good.name, f"sub/{good.name}", "sub/reference.json"} <= scanned  # read, by content
    frame, problems = load_results([tmp_path])
    assert frame.empty and problems == []


def test_boundary_rows_hold_saturating_tiny_and_signed_zero_values():
    rows = boundary_rows(32, "bfloat16").astype(np.float64)
    assert rows.shape == (8, 32)
    assert np.isfinite(rows).all() and np.abs(rows).max() == 2.0**100
    assert np.abs(rows[3]).min() == 2.0**-126  # the smallest normal
    assert np.signbit(rows[6]).all() and (rows[6] == 0).all()
    assert not np.signbit(rows[5]).any() and (rows[5] == 0).all()


def test_compare_judges_by_tolerance_not_identity():
    ref = np.array([1.0, -2.0, 0.0, 1e-9], np.float32)
    tol = DRIFT_TOLERANCES["float32"]
    scale = 2.0
    at_bound = ref + (tol["atol"] * scale + tol["rtol"] * np.abs(ref)) * 0.999
    c = compare(at_bound, ref, tol)
    assert c.within_tolerance and c.scale == scale and c.worst_ratio <= 1
    assert c.max_rel_err is not None and c.max_rel_err > tol["rtol"]  # the 1e-9 element
    c = compare(ref + 4 * tol["atol"] * scale, ref, tol)
    assert not c.within_tolerance and "exceeds rtol" in c.finding
    c = compare(ref[:3], ref, tol)
    assert not c.within_tolerance and "shape (3,), reference (4,)" in c.finding
    c = compare(np.array([1.0, np.nan, 0.0, 0.0]), ref, tol)
    assert not c.within_tolerance and "current has 1 non-finite values" in c.finding


def test_the_tolerance_grows_with_the_reduction_length_from_its_64_term_values():
    at_64 = {"rtol": 2.0**-16, "atol": 2.0**-18}
    assert tolerance("float32") == DRIFT_TOLERANCES["float32"] == at_64
    assert tolerance("float32", 512) == {"rtol": 2.0**-13, "atol": 2.0**-15}  # 4 n u and n u
    assert tolerance("bfloat16", 512) == {"rtol": 2.0**-5, "atol": 2.0**-5}  # the floor holds
    assert tolerance("bfloat16", 2**20) == {"rtol": 2.0**-2, "atol": 2.0**-4}  # float32 rule
    assert tolerance("bfloat16", 64, 2.0**-3) == {"rtol": 2.0**-3, "atol": 2.0**-3}
    assert set_method("transformer", {}).tolerance("bfloat16") == {"rtol": 0.125, "atol": 0.125}
    assert set_method("transformer", {}).tolerance("float32") == tolerance("float32", 512)
    with pytest.raises(ValueError, match="no drift tolerance for dtype 'int8'"):
        tolerance("int8")
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="reduction_length must be a whole number >= 1"):
            tolerance("float32", bad)


def test_an_unreadable_drift_file_is_named(tmp_path):
    (problem,) = read_file(tmp_path / "drift-gone.jsonl").problems
    assert "cannot be read" in problem.reason
    with pytest.raises(FileNotFoundError, match="no such results file or folder"):
        load_drift(tmp_path / "nowhere")


def test_wrong_batch_raises_batch_shape_error_directly():
    """The invalid_shape set rests on this: the workload checks the batch at trace time."""
    params = [{"w": np.zeros((4, 2), np.float32), "b": np.zeros(2, np.float32)}]
    with pytest.raises(mlp.BatchShapeError):
        mlp.loss(params, (np.zeros((3, 3), np.float32), np.zeros((3, 2), np.float32)))


def test_the_upgrades_findings_are_the_candidates_the_baseline_lacks():
    """A review's exit and JSON count the outputs the upgrade moved: a finding of both versions
    (against a reference saved under a third) was there before it."""
    import pandas as pd

    from jaxbench.analysis.drift import new_findings

    def row(version, output, within):
        return {"version": version, "workload": "train_step", "dtype": "float32", "set": "s1",
                "output": output, "max_abs_err": 0.0 if within else 0.1, "max_rel_err": 0.0,
                "rtol": 1e-5, "atol": 1e-6, "within_tolerance": within}  # fmt: skip

    frame = pd.DataFrame([row("0.11.2", "loss", False), row("0.12.0.1", "loss", False),
                          row("0.11.2", "grad", True), row("0.12.0.1", "grad", False),
                          row("0.11.2", "out", True), row("0.12.0.1", "out", True)])  # fmt: skip
    fresh = new_findings(frame, "0.11.2", "0.12.0.1")
    assert fresh["output"].tolist() == ["grad"] and set(fresh["version"]) == {"0.12.0.1"}
    assert new_findings(None, "0.11.2", "0.12.0.1").empty
    assert new_findings(frame, "0.12.0.1", "0.11.2").empty  # the other way: nothing new
