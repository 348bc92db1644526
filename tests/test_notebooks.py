"""analysis/*.py notebooks: each runs top to bottom (jupytext + nbclient) on the test venv's Python.

The notebooks read ``JAXBENCH_RESULTS``. They run against a synthetic folder written here (with
known regressions), and against the committed ``results/versions`` (real runs of three JAX
versions).
"""

import re
import tempfile
from pathlib import Path

import jupytext
import pytest
from analysis_data import (
    PROCESSES,
    REVIEW_VERSIONS,
    SLOWER_CASE,
    review_records,
    write,
    write_versions,
)

from jaxbench.analysis.notebook import DEFAULT_RESULTS, RESULTS_ENV, repo_root, results_dir
from jaxbench.analysis.notebook_run import NOTEBOOKS, NotebookError, execute_notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "analysis"
COMMITTED = ROOT / DEFAULT_RESULTS


@pytest.fixture(scope="module")
def synthetic_results(tmp_path_factory):
    return write_versions(tmp_path_factory.mktemp("results") / "versions", n=40)


def execute(name):
    """Run ``analysis/<name>.py`` as ``jaxbench notebook`` does; return the executed notebook."""
    return execute_notebook(name)


def outputs(nb):
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def text_of(nb):
    parts = []
    for out in outputs(nb):
        data = out.get("data", {})
        parts += [data.get("text/plain", ""), data.get("text/markdown", ""), out.get("text", "")]
    return "\n".join(parts)


def test_notebook_text_describes_the_verdict_rule_over_processes():
    text = (NOTEBOOK_DIR / "upgrade_review.py").read_text()
    assert "The process is the unit" in text and "Welch" in text
    for verdict in ("slower", "faster", "same", "inconclusive", "unstable"):
        assert f"`{verdict}`" in text
    for gone in ("bootstrap", "Mann-Whitney", "`unchanged`", "n_resamples"):
        assert gone not in text, gone
    assert "bootstrap" not in (NOTEBOOK_DIR / "latency_distributions.py").read_text()


def test_notebooks_are_percent_scripts_paired_with_ipynb():
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.py")) == sorted(NOTEBOOKS)
    assert 'formats = "ipynb,py:percent"' in (NOTEBOOK_DIR / "jupytext.toml").read_text()
    for name in NOTEBOOKS:
        nb = jupytext.read(NOTEBOOK_DIR / f"{name}.py")
        assert nb.metadata["jupytext"]["formats"] == "ipynb,py:percent"
        assert [c.cell_type for c in nb.cells][:2] == ["markdown", "code"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_synthetic_results(name, synthetic_results, monkeypatch):
    monkeypatch.setenv(RESULTS_ENV, str(synthetic_results))
    nb = execute(name)
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs(nb)), "no figure shown"
    text = text_of(nb)
    assert str(synthetic_results) in text  # it read the folder it was pointed at
    if name == "upgrade_review":
        (cell,) = [c for c in nb.cells if "comparison_table(review.regressions)" in c.source]
        html = cell.outputs[0]["data"]["text/html"]
        assert SLOWER_CASE in html and f"{PROCESSES}+{PROCESSES}" in html  # processes shown
        assert "**2 slower**, **0 faster**" in text  # the verdict counts, beside the others
        assert "inconclusive" in text and "unstable" in text
    if name == "latency_distributions":
        # The summary lists each case's versions in version order (text order: 0.4.10 first).
        (cell,) = [c for c in nb.cells if c.source.startswith("summary = ")]
        table = cell.outputs[0]["data"]["text/plain"]
        found = re.findall(r"\b(0\.4\.9|0\.4\.10|0\.5\.0)\b", table)
        assert found[:3] == list(REVIEW_VERSIONS)


def test_the_upgrade_review_of_one_version_says_there_is_nothing_to_compare(tmp_path, monkeypatch):
    """Also: the kernel's connection file goes with its temporary folder (it was left in /tmp)."""
    for p in range(2):
        write(tmp_path / f"run-{p}.jsonl", review_records(REVIEW_VERSIONS[0], 0, 20, p))
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    nb = execute("upgrade_review")
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    assert "compared none (one version: nothing to compare" in text_of(nb)
    assert list(temp.iterdir()) == []


# Against the committed real results (three JAX versions): mandatory.
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_committed_results(name, monkeypatch):
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    nb = execute(name)
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    assert str(COMMITTED) in text_of(nb)


def test_results_folder_is_found_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULTS_ENV, "results/cpu")
    assert repo_root(ROOT / "analysis") == ROOT
    assert results_dir(ROOT / "analysis") == ROOT / "results" / "cpu"
    monkeypatch.chdir(tmp_path)  # outside the checkout: the imported package's checkout
    assert results_dir() == ROOT / "results" / "cpu"
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match=f"nope.*{RESULTS_ENV}"):
        results_dir()


def test_the_notebook_command_saves_the_executed_notebook_and_names_bad_input(tmp_path):
    import nbformat

    from tests.conftest import run_cli

    results = write_versions(tmp_path / "versions", n=20)
    out = run_cli("notebook", "latency_distributions", "-r", str(results), "-o",
                  str(tmp_path / "nb.ipynb"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "IPKernelApp" not in out.stderr  # the kernel app's own warnings are not shown
    nb = nbformat.read(tmp_path / "nb.ipynb", as_version=4)
    assert str(results) in text_of(nb)
    bad = run_cli("notebook", "nope")
    assert bad.returncode == 2 and "unknown notebook 'nope'" in bad.stderr
    empty = run_cli("notebook", "")  # the name, not the --out it would make
    assert empty.stderr.startswith("error: unknown notebook ''; choose from"), empty.stderr
    missing = run_cli("notebook", "upgrade_review", "-r", str(tmp_path / "none"))
    assert missing.returncode == 2 and "--results" in missing.stderr
    # An unwritable --out is named before the notebook runs (on an empty folder it would fail).
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("")
    blocked = run_cli("notebook", "latency_distributions", "-r", str(tmp_path / "empty"), "-o",
                      str(tmp_path / "file" / "nb.ipynb"))  # fmt: skip
    assert blocked.returncode == 2, blocked.stderr
    assert blocked.stderr.startswith(f"error: --out {tmp_path / 'file' / 'nb.ipynb'}: ")
    assert "is a file, not a folder" in blocked.stderr
    assert len(blocked.stderr.strip().splitlines()) == 1, blocked.stderr
    with pytest.raises(NotebookError, match="choose from latency_distributions"):
        execute_notebook("nope")
    # An empty folder is said as such, not as the KeyError of the first column read.
    for name in ("latency_distributions", "forward_crossover"):
        empty = run_cli("notebook", name, "-r", str(tmp_path / "empty"))
        assert empty.returncode == 2
        errors = [ln for ln in empty.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in empty.stderr, empty.stderr  # kernel logs
        assert errors[0].startswith(f"error: analysis/{name}.py: cell "), errors[0]
        assert "(%matplotlib" not in errors[0]
        assert errors[0].endswith(f" raised ValueError: no records loaded from "
                                  f"{tmp_path / 'empty'}: no result files"), errors[0]  # fmt: skip
