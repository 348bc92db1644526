"""``jaxbench compare``: two result sets or versions, or two live variants interleaved."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jaxbench.cli.lines import (
    PairProgress,
    print_exponent_changes,
    print_live_exponent_changes,
)
from jaxbench.cli.options import (
    CURRENT,
    EXIT_MEANINGS,
    Alpha,
    Backend,
    Candidate,
    CompileThreshold,
    FailOnUndecided,
    JsonOut,
    MarkdownOut,
    Rounds,
    SetA,
    SetB,
    Threshold,
    VersionEnvOptions,
    check_output_files,
    check_rule_options,
    console,
    err_console,
    exit_status,
    fail,
    given_text,
    pythons_for,
    side_label,
    side_params,
    writable_folder,
    write_summary,
    write_verdicts,
)
from jaxbench.cli.selection import RecordedSelection, Selection, version_command
from jaxbench.live_defaults import (
    DEFAULT_MAX_PAIRS,
    DEFAULT_MAX_TIME_S,
    DEFAULT_PAIRS,
    DEFAULT_PAIRS_STEP,
    DEFAULT_ROUNDS,
)
from jaxbench.measure.trace import TRACE_CALLS

if TYPE_CHECKING:
    from jaxbench.cluster.pyenvs import VersionEnvs

BASELINE_HELP = (
    f"Results path or JAX version; live: {CURRENT}, a path to a python, or a JAX version."
)


def _offline(baseline: str, candidate: str, results: list[Path], opts: dict[str, Any],
             chosen: RecordedSelection | None = None, json_out: Path | None = None,
             markdown: Path | None = None) -> None:  # fmt: skip
    """Compare recorded results; every file is read once: records and calibrations together.

    ``chosen``: compare only the records it admits (the selection options), else all.
    """
    from jaxbench.store import collector_paused

    with collector_paused():
        _compare_recorded(baseline, candidate, results, opts, chosen, json_out, markdown)


def _same_records(what: str) -> None:
    err_console.print(f"warning: baseline and candidate are the same records ({what}): every "
                      "ratio is 1 (an A/A check of the tool, not a comparison)",
                      highlight=False)  # fmt: skip


def _compare_recorded(baseline: str, candidate: str, results: list[Path], opts: dict[str, Any],
                      chosen: RecordedSelection | None, json_out: Path | None,
                      markdown: Path | None) -> None:  # fmt: skip
    from jaxbench.analysis import compare_versions
    from jaxbench.analysis.compare import BASIS
    from jaxbench.analysis.frames import results_of
    from jaxbench.store import Loaded, load
    from jaxbench.tables import comparison_model, comparison_table, verdict_notes

    read = Loaded()

    def load_results(paths: list[Path]) -> tuple[Any, list]:
        loaded = load(paths, kinds={"record", "calibration"})
        read.extend(loaded)
        files.append(loaded.files)
        return results_of(loaded)

    files: list[set[Path]] = []  # what each load read
    as_paths = [Path(baseline), Path(candidate)]
    exists = [p.exists() for p in as_paths]
    if all(exists):
        import pandas as pd

        frames = []
        if as_paths[0].resolve() == as_paths[1].resolve():  # an A/A check: keep the sides apart
            _same_records(baseline)
            baseline, candidate = f"{baseline} (baseline)", f"{candidate} (candidate)"
        for side, path in zip((baseline, candidate), as_paths, strict=True):
            frame, problems = load_results([path])
            _print_problems(problems)
            if frame.empty:
                raise fail(f"{path}: no jaxbench or asv records could be loaded")
            frames.append(frame.assign(side=side))
        if (shared := files[0] & files[1]) and files[0] != files[1]:
            err_console.print(f"warning: the sides share {len(shared)} file(s) (e.g. "
                              f"{min(shared)}): their processes are on both sides, which pulls "
                              "every ratio towards 1", highlight=False)  # fmt: skip
        frame, by = pd.concat(frames, ignore_index=True), "side"
    elif any(exists):
        path, other = (baseline, candidate) if exists[0] else (candidate, baseline)
        raise fail(f"{path!r} is a path but {other!r} is not: give two result paths, "
                   "or two JAX versions found in --results")  # fmt: skip
    else:
        for side in (baseline, candidate):  # a version has no slash and no file suffix
            if "/" in side or os.sep in side or side.endswith((".jsonl", ".json")):
                raise fail(f"{side!r}: no such file or folder (nor a JAX version)")
        missing = [str(p) for p in results if not p.exists()]
        if missing:
            raise fail(f"--results {missing[0]!r}: no such file or folder")
        frame, problems = load_results(results)
        _print_problems(problems)
        if frame.empty:
            raise fail(f"no records could be loaded from {', '.join(map(str, results))}")
        by = "version"
        if baseline == candidate:
            _same_records(f"JAX {baseline}")
    if chosen is not None:
        frame = frame[chosen.admits(frame)]
        if frame.empty:
            raise fail("no record of the selected cases (-w, -s, --param, ...); `jaxbench show` "
                       "lists the cases recorded")  # fmt: skip
    fail_on_undecided = opts.pop("fail_on_undecided", False)
    try:
        result = compare_versions(frame, baseline, candidate, by=by, **opts)
    except ValueError as exc:
        raise fail(str(exc)) from None
    for reason in result.kept_apart:
        console.print(f"kept apart: {reason}", highlight=False)
    for case in result.unmatched:
        console.print(f"unmatched: {case}", highlight=False)
    for failure in result.failed:
        console.print(f"failed: {failure}", highlight=False)
    if result.table.empty and not result.failed:
        raise fail(f"no common case: {baseline} and {candidate} share no case measured under "
                   "the same condition (see unmatched and kept apart above)")  # fmt: skip
    if not result.table.empty:
        console.print(comparison_table(result))
    for line in verdict_notes(result.table):
        console.print(line, highlight=False)
    console.print(f"mode: sequential; {BASIS}; verdicts: {_counts(result.table)}")
    _print_processes_needed(result, opts)
    print_exponent_changes(frame, "side" if by == "side" else "jax", baseline, candidate,
                            opts["alpha"])  # fmt: skip
    roots = results if not all(exists) else as_paths
    _cite_calibration(roots, set(result.table["case"]), read)
    code = exit_status(result.table["verdict"], fail_on_undecided, result.candidate_failed)
    write_verdicts(json_out, "compare", _rows(result.table), code, mode="sequential",
                   baseline=baseline, candidate=candidate, threshold=opts["threshold"],
                   alpha=opts["alpha"],
                   failed=[dataclasses.asdict(f) for f in result.failed])  # fmt: skip
    if markdown is not None:
        write_summary(markdown, f"jaxbench compare: {candidate} vs {baseline}",
                      comparison_model(result),
                      [*(f"Failed: {f}." for f in result.failed),
                       *_summary_lines(result.table, f"sequential; {BASIS}", code)])  # fmt: skip
    raise typer.Exit(code)


def _rows(table: Any) -> list[dict[str, Any]]:
    """A verdict table's rows as JSON objects (missing values ``null``)."""
    import json

    return json.loads(table.to_json(orient="records", default_handler=str))


