"""``jaxbench report`` replaces the previous report whole, or not at all.

The report is built in a staging folder inside the output folder and swapped in at the end
(:func:`jaxbench.analysis.report.render_report`). Whatever stops a run (an exception, Ctrl-C, a
kill) must leave the previous report (markdown and every figure) byte-identical, and nothing
in the output folder that is not the report's may be touched.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from analysis_data import forward_records, write, write_processes
from typer.testing import CliRunner

from jaxbench.analysis import facets
from jaxbench.analysis import report as report_module
from jaxbench.analysis.report import STAGING_PREFIX, recover_report, render_report, write_report
from jaxbench.analysis.report_tables import header_section
from jaxbench.cli import app
from jaxbench.folders import LOCK_NAME

USER_FILES = {"notes.txt": b"mine, not the report's\n", "figures/README.txt": b"also mine\n"}


def train_only(folder):
    """Two versions of one train step: latency, ECDF and compile figures (quick to draw)."""
    folder.mkdir()
    write_processes(folder, "0.4.9", 1e-3, processes=2, n=20, compile_s=0.2)
    write_processes(folder, "0.4.10", 1.3e-3, processes=2, n=20, compile_s=0.3)
    return folder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``(old, new)`` results: old adds forward-mode records (and so crossover figures)."""
    root = tmp_path_factory.mktemp("swap-data")
    old = root / "old"
    old.mkdir()
    for version, median in (("0.4.9", 1e-3), ("0.4.10", 1.2e-3)):
        write_processes(old, version, median, processes=2, n=20, compile_s=0.2)
        write(old / f"fwd-{version}.jsonl", forward_records(version, ks=(1, 8), n=5))
    return old, train_only(root / "new")


@pytest.fixture(scope="module")
def template(data, tmp_path_factory):
    """A previous report, built once, with files of the user's beside and inside it."""
    out = tmp_path_factory.mktemp("swap-template") / "out"
    write_report([data[0]], out)
    for name, content in USER_FILES.items():
        (out / name).write_bytes(content)
    return out


@pytest.fixture
def previous(template, tmp_path):
    """A copy of the previous report, and its bytes: ``(folder, {relative path: bytes})``."""
    out = tmp_path / "site" / "out"
    shutil.copytree(template, out)
    return out, snapshot(out)


def snapshot(folder):
    """Every file under ``folder`` (hidden ones too), by relative path, with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def outside_staging(folder):
    """:func:`snapshot` less what staging folders hold."""
    return {k: v for k, v in snapshot(folder).items() if not k.startswith(STAGING_PREFIX)}


def stagings(out):
    return sorted(out.glob(f"{STAGING_PREFIX}*"))


def linked(report_md):
    return set(re.findall(r"\]\((figures/[^)]+)\)", report_md.read_text(encoding="utf-8")))


def pngs(out):
    return {f"figures/{p.name}" for p in (out / "figures").glob("*.png")}


def test_the_previous_report_has_figures_and_user_files(previous):
    out, before = previous
    assert len(pngs(out)) >= 5 and pngs(out) == linked(out / "report.md")
    assert {"report.md", "report.html", *USER_FILES} <= set(before)


# -- interrupted in the process: exception or Ctrl-C ----------------------------------------------


def raise_in_figures(monkeypatch, out, exc_type):
    """Make the second figure function raise, once the first figure is saved in staging."""
    seen = []

    def boom(*args, **kwargs):
        seen.extend(p for s in stagings(out) for p in (s / "figures").glob("*.png"))
        raise exc_type("stopped while writing figures")

    monkeypatch.setattr(facets, "ecdf_grid", boom)
    return seen


def raise_in_swap(monkeypatch, out, exc_type):
    """Make the commit (``report.md`` replaced) raise once the new figures are in place."""
    seen = []
    real = os.replace

    def boom(src, dst):
        if Path(dst) == out / "report.md":
            (staging,) = stagings(out)
            assert (staging / "old-figures").is_dir()  # the old figures set aside
            seen.extend(out.glob("figures/*.png"))  # the new ones in place
            raise exc_type("stopped in the swap")
        return real(src, dst)

    monkeypatch.setattr(report_module.os, "replace", boom)
    return seen


@pytest.mark.parametrize("where", [raise_in_figures, raise_in_swap], ids=["figures", "swap"])
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, RuntimeError, OSError])
def test_an_interrupted_report_leaves_the_previous_one_byte_identical(
    previous, data, monkeypatch, where, exc_type
):
    out, before = previous
    beside = sorted(out.parent.iterdir())
    seen = where(monkeypatch, out, exc_type)
    with pytest.raises(exc_type, match="stopped"):
        write_report([data[1]], out)
    assert seen, "the run was not stopped after writing a figure"
    assert snapshot(out) == before
    assert stagings(out) == [] and sorted(out.parent.iterdir()) == beside


def test_ctrl_c_in_the_cli_exits_130_naming_the_unchanged_report(previous, data, monkeypatch):
    out, before = previous
    raise_in_figures(monkeypatch, out, KeyboardInterrupt)
    result = CliRunner().invoke(app, ["report", str(data[1]), "--out", str(out)])
    assert result.exit_code == 130, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0]
    assert f"the previous report at {out / 'report.md'} is unchanged" in lines[0]
    assert "Traceback" not in result.output
    assert stagings(out) == []
    lock = snapshot(out).pop(LOCK_NAME)  # the folder's lock stays, empty; nothing else changed
    assert lock == b"" and {k: v for k, v in snapshot(out).items() if k != LOCK_NAME} == before


def test_ctrl_c_in_the_cli_without_a_previous_report_says_none_was_written(
    data, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    raise_in_figures(monkeypatch, out, KeyboardInterrupt)
    result = CliRunner().invoke(app, ["report", str(data[1]), "--out", str(out)])
    assert result.exit_code == 130, result.output
    assert result.stderr.strip() == f"error: report interrupted; no report was written to {out}"
    assert not out.exists()  # the report made the folder: it leaves none behind


# -- killed: SIGKILL in a subprocess ---------------------------------------------------------------

DRIVER = """
import os, sys, time
from pathlib import Path

