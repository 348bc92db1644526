"""A user's package reviewed across two real JAX versions: installed where the review runs it.

The package is a local project built here, visible to the project's interpreter only (its
``.dist-info`` with PEP 610's ``direct_url.json``, as pip leaves an editable install, on
``PYTHONPATH``). The review compares JAX 0.11.2 (its environment built by the review, which
must install the package from its folder) with this interpreter's JAX (``current``). This is the
one test that builds a JAX-version environment from the package index: about a minute.
"""

from __future__ import annotations

import os
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from conftest import editable_dist_info, run_cli

BASELINE = "0.11.2"
PACKAGE = "reviewed_pkg"
STEP = """
import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def step(n: int = 64):
    return Step(fn=jax.jit(lambda a: jnp.tanh(a) * 2.0), args=(jnp.linspace(-1.0, 1.0, n),))
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """The package's folder (a buildable project) and the site folder that 'installs' it."""
    project = tmp_path / "project"
    (project / PACKAGE).mkdir(parents=True)
    (project / PACKAGE / "__init__.py").write_text("")
    (project / PACKAGE / "bench.py").write_text(STEP)
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "{PACKAGE}"\nversion = "0.3"\n'
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    editable_dist_info(tmp_path / "site", PACKAGE, project)
    return project, tmp_path / "site"


@pytest.mark.slow
def test_a_users_package_is_installed_into_the_version_environment_and_reviewed(tmp_path):
    project, site = _project(tmp_path)
    envs, out = tmp_path / "envs", tmp_path / "review"
    path = os.pathsep.join([str(site), str(project)])
    done = run_cli("review", BASELINE, "current", "-w", f"{PACKAGE}.bench:step", "--processes",
                   "2", "--budget", "0", "--min-samples", "5", "--warmup", "1", "--pairs", "2",
                   "--max-pairs", "2", "--env-root", str(envs), "-o", str(out),
                   env={"PYTHONPATH": path}, timeout=900)  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: the case is slower
    (python,) = envs.glob(f"jax-{BASELINE}-*/bin/python")
    # installed in the version's environment: found there without PYTHONPATH, from its folder
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
                           capture_output=True, text=True, env=alone)  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(project.resolve())
    report = (out / "report" / "report.md").read_text()
    current = metadata.version("jax")
    assert report.startswith(f"# JAX version review: {BASELINE} → {current}")
    drift = report.split("## Numerical drift", 1)[1].split("\n## ", 1)[0]
    assert f"`{PACKAGE}.bench:step` (1 set(s): `standard n=64`; JAX {BASELINE}, {current})" in drift
    assert "within tolerance" in drift