def _print_processes_needed(result: Any, opts: dict[str, Any]) -> None:
    """One line: processes a side this machine needs to decide a 5 % change, and what it has."""
    import math

    from jaxbench.analysis.compare import PLANNED_EFFECT, processes_to_decide
    from jaxbench.inference.verdicts import MAX_ADVICE_UNITS

    need, spread = processes_to_decide(result.table, PLANNED_EFFECT, opts["threshold"],
                                       opts["alpha"], opts.get("strict", False))  # fmt: skip
    table = result.table
    have = int(table[["n_baseline", "n_candidate"]].min(axis=1).median()) if len(table) else 0
    if need is None and opts["threshold"] > PLANNED_EFFECT:  # the change cannot be called
        console.print(f"design: a {PLANNED_EFFECT:.0%} change does not reach the threshold "
                      f"{opts['threshold']:.1%}: no number of processes calls it slower",
                      highlight=False)  # fmt: skip
        return
    if need is None and not math.isnan(spread):  # a spread too wide for any advice
        console.print(f"design: the spread between processes (sd {spread:.3f} in log, median "
                      f"over the cases) is too wide to call a {PLANNED_EFFECT:.0%} change with "
                      f"fewer than {MAX_ADVICE_UNITS} processes a side: find what disturbs "
                      "the processes (a busy machine, frequency scaling) before running more",
                      highlight=False)  # fmt: skip
        return
    if need is None:
        console.print(f"design: {have} process(es) a side measure no spread between processes; "
                      f"run at least 2 a side (each run is one)", highlight=False)  # fmt: skip
        return
    verdict = "enough" if have >= need else f"run {need - have} more a side"
    console.print(f"design: to call a {PLANNED_EFFECT:.0%} change slower with 80 % power this "
                  f"machine needs about {need} processes a side (spread between processes: sd "
                  f"{spread:.3f} in log, median over the cases); these runs have {have}: "
                  f"{verdict}", highlight=False)  # fmt: skip