from jaxbench.analysis import facets
from jaxbench.analysis.report import write_report

data, out, marker, where = sys.argv[1:5]
out = Path(out)


def hang(*args, **kwargs):
    Path(marker).write_text("stopped")
    time.sleep(3600)


if where == "figures":  # the second figure function: the first figure is written
    facets.ecdf_grid = hang
else:  # the commit: the new figures are in place, the old ones set aside
    real = os.replace

    def replace(src, dst):
        if Path(dst) == out / "report.md":
            hang()
        return real(src, dst)

    os.replace = replace
write_report([data], out)
"""


def kill_when_stopped(tmp_path, data, out, where):
    """Run a report in a subprocess that stops at ``where``; SIGKILL it there."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    marker = tmp_path / "stopped"
    marker.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, str(driver), str(data), str(out), str(marker), where])
    try:
        deadline = time.monotonic() + 600  # a safety net against a hang, not a measurement
        while not marker.exists():
            assert proc.poll() is None, "the report finished or failed before it was killed"
            assert time.monotonic() < deadline, "the report never reached the stopping point"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
@pytest.mark.parametrize("where", ["figures", "swap"])
def test_a_killed_report_leaves_the_previous_one_whole(previous, data, tmp_path, where):
    out, before = previous
    kill_when_stopped(tmp_path, data[1], out, where)
    (staging,) = stagings(out)  # a kill cleans nothing up
    old_figures = snapshot(out / "figures") if where == "figures" else None
    if where == "figures":
        assert list((staging / "figures").glob("*.png"))  # killed mid-write
        assert outside_staging(out) == before  # untouched, in place
    else:
        # Killed between the renames and the commit: report.md is the previous one, and its
        # figures, every one of them, are set aside in the staging folder until recovered.
        assert (out / "report.md").read_bytes() == before["report.md"]
        assert (staging / "old-report.html").read_bytes() == before["report.html"]
        old_figures = snapshot(staging / "old-figures")
        assert snapshot(out / "figures") != old_figures  # the new ones are in place
    assert {f"figures/{k}": v for k, v in old_figures.items()} == {
        k: v for k, v in before.items() if k.startswith("figures/")
    }
    recover_report(out)
    assert snapshot(out) == before and stagings(out) == []

    # A killed run's leftovers do not stop the next one, which cleans them up.
    kill_when_stopped(tmp_path, data[1], out, where)
    path = write_report([data[1]], out)
    assert stagings(out) == [] and pngs(out) == linked(path)
    assert (out / "notes.txt").read_bytes() == USER_FILES["notes.txt"]


# -- a normal rerun --------------------------------------------------------------------------------


def test_a_rerun_replaces_the_report_and_leaves_no_stale_figures(previous, data):
    out, before = previous
    old_pngs = pngs(out)
    path = write_report([data[1]], out)
    now = pngs(out)
    assert now == linked(path) and now  # exactly the figures the new report links
    assert {f for f in old_pngs if "crossover" in f or "forward" in f} and not {
        f for f in now if "crossover" in f or "forward" in f
    }
    assert path.read_bytes() != before["report.md"] and "0.4.10" in path.read_text()
    for name, content in USER_FILES.items():  # not the report's: kept
        assert (out / name).read_bytes() == content
    assert stagings(out) == []
    assert {p.name for p in out.iterdir()} == {"report.md", "report.html", "figures", "notes.txt"}
    assert (out / "report.html").read_bytes() != before["report.html"]  # replaced with it


def test_a_report_without_figures_removes_the_old_figures_folder(previous, data):
    out, _ = previous
    (out / "figures" / "README.txt").unlink()
    review = report_module.load_review(data[1])
    path = render_report(review, out, [header_section])
    assert not (out / "figures").exists() and "figures/" not in path.read_text()
    assert {p.name for p in out.iterdir()} == {"report.md", "report.html", "notes.txt"}


def test_a_file_named_figures_is_not_replaced(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "figures").write_text("a file of the user's")
    with pytest.raises(NotADirectoryError, match="figures"):
        write_report([data[1]], out)
    assert (out / "figures").read_text() == "a file of the user's"
    assert {p.name for p in out.iterdir()} == {"figures"}
