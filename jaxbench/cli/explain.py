"""``jaxbench explain``: what changed in the compiled program between two interpreters."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from jaxbench.cli.options import (
    CURRENT,
    Backend,
    Candidate,
    SetA,
    SetB,
    VersionEnvOptions,
    console,
    err_console,
    fail,
    given_text,
    pythons_for,
    side_label,
    side_params,
    writable_folder,
)
from jaxbench.cli.selection import RecordedSelection, Selection, version_command

SIDE_HELP = (
    f"Baseline: {CURRENT}, a path to a python, a JAX version (its venv, built once), or a "
    "result set (a folder or file of jaxbench run records, whose saved programs are read)."
)


def is_result_set(side: str) -> bool:
    """Whether a side names saved results (a folder, or a ``.jsonl``/``.json`` file)."""
    path = Path(side)
    return path.is_dir() or (path.is_file() and path.suffix in (".jsonl", ".json"))


def explain_result_sets(
    baseline: str, candidate: str, chosen: RecordedSelection | None, verdict: str | None
) -> int:
    """Explain every case both result sets hold (or those ``chosen`` admits) from saved artifacts.

    Each side is read once (:func:`jaxbench.analysis.load_results`); the same frames give the
    change of each swept parameter's scaling exponent at the end.

    Returns:
        The exit status: 0, or 1 when no case could be explained.
    """
    import pandas as pd

    from jaxbench.analysis import load_results
    from jaxbench.analysis.programs import artifact_of, traced_op_lines
    from jaxbench.cli.lines import print_exponent_changes
    from jaxbench.explain.saved import explain_saved
    from jaxbench.store import ArtifactError

    if Path(baseline).resolve() == Path(candidate).resolve():
        err_console.print(f"warning: baseline and candidate are the same records ({baseline}): "
                          "every program is identical to itself (a check of the tool, not a "
                          "comparison)", highlight=False)  # fmt: skip
    frames = []
    for side in (baseline, candidate):
        frame, problems = load_results([side])
        for problem in problems:
            err_console.print(f"problem: {problem}", highlight=False, markup=False)
        timed = frame[frame["status"] == "ok"] if not frame.empty else frame
        if timed.empty:
            raise fail(f"{side} holds no timed records")
        frames.append(timed.assign(side=side))
    admitted = [set(f["case"] if chosen is None else f["case"][chosen.admits(f)]) for f in frames]
    if not (admitted[0] or admitted[1]):
        raise fail(f"no case of {baseline} or {candidate} matches the selection (-w, --param, "
                   "...)")  # fmt: skip
    common = sorted(admitted[0] & admitted[1])
    a, b = admitted
    for side, only in (("baseline", a - b), ("candidate", b - a)):
        if only:
            named = sorted(only)[:5] + ([f"and {len(only) - 5} more"] if len(only) > 5 else [])
            err_console.print(f"only on the {side} side, not explained: {', '.join(named)}",
                              highlight=False, markup=False)  # fmt: skip
    if not common:
        raise fail(f"{baseline} and {candidate}: no timed case in common to explain (result "
                   "sets are matched case by case; to explain two parameter values, run both "
                   "live: explain current current -w WORKLOAD --set-b PARAM=VALUE)")  # fmt: skip
    explained = 0
    for label in common:
        a, b = (artifact_of(f[f["case"] == label]) for f in frames)
        console.print(label, style="bold", highlight=False, markup=False)
        if a is None or b is None:
            which = "baseline" if a is None else "candidate"
            console.print(f"  no saved programs on the {which} side (records older than "
                          "schema 3, or none written)", highlight=False, markup=False)  # fmt: skip
            continue
        try:
            lines = explain_saved(a, b, verdict)
        except (ArtifactError, ValueError) as exc:
            console.print(f"  not explained: {exc}", highlight=False, markup=False, soft_wrap=True)
            continue
        explained += 1
        for line in lines + traced_op_lines(*(f[f["case"] == label] for f in frames)):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    both = pd.concat(frames, ignore_index=True)
    if chosen is not None:  # of the selected cases only, as compare's
        both = both[chosen.admits(both)]
    print_exponent_changes(both, "side", baseline, candidate, alpha=0.05)
    return 0 if explained else 1


def _report(title: str, sections: list[tuple[str, list[str], list[str]]], cases: int) -> str:
    """The Markdown of one explain run: per case, the artifacts of each side and the lines.

    It is rewritten after each case, so a run stopped part-way leaves the cases before it; the
    line under the title says how many of the ``cases`` selected it holds.
    """
    done = len(sections)
    state = "every one" if done == cases else "stopped before the rest"
    out = [f"# {title}", "", f"{done} of the {cases} case(s) selected ({state}).", ""]
    for label, hashes, lines in sections:
        files = f"`programs/{hashes[0]}.json.gz`, `programs/{hashes[1]}.json.gz`"
        out += [f"## {label}", "", f"Programs (baseline, candidate): {files}.", "", "```",
                *lines, "```", ""]  # fmt: skip
    return "\n".join(out)


def register(app: typer.Typer) -> None:
    """Add ``explain`` to ``app``."""

    @version_command(app, "explain")
    def explain_cmd(
        baseline: Annotated[str, typer.Argument(parser=given_text, help=SIDE_HELP)],
        candidate: Candidate,
        select: Selection,
        venvs: VersionEnvOptions,
        set_a: SetA = None,
        set_b: SetB = None,
        backend: Backend = "cpu",
        verdict: Annotated[
            str | None,
            typer.Option(
                help="The cases' timing verdict, if known: slower, faster, same, inconclusive "
                "or unstable."
            ),
        ] = None,
        out: Annotated[
            str | None,
            typer.Option(
                "--out", "-o", help="Live sides: folder for `explain-<id>.md` and `programs/`."
            ),
        ] = None,
        trace: Annotated[
            bool,
            typer.Option(
                "--trace",
                metavar="",
                help="Also trace each side with jax.profiler (--processes workers a side, a few "
                "warmed calls each) and diff the time per op, with intervals over processes.",
            ),
        ] = False,
        processes: Annotated[
            int | None,
            typer.Option(help="With --trace: worker processes a side (the unit; default 3)."),
        ] = None,
    ) -> None:
        """Explain what changed in the compiled program of each selected case.

        Each side prepares the case in a fresh worker (`current`, an interpreter, or a JAX
        version's venv) and hands back its jaxpr, StableHLO, optimized HLO and XLA's cost and
        memory figures. Printed per case: which levels are identical (names and metadata set
        aside), the first that differs and what that points at, the changed counts (opcodes,
        fusions by kind, custom calls, copies, ops in while bodies), FLOP, bytes and memory,
        and a bounded diff of the optimized HLO. With identical programs and --verdict slower
        or faster, it says the cause is below HLO. Nothing is timed. With --out, the text goes
        to `explain-<id>.md` there and each side's programs to `programs/<sha256>.json.gz`.

        Two result sets (folders or files of `jaxbench run`) are explained from the programs
        their records saved, with no worker started: every case they share, or those selected.
        Where their records hold traces (`jaxbench run --trace`), the time per op is compared
        over their processes too.

        With --trace, each side also runs --processes workers that trace a few warmed calls
        (jax.profiler; never inside any timing), and the time per op (the HLO instruction a
        CPU thunk runs, a device op) is compared over those processes: which ops' time moved,
        by how much, and what share of the change each explains, even when the programs are
        identical.
        """
        from jaxbench.backends import check_backend
        from jaxbench.explain import diff_programs, explain_lines
        from jaxbench.explain.normalize import programs_keys
        from jaxbench.explain.ops import op_report
        from jaxbench.interleave import WorkerError
        from jaxbench.interleave.session import capture_ops, capture_programs
        from jaxbench.measure.trace import TRACE_CALLS
        from jaxbench.store import new_run_id, save_programs, write_atomic

        if verdict is not None and verdict not in ("slower", "faster", "same", "inconclusive",
                                                   "unstable"):  # fmt: skip
            raise fail(f"--verdict {verdict!r}: expected slower, faster, same, inconclusive or "
                       "unstable")  # fmt: skip
        if processes is not None and not trace:
            raise fail(f"--processes {processes} applies to --trace (the tracing workers a side)")
        processes = 3 if processes is None else processes
        if processes < 1:
            raise fail(f"--processes {processes}: expected at least 1 (2 or more give intervals)")
        try:
            cases = select.cases()
            check_backend(backend)
        except ValueError as exc:
            raise fail(str(exc)) from None
        saved = [is_result_set(side) for side in (baseline, candidate)]
        if any(saved):
            other = Path(candidate if saved[0] else baseline)
            if not all(saved) and other.is_file() and not os.access(other, os.X_OK):
                raise fail(f"{other}: not a file of records (.jsonl or .json) nor a folder")
            looks_like_a_path = "/" in str(other) or other.suffix in (".jsonl", ".json", ".gz")
            if not all(saved) and not other.exists() and looks_like_a_path:
                raise fail(f"{other}: no such file or folder")
            if not all(saved):
                raise fail(f"explain {baseline} {candidate}: give two result sets, or two "
                           "interpreters or versions, not one of each")  # fmt: skip
            if out or set_a or set_b or trace:
                raise fail("--out, --set-a, --set-b and --trace apply to live workers, not to "
                           "result sets")  # fmt: skip
            try:
                chosen = select.recorded() if select.given else None
            except ValueError as exc:
                raise fail(str(exc)) from None
            raise typer.Exit(explain_result_sets(baseline, candidate, chosen, verdict))
        a, b = side_params(cases, set_a, "--set-a"), side_params(cases, set_b, "--set-b")
        folder = writable_folder(out) if out else None  # before any environment is built
        envs = venvs.envs([c.workload for c in cases], specs=(baseline, candidate))
        python_a, python_b = pythons_for((("baseline", baseline), ("candidate", candidate)), envs)
        path = folder / f"explain-{new_run_id()}.md" if folder else None
        sections = []
        sides = (("baseline", side_label(baseline, a), python_a, a),
                 ("candidate", side_label(candidate, b), python_b, b))  # fmt: skip
        unexplained = 0
        for case in cases:
            params = dict(case.params)
            which: tuple | None = None  # the side at work, named where it fails
            try:
                captured = []
                for which in sides:
                    captured.append(capture_programs(which[2], case.workload, params | which[3],
                                                     backend))  # fmt: skip
                (jax_a, base), (jax_b, cand) = captured
                which = None
                diffs = diff_programs(base, cand)
                tables: tuple[list, list] = ([], [])
                for _ in range(processes if trace else 0):  # the sides in turn
                    for i, which in enumerate(sides):
                        tables[i].append(capture_ops(which[2], case.workload, params | which[3],
                                                     backend, TRACE_CALLS))  # fmt: skip
            except (WorkerError, ValueError) as exc:  # said, and the next case goes on
                side = f"{which[0]} {which[1]}: " if which else ""
                err_console.print(f"{case.label}: not explained: {side}{exc}", highlight=False)
                unexplained += 1
                continue
            label = (f"{case.label}: {side_label(baseline, a)} (JAX {jax_a}) vs "
                     f"{side_label(candidate, b)} (JAX {jax_b})")  # fmt: skip
            lines = explain_lines(diffs, verdict)
            if trace:
                lines += op_report(*tables, keys=(programs_keys(base), programs_keys(cand)))
            console.print(label, style="bold", highlight=False, markup=False)
            for line in lines:
                console.print(line, highlight=False, markup=False, soft_wrap=True)
            if folder is not None and path is not None:  # rewritten whole after each case
                title = f"jaxbench explain {baseline} {candidate}"
                try:
                    hashes = [save_programs(folder, side) for side in (base, cand)]
                    text = _report(title, [*sections, (label, hashes, lines)], len(cases))
                    write_atomic(path, text.encode())
                except OSError as exc:
                    kept = (f"; {path} holds the {len(sections)} case(s) before it"
                            if sections else "")  # fmt: skip
                    raise fail(f"cannot write {exc.filename or path}: {exc.strerror or exc}"
                               f"{kept}", code=1) from None  # fmt: skip
                sections.append((label, hashes, lines))
        if path is not None and path.exists():
            console.print(f"wrote {path} and the programs under {path.parent / 'programs'}",
                          highlight=False)  # fmt: skip
        if unexplained:
            raise fail(f"{unexplained} of {len(cases)} case(s) not explained (above)", code=1)