def _counts(table: Any) -> str:
    from jaxbench.inference.verdicts import VERDICTS

    counts = table["verdict"].value_counts()
    return ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts) or "none"


def _cite_calibration(folders: list[Path], cases: set[str], read: Any = None) -> None:
    """One line per compared case that has a calibration of this host, or how to make one.

    The calibrations under ``folders`` and ``results/``, each file read once: ``read`` (a
    :class:`jaxbench.store.Loaded`) holds what the command read already (its calibrations are
    used, its files not read again). A calibration measures one case's spread on one host, so
    only the newest complete one of the same case and host is cited (an interrupted one where
    there is no other, and said so).
    """
    from jaxbench.env import host
    from jaxbench.store import Loaded, load
    from jaxbench.store.calibration import newest_calibration, partial_note

    read = read if read is not None else Loaded()
    here = host()["hostname"]
    roots = [f for f in dict.fromkeys([*folders, Path("results")]) if f.exists()]
    more = load(roots, kinds={"calibration"}, skip=read.files)
    found = [*read.models("calibration"), *more.models("calibration")]
    by_case: dict[str, list] = {}  # one pass over the calibrations, not one per case
    for c in found:
        if c.case.label in cases:
            by_case.setdefault(c.case.label, []).append(c)
    cited = [(case, newest_calibration(by_case[case], here)) for case in sorted(by_case)]
    cited = [(case, cal) for case, cal in cited if cal is not None]
    if not cited:
        console.print(f"calibration: none of these cases on {here} under "
                      f"{', '.join(map(str, roots))}; `jaxbench calibrate` measures the A/A "
                      "false-alarm rate and the smallest detectable change of a case here",
                      highlight=False)  # fmt: skip
        return
    for case, cal in cited:
        s = cal.summary
        rate = "n/a" if s.false_alarm_rate is None else f"{s.false_alarms}/{s.comparisons}"
        ci = "" if s.false_alarm_ci_high is None else f" (95 % up to {s.false_alarm_ci_high:.0%})"
        det = "n/a" if s.detectable_80 is None else f"{s.detectable_80:.1%}"
        d = s.design
        console.print(f"calibration of {case} on {here} ({cal.started_at}, run {cal.run_id})"
                      f"{partial_note(cal)}: "
                      f"A/A false alarms {rate}{ci}; {d.pairs} pairs at the first look detect "
                      f"{det} at 80 % power", highlight=False)  # fmt: skip


def _summary_lines(table: Any, design: str, code: int) -> list[str]:
    """The Markdown summary's lines under its table: the verdicts, the design, the exit."""
    return [f"**Verdicts:** {_counts(table)}.", f"Design: {design}.",
            f"Exit status {code}: {EXIT_MEANINGS[code]}."]  # fmt: skip


def _print_problems(problems: list) -> None:
    for p in problems:
        err_console.print(f"warning: {p.path}: {p.reason}", highlight=False)


