"""``jaxbench review BASE CAND``: the one command for a JAX upgrade review."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from jaxbench.cli.lines import PairProgress
from jaxbench.cli.options import (
    EXIT_MEANINGS,
    Alpha,
    Backend,
    Budget,
    CompileThreshold,
    FailOnUndecided,
    JsonOut,
    MarkdownOut,
    MinSamples,
    Rounds,
    Threshold,
    TraceRecords,
    VersionEnvOptions,
    Warmup,
    check_output_files,
    check_rule_options,
    console,
    err_console,
    exit_status,
    fail,
    given_text,
    pythons_for,
    timing_fields,
    writable_folder,
    write_summary,
    write_verdicts,
)
from jaxbench.cli.selection import Selection, version_command
from jaxbench.live_defaults import (
    DEFAULT_CALLS_PER_BLOCK,
    DEFAULT_MAX_PAIRS,
    DEFAULT_PAIRS,
    DEFAULT_PAIRS_STEP,
    DEFAULT_ROUNDS,
)

#: The review's folder when ``--out`` is not given, relative to the current folder: outside the
#: project's committed ``results/`` (``results/review/`` holds reviews kept as records of the
#: project; a new one never writes there unless asked); ``/review/`` is git-ignored.
DEFAULT_OUT = "review/{baseline}-{candidate}"


def run_options(select: Selection, backend: str, timing: dict, trace: bool = False) -> list[str]:
    """The ``jaxbench run`` arguments of a selection, a backend, timing fields and ``--trace``.

    With ``--record-refused``: the selection was checked here, under this interpreter's JAX; a
    factory that refuses a case under a side's JAX only is that side's ``failed`` record, not
    the end of its run (and of the review) with exit 2.
    """
    out = select.argv()
    out += ["-b", backend, "--budget", str(timing["budget_s"]), "--min-samples",
            str(timing["min_samples"]), "--warmup", str(timing["warmup_calls"]),
            "--record-refused"]  # fmt: skip
    return out + (["--trace"] if trace else [])


#: Help of ``review``'s baseline: what a side may be (:func:`jaxbench.cli.options.pythons_for`).
REVIEW_BASELINE_HELP = "The JAX version in use (its venv), current, or a path to a python."


def jax_version(python: str) -> str:
    """The JAX version an interpreter imports (exit 2 with its error when it cannot)."""
    from jaxbench.cluster import pyenvs

    try:
        return pyenvs.imported_jax(python)
    except pyenvs.PyEnvError as exc:
        raise fail(f"{python}: {exc}") from None


def _drift(side: Any, backend: str, reference: Path | None, logs: Path,
           checks: list[tuple[str | None, list[str], Path | None]]) -> list[str]:  # fmt: skip
    """Check numerical drift of one side; a check whose rows are already there is reused.

    Args:
        side: The side (its interpreter and folder).
        backend: ``-b``.
        reference: ``--reference`` of the built-in sets, or ``None`` for drift's own.
        logs: Folder of the logs.
        checks: Per check: the user workload (``None``: the built-in sets), its ``--param``
            texts, and its reference folder (:func:`_drift_checks`).

    Returns:
        One status per check (``within tolerance``, ``findings``, ``reused``, or
        ``not checked; see LOG``).
    """
    from jaxbench.store import load
    from jaxbench.upgrade.screen import run_logged

    loaded = load([side.folder], kinds={"jaxbench-drift"}) if side.folder.exists() else None
    done = {i.model.workload for i in loaded.of("jaxbench-drift")} if loaded else set()
    users = {w for w, _, _ in checks if w is not None}
    statuses = []
    for workload, _, ref in checks:
        if bool(done - users) if workload is None else workload in done:
            statuses.append("reused")
            continue
        command = [side.python, "-m", "jaxbench", "drift", "-o", str(side.folder), "-b", backend]
        if workload is not None:
            command += ["-w", workload, "--reference", str(ref)]
        elif reference is not None:
            command += ["--reference", str(reference)]
        log = logs / f"drift-{side.name}{'-' + _safe(workload) if workload else ''}.log"
        code, _ = run_logged(command, log)
        statuses.append({0: "within tolerance", 1: "findings"}.get(code, f"not checked; see {log}"))
    return statuses


def _safe(name: str) -> str:
    from jaxbench.drift.user import reference_folder

    return reference_folder(name).name


def _drift_checks(cases: list, folder: Path) -> list[tuple[str | None, list[str], Path | None]]:
    """The drift checks of the selection.

    The built-in sets when a built-in family is selected; each user workload against a
    reference its baseline saves under ``folder/drift-reference/`` (:func:`_user_reference`).
    """
    from jaxbench.workloads.source import user_workload_names

    names = [c.workload for c in cases]
    users = user_workload_names(names)
    checks: list[tuple[str | None, list[str], Path | None]] = []
    if any(n not in users for n in names):
        checks.append((None, [], None))
    for name in users:
        params = [f"{k}={v}" for c in cases if c.workload == name for k, v in c.params.items()]
        checks.append((name, list(dict.fromkeys(params)), folder / "drift-reference" / _safe(name)))
    return checks


def _user_reference(baseline: Any, backend: str, logs: Path, workload: str, params: list[str],
                    ref: Path) -> str | None:  # fmt: skip
    """Save ``workload``'s drift reference with the baseline's interpreter, once.

    Returns:
        ``None`` when the reference is there; else why not (the log to read).
    """
    from jaxbench.drift.reference import manifest_path
    from jaxbench.upgrade.screen import run_logged

    if manifest_path(ref).exists():
        return None
    command = [baseline.python, "-m", "jaxbench", "drift", "-w", workload, "--save-reference",
               "--reference", str(ref), "-b", backend,
               *[a for p in params for a in ("--param", p)]]  # fmt: skip
    log = logs / f"drift-reference-{_safe(workload)}.log"
    code, _ = run_logged(command, log)
    return None if code == 0 else f"no reference saved; see {log}"


def register(app: typer.Typer) -> None:
    """Add ``review`` to ``app``."""

    @version_command(app, "review")
    def review_cmd(
        baseline: Annotated[str, typer.Argument(parser=given_text, help=REVIEW_BASELINE_HELP)],
        candidate: Annotated[
            str, typer.Argument(help="The JAX version to upgrade to; the same kinds.")
        ],
        select: Selection,
        venvs: VersionEnvOptions,
        processes: Annotated[
            int, typer.Option(help="Recorded processes a side (the unit of the screen).")
        ] = 3,
        budget: Budget = 0.2,
        min_samples: MinSamples = 20,
        warmup: Warmup = 3,
        pairs: Annotated[int, typer.Option(help="Live: process pairs of the first look.")] = (
            DEFAULT_PAIRS
        ),
        max_pairs: Annotated[int, typer.Option(help="Live: most pairs.")] = DEFAULT_MAX_PAIRS,
        pairs_step: Annotated[int, typer.Option(help="Live: pairs added per look.")] = (
            DEFAULT_PAIRS_STEP
        ),
        rounds: Rounds = DEFAULT_ROUNDS,
        calls_per_block: Annotated[int, typer.Option(help="Live: timed calls per block.")] = (
            DEFAULT_CALLS_PER_BLOCK
        ),
        threshold: Threshold = 0.02,
        compile_threshold: CompileThreshold = 0.10,
        alpha: Alpha = 0.05,
        drift: Annotated[
            bool, typer.Option(metavar="", help="Check numerical drift per side.")
        ] = True,
        trace: TraceRecords = False,
        reference: Annotated[
            Path | None, typer.Option(help="Drift reference folder (default: drift's own).")
        ] = None,
        backend: Backend = "cpu",
        json_out: JsonOut = None,
        markdown: MarkdownOut = None,
        fail_on_undecided: FailOnUndecided = False,
        out: Annotated[
            str | None,
            typer.Option(
                "--out",
                "-o",
                help="Folder of the review (default review/BASE-CAND under the current folder, "
                "outside the project's committed results/).",
            ),
        ] = None,
    ) -> None:
        """Review a JAX upgrade: screen, confirm live, explain, check drift, report.

        1. Screen: every selected case in recorded runs, --processes a side, the sides in
           turn (each `jaxbench run` is one process, saving its programs).
        2. Confirm: each case the recorded runs call slower, faster, inconclusive or unstable
           is compared live, in interleaved process pairs.
        3. Explain each change that holds from the saved programs (with --trace, also op by
           op from each screen process's profiler trace).
        4. Check numerical drift per side.
        5. Write report/report.md.

        A second run with the same --out reuses what is there. Exit 1 when a case is slower
        (its final steady-state verdict, or its recorded compile time, as in `compare`), 2 on
        bad input, 3 with --fail-on-undecided when no case is slower but one is undecided
        (inconclusive, unstable, or recorded and live verdicts that disagree).
        """
        from jaxbench.backends import check_backend
        from jaxbench.interleave import Schedule

        try:
            check_rule_options(alpha, {"--threshold": threshold,
                                       "--compile-threshold": compile_threshold})  # fmt: skip
            if processes < 2:
                raise ValueError(f"--processes {processes}: expected at least 2 (the process "
                                 "is the unit: one a side gives no interval)")  # fmt: skip
            refused: list = []  # under this interpreter's JAX; a side's may take them
            cases = select.cases(refused=refused)
            check_backend(backend)
            schedule = Schedule(pairs=pairs, max_pairs=max_pairs, pairs_step=pairs_step,
                                rounds=rounds, calls_per_block=calls_per_block)  # fmt: skip
            timing = timing_fields(budget, min_samples, warmup)
        except ValueError as exc:
            raise fail(str(exc)) from None
        check_output_files(json_out, markdown)
        if baseline == candidate:
            raise fail(f"{baseline} twice: a review compares two versions")
        for case, why in refused:  # measured all the same: each side's record says how it fared
            err_console.print(f"note: {case.label}: refused under this interpreter's JAX "
                              f"({why}); each version runs it and records it failed where it "
                              "fails", highlight=False, soft_wrap=True)  # fmt: skip
        if reference is not None and not reference.is_dir():
            what = "a file, expected a folder" if reference.exists() else "no such folder"
            raise fail(f"--reference {reference}: {what}")
        _review(baseline, candidate, cases, run_options(select, backend, timing, trace),
                processes, schedule, backend,
                venvs.envs([c.workload for c in cases], specs=(baseline, candidate)),
                out, drift, reference,
                {"threshold": threshold, "compile_threshold": compile_threshold,
                 "alpha": alpha}, json_out, markdown, fail_on_undecided)  # fmt: skip


def _review(
    baseline: str,
    candidate: str,
    cases: list,
    run_args: list[str],
    processes: int,
    schedule: Any,
    backend: str,
    envs: Any,
    out: str | None,
    drift: bool,
    reference: Path | None,
    rule: dict[str, float],
    json_out: Path | None = None,
    markdown: Path | None = None,
    fail_on_undecided: bool = False,
) -> None:
    from jaxbench.analysis.drift import new_findings
    from jaxbench.analysis.report import DEFAULT_SECTIONS, load_review, render_report
    from jaxbench.analysis.review import Settings
    from jaxbench.folders import FolderBusy, remove_if_only_lock, sole_writer
    from jaxbench.interleave import LiveStopped, Variant, live_path, resume_live, run_live
    from jaxbench.upgrade.confirm import finished, open_cases, unfinished
    from jaxbench.upgrade.screen import ScreenError, Side, other_code, screen
    from jaxbench.upgrade.summary import answers, review_sections
    from jaxbench.workloads.source import source_of, user_workload_names

    given = DEFAULT_OUT.format(baseline=baseline, candidate=candidate) if out is None else out
    target = Path(given)
    made = not target.exists()
    folder = writable_folder(given)  # before any environment is built; '' is refused
    users = user_workload_names([c.workload for c in cases])
    if why := other_code(folder, {w: source_of(w).digest for w in users}):
        raise fail(why)
    try:
        pythons = pythons_for((("baseline", baseline), ("candidate", candidate)), envs,
                              distinct=True)  # fmt: skip
        versions = (jax_version(pythons[0]), jax_version(pythons[1]))
        if versions[0] == versions[1]:
            raise fail(f"{baseline} and {candidate} both import JAX {versions[0]}: a review "
                       "compares two versions")  # fmt: skip
    except typer.Exit:
        if made:
            remove_if_only_lock(folder)  # a refused review leaves no folder behind
        raise
    sides = [Side(v, p, folder / v) for v, p in zip(versions, pythons, strict=True)]
    labels = list(dict.fromkeys(c.label for c in cases))
    logs = folder / "logs"
    err_console.print(f"review: {len(labels)} case(s), JAX {versions[0]} -> {versions[1]}, "
                      f"{processes} processes a side, into {folder}", highlight=False)  # fmt: skip

    def progress(side: Side, number: int, seconds: float, reused: bool) -> None:
        what = "on disk, reused" if reused else f"{seconds:.0f} s"
        err_console.print(f"screen: process {number} of {processes}, JAX {side.name} ({what})",
                          highlight=False)  # fmt: skip

    settings = Settings(**rule)
    try:
        with sole_writer(folder, "--out"):
            screen(sides, processes, set(labels), run_args, logs, progress)
            review = load_review([folder], baseline=versions[0], candidate=versions[1],
                                 settings=settings)  # fmt: skip
            done = finished(review.live, *versions, schedule.pairs)
            opened = open_cases(review.results, labels)
            for reason in dict.fromkeys(r for c in review.comparisons for r in c.kept_apart):
                # e.g. a resumed screen run with other timing settings: not pooled, and said
                err_console.print(f"kept apart: {reason}", highlight=False)
            _say_processes_needed(review, processes, rule)
            if reused := [label for label in opened if label in done]:
                err_console.print(f"confirm: {len(reused)} case(s) compared live before, reused",
                                  highlight=False)  # fmt: skip
            need = [label for label in opened if label not in done]
            variants = [Variant(s.name, s.python, {}) for s in sides]

            def saved(n: int, path: Path) -> None:
                err_console.print(f"confirm: pair {n} saved in {path.name}", highlight=False)

            for path, found in unfinished(folder, *versions, schedule.pairs).items():
                err_console.print(f"confirm: completing the first look cut short in {path.name}",
                                  highlight=False)  # fmt: skip
                resumed = resume_live(path, found, *variants, backend, rule["threshold"],
                                      rule["alpha"], saved)  # fmt: skip
                completed = {c.label for c in resumed.comparisons}
                need = [label for label in need if label not in completed]
            if need:
                err_console.print(f"confirm: {len(need)} case(s) live, up to {schedule.max_pairs} "
                                  "process pairs", highlight=False)  # fmt: skip
                by_label = {c.label: c for c in cases}
                chosen = [(by_label[x].workload, dict(by_label[x].params)) for x in need]
                run_live(*variants, chosen,
                         live_path(folder), backend, schedule, threshold=rule["threshold"],
                         alpha=rule["alpha"],
                         on_saved=PairProgress(schedule.max_pairs, "confirm: "))  # fmt: skip
            if drift:
                checks = _drift_checks(cases, folder)
                for workload, params, ref in checks:
                    why = workload and _user_reference(sides[0], backend, logs, workload,
                                                       params, ref)  # fmt: skip
                    if why:
                        err_console.print(f"drift, {workload}: {why}", highlight=False)
                for side in sides:
                    statuses = _drift(side, backend, reference, logs, checks)
                    for (workload, _, _), status in zip(checks, statuses, strict=True):
                        what = workload or "built-in sets"
                        err_console.print(f"drift, JAX {side.name}, {what}: {status}",
                                          highlight=False)  # fmt: skip
            review = load_review([folder], baseline=versions[0], candidate=versions[1],
                                 settings=settings)  # fmt: skip
            found = answers(review, labels, finished(review.live, *versions, schedule.pairs),
                            versions)  # fmt: skip
            report = render_report(
                review, folder / "report", review_sections(found, DEFAULT_SECTIONS)
            )
    except FolderBusy as exc:
        raise fail(str(exc)) from None
    except ScreenError as exc:
        raise fail(f"{exc}; what was measured is in {folder}", code=1) from None
    except LiveStopped as exc:
        raise fail(f"live confirmation: {exc.line()}; the same command resumes from it",
                   code=exc.exit_code) from None  # fmt: skip
    except KeyboardInterrupt:
        raise fail(f"interrupted; what was measured is in {folder}, and the same command "
                   "resumes from it", code=130) from None  # fmt: skip
    _print(found)
    failed = [f for c in review.comparisons for f in c.failed]
    for failure in failed:  # timed by one version, failed in the other: the candidate's first
        console.print(f"failed: {failure}", highlight=False)
    console.print(f"report: {report}", highlight=False)
    drifted = new_findings(review.drift, *versions)
    for row in drifted.head(5).itertuples():  # what the upgrade moved beyond tolerance
        console.print(f"drift: JAX {versions[1]}, {row.workload} {row.dtype} {row.set} "
                      f"{row.output}: beyond tolerance (within it under {versions[0]}; "
                      f"max abs err {row.max_abs_err:.3g}, rtol {row.rtol:.3g})",
                      highlight=False, soft_wrap=True)  # fmt: skip
    if len(drifted) > 5:
        console.print(f"drift: ... and {len(drifted) - 5} more output(s)", highlight=False)
    lost = any(c.candidate_failed for c in review.comparisons) or not drifted.empty
    code = exit_status([v for a in found for v in a.verdicts()], fail_on_undecided, lost)
    write_verdicts(json_out, "review", [dataclasses.asdict(a) for a in found], code,
                   baseline=versions[0], candidate=versions[1], threshold=rule["threshold"],
                   alpha=rule["alpha"], report=str(report),
                   failed=[dataclasses.asdict(f) for f in failed],
                   drift_findings=drifted.to_dict(orient="records"))  # fmt: skip
    _summarize(markdown, found, versions, code, report, len(drifted))
    if code:
        raise typer.Exit(code)


def _say_processes_needed(review: Any, processes: int, rule: dict[str, float]) -> None:
    """One line: processes a side the screen would need to decide 5 % here, from its spread.

    The screen keeps ``--processes``: the spread is known only after it, and every case it
    leaves open goes to live pairs, which decide with far fewer processes.
    """
    from jaxbench.analysis.compare import PLANNED_EFFECT, processes_to_decide

    if not review.comparisons:
        return
    need, spread = processes_to_decide(review.comparisons[0].table, PLANNED_EFFECT,
                                       rule["threshold"], rule["alpha"])  # fmt: skip
    if need is None:
        return
    enough = (
        "enough"
        if processes >= need
        else (f"the screen has {processes}; the cases it leaves open are confirmed in live pairs")
    )
    err_console.print(f"screen: to call a {PLANNED_EFFECT:.0%} change from recorded runs alone "
                      f"this machine needs about {need} processes a side (spread between "
                      f"processes sd {spread:.3f}); {enough}", highlight=False)  # fmt: skip


def _summarize(path: Path | None, found: list, versions: Any, code: int, report: Path,
               drifted: int = 0) -> None:  # fmt: skip
    """``--markdown``: the review's answer table and lines, appended (a CI job's summary)."""
    from jaxbench.upgrade.summary import answer_counts, answers_table

    said = ", ".join(f"{n} {v}" for v, n in answer_counts(found).items() if n) or "none"
    meaning = (
        "a case is slower (steady state or compile time), failed on the candidate, or its "
        "outputs drifted"
        if code == 1
        else EXIT_MEANINGS[code]
    )
    lines = [f"**Verdicts:** {said}.", f"Exit status {code}: {meaning}.", f"Report: `{report}`."]
    if drifted:
        lines.append(f"**Drift:** {drifted} output(s) beyond tolerance under JAX {versions[1]} "
                     f"that JAX {versions[0]} kept within it (see the report).")  # fmt: skip
    for a in found:
        if a.explanation:
            lines.append(f"**{a.case}** ({a.verdict}): " + " ".join(a.explanation))
    write_summary(path, f"jaxbench review: JAX {versions[0]} -> {versions[1]}",
                  answers_table(found), lines)  # fmt: skip


def _print(found: list) -> None:
    from jaxbench.tables import rich_table
    from jaxbench.upgrade.summary import answers_table

    console.print(rich_table(answers_table(found, compact=True)))
    for a in found:
        if a.explanation:
            console.print(f"{a.case} ({a.verdict}):", style="bold", highlight=False, markup=False)
            for line in a.explanation:
                console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
