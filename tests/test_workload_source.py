"""A user workload's code: found, recorded, installed into JAX-version environments, checked there.

The user's package is a local project "installed" into this interpreter the way pip leaves an
editable install: a ``.dist-info`` folder with PEP 610's ``direct_url.json`` and an entry point,
and the project folder on ``sys.path``. Nothing is installed into the project's venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import editable_dist_info, fake_pip
from typer.testing import CliRunner

from jaxbench.cli import app
from jaxbench.cluster import pyenvs
from jaxbench.workloads.source import (
    environment_requirements,
    requirements,
    source_of,
    unimportable,
    user_workload_names,
)

STEP = """
import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def step(n: int = 4):
    return Step(fn=jax.jit(lambda a: a * 2.0), args=(jnp.ones(n),))
"""
runner = CliRunner()


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


def installed_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    """A git project ``name`` with ``name/bench.py:step``, installed editable from its folder."""
    project = tmp_path / f"{name}-project"
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text("")
    (project / name / "bench.py").write_text(STEP)
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    editable_dist_info(tmp_path / "site", name, project,
                       f"[jaxbench.workloads]\n{name}_step = {name}.bench:step\n")  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(project))
    source_of.cache_clear()
    return project


def test_a_workload_from_a_local_project_is_found_with_its_folder_commit_and_dirty_state(
    tmp_path, monkeypatch
):
    project = installed_project(tmp_path, monkeypatch, "srcpkg_a")
    found = source_of("srcpkg_a.bench:step")
    assert (found.module, found.distribution, found.version) == (
        "srcpkg_a.bench",
        "srcpkg_a",
        "0.3",
    )
    assert found.file == str((project / "srcpkg_a" / "bench.py").resolve())
    assert (found.project, found.editable) == (str(project), True)
    assert (found.commit, found.dirty) == (_git(project, "rev-parse", "HEAD"), False)
    assert requirements(found) == ["-e", str(project)]
    # by its entry point: the same code, the distribution named by the entry point
    by_entry = source_of("srcpkg_a_step")
    assert (by_entry.module, by_entry.distribution, by_entry.project) == (
        "srcpkg_a.bench", "srcpkg_a", str(project))  # fmt: skip
    (project / "srcpkg_a" / "bench.py").write_text(STEP + "\n# edited\n")
    source_of.cache_clear()
    assert source_of("srcpkg_a.bench:step").dirty is True


def test_code_outside_any_distribution_is_said_and_gets_no_requirement(tmp_path, monkeypatch):
    (tmp_path / "loose_mod_b.py").write_text(STEP)
    monkeypatch.syspath_prepend(str(tmp_path))
    source_of.cache_clear()
    found = source_of("loose_mod_b:step")
    assert found.distribution is None and found.project is None and found.commit is None
    assert requirements(found) == []
    reqs, said = environment_requirements(["loose_mod_b:step"], [], None)
    assert reqs == () and "belongs to no installed distribution" in said[0]
    assert user_workload_names(["train_step", "loose_mod_b:step", "loop"]) == ["loose_mod_b:step"]


def test_what_version_environments_get_is_said_only_where_a_side_is_a_version(
    tmp_path, monkeypatch, capsys
):
    from jaxbench.cli.options import VersionEnvOptions

    (tmp_path / "loose_mod_d.py").write_text(STEP)
    monkeypatch.syspath_prepend(str(tmp_path))
    source_of.cache_clear()
    venvs = VersionEnvOptions(env_root=tmp_path / "envs")
    venvs.envs(["loose_mod_d:step"], specs=("current", sys.executable))
    assert capsys.readouterr().err == ""  # no environment is built: nothing to say
    venvs.envs(["loose_mod_d:step"], specs=("current", "0.11.2"))
    assert "-w loose_mod_d:step: loose_mod_d belongs to no installed" in capsys.readouterr().err


def test_environment_requirements_join_the_workloads_with_and_requirements_once(
    tmp_path, monkeypatch
):
    project = installed_project(tmp_path, monkeypatch, "srcpkg_c")
    req_file = tmp_path / "reqs.txt"
    req_file.write_text("optax\n")
    reqs, said = environment_requirements(
        ["srcpkg_c.bench:step", "srcpkg_c_step"], ["flax==0.12", str(tmp_path)], req_file
    )
    assert reqs == ("-e", str(project), "flax==0.12", str(tmp_path.resolve()), "-r",
                    str(req_file.resolve()))  # fmt: skip
    assert len(said) == 2 and f"install -e {project} (srcpkg_c 0.3)" in said[0]
    with pytest.raises(ValueError, match=r"^--requirements .*nope\.txt: no such file$"):
        environment_requirements([], [], tmp_path / "nope.txt")


@pytest.mark.parametrize(
    ("with_", "requirements", "error"),
    [([""], None, r"^--with '': expected a pip requirement or a local project folder"),
     (["./no/such/dir"], None, r"^--with \./no/such/dir: no such folder or file"),
     ([], "FOLDER", r"^--requirements .*: a folder, expected a pip requirements file$")],
)  # fmt: skip
def test_a_bad_with_or_requirements_is_named_before_pip_sees_it(
    tmp_path, with_, requirements, error
):
    given = tmp_path if requirements == "FOLDER" else requirements
    with pytest.raises(ValueError, match=error):
        environment_requirements([], with_, given)


def test_more_requirements_get_an_environment_of_their_own_and_go_to_pip(tmp_path, monkeypatch):
    req_file = tmp_path / "reqs.txt"
    req_file.write_text("optax\n")
    plain = pyenvs.env_dir(tmp_path, "0.11.2", None, "3.13")
    more = pyenvs.env_dir(tmp_path, "0.11.2", None, "3.13", ("-r", str(req_file)))
    assert plain.name == "jax-0.11.2-py3.13" and more.name.startswith("jax-0.11.2-py3.13-u")
    req_file.write_text("optax\nflax\n")  # an edited file: another environment
    assert pyenvs.env_dir(tmp_path, "0.11.2", None, "3.13", ("-r", str(req_file))) != more
    calls = fake_pip(monkeypatch, "0.11.2")
    python = pyenvs.ensure_env(tmp_path, "0.11.2", "/usr/bin/python3", requirements=("-e", "/p"))
    (install,) = [c for c, _ in calls if "install" in c]
    assert install[-4:] == ["jax==0.11.2", "jaxlib==0.11.2", "-e", "/p"]
    marker = json.loads((python.parent.parent / pyenvs.MARKER).read_text())
    assert marker["requirements"] == ["-e", "/p"]


def test_an_interpreter_that_cannot_find_the_workload_is_named_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "here_only_d.py").write_text(STEP)
    monkeypatch.syspath_prepend(str(tmp_path))  # this process finds it; a fresh one does not
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert unimportable(sys.executable, ["here_only_d:step"]) == (
        "--workload 'here_only_d:step': cannot import here_only_d: ModuleNotFoundError: No "
        "module named 'here_only_d'"
    )
    assert unimportable(sys.executable, []) is None
    envs = pyenvs.VersionEnvs(tmp_path, workloads=("here_only_d:step",))
    with pytest.raises(pyenvs.WorkloadNotFound) as info:
        envs.check(sys.executable, "the JAX 0.11.2 environment (F)")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # now a fresh interpreter finds it too
    assert unimportable(sys.executable, ["here_only_d:step"]) is None
    assert "\n" not in str(info.value) and "here_only_d" in str(info.value)
    assert str(info.value).endswith(
        "in the JAX 0.11.2 environment (F); install what it needs there with --with PKG or "
        "--requirements FILE"
    )
    # a module that imports there and raises: no package to install, so no such advice
    (tmp_path / "needs_newer_d.py").write_text("raise ImportError('needs jax.newfeature')\n")
    envs = pyenvs.VersionEnvs(tmp_path, workloads=("needs_newer_d:step",))
    with pytest.raises(pyenvs.WorkloadNotFound) as info:
        envs.check(sys.executable, "the JAX 0.11.2 environment (F)")
    said = str(info.value)
    assert "ImportError: needs jax.newfeature" in said and "--with" not in said
    assert said.endswith("(F): it fails to load under that environment's JAX or packages, not "
                         "for want of one")  # fmt: skip


@pytest.mark.parametrize("command", ["review", "compare --interleave", "explain"])
def test_a_version_the_index_lacks_on_either_side_stops_before_any_environment_is_built(
    command, tmp_path, monkeypatch
):
    built, asked = [], []
    monkeypatch.setattr(pyenvs, "ensure_env", lambda *a, **k: built.append(a))

    def index_versions(python, package, extra_index_url=None):
        asked.append(package)
        return ["0.12.0.1", "0.11.2"]

    monkeypatch.setattr(pyenvs, "index_versions", index_versions)
    result = runner.invoke(app, [*command.split(), "0.11.2", "9.9.9", "-w", "loop",
                                 "-o", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2, result.output
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert error == ["error: candidate '9.9.9': jax 9.9.9 is not on the package index for "
                     f"{pyenvs.base_python(None)} (newest offered: 0.12.0.1, 0.11.2)"]  # fmt: skip
    assert built == [] and "jax" in asked
    # a version older than jaxbench's own jax requirement: refused before pip is asked
    asked.clear()
    result = runner.invoke(app, [*command.split(), "0.9.2", "0.11.2", "-w", "loop",
                                 "-o", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "error: baseline '0.9.2': JAX 0.9.2: jaxbench runs on jax>=0.10" in result.output
    assert built == [] and asked == []


def test_review_of_one_version_twice_and_an_interpreter_without_jax_build_nothing(
    tmp_path, monkeypatch
):
    import importlib.metadata

    built = []
    monkeypatch.setattr(pyenvs, "ensure_env", lambda *a, **k: built.append(a))
    current = importlib.metadata.version("jax")
    monkeypatch.setattr(pyenvs, "index_versions", lambda *a, **k: [current, "0.11.2"])
    result = runner.invoke(app, ["review", "current", current, "-w", "loop",
                                 "-o", str(tmp_path / "rev")])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"current and {current} both import JAX {current}: a review" in result.output
    no_jax = tmp_path / "python"  # an interpreter whose workers could not import JAX
    no_jax.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'jax'\" >&2\n"
                      "exit 1\n")  # fmt: skip
    no_jax.chmod(0o755)
    for command in (["compare", "--interleave"], ["explain"]):
        result = runner.invoke(app, [*command, "current", str(no_jax), "-w", "loop",
                                     "--param", "trip=20", "--param", "width=1"])  # fmt: skip
        assert result.exit_code == 2, result.output
        error = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert error == [f"error: candidate {str(no_jax)!r}: cannot run a worker: "
                         "ModuleNotFoundError: No module named 'jax'"]  # fmt: skip
    assert built == []


@pytest.mark.slow
def test_a_version_environment_without_the_users_package_stops_the_review_before_measuring(
    tmp_path, monkeypatch
):
    """``review`` builds both environments first; one that lacks the module: exit 2, one line."""
    project = installed_project(tmp_path, monkeypatch, "srcpkg_e")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    built = []

    def fake_env(root, version, base, extra=None, index=None, requirements=()):
        built.append((version, requirements))
        return Path(sys.executable)  # an interpreter without srcpkg_e

    monkeypatch.setattr(pyenvs, "ensure_env", fake_env)
    monkeypatch.setattr(pyenvs, "check_versions", lambda *a, **k: None)
    started = []
    monkeypatch.setattr("jaxbench.upgrade.screen.run_process", lambda *a: started.append(a))
    result = runner.invoke(app, ["review", "0.11.2", "0.12.0.1", "-w", "srcpkg_e.bench:step",
                                 "--with", "optax", "-o", str(tmp_path / "rev")])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert built == [("0.11.2", ("-e", str(project), "optax"))] and not started
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "cannot import srcpkg_e.bench" in error[0]
    assert "the JAX 0.11.2 environment" in error[0] and "--with PKG" in error[0]
    assert not (tmp_path / "rev").exists()


@pytest.mark.slow
def test_a_run_records_the_code_of_its_user_workload_and_dirty_runs_are_kept_apart(
    tmp_path, monkeypatch
):
    from jaxbench.analysis import load_results
    from jaxbench.analysis.conditions import condition_fields

    project = installed_project(tmp_path, monkeypatch, "srcpkg_f")
    args = ["run", "-w", "srcpkg_f.bench:step", "--budget", "0", "--min-samples", "5",
            "--in-process"]  # fmt: skip
    assert runner.invoke(app, [*args, "-o", str(tmp_path / "clean")]).exit_code == 0
    (project / "srcpkg_f" / "bench.py").write_text(STEP + "\n# edited\n")
    source_of.cache_clear()
    assert runner.invoke(app, [*args, "-o", str(tmp_path / "dirty")]).exit_code == 0
    frame, problems = load_results([tmp_path / "clean", tmp_path / "dirty"])
    assert not problems and len(frame) == 2
    sources = [env.workload_source for env in frame["env"]]
    assert {s.dirty for s in sources} == {False, True}
    assert all(s.commit == _git(project, "rev-parse", "HEAD") for s in sources)
    assert all(s.project == str(project) and s.version == "0.3" for s in sources)
    dirty = condition_fields(frame, ["workload_dirty"])["workload_dirty"]
    assert dirty.nunique() == 2


@pytest.mark.slow
def test_a_review_checks_drift_of_the_selected_user_workload_against_the_baselines_outputs(
    tmp_path, monkeypatch
):
    """The baseline saves the user workload's reference; each side checks it; the report says."""
    from jaxbench.analysis.drift import load_drift
    from jaxbench.analysis.report_tables import checked_sets
    from jaxbench.cases import select_cases
    from jaxbench.cli.review import _drift, _drift_checks, _user_reference
    from jaxbench.upgrade.screen import Side

    (tmp_path / "drift_mod_g.py").write_text(STEP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the sides' interpreters find it too
    cases = select_cases(["drift_mod_g:step"], overrides={"n": [8]})
    checks = _drift_checks(cases, tmp_path / "rev")
    assert checks == [("drift_mod_g:step", ["n=8"],
                       tmp_path / "rev" / "drift-reference" / "drift_mod_g-step")]  # fmt: skip
    sides = [Side(v, sys.executable, tmp_path / "rev" / v) for v in ("0.11.2", "0.12.0.1")]
    logs = tmp_path / "rev" / "logs"
    _, params, ref = checks[0]
    assert _user_reference(sides[0], "cpu", logs, "drift_mod_g:step", params, ref) is None
    for side in sides:
        assert _drift(side, "cpu", None, logs, checks) == ["within tolerance"]
    assert _drift(sides[1], "cpu", None, logs, checks) == ["reused"]
    frame, problems = load_drift([tmp_path / "rev"])
    assert not problems and set(frame["workload"]) == {"drift_mod_g:step"}
    assert "`drift_mod_g:step` (1 set(s): `standard n=8`" in checked_sets(frame)
    both = select_cases(["loop", "drift_mod_g:step"])
    assert [w for w, _, _ in _drift_checks(both, tmp_path)] == [None, "drift_mod_g:step"]


TOLERANT = """
import os

import jax
import jax.numpy as jnp

from jaxbench.workloads import LeafTolerance, Step

SHIFT = float(os.environ.get("TOLERANT_SHIFT", "0"))


def step(n: int = 4):
    def fn(a):
        return {"kept": a * 2.0, "noisy": a + SHIFT, "loose": a * (1.0 + SHIFT)}

    return Step(fn=jax.jit(fn), args=(jnp.ones(n),), tolerances={
        "noisy": LeafTolerance(reason="moves with the shift", exclude=True),
        "loose": LeafTolerance(reason="scaled by the shift", rtol=0.1),
    })
"""


@pytest.mark.slow
def test_drift_of_a_user_workload_keeps_its_stated_tolerances_and_records_why(tmp_path):
    """Saved with no shift, checked with one: the excluded and loosened leaves are no finding."""
    import os

    from conftest import run_cli

    from jaxbench.store import read_file

    (tmp_path / "tolerant_h.py").write_text(TOLERANT)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    ref, out = tmp_path / "ref", tmp_path / "out"
    saved = run_cli("drift", "-w", "tolerant_h:step", "--save-reference", "--reference",
                    str(ref), env=env)  # fmt: skip
    assert saved.returncode == 0, saved.stdout + saved.stderr
    checked = run_cli("drift", "-w", "tolerant_h:step", "--reference", str(ref), "-o", str(out),
                      env=env | {"TOLERANT_SHIFT": "0.05"})  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (path,) = out.glob("drift-*.jsonl")
    rows = {r.output: r for r in read_file(path, strict=True).models("jaxbench-drift")}
    assert all(r.within_tolerance for r in rows.values())
    assert rows["out.noisy"].tolerance_reason == "excluded: moves with the shift"
    assert rows["out.loose"].rtol == 0.1 and rows["out.loose"].max_rel_err > 0.04
    assert rows["out.kept"].tolerance_reason is None
    strict = run_cli("drift", "-w", "tolerant_h:step", "--reference", str(ref), "-o",
                     str(out), env=env | {"TOLERANT_SHIFT": "0.5"})  # fmt: skip
    assert strict.returncode == 1  # past rtol 0.1: a finding


def test_the_drift_tables_loss_is_a_floating_scalar_not_an_optimizers_step_count():
    from jaxbench.cli.drift import _loss_cell
    from jaxbench.store import DriftRow

    def row(output, dtype, ref, now):
        return DriftRow.model_construct(output=output, output_dtype=dtype, reference_value=ref,
                                        current_value=now, within_tolerance=True)  # fmt: skip

    rows = [row("out.1.0.count", "int32", 1, 1), row("out.2", "float32", 0.5, 0.25)]
    assert _loss_cell(rows) == "0.5 -> 0.25"
    assert _loss_cell([*rows, row("loss", "float32", 2.0, 3.0)]) == "2 -> 3"


def test_a_local_project_whose_dependencies_changed_gets_a_new_environment(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = []\n')
    before = pyenvs.env_dir(tmp_path, "0.11.2", None, "3.13", ("-e", str(project)))
    (project / "mod.py").write_text("x = 1\n")  # code: installed editable, same environment
    assert pyenvs.env_dir(tmp_path, "0.11.2", None, "3.13", ("-e", str(project))) == before
    (project / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = ["optax"]\n')
    assert pyenvs.env_dir(tmp_path, "0.11.2", None, "3.13", ("-e", str(project))) != before


def test_the_code_digest_follows_every_file_of_the_package_and_a_review_refuses_other_code(
    tmp_path, monkeypatch
):
    """A review re-run after the model changed reused the old model's processes, silently: the
    records keep the digest of the package's files, and a folder of other code is refused."""
    from jaxbench.store import Record, write_jsonl
    from jaxbench.store.record import WorkloadSource
    from jaxbench.upgrade.screen import other_code
    from jaxbench.workloads.source import code_digest

    pkg = tmp_path / "src" / "digested"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text("WIDTH = 64\n")
    (pkg / "bench.py").write_text(STEP)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    before = code_digest("digested.bench", str(pkg / "bench.py"))
    assert before and before == code_digest("digested.bench", str(pkg / "bench.py"))
    (pkg / "model.py").write_text("WIDTH = 128\n")  # another file of the package than the factory's
    after = code_digest("digested.bench", str(pkg / "bench.py"))
    assert after and after != before
    scripts = tmp_path / "scripts"  # modules outside a package: the folder's, beside each other
    scripts.mkdir()
    (scripts / "wrap.py").write_text("from model import step\n")
    (scripts / "model.py").write_text(STEP)
    alone = code_digest("no_such_top_level_x", str(scripts / "wrap.py"))
    (scripts / "model.py").write_text(STEP + "\n# edited\n")  # where the model lives
    assert (
        alone is not None and code_digest("no_such_top_level_x", str(scripts / "wrap.py")) != alone
    )

    folder = tmp_path / "review" / "0.12.0.1"
    source = WorkloadSource(workload="digested.bench:step", digest=before)
    write_jsonl(folder / "run-0.jsonl", [Record(run_id="r", benchmark="digested.bench:step",
                                                params={"n": 4}, status="ok",
                                                env={"workload_source": source})])  # fmt: skip
    review = tmp_path / "review"
    assert other_code(review, {"digested.bench:step": before}) is None
    assert other_code(review, {"digested.bench:step": None}) is None  # unknown now: not held
    said = other_code(review, {"digested.bench:step": after})
    assert said is not None and said.startswith(f"{review} holds runs of digested.bench:step "
                                                "measured from other code")  # fmt: skip
    assert "give another --out" in said
