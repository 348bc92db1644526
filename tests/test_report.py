"""jaxbench.analysis.report and ``jaxbench report``: verdicts that hold first, compile apart.

The synthetic results (:mod:`analysis_data`) have :data:`analysis_data.PROCESSES` processes per
version with a known process-level noise, one known steady-state regression and one known
compile-time regression; nothing else moves.
"""

import inspect
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_data import (
    COMPILE_SLOWDOWN,
    FAILED_CASE,
    PROCESSES,
    REVIEW_VERSIONS,
    SLOWDOWN,
    SLOWER_CASE,
    SLOWER_COMPILE_CASE,
    TRAIN,
    lognormal,
    record,
    write,
    write_processes,
    write_versions,
)
from typer.testing import CliRunner

from jaxbench.analysis import report_tables
from jaxbench.analysis.compare import STEADY_STATE
from jaxbench.analysis.drift import DRIFT_COLUMNS
from jaxbench.analysis.report import (
    ReviewInputError,
    load_review,
    render_report,
    write_report,
)
from jaxbench.analysis.report_live import disagree
from jaxbench.analysis.review import Settings, version_pairs
from jaxbench.cli import app
from jaxbench.cli.report import report_cmd
from jaxbench.inference.verdicts import decide

PNG = b"\x89PNG\r\n\x1a\n"
ROOT = Path(__file__).resolve().parent.parent
FOUR = f"{PROCESSES}+{PROCESSES}"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = write_versions(tmp_path_factory.mktemp("results") / "versions")
    (folder / "corrupt.jsonl").write_text("{not json\n")
    return folder


@pytest.fixture(scope="module")
def built(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path = write_report([data], out)
    return path, path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def review(data):
    return load_review(data)


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


def interval(cell):
    """``(ratio, low, high)`` of a ``ratio [CI]`` cell."""
    ratio, low, high = map(float, re.findall(r"\d+\.\d+", cell))
    return ratio, low, high


def test_the_report_leads_with_the_verdicts_that_hold(built):
    _, text = built
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:5] == [
        "Regressions",
        "Improvements",
        "Inconclusive and unstable",
        "Scaling exponents",  # the synthetic forward records sweep K
        "Comparisons by pair",
    ]
    regressions = rows(section(text, "Regressions"))
    steady = [r for r in regressions if r["metric"] == "steady state"]
    assert [r["case"] for r in steady] == [SLOWER_CASE]
    (row,) = steady
    assert row["versions"] == "0.4.9 → 0.4.10"
    ratio, low, high = interval(row["ratio [CI]"])
    assert 1.02 < low <= ratio <= high  # the whole interval above 1 + threshold
    assert low <= SLOWDOWN * 1.01 and high >= SLOWDOWN * 0.99  # covers the known 20 %
    assert float(row["p"]) < 0.05
    assert row["processes"] == FOUR and row["calls"] == "320 / 320"
    assert re.fullmatch(r"\d+\.\d %", row["detectable"])
    assert "basis" not in row
    assert rows(section(text, "Improvements")) == []


def test_the_summary_counts_every_verdict_beside_the_ones_that_hold(built, review):
    _, text = built
    head = text[: text.index("## Regressions")]
    counts = review.verdict_counts()
    assert counts["slower"] == 2 and counts["faster"] == 0
    sentence = (
        f"**2 slower**, **0 faster**, {counts['same']} same (verdicts that hold); "
        f"{counts['inconclusive']} inconclusive, {counts['unstable']} unstable, over "
        f"{len(review.results)} comparisons"
    )
    assert sentence in head
    table = rows(head)
    assert [(r["versions"], r["metric"]) for r in table] == [
        ("0.4.9 → 0.4.10", "steady state"),
        ("0.4.9 → 0.4.10", "compile time"),
        ("0.4.10 → 0.5.0", "steady state"),
        ("0.4.10 → 0.5.0", "compile time"),
    ]
    for r in table:
        assert sum(int(r[v]) for v in ("slower", "faster", "same", "inconclusive", "unstable")) == (
            int(r["total"])
        )


