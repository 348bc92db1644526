"""The CI recipe of docs/ci.md: its script run on two checkouts of a user's package."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

SCRIPT = ROOT / "examples" / "ci" / "compare-pr.sh"
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"

PYPROJECT = """
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "prbench"
version = "0.1.0"

[tool.setuptools]
packages = ["prbench"]
"""

MODULE = '''
import jax
import jax.numpy as jnp

from jaxbench.workloads import Step

REPEATS = {repeats}


def step(n: int = 96) -> Step:
    """A chain of REPEATS matmuls: the head of the pull request does more work."""

    def f(x, w):
        for _ in range(REPEATS):
            x = jnp.tanh(x @ w)
        return x

    return Step(fn=jax.jit(f), args=(jax.ShapeDtypeStruct((n, n), jnp.float32),
                                     jax.ShapeDtypeStruct((n, n), jnp.float32)))
'''


def _checkout(folder, repeats):
    (folder / "prbench").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (folder / "prbench" / "__init__.py").write_text("")
    (folder / "prbench" / "bench.py").write_text(MODULE.format(repeats=repeats))
    return folder


def _recipe(tmp_path, *args):
    env = {**os.environ, "PYTHON": sys.executable, "COLUMNS": "200",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}  # fmt: skip
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip


@pytest.mark.slow
def test_the_recipe_calls_a_slower_pull_request_slower_and_posts_the_summary(tmp_path):
    base = _checkout(tmp_path / "base", repeats=1)
    head = _checkout(tmp_path / "head", repeats=8)
    # relative, as the workflow passes them: folders, never names of packages on the index
    assert (base.parent, head.parent) == (tmp_path, tmp_path)
    done = _recipe(tmp_path, "base", "head", "prbench.bench:step", "--pairs", "3",
                   "--max-pairs", "4", "--rounds", "6")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # compare's: a case is slower
    assert (tmp_path / "jaxbench-verdicts.json").exists(), done.stdout + done.stderr
    verdicts = json.loads((tmp_path / "jaxbench-verdicts.json").read_text())
    assert verdicts["exit_status"] == 1 and verdicts["mode"] == "interleaved"
    (case,) = verdicts["cases"]
    assert case["verdict"] == "slower" and case["ratio"] > 2
    assert case["metric"] == "steady_state"  # as a recorded comparison's rows say it
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## jaxbench compare: ")
    assert "| slower" in summary or "slower |" in summary  # the verdict table, as Markdown
    assert "**Verdicts:** 1 slower." in summary
    assert "Exit status 1: a case is slower, or a case failed." in summary
    # each side's worker imported its own checkout, and the live file says which
    (live,) = (tmp_path / "results").glob("interleave-*.jsonl")
    sides = json.loads(live.read_text().splitlines()[-1])
    for name in ("baseline", "candidate"):
        source = sides[name]["env"]["workload_source"]
        folder = "base" if name == "baseline" else "head"
        assert f".jaxbench-pr/{folder}/" in source["file"], source
        assert (source["distribution"], source["version"]) == ("prbench", "0.1.0")
    # each side imported its own checkout, through the venv the recipe made for it
    side = tmp_path / ".jaxbench-pr" / "base" / "bin" / "python"
    where = subprocess.run([str(side), "-c", "import prbench.bench as b; print(b.REPEATS)"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert where.stdout.strip() == "1"


def test_the_recipe_refuses_a_missing_checkout_in_one_line(tmp_path):
    done = _recipe(tmp_path, str(tmp_path / "nowhere"), str(tmp_path), "m:f")
    assert done.returncode == 2
    assert done.stderr.strip().endswith("nowhere: no such folder (expected a checkout of your "
                                        "repository)")  # fmt: skip
    usage = _recipe(tmp_path, "only-one")
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_the_workflow_runs_the_recipe_on_the_base_and_the_head():
    text = WORKFLOW.read_text()
    assert "on:\n  pull_request:" in text
    assert "ref: ${{ github.event.pull_request.base.sha }}" in text
    run = textwrap.dedent(text.split("run: >-\n", 1)[1]).split("\n- ")[0]
    assert "compare-pr.sh base head mypkg.bench:train_step" in " ".join(run.split())
