"""``jaxbench bisect``: which JAX release between two versions made each case slower."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from jaxbench.cli.options import (
    Alpha,
    Backend,
    Rounds,
    Threshold,
    VersionEnvOptions,
    check_rule_options,
    console,
    err_console,
    fail,
    profile_option,
    timing_fields,
    writable_folder,
)
from jaxbench.cli.selection import Selection, version_command
from jaxbench.live_defaults import DEFAULT_PAIRS, DEFAULT_PAIRS_STEP, DEFAULT_ROUNDS

#: ``--search auto`` sweeps every release up to this many, and searches by halves beyond.
SWEEP_AT_MOST = 8
#: Sweeps (processes) per release of a bisect on a cluster profile.
DEFAULT_SWEEPS = 3


def _releases(good: str, bad: str, envs: Any) -> tuple[str, list[str]]:
    """The base interpreter and the releases from ``good`` to ``bad`` (exit 2 if none).

    The releases are those on the index of jax, jaxlib and ``envs``' CUDA plugin, with
    ``envs``' extra index (:class:`jaxbench.cluster.pyenvs.VersionEnvs`).
    """
    from jaxbench.bisect import releases_between
    from jaxbench.cluster import pyenvs

    try:
        base = pyenvs.base_python(None)
        found = releases_between(good, bad, *envs.offered(base))
    except (ValueError, pyenvs.PyEnvError) as exc:
        raise fail(str(exc)) from None
    try:
        pyenvs.check_supported([good])
    except ValueError as exc:
        raise fail(str(exc).replace("--jax: JAX ", "GOOD ", 1)) from None
    return base, found


def _explain(python_of: Any, case: Any, before: str, after: str, verdict: str,
             backend: str) -> list[str]:  # fmt: skip
    """``jaxbench explain``'s lines for one step (a line saying why, if it cannot run)."""
    from jaxbench.explain import diff_programs, explain_lines
    from jaxbench.interleave import WorkerError
    from jaxbench.interleave.session import capture_programs

    try:
        _, base = capture_programs(python_of(before), case.workload, dict(case.params), backend)
        _, cand = capture_programs(python_of(after), case.workload, dict(case.params), backend)
        return explain_lines(diff_programs(base, cand), verdict)
    except (WorkerError, ValueError) as exc:
        return [f"explain could not run: {exc}"]


Files = Callable[[], list[str]]
ExplainStep = Callable[[str, str, str, str], list[str]]


def _live(envs: Any, base: str, cases: list, backend: str, schedule: Any, threshold: float,
          alpha: float, folder: Path) -> tuple[Any, Files, ExplainStep]:  # fmt: skip
    """The live judge (pairs of fresh workers per comparison), its files, its explainer."""
    from jaxbench.bisect.live import LiveJudge

    pythons: dict[str, str] = {}

    def python_of(release: str) -> str:
        if release not in pythons:
            pythons[release] = str(envs.python(release, base))
        return pythons[release]

    def done(path: Path, before: str, after: str, got: dict) -> None:
        for label, j in got.items():
            err_console.print(f"{after} vs {before}: {label}: {j.text()}  ({path.name})",
                              highlight=False, markup=False)  # fmt: skip

    def pair(before: str, after: str, count: int) -> None:
        err_console.print(f"{after} vs {before}: process pair {count} done (up to "
                          f"{schedule.max_pairs})", highlight=False)  # fmt: skip

    by_label = {c.label: c for c in cases}
    judge = LiveJudge(python_of, {c.label: (c.workload, dict(c.params)) for c in cases},
                      backend, schedule, threshold, alpha, folder, done, pair)  # fmt: skip

    def explain_step(label: str, before: str, after: str, verdict: str) -> list[str]:
        return _explain(python_of, by_label[label], before, after, verdict, backend)

    return judge, lambda: [p.name for p in judge.paths], explain_step


