"""jaxbench.analysis.report and ``jaxbench report``: regressions first, compile apart, figures."""

import inspect
import re
from pathlib import Path

import pandas as pd
import pytest
from analysis_data import (
    FAILED_CASE,
    REVIEW_VERSIONS,
    SLOWER_CASE,
    SLOWER_COMPILE_CASE,
    lognormal,
    record,
    write,
    write_versions,
)
from typer.testing import CliRunner

from jaxbench.analysis import report_tables
from jaxbench.analysis.drift import DRIFT_COLUMNS
from jaxbench.analysis.report import (
    ReviewInputError,
    load_review,
    render_report,
    write_report,
)
from jaxbench.analysis.review import Settings, version_pairs
from jaxbench.cli import app
from jaxbench.report_cli import report_cmd

PNG = b"\x89PNG\r\n\x1a\n"
RESAMPLES = 500


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = write_versions(tmp_path_factory.mktemp("results") / "versions")
    (folder / "corrupt.jsonl").write_text("{not json\n")
    return folder


@pytest.fixture(scope="module")
def built(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path = write_report([data], out, n_resamples=RESAMPLES)
    return path, path.read_text(encoding="utf-8")


def section(text, title):
    """The body of ``## title`` (up to the next ``## `` heading)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section {title!r}"
    return match.group(1)


def subsection(text, title):
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert match, f"no heading {title!r}"
    return match.group(1)


def rows(markdown):
    """The rows of the first pipe table in ``markdown`` as dicts (header -> cell text)."""
    lines = [ln for ln in markdown.splitlines() if ln.startswith("|")]
    if not lines:
        return []
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]


# -- the report --------------------------------------------------------------------------------


def test_the_regressions_table_comes_first_and_holds_the_known_slower_case(built):
    _, text = built
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:3] == ["Regressions", "Improvements", "Comparisons by pair"]
    first_table = text.index("\n|")
    assert text.index("## Regressions") < first_table < text.index("## Improvements")

    regressions = rows(section(text, "Regressions"))
    steady = [r for r in regressions if r["metric"] == "steady state"]
    assert [r["case"] for r in steady] == [SLOWER_CASE]
    (row,) = steady
    assert row["versions"] == "0.4.9 → 0.4.10"
    ratio, low, high = map(float, re.findall(r"\d+\.\d+", row["ratio [CI]"]))
    assert 1 < low <= ratio <= high and 1.05 < ratio < 1.15  # 10 % slower by construction
    assert float(row["p"]) < 0.05 and row["basis"] == "CI + U test"
    assert rows(section(text, "Improvements")) == []


def test_compile_time_and_steady_state_are_separate_rows(built):
    _, text = built
    regressions = rows(section(text, "Regressions"))
    compiled = [r for r in regressions if r["metric"] == "compile time"]
    assert [r["case"] for r in compiled] == [SLOWER_COMPILE_CASE]
    assert compiled[0]["change"] == "+30.0 %" and compiled[0]["basis"] == "threshold only"
    # Its steady state did not move: unchanged, in the steady-state table of the pair.
    pair = section(text, "Comparisons by pair")
    steady = rows(subsection(pair, "Steady state (latency per call): 0.4.9 → 0.4.10"))
    compile_ = rows(subsection(pair, "Compile time (XLA compile per record): 0.4.9 → 0.4.10"))
    by_case = {r["case"]: r["verdict"] for r in steady}
    assert by_case[SLOWER_COMPILE_CASE] == "unchanged" and by_case[SLOWER_CASE] == "slower"
    assert {r["case"]: r["verdict"] for r in compile_}[SLOWER_COMPILE_CASE] == "slower"
    assert not any(r["case"].startswith("forward/") for r in compile_)  # no compile_s recorded


def test_versions_are_in_version_order(built):
    _, text = built
    assert text.startswith("# JAX version review: 0.4.9 → 0.4.10 → 0.5.0\n")
    pair = section(text, "Comparisons by pair")
    assert pair.index("### 0.4.9 → 0.4.10") < pair.index("### 0.4.10 → 0.5.0")
    env = rows(section(text, "Versions and environment"))
    assert [r["version"] for r in env] == list(REVIEW_VERSIONS)
    assert [r["drift"] for r in env] == ["not checked"] * 3
    assert env[0]["python"] == "3.12.1" and env[0]["host CPU"] == "AMD EPYC ×2"


def test_a_corrupt_file_is_named_under_problems_and_the_report_still_builds(built):
    _, text = built
    problems = section(text, "Problems")
    assert "corrupt.jsonl" in problems
    assert "corrupt.jsonl" not in section(text, "Regressions")
    assert "1 file(s) or part(s) of files did not load" in text


def test_every_linked_figure_exists_and_is_a_png(built):
    path, text = built
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) >= 5  # train-step violins, forward violins, ECDF, compile, crossover
    for link in links:
        assert not Path(link).is_absolute() and link.startswith("figures/")
        figure = path.parent / link
        assert figure.read_bytes()[:8] == PNG, link
    on_disk = {f"figures/{p.name}" for p in (path.parent / "figures").iterdir()}
    assert on_disk == set(links)  # nothing unlinked, nothing stale
    for kind in ("latency-train-step", "latency-forward-mode", "ecdf", "compile", "crossover"):
        assert any(kind in link for link in links), kind


def test_method_kept_apart_and_not_timed(built):
    _, text = built
    method = section(text, "Method")
    assert "Comparison mode: sequential." in method
    assert "separate processes" in method and "independent samples" in method
    assert "steady state 2.0%, compile time 10.0%" in method
    assert f"{RESAMPLES} resamples, seed 0" in method and "95%" in method
    not_timed = rows(section(text, "Not timed"))
    assert [(r["status"], r["example"], r["0.5.0"]) for r in not_timed] == [
        ("failed", FAILED_CASE, "1")
    ]
    kept = section(text, "Kept apart")
    assert f"steady_state {FAILED_CASE}: only 0.4.10 has it" in kept
    crossover = rows(section(text, "Forward mode: crossover"))
    assert [r["version"] for r in crossover] == list(REVIEW_VERSIONS)
    assert {r["linearize < vmap(jvp) from K"] for r in crossover} == {"4"}


# -- drift, sections, pairs ----------------------------------------------------------------------


def drift_frame():
    common = {"workload": "train_step", "dtype": "float32", "set": "gate", "rtol": 1e-5}
    common |= {"atol": 1e-6}
    checks = [  # version, output, max_abs_err, max_rel_err, within_tolerance
        ("0.4.9", "loss", 0.0, 0.0, True),
        ("0.4.10", "loss", 3e-3, 2e-3, False),
        ("0.4.10", "grads", 0.0, 0.0, True),
    ]
    names = ("version", "output", "max_abs_err", "max_rel_err", "within_tolerance")
    frame = pd.DataFrame([common | dict(zip(names, c, strict=True)) for c in checks])
    return frame[list(DRIFT_COLUMNS)]


def test_drift_is_summarised_per_version_and_its_findings_listed(data, tmp_path):
    review = load_review(data, settings=Settings(n_resamples=50), drift=drift_frame())
    sections = [
        report_tables.environment_section,
        report_tables.drift_section,
        lambda ctx: "## Appended\n\nan extra section",
    ]
    text = render_report(review, tmp_path, sections).read_text()
    env = rows(section(text, "Versions and environment"))
    assert {r["version"]: r["drift"] for r in env} == {
        "0.4.9": "none",
        "0.4.10": "1 finding",
        "0.5.0": "not checked",
    }
    findings = rows(section(text, "Numerical drift"))
    assert [(r["version"], r["output"], r["max_abs_err"]) for r in findings] == [
        ("0.4.10", "loss", "0.003")
    ]
    assert text.rstrip().endswith("an extra section")  # sections are a list: append one
    assert not (tmp_path / "figures").exists()


def test_a_drift_frame_without_its_columns_is_refused(data):
    drift = drift_frame().drop(columns="max_rel_err")
    with pytest.raises(ReviewInputError, match="max_rel_err"):
        load_review(data, settings=Settings(n_resamples=50), drift=drift)


def test_version_pairs():
    versions = ["0.5.0", "0.4.10", "0.4.9"]
    assert version_pairs(versions) == [("0.4.9", "0.4.10"), ("0.4.10", "0.5.0")]
    assert version_pairs(versions, "0.4.9", "0.5.0") == [("0.4.9", "0.5.0")]
    assert version_pairs(versions, candidate="0.5.0") == [("0.4.10", "0.5.0")]
    assert version_pairs(versions, baseline="0.4.9") == [("0.4.9", "0.5.0")]
    assert version_pairs(["0.4.9"]) == []
    with pytest.raises(ReviewInputError, match=r"unknown candidate version '0\.6'.*0\.4\.9"):
        version_pairs(versions, candidate="0.6")
    with pytest.raises(ReviewInputError, match="both"):
        version_pairs(versions, "0.4.9", "0.4.9")
    with pytest.raises(ReviewInputError, match="oldest"):
        version_pairs(versions, candidate="0.4.9")


def test_a_baseline_and_candidate_give_just_that_pair(data):
    review = load_review(
        data, baseline="0.4.9", candidate="0.5.0", settings=Settings(n_resamples=50)
    )
    assert review.pairs == [("0.4.9", "0.5.0")]
    assert review.versions == ["0.4.9", "0.5.0"]
    assert set(review.frame["version"].astype(str)) == {"0.4.9", "0.5.0"}
    assert SLOWER_CASE in set(review.regressions["case"])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(threshold=-0.1), "threshold must be"),
        (dict(compile_threshold=float("nan")), "compile_threshold must be"),
        (dict(alpha=1.0), "alpha must be in"),
    ],
)
def test_bad_settings_are_named(settings, message):
    with pytest.raises(ReviewInputError, match=message):
        Settings(**settings)


# -- the command -------------------------------------------------------------------------------


def invoke(*args):
    return CliRunner().invoke(app, ["report", *map(str, args)])


@pytest.fixture
def two_versions(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    write(folder / "a.jsonl", [record("0.4.9", lognormal(1e-3, 60, seed=1))])
    write(folder / "b.jsonl", [record("0.4.10", lognormal(1.1e-3, 60, seed=2))])
    (folder / "broken.jsonl").write_text("garbage\n")
    return folder


def test_cli_writes_the_report_and_counts_regressions(two_versions, tmp_path):
    out = tmp_path / "out"
    result = invoke(two_versions, "--out", out)
    assert result.exit_code == 0, result.output
    assert "regressions: 1," in result.stdout
    assert f"report: {out / 'report.md'}" in result.stdout
    assert "broken.jsonl" in result.stderr  # not loaded, named, not fatal
    text = (out / "report.md").read_text()
    assert "broken.jsonl" in section(text, "Problems")
    assert rows(section(text, "Regressions"))[0]["versions"] == "0.4.9 → 0.4.10"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no such results file or folder"),
        (["--candidate", "9.9"], "unknown candidate version '9.9'"),
        (["--baseline", "0.4.10"], "baseline '0.4.10' is the newest version"),
        (["--alpha", "0"], "alpha must be in (0, 1)"),
        (["--threshold", "-1"], "threshold must be a finite number >= 0"),
    ],
)
def test_cli_bad_input_is_exit_2_with_one_line(args, message, two_versions, tmp_path):
    args = [tmp_path / a if a == "nope" else a for a in args]
    paths = [] if args[0] == tmp_path / "nope" else [two_versions]
    result = invoke(*paths, *args, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not (tmp_path / "out" / "report.md").exists()


def test_cli_without_loadable_records_is_exit_2_naming_the_files(tmp_path):
    (tmp_path / "only.jsonl").write_text("{broken\n")
    result = invoke(tmp_path, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "no records loaded" in result.stderr and "only.jsonl" in result.stderr


def test_cli_defaults_are_the_librarys():
    defaults = {name: p.default for name, p in inspect.signature(report_cmd).parameters.items()}
    library = Settings()
    assert defaults["threshold"] == library.threshold
    assert defaults["compile_threshold"] == library.compile_threshold
    assert defaults["alpha"] == library.alpha


# -- drift checks and live comparisons found beside the records ---------------------------------


def live_comparison(shift):
    """An interleaved comparison whose candidate blocks are ``shift`` times the baseline's."""
    from jaxbench.interleave.result import CaseComparison, Round, SideInfo
    from jaxbench.interleave.session import Schedule

    def side(label, version):
        return SideInfo(label=label, python="py", params={"size": "tiny"}, benchmark="train_step",
                        jax=version, jaxlib=version, backend="cpu", device_kind="cpu",
                        compile_s=0.1, flops=1.0, env={})  # fmt: skip

    rounds = []
    for i, drift in enumerate(1 + 0.2 * (pd.Series(range(12)) % 3)):
        base = lognormal(1e-3 * drift, 10, seed=i, sigma=0.01)
        cand = lognormal(shift * 1e-3 * drift, 10, seed=100 + i, sigma=0.01)
        rounds.append(Round(order="AB" if i % 2 else "BA", baseline_s=base, candidate_s=cand))
    c = CaseComparison.start("interleaved", "train_step", {"size": "tiny"}, Schedule())
    return c.with_sides(side("0.4.9", "0.4.9"), side("0.4.10", "0.4.10")).finished(rounds)


def test_drift_checks_and_live_comparisons_beside_the_records_are_reported(data, tmp_path):
    import shutil

    from jaxbench.interleave.result import write_jsonl

    folder = tmp_path / "results"
    shutil.copytree(data, folder)
    drift_file = next(Path("results/versions/0.11.2").glob("drift-*.jsonl"))
    shutil.copy(drift_file, folder / drift_file.name)
    (folder / "drift-corrupt.jsonl").write_text("{oops\n")
    write_jsonl(folder / "interleave-x.jsonl", [live_comparison(1.10)])
    text = write_report([folder], tmp_path / "out", n_resamples=RESAMPLES).read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:3] == ["Regressions", "Live comparisons", "Improvements"]
    live = section(text, "Live comparisons")
    assert "**interleaved**" in live and "back to back" not in live
    (row,) = rows(live)
    assert row["verdict"] == "slower" and row["design"] == "interleaved"
    assert row["baseline"] == "0.4.9 (jax 0.4.9)" and row["rounds x calls"] == "12 x 10"
    assert "recorded runs" in row  # the sequential verdict of the same case, where compared
    drift = section(text, "Numerical drift")
    assert "No findings: all" in drift and "checked outputs are within tolerance" in drift
    problems = section(text, "Problems")
    assert "drift-corrupt.jsonl" in problems and "corrupt.jsonl" in problems