def test_unchanged_cases_are_never_called_slower_or_faster(review):
    results = review.results
    known = {(STEADY_STATE, SLOWER_CASE), ("compile", SLOWER_COMPILE_CASE)}
    changed = results[
        [(m, c) in known and a == "0.4.9" for m, c, a in zip(
            results["metric"], results["case"], results["baseline"], strict=True)]
    ]  # fmt: skip
    assert set(changed["verdict"]) == {"slower"}
    rest = results.drop(changed.index)
    assert set(rest["verdict"]) <= {"same", "inconclusive"}
    assert (rest["verdict"] == "same").mean() > 0.5  # 4 processes a side settle most of them
    assert (results["n_baseline"] == PROCESSES).all()


def test_compile_time_and_steady_state_are_separate_rows(built):
    _, text = built
    regressions = rows(section(text, "Regressions"))
    compiled = [r for r in regressions if r["metric"] == "compile time"]
    assert [r["case"] for r in compiled] == [SLOWER_COMPILE_CASE]
    ratio, low, _ = interval(compiled[0]["ratio [CI]"])
    assert low > 1.10 and ratio == pytest.approx(COMPILE_SLOWDOWN, rel=0.05)
    assert compiled[0]["processes"] == FOUR and compiled[0]["calls"] == "4 / 4"
    # Its steady state did not move: not slower, in the steady-state table of the pair.
    pair = section(text, "Comparisons by pair")
    steady = rows(subsection(pair, "Steady state (latency per call): 0.4.9 → 0.4.10"))
    compile_ = rows(subsection(pair, "Compile time (XLA compile per process): 0.4.9 → 0.4.10"))
    by_case = {r["case"]: r["verdict"] for r in steady}
    assert by_case[SLOWER_COMPILE_CASE] in ("same", "inconclusive")
    assert by_case[SLOWER_CASE] == "slower"
    assert {r["case"]: r["verdict"] for r in compile_}[SLOWER_COMPILE_CASE] == "slower"
    assert not any(r["case"].startswith("forward/") for r in compile_)  # no compile_s recorded
    assert all(r["processes"] == FOUR and "advice" in r for r in steady)


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
    assert "1 problem(s) with results files" in text


def test_latency_figures_draw_at_most_their_calls_of_each_version(review, tmp_path, monkeypatch):
    from jaxbench.analysis import facets, report_figures
    from jaxbench.analysis.report_context import ReportContext

    drawn = []
    for name in ("latency_grid", "ecdf_grid"):
        real = getattr(facets, name)

        def spy(rows, *args, real=real, **kwargs):
            drawn.append(rows)
            return real(rows, *args, **kwargs)

        monkeypatch.setattr(facets, name, spy)
    monkeypatch.setattr(report_figures, "DRAWN_CALLS", 7)
    text = report_figures.latency_section(ReportContext(review, tmp_path))
    assert "drawn from at most 7 of its calls" in text
    assert len(drawn) >= 2
    for rows in drawn:
        per = rows.groupby(["case", "version"], observed=True)["latency_s"].agg(["size", "min"])
        assert per["size"].max() == 7  # each version of a case had more calls than that
        whole = review.frame[review.frame["status"] == "ok"].explode("samples_s")
        fastest = whole.groupby(["case", "version"], observed=True)["samples_s"].min()
        assert np.allclose(per["min"], fastest.loc[per.index].astype(float))


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