def _recorded(profile: Any, releases: list[str], cases: list, processes: int, threshold: float,
              alpha: float, envs: Any) -> tuple[Any, Files, ExplainStep]:  # fmt: skip
    """Sweeps of every release through the profile, then the recorded judge over them."""
    from jaxbench.analysis import load_results
    from jaxbench.cluster.preflight import PreflightError
    from jaxbench.cluster.pyenvs import PyEnvError, WorkloadNotFound
    from jaxbench.upgrade.recorded import RecordedJudge, sweep_releases

    timing = timing_fields(0.2, 20, 3)  # jaxbench run's defaults
    try:
        sweeps = sweep_releases(profile, releases, cases, timing, processes,
                                lambda line: err_console.print(line, highlight=False),
                                envs.requirements, envs.workloads)  # fmt: skip
    except (PreflightError, ValueError, WorkloadNotFound) as exc:
        raise fail(str(exc)) from None
    except PyEnvError as exc:
        raise fail(str(exc), code=1) from None
    frame, problems = load_results(sweeps)
    for problem in problems:
        err_console.print(f"problem: {problem}", highlight=False, markup=False)
    judge = RecordedJudge(frame, threshold, alpha)
    return judge, lambda: [str(p) for p in sweeps], judge.explain


#: ``--workload`` of bisect: its help warns of the cost of each case.
BisectWorkloads = Annotated[
    list[str] | None,
    typer.Option(
        "--workload",
        "-w",
        help="Workload(s) to bisect; each case costs minutes a comparison, so select a few.",
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``bisect`` to ``app``."""

    @version_command(app, "bisect", full=False, workload=BisectWorkloads)
    def bisect_cmd(
        good: Annotated[str, typer.Argument(help="A JAX version known to be fast.")],
        bad: Annotated[str, typer.Argument(help="A later JAX version known to be slow.")],
        select: Selection,
        venvs: VersionEnvOptions,
        search: Annotated[
            str,
            typer.Option(
                help="sweep (every release), binary (halves), or auto: sweep up to "
                f"{SWEEP_AT_MOST} releases."
            ),
        ] = "auto",
        explain: Annotated[
            bool,
            typer.Option(metavar="", help="Explain the program change at each step found."),
        ] = True,
        backend: Backend = "cpu",
        pairs: Annotated[int, typer.Option(help="Process pairs of the first look.")] = (
            DEFAULT_PAIRS
        ),
        max_pairs: Annotated[int, typer.Option(help="Most pairs per comparison.")] = 20,
        pairs_step: Annotated[int, typer.Option(help="Pairs added per look.")] = (
            DEFAULT_PAIRS_STEP
        ),
        rounds: Rounds = DEFAULT_ROUNDS,
        calls_per_block: Annotated[int, typer.Option(help="Timed calls per block.")] = 10,
        threshold: Threshold = 0.02,
        alpha: Alpha = 0.05,
        profile: Annotated[
            str | None,
            typer.Option(
                help="Run on a cluster profile (`slurm/<name>.toml` or a name): one task per "
                "release, --processes sweeps, judged over processes."
            ),
        ] = None,
        processes: Annotated[
            int | None,
            typer.Option(help="With --profile: processes (sweeps) per release (default 3)."),
        ] = None,
        out: Annotated[
            str,
            typer.Option("--out", "-o", help="Folder of `bisect-<id>.md` and the comparisons."),
        ] = "results",
    ) -> None:
        """Find the releases between GOOD and BAD where each selected case got slower (or faster).

        The releases are those the package index has of jax and jaxlib (and, with --jax-extra
        cuda12 or cuda13, of the matching CUDA plugin; with --extra-index-url, nightly builds
        there too); each gets its own environment under --env-root (built once). Releases
        are compared live, in pairs of fresh worker processes (as compare --interleave), with
        the verdicts of compare:
        --search sweep judges every release against GOOD and then the neighbours around every
        change, so it finds a step that is later undone and several steps; binary halves the
        range where its ends differ, fewer comparisons but blind to a step undone within a
        half. Each step gets jaxbench explain's diff of the two programs. Writes
        `bisect-<id>.md` and each comparison's `interleave-<id>.jsonl` to --out. Exit 2 on bad
        input, before any environment is built.
        """
        from jaxbench.backends import check_backend
        from jaxbench.bisect import STRATEGIES
        from jaxbench.bisect import search as run_search
        from jaxbench.bisect.summary import case_lines, markdown
        from jaxbench.cluster import pyenvs
        from jaxbench.interleave import LiveStopped, Schedule
        from jaxbench.store import new_run_id, write_atomic

        if search not in (*STRATEGIES, "auto"):
            raise fail(f"--search {search!r}: expected sweep, binary or auto")
        try:
            check_rule_options(alpha, {"--threshold": threshold})
            cases = select.cases()
            check_backend(backend)
            schedule = Schedule(pairs=pairs, max_pairs=max_pairs, pairs_step=pairs_step,
                                rounds=rounds, calls_per_block=calls_per_block)  # fmt: skip
        except ValueError as exc:
            raise fail(str(exc)) from None
        if profile is not None and (venvs.jax_extra or venvs.extra_index_url):
            raise fail("--jax-extra and --extra-index-url apply to a local bisect; with "
                       "--profile, the profile's [environment] jax_extra is used")  # fmt: skip
        if processes is not None and profile is None:
            raise fail(f"--processes {processes} applies to --profile (the sweeps per release); "
                       "a local bisect compares live, in pairs of worker processes")  # fmt: skip
        processes = DEFAULT_SWEEPS if processes is None else processes
        if profile is not None and processes < 2:
            raise fail(f"--processes {processes}: expected at least 2 (the process is the "
                       "unit of a recorded verdict)")  # fmt: skip
        prof = profile_option(profile) if profile is not None else None
        extra = prof.environment.jax_extra if prof is not None else None
        envs = venvs.envs([c.workload for c in cases], jax_extra=extra)
        base, releases = _releases(good, bad, envs)
        folder = writable_folder(out)  # after the releases: a bad range leaves no folder
        chosen = search if search != "auto" else (
            "sweep" if len(releases) <= SWEEP_AT_MOST else "binary")  # fmt: skip
        where = (f"profile {prof.name}" if prof is not None
                 else f"environments under {venvs.env_root}")  # fmt: skip
        err_console.print(f"bisect: {len(cases)} case(s), {len(releases)} releases "
                          f"({', '.join(releases)}); {chosen}; {where}",
                          highlight=False)  # fmt: skip
        by_label = {c.label: c for c in cases}
        if prof is not None:
            judge, files, explain_step = _recorded(prof, releases, cases, processes, threshold,
                                                   alpha, envs)  # fmt: skip
        else:
            judge, files, explain_step = _live(envs, base, cases, backend, schedule, threshold,
                                               alpha, folder)  # fmt: skip
        try:
            result = run_search(chosen, releases, list(by_label), judge, threshold)
        except LiveStopped as exc:
            kept = f"; the comparisons finished before it are in {folder}" if files() else ""
            raise fail(f"{exc.line()}{kept}", code=exc.exit_code) from None
        except pyenvs.PyEnvError as exc:
            kept = f"; the comparisons finished are in {folder}" if files() else ""
            code = 2 if isinstance(exc, pyenvs.WorkloadNotFound) else 1
            raise fail(f"{exc}{kept}", code=code) from None
        except KeyboardInterrupt:
            kept = f"; the comparisons finished are in {folder}" if files() else ""
            raise fail(f"interrupted{kept}", code=130) from None
        explanations = {}
        if explain:
            for step in result.steps:
                explanations[(step.case, step.before, step.after)] = explain_step(
                    step.case, step.before, step.after, step.judgement.verdict)  # fmt: skip
        for label in by_label:
            console.print(label, style="bold", highlight=False, markup=False)
            for line in case_lines(result, label):
                console.print(line, highlight=False, markup=False, soft_wrap=True)
            for (case, before, after), lines in explanations.items():
                if case == label and lines:  # its first line; the whole of it in the .md
                    console.print(f"  explained {before} -> {after}: {lines[0]}",
                                  highlight=False, markup=False, soft_wrap=True)  # fmt: skip
        path = folder / f"bisect-{new_run_id()}.md"
        design = ("processes", "Sweeps") if prof is not None else ("process pairs", "Comparisons")
        text = markdown(result, f"jaxbench bisect {good} {bad}", files(), explanations, *design)
        write_atomic(path, text.encode())
        console.print(f"wrote {path}", highlight=False)