def _live(
    baseline: str,
    candidate: str,
    cases: list,
    set_a: dict[str, Any],
    set_b: dict[str, Any],
    back_to_back: bool,
    backend: str,
    schedule_fields: dict[str, Any],
    envs: VersionEnvs,
    out: Path,
    opts: dict[str, Any],
    json_out: Path | None = None,
    markdown: Path | None = None,
) -> None:
    from jaxbench.analysis.compare import STEADY_STATE
    from jaxbench.analysis.live import comparisons_frame
    from jaxbench.analysis.programs import paired_op_lines
    from jaxbench.interleave import (
        LiveStopped,
        Schedule,
        Variant,
        cut_short_files,
        live_path,
        resume_live,
        run_live,
        summary_line,
    )
    from jaxbench.interleave.verdict import BASIS
    from jaxbench.tables import live_comparison_model, live_comparison_table, verdict_notes

    try:
        schedule = Schedule(**schedule_fields)
    except ValueError as exc:
        raise fail(str(exc)) from None
    python_a, python_b = pythons_for((("baseline", baseline), ("candidate", candidate)), envs)
    a = Variant(side_label(baseline, set_a), python_a, set_a)
    b = Variant(side_label(candidate, set_b), python_b, set_b)

    saved = PairProgress(schedule.max_pairs)
    fail_on_undecided = opts.pop("fail_on_undecided", False)
    mode = "back_to_back" if back_to_back else "interleaved"
    labels = {c.label for c in cases}

    def ran(c: Any) -> bool:  # by these sides, in this mode, on selected cases
        sides = tuple((s.label, s.python) if s else None for s in (c.baseline, c.candidate))
        return (c.mode == mode and c.label in labels
                and sides == ((a.label, a.python), (b.label, b.python)))  # fmt: skip

    found, paths = [], []
    try:
        for cut, comparisons in cut_short_files(out, ran, schedule.pairs).items():
            err_console.print(f"completing the first look cut short in {cut}", highlight=False)
            resumed = resume_live(cut, comparisons, a, b, backend, opts["threshold"],
                                  opts["alpha"], saved)  # fmt: skip
            found += resumed.comparisons
            paths.append(resumed.path)
        done = {c.label for c in found}
        rest = [(c.workload, dict(c.params)) for c in cases if c.label not in done]
        if rest:
            run = run_live(a, b, rest, live_path(out), backend, schedule, mode, on_saved=saved,
                           **opts)  # fmt: skip
            found += run.comparisons
            paths.append(run.path)
    except LiveStopped as exc:
        raise fail(exc.line(), code=exc.exit_code) from None
    frame = comparisons_frame(found, opts["threshold"], opts["alpha"], opts["strict"])
    for c in found:
        err_console.print(summary_line(c), highlight=False)
    console.print(live_comparison_table(frame))
    for line in verdict_notes(frame):
        console.print(line, highlight=False)
    said = "back to back (sequential)" if back_to_back else "interleaved"
    console.print(f"mode: {said}; {BASIS[mode]}; alpha {opts['alpha']:g} spent over up to "
                  f"{schedule.looks} look(s) (O'Brien-Fleming type); verdicts: "
                  f"{_counts(frame)}")  # fmt: skip
    print_live_exponent_changes(found, opts["alpha"])
    if schedule.trace_calls:
        for c in found:
            console.print(c.label, style="bold", highlight=False, markup=False)
            for line in paired_op_lines(c) or ["ops: no pair traced the case"]:
                console.print(line, highlight=False, markup=False, soft_wrap=True)
    for path in paths:
        console.print(f"wrote {path}", highlight=False)
    _cite_calibration([out], {c.label for c in found})
    failed = any(c.status != "ok" for c in found)
    code = 1 if failed else exit_status(frame["verdict"], fail_on_undecided)
    rows = _rows(frame.assign(metric=STEADY_STATE))  # a live pair times the steady state only
    write_verdicts(json_out, "compare", rows, code, mode=mode, baseline=a.label,
                   candidate=b.label, threshold=opts["threshold"], alpha=opts["alpha"],
                   live=", ".join(map(str, paths)))  # fmt: skip
    if markdown is not None:
        write_summary(markdown, f"jaxbench compare: {b.label} vs {a.label}",
                      live_comparison_model(frame),
                      _summary_lines(frame, f"{said}; {BASIS[mode]}", code))  # fmt: skip
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``compare`` to ``app``."""

    @version_command(app, "compare")
    def compare_cmd(
        baseline: Annotated[str, typer.Argument(parser=given_text, help=BASELINE_HELP)],
        candidate: Candidate,
        select: Selection,
        venvs: VersionEnvOptions,
        results: Annotated[
            list[Path] | None,
            typer.Option("--results", "-r", help="Where to find versions (default results/)."),
        ] = None,
        interleave: Annotated[
            bool,
            typer.Option(
                "--interleave", metavar="", help="Live: two workers in alternating blocks."
            ),
        ] = False,
        back_to_back: Annotated[
            bool,
            typer.Option(
                "--back-to-back", metavar="", help="Live, but one worker after the other."
            ),
        ] = False,
        set_a: SetA = None,
        set_b: SetB = None,
        backend: Backend = "cpu",
        pairs: Annotated[
            int, typer.Option(help="Live: process pairs of the first look.")
        ] = DEFAULT_PAIRS,
        max_pairs: Annotated[
            int, typer.Option(help="Live: most pairs, added while a case is inconclusive.")
        ] = DEFAULT_MAX_PAIRS,
        pairs_step: Annotated[
            int, typer.Option(help="Live: pairs added per further look.")
        ] = DEFAULT_PAIRS_STEP,
        max_time: Annotated[
            float,
            typer.Option(help="Live: seconds of pairs a case may take before it gets no more."),
        ] = DEFAULT_MAX_TIME_S,
        rounds: Rounds = DEFAULT_ROUNDS,
        calls_per_block: Annotated[int, typer.Option(help="Live: timed calls per block.")] = 10,
        warmup_rounds: Annotated[int, typer.Option(help="Live: untimed rounds first.")] = 3,
        seed: Annotated[int, typer.Option(min=0, help="Live: seed of the block order.")] = 0,
        trace: Annotated[
            bool,
            typer.Option(
                "--trace",
                metavar="",
                help="Live, interleaved: after each pair's timed rounds, each worker traces a "
                "few steady-state calls (jax.profiler); the op diff over the pairs is printed.",
            ),
        ] = False,
        out: Annotated[
            str, typer.Option("--out", "-o", help="Live: folder for `interleave-<id>.jsonl`.")
        ] = "results",
        threshold: Threshold = 0.02,
        compile_threshold: CompileThreshold = 0.10,
        alpha: Alpha = 0.05,
        strict: Annotated[
            bool,
            typer.Option(
                "--strict",
                metavar="",
                help="Call a change only when the whole interval lies "
                "beyond the threshold (minimum-effect test; needs far more processes).",
            ),
        ] = False,
        json_out: JsonOut = None,
        markdown: MarkdownOut = None,
        fail_on_undecided: FailOnUndecided = False,
    ) -> None:
        """Compare a baseline with a candidate: ratio, interval over processes, verdict per case.

        Two result paths (files or folders) or two JAX versions found in --results: the
        sequential comparison of recorded runs, each run a process (with -w, -s, --param, ...:
        of the selected cases only). With --interleave (or
        --back-to-back): run both now, in several pairs of fresh worker processes, on the
        selected cases. Verdicts: slower, faster, same, inconclusive, unstable. Exit 0 when no
        case is slower, 1 when one is (or a case failed: live, or recorded on the candidate only
        where the baseline timed it), 2 on bad input, 3 with
        --fail-on-undecided when no case is slower but one is inconclusive or unstable.
        """
        try:
            check_rule_options(alpha, {"--threshold": threshold,
                                       "--compile-threshold": compile_threshold})  # fmt: skip
        except ValueError as exc:
            raise fail(str(exc)) from None
        check_output_files(json_out, markdown)
        opts = {"threshold": threshold, "alpha": alpha, "strict": strict,
                "fail_on_undecided": fail_on_undecided}  # fmt: skip
        if interleave and back_to_back:
            raise fail("--interleave and --back-to-back exclude each other: pick one")
        if trace and not interleave:
            raise fail("--trace applies to --interleave (its pairs' workers trace the case); "
                       "recorded runs keep the traces of `run --trace`")  # fmt: skip
        if not (interleave or back_to_back):
            if set_a or set_b:
                raise fail("--set-a/--set-b apply to --interleave (both sides run now); recorded "
                           "runs are compared case by case as measured")  # fmt: skip
            chosen = None
            if select.given:  # the selected cases' records only, as `explain` of result sets
                try:
                    chosen = select.recorded()
                except ValueError as exc:
                    raise fail(str(exc)) from None
            live_only = {"--backend": (backend, "cpu"), "--pairs": (pairs, DEFAULT_PAIRS),
                         "--max-pairs": (max_pairs, DEFAULT_MAX_PAIRS),
                         "--pairs-step": (pairs_step, DEFAULT_PAIRS_STEP),
                         "--max-time": (max_time, DEFAULT_MAX_TIME_S),
                         "--rounds": (rounds, DEFAULT_ROUNDS),
                         "--calls-per-block": (calls_per_block, 10),
                         "--warmup-rounds": (warmup_rounds, 3), "--seed": (seed, 0),
                         "--out": (out, "results")}  # fmt: skip
            if given := [name for name, (value, default) in live_only.items() if value != default]:
                raise fail(f"{', '.join(given)}: a live comparison's option (--interleave, "
                           "--back-to-back); a recorded one reads what was measured")  # fmt: skip
            _offline(baseline, candidate, results or [Path("results")],
                     opts | {"compile_threshold": compile_threshold}, chosen, json_out,
                     markdown)  # fmt: skip
            return
        if results:
            raise fail("--results applies to recorded comparisons, not --interleave")

        try:
            cases = select.cases()
            from jaxbench.backends import check_backend

            check_backend(backend)
        except ValueError as exc:
            raise fail(str(exc)) from None
        a, b = side_params(cases, set_a, "--set-a"), side_params(cases, set_b, "--set-b")
        schedule = {"pairs": pairs, "max_pairs": max_pairs, "pairs_step": pairs_step,
                    "max_time_s": max_time, "rounds": rounds, "calls_per_block": calls_per_block,
                    "warmup_rounds": warmup_rounds, "seed": seed,
                    "trace_calls": TRACE_CALLS if trace else 0}  # fmt: skip
        envs = venvs.envs([c.workload for c in cases], specs=(baseline, candidate))
        _live(baseline, candidate, cases, a, b, back_to_back, backend, schedule,
              envs, writable_folder(out), opts, json_out, markdown)  # fmt: skip