def test_method_states_the_unit_the_rule_and_its_error_rate(built):
    _, text = built
    method = section(text, "Method")
    assert "Comparison design: sequential." in method
    assert "separate processes" in method
    assert "**The process is the unit.**" in method and "per process, the median" in method
    assert "Welch's t interval" in method and "t interval over pairs" in method
    for verdict in ("slower", "faster", "same", "inconclusive", "unstable"):
        assert f"- `{verdict}`" in method, verdict
    assert "probability at most alpha / 2 = 2.5% per case" in method
    # the rule the report applies (decide, not strict): a change shown, its estimate >= 1 + t
    assert decide(1.01, 1.10) == "slower"
    assert "- `slower`: lo > 1 (a change is shown) and the estimate" in method
    assert "lo > 1 + t" not in method and "whole interval lies above" not in text
    assert "O'Brien-Fleming-type error spending over the looks" in method  # not alpha / L
    assert "alpha / L" not in method
    assert "Kalibera and R. Jones" in method and "ISMM 2013" in method
    assert "Pinpoint" in method
    assert "steady state 2.0%, compile time 10.0%" in method and "95%" in method
    for gone in ("bootstrap", "Mann-Whitney", "resamples", "`unchanged`"):
        assert gone not in method, gone


def test_not_timed_kept_apart_and_crossover(built):
    _, text = built
    not_timed = rows(section(text, "Not timed"))
    assert [(r["status"], r["example"], r["0.5.0"]) for r in not_timed] == [
        ("failed", FAILED_CASE, str(PROCESSES))
    ]
    kept = section(text, "Kept apart")
    assert (f"- {FAILED_CASE}: no ok record on 0.5.0 ({PROCESSES} failed); first error: gate: "
            "loss not finite") in kept  # fmt: skip
    assert f"{FAILED_CASE}: only 0.4.10 has it" not in kept  # 0.5.0 has it: failed
    crossover = rows(section(text, "Forward mode: crossover"))
    assert [r["version"] for r in crossover] == list(REVIEW_VERSIONS)
    assert {round(float(r["linearize < vmap(jvp) from K"])) for r in crossover} == {4}


# -- inconclusive and unstable rows --------------------------------------------------------------


def test_one_process_a_side_is_inconclusive_and_says_what_would_settle_it(tmp_path):
    write(tmp_path / "a.jsonl", [record("0.4.9", lognormal(1e-3, 60, seed=1), run_id="a")])
    write(tmp_path / "b.jsonl", [record("0.4.10", lognormal(1.1e-3, 60, seed=2), run_id="b")])
    text = write_report([tmp_path], tmp_path / "out").read_text()
    assert rows(section(text, "Regressions")) == []  # 10 % in the calls, but one process a side
    part = section(text, "Inconclusive and unstable")
    assert "1 comparison(s) are `inconclusive`" in part
    (row,) = rows(part[part.index("apparent changes") :])
    assert row["processes"] == "1+1" and row["ratio [CI]"].endswith("(no CI)")
    assert "gives no interval" in row["advice"]
    pair = section(text, "Comparisons by pair")
    (steady,) = rows(subsection(pair, "Steady state (latency per call): 0.4.9 → 0.4.10"))
    assert steady["verdict"] == "inconclusive" and steady["advice"] == row["advice"]


def test_a_process_whose_latency_moves_is_unstable_with_its_reason(tmp_path):
    for p in range(3):
        base = lognormal(1e-3, 60, seed=10 + p, sigma=0.01)
        cand = lognormal(1e-3, 60, seed=20 + p, sigma=0.01)
        if p == 0:  # the machine changed half-way through this candidate process
            cand = cand[:30] + [1.4 * x for x in cand[30:]]
        write(tmp_path / f"a{p}.jsonl", [record("0.4.9", base, run_id=f"a{p}")])
        write(tmp_path / f"b{p}.jsonl", [record("0.4.10", cand, run_id=f"b{p}")])
    text = write_report([tmp_path], tmp_path / "out").read_text()
    part = section(text, "Inconclusive and unstable")
    assert "1 comparison(s) are `unstable`" in part
    (row,) = rows(part)
    assert row["processes"] == "3+3"
    assert "latency moved" in row["reason"] and "between halves" in row["reason"]
    assert rows(section(text, "Regressions")) == [] and rows(section(text, "Improvements")) == []
    assert "0 inconclusive, 1 unstable" in text


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
    review = load_review(data, drift=drift_frame())
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
        load_review(data, drift=drift)


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
    review = load_review(data, baseline="0.4.9", candidate="0.5.0")
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
    write_processes(folder, "0.4.9", 1e-3)
    write_processes(folder, "0.4.10", 1.2e-3)
    (folder / "broken.jsonl").write_text("garbage\n")
    return folder


def test_cli_writes_the_report_and_counts_every_verdict(two_versions, tmp_path):
    out = tmp_path / "out"
    result = invoke(two_versions, "--out", out)
    assert result.exit_code == 0, result.output
    assert (
        "regressions: 1, improvements: 0, same: 0, inconclusive: 0, unstable: 0, comparisons: 1"
        in result.stdout
    )
    assert f"report: {out / 'report.md'}" in result.stdout
    assert "problem:" in result.stderr and "broken.jsonl" in result.stderr  # named, not fatal
    text = (out / "report.md").read_text()
    assert "broken.jsonl" in section(text, "Problems")
    assert rows(section(text, "Regressions"))[0]["versions"] == "0.4.9 → 0.4.10"


def test_a_second_writer_of_one_folder_is_named_and_a_killed_holder_frees_it(
    two_versions, tmp_path
):
    import subprocess
    import sys

    out = tmp_path / "out"
    out.mkdir()
    hold = ("import sys, time; from pathlib import Path; from jaxbench.folders import sole_writer\n"
            "with sole_writer(Path(sys.argv[1]), '--out'):\n"
            "    print('held', flush=True); time.sleep(120)")  # fmt: skip
    holder = subprocess.Popen([sys.executable, "-c", hold, str(out)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = invoke(two_versions, "--out", out)
        assert busy.exit_code == 2
        assert f"--out {out} is in use by pid {holder.pid} (jaxbench " in busy.stderr
        assert not (out / "report.md").exists()
    finally:
        holder.kill()
        holder.wait()
    assert invoke(two_versions, "--out", out).exit_code == 0  # the kernel freed its lock
    assert (out / "report.md").is_file()
    assert not (out / ".jaxbench.holder").exists()  # released: no holder named any more


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no such results file or folder"),
        (["--candidate", "9.9"], "unknown candidate version '9.9'"),
        (["--baseline", "0.4.10"], "baseline '0.4.10' is the newest version"),
        (["--alpha", "0"], "alpha must be in (0, 1)"),
        (["--threshold", "-1"], "--threshold: threshold must be a number >= 0, got -1"),
        (["--threshold", "nan"], "--threshold: threshold must be a number >= 0, got nan"),
        (["--compile-threshold", "inf"], "--compile-threshold: threshold must be a number >= 0"),
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


def side(label, version, params):
    from jaxbench.store.live import SideInfo

    return SideInfo(label=label, python="py", params=params, benchmark="train_step",
                    jax=version, jaxlib=version, backend="cpu", device_kind="cpu",
                    compile_s=0.1, flops=1.0, env={})  # fmt: skip


def live_comparison(shift, pairs=4, params=None, versions=("0.4.9", "0.4.10")):
    """An interleaved comparison over ``pairs`` pairs, the candidate ``shift`` times slower.

    Each pair has its own offset (log sd 0.005); within a pair the rounds drift together.
    """
    from jaxbench.interleave.session import Schedule
    from jaxbench.store.live import CaseComparison, PairRun, Round, now

    params = params or {"size": "tiny"}
    schedule = Schedule(pairs=pairs, max_pairs=pairs)
    c = CaseComparison.start("interleaved", "train_step", params, schedule)
    rng = np.random.default_rng([pairs, int(shift * 1000)])
    for p in range(pairs):
        offset = math.exp(0.005 * rng.standard_normal())
        rounds = []
        for i, drift in enumerate(1 + 0.2 * (np.arange(12) % 3)):
            base = lognormal(1e-3 * drift, 10, seed=1000 * p + i, sigma=0.01)
            cand = lognormal(shift * offset * 1e-3 * drift, 10, seed=1000 * p + 100 + i, sigma=0.01)
            rounds.append(Round(order="AB" if i % 2 else "BA", baseline_s=base, candidate_s=cand))
        pair = PairRun(index=p, baseline=side(versions[0], versions[0], params),
                       candidate=side(versions[1], versions[1], params), rounds=rounds,
                       started_at=now())  # fmt: skip
        c = c.with_pair(pair)
    return c


SLOWER_PARAMS = {"size": "small", "dtype": "float32", **TRAIN}  # SLOWER_CASE
UNCHANGED_PARAMS = {"size": "small", "dtype": "bfloat16", **TRAIN}


def test_disagreement_is_two_verdicts_that_hold_and_differ():
    assert disagree("slower", "faster") and disagree("slower", "same")
    assert disagree("faster", "same") and disagree("same", "slower")
    assert not disagree("slower", "slower") and not disagree("same", "same")
    for quiet in ("inconclusive", "unstable"):
        for other in ("slower", "faster", "same", "inconclusive", "unstable"):
            assert not disagree(quiet, other) and not disagree(other, quiet)


def test_drift_checks_and_live_comparisons_beside_the_records_are_reported(data, tmp_path):
    from jaxbench.store import write_jsonl

    folder = tmp_path / "results"
    shutil.copytree(data, folder)
    drift_file = next((ROOT / "results/versions/0.11.2").glob("drift-*.jsonl"))
    shutil.copy(drift_file, folder / drift_file.name)
    (folder / "drift-corrupt.jsonl").write_text("{oops\n")
    live = [
        live_comparison(SLOWDOWN, params=SLOWER_PARAMS),  # agrees with the records: slower
        live_comparison(1.0, params=SLOWER_PARAMS),  # same, where the records say slower
        live_comparison(1.10, params=UNCHANGED_PARAMS),  # slower, where the records say same
        live_comparison(1.10, pairs=1, params=UNCHANGED_PARAMS),  # one pair: inconclusive
    ]
    write_jsonl(folder / "interleave-x.jsonl", live)
    text = write_report([folder], tmp_path / "out").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:4] == [
        "Regressions",
        "Improvements",
        "Live comparisons",
        "Inconclusive and unstable",
    ]
    part = section(text, "Live comparisons")
    assert "**interleaved**" in part and "back to back" not in part
    table = rows(part)
    assert [r["verdict"] for r in table] == ["slower", "same", "slower", "inconclusive"]
    assert [r["pairs"] for r in table] == ["4", "4", "4", "1"]
    assert [r["disagree"] for r in table] == ["", "yes", "yes", ""]
    assert "2 of 4 live comparison(s) disagree" in part
    first = table[0]
    assert first["design"] == "interleaved" and first["case"] == SLOWER_CASE
    assert first["baseline"] == "0.4.9 (jax 0.4.9)" and first["rounds x calls"] == "12 x 10"
    assert (
        first["recorded runs"].startswith("slower +")
        and f"({FOUR} processes)" in (first["recorded runs"])
    )
    assert table[2]["recorded runs"].startswith("same ")
    assert "one pair gives no interval" in table[3]["advice"]
    drift = section(text, "Numerical drift")
    assert "No findings: all" in drift and "checked outputs are within tolerance" in drift
    problems = section(text, "Problems")
    assert "drift-corrupt.jsonl" in problems and "corrupt.jsonl" in problems


def test_files_named_explicitly_are_read_by_the_one_loader_and_none_is_not_loaded(tmp_path):
    """Naming a run, a drift check and a live comparison file lists none of them as a problem."""
    from jaxbench.store import write_jsonl

    runs = write_processes(tmp_path, "0.4.9", 1e-3) + write_processes(tmp_path, "0.4.10", 1e-3)
    drift = tmp_path / "drift-check.jsonl"
    shutil.copy(next((ROOT / "results/versions/0.11.2").glob("drift-*.jsonl")), drift)
    live = write_jsonl(tmp_path / "interleave-x.jsonl", [live_comparison(1.0)])
    named = [*runs, drift, live]

    review = load_review(named)
    assert review.problems == []
    assert review.drift is not None and len(review.live) == 1
    assert len(review.frame) == len(runs)
    out = tmp_path / "out"
    result = invoke(*named, "--out", out)
    assert result.exit_code == 0, result.output
    assert "problem:" not in result.stderr and "not loaded" not in result.stderr
    text = (out / "report.md").read_text()
    assert section(text, "Problems").strip() == "None: every results file loaded."
    assert "problem(s) with results files" not in text
    # A folder still goes to every loader, and a file inside it is not read twice.
    both = load_review([tmp_path, live, runs[0]])
    assert both.problems == [] and len(both.live) == 1 and len(both.frame) == len(runs)


def test_calibration_of_the_machine_is_cited_or_asked_for(two_versions, tmp_path):
    from test_calibrate import record

    from jaxbench.calibrate import write_calibration

    out = tmp_path / "out"
    text = write_report([two_versions], out).read_text()
    assert "`box`: no calibration under the sources; `jaxbench calibrate" in text
    write_calibration(two_versions / "calibration", record(hostname="box"))
    write_calibration(
        two_versions / "calibration",
        record(run_id="20270101T000000Z-00000001", hostname="other", started="2027"),
    )
    cal = section(write_report([two_versions], out).read_text(), "Calibration")
    assert "`box` (2026-01-01, JAX 0.12.0.1" in cal and "of 2 A/A comparisons" in cal
    assert "other" not in cal


def test_one_version_with_a_case_under_two_conditions_says_what_kept_them_apart(tmp_path):
    quiet = record("0.12.0.1", [1e-3] * 5, run_id="a")
    flagged = record("0.12.0.1", [1e-3] * 5, run_id="b", env={"env_vars": {"XLA_FLAGS": "--x"}})
    write(tmp_path / "results" / "a.jsonl", [quiet])
    write(tmp_path / "results" / "b.jsonl", [flagged])
    review = load_review(tmp_path / "results")
    assert review.comparisons == []
    text = render_report(review, tmp_path / "out", [report_tables.kept_apart_section]).read_text()
    kept = section(text, "Kept apart")
    assert "kept apart from" in kept and "env.XLA_FLAGS " in kept  # either side first
    assert "'--x'" in kept and "'--xla_cpu_multi_thread_eigen=true'" in kept


# -- report.html: the same report as one page -------------------------------------------------


def test_the_html_report_inlines_every_figure_and_makes_every_table_sortable(built):
    path, text = built
    page = (path.parent / "report.html").read_text(encoding="utf-8")
    figures = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)", text)
    assert figures, "the synthetic review has figures"
    assert page.count('src="data:image/png;base64,') == len(figures)
    assert 'src="figures/' not in page and "data-missing" not in page
    tables = len(re.findall(r"^\|[ :-]+\|", text, re.M))  # each Markdown table's rule line
    assert page.count('<table class="sortable">') == tables > 2 and "<table>" not in page
    assert page.startswith("<!DOCTYPE html>") and "<title>" in page


def _chromium_dom(chromium, page, tmp_path):
    """``page`` opened in headless Chromium, its DOM after the load event."""
    import subprocess

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
             f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom"]  # fmt: skip
    done = subprocess.run([chromium, *flags, page.as_uri()], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    return done.stdout


@pytest.mark.slow
def test_the_html_report_opens_in_headless_chromium_with_its_figures_and_sorts(built, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    from jaxbench.analysis.report_html import report_html

    # The review's own page: every figure decoded by the browser (a broken one is 0 wide).
    path, _ = built
    probe = """<script>window.addEventListener("load", () => {
      const widths = Array.from(document.images).map(i => i.naturalWidth);
      document.body.dataset.widths = widths.join();
    });</script></body>"""
    page = tmp_path / "report.html"
    page.write_text((path.parent / "report.html").read_text().replace("</body>", probe))
    dom = _chromium_dom(chromium, page, tmp_path)
    widths = re.search(r'data-widths="([^"]*)"', dom).group(1).split(",")
    assert widths and all(int(w) > 100 for w in widths), widths
    # A click on a header sorts by value (numbers as numbers), a second click reverses.
    table = ("| case | ratio [CI] | verdict |\n| --- | ---: | --- |\n"
             "| b | 10.5 [9, 12] | slower |\n| a | 2.906 [1.865, 4.528] | slower |\n"
             "| c | 0.98 [0.95, 1.01] | same |\n| d | n/a | inconclusive |\n")  # fmt: skip
    clicks = """<script>
      const th = document.querySelectorAll("table.sortable th")[1];
      const names = () => Array.from(document.querySelectorAll("tbody tr"),
                                     r => r.cells[0].textContent);
      th.click(); const up = names();
      th.click(); const down = names();
      document.body.dataset.up = up.join(); document.body.dataset.down = down.join();
    </script></body>"""  # fmt: skip
    sorted_page = tmp_path / "sorted.html"
    sorted_page.write_text(report_html(table, tmp_path, "t").replace("</body>", clicks))
    dom = _chromium_dom(chromium, sorted_page, tmp_path)
    assert 'data-up="c,a,b,d"' in dom and 'data-down="d,b,a,c"' in dom, dom[-600:]


def test_sweep_panels_read_in_sweep_order_not_as_text():
    from jaxbench.analysis.report_figures import ranked_cases
    from jaxbench.store.record import case_sort_key

    cases = [f"loop/at_set trip={t} width=1" for t in (1024, 64, 256)]
    assert sorted(cases, key=case_sort_key) == [cases[1], cases[2], cases[0]]
    assert sorted(cases) == [cases[0], cases[2], cases[1]]  # as text: 1024, 256, 64
    moved = pd.Series({cases[2]: 0.5})  # the one that moved leads, the rest in sweep order
    assert ranked_cases(cases, moved, 3) == [cases[2], cases[1], cases[0]]
    assert ranked_cases(cases, moved, 2) == [cases[2], cases[1]]


def test_the_scaling_section_draws_latency_against_each_swept_parameter(built):
    path, text = built
    body = section(text, "Scaling exponents")
    (image,) = re.findall(r"!\[latency against swept parameters\]\((figures/[^)]+\.png)\)", body)
    assert (path.parent / image).stat().st_size > 10_000


def test_a_sweep_figure_draws_one_line_per_version_through_the_medians():
    from jaxbench.analysis import facets

    points = pd.DataFrame({
        "benchmark": "loop/at_set", "backend": "cpu", "device_kind": "cpu", "machine": "vm",
        "params": "width=1", "swept": "trip", "x": [64.0, 256.0, 1024.0] * 4,
        "median_s": [1e-6, 4e-6, 16e-6] * 2 + [1e-6, 8e-6, 64e-6] * 2,
        "jax": ["0.4.9"] * 6 + ["0.4.10"] * 6, "process": ["p"] * 12,
    })  # fmt: skip
    fig = facets.sweep_grid(points)
    (ax,) = fig.axes
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) == 3]
    assert len(lines) == 2 and ax.get_xscale() == ax.get_yscale() == "log"
    assert sorted(tuple(line.get_ydata()) for line in lines) == [(1e-6, 4e-6, 16e-6),
                                                                 (1e-6, 8e-6, 64e-6)]  # fmt: skip
    # A dot per record, in its version's color: one marker-only line a version.
    dots = [line for line in ax.get_lines() if line.get_linestyle() == "None"]
    assert sorted(len(line.get_xdata()) for line in dots) == [6, 6]
    assert {line.get_color() for line in dots} == {line.get_color() for line in lines}
    with pytest.raises(ValueError, match="no swept parameter"):
        facets.sweep_grid(points.iloc[:0])
