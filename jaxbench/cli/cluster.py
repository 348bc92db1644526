"""``jaxbench submit``, ``status`` and ``collect``: the cluster runner for people."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from jaxbench.cli.options import (
    Budget,
    MinSamples,
    Pipeline,
    Requirements,
    Warmup,
    With,
    console,
    err_console,
    fail,
    given_path,
    profile_option,
    say,
    timing_fields,
)
from jaxbench.cli.selection import Selection, selects_cases

if TYPE_CHECKING:
    from jaxbench.cluster.profile import Profile
    from jaxbench.cluster.sweep import Sweep
    from jaxbench.store import SweepManifest
    from jaxbench.store.sweep import Submission

SweepArg = Annotated[
    Path, typer.Argument(parser=given_path, help="The sweep folder (printed by `submit`).")
]


@selects_cases()
def submit_cmd(
    ctx: typer.Context,
    select: Selection,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile", "-p", help="`slurm/<name>.toml`, or a name: cpu, gpu, local, test-cluster."
        ),
    ] = None,
    jax: Annotated[
        str | None,
        typer.Option(help="JAX versions, comma-separated; each runs in its own environment."),
    ] = None,
    cases_per_task: Annotated[
        int | None, typer.Option(help="Cases per array task (default: the profile's).")
    ] = None,
    time_limit: Annotated[
        int | None, typer.Option(help="Minutes per task (default: from the shard's cases).")
    ] = None,
    sweeps_dir: Annotated[
        Path | None, typer.Option(help="Where the sweep folder goes (default: the profile's).")
    ] = None,
    budget: Budget = 0.2,
    min_samples: MinSamples = 20,
    warmup: Warmup = 3,
    pipeline: Pipeline = 1,
    with_: With = None,
    requirements: Requirements = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Sweep folder: submit again only its cases without an ok record."),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option("--wait", metavar="", help="Wait for the tasks, then collect the records."),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", metavar="", help="Check and print the plan; submit nothing."),
    ] = False,
) -> None:
    """Send the selected cases to a cluster as job arrays; print the job ids and return.

    A local profile runs the tasks here, one after another, and returns when they end.
    """
    from jaxbench.cluster import dispatch
    from jaxbench.cluster.sweep import Sweep

    if resume is not None:
        sweep = Sweep(resume)
        submission = _resume(ctx, sweep, dry_run)
    else:
        sweep, submission = _submit_new(ctx.params, select)
    if submission is None:
        return
    ids = sorted(set(submission.job_ids.values()))
    console.print(f"submitted {len(submission.job_ids)} task(s): jobs {' '.join(ids)}")
    console.print(f"sweep: {sweep.root}", highlight=False, soft_wrap=True)
    if wait:
        dispatch.wait(sweep)
        status_cmd(sweep.root)
        collect_cmd(sweep.root)
    else:
        _if_ended(sweep)


def _if_ended(sweep: Sweep) -> None:
    """Where every task has ended already (local tasks run in turn), say how; exit 1 if unwell.

    A local ``submit`` waits for its tasks, so it is the run: a task that failed, timed out or
    was stopped, or a case without a record or ``failed``, is exit 1 with the way on, as
    ``run`` and ``collect`` do (a ``skipped`` case is not: the node lacks what it needs; but
    no case ``ok`` is exit 1, nothing having been measured). Tasks still queued or running
    (Slurm) are left to ``status``.
    """
    from jaxbench.cluster import dispatch
    from jaxbench.tables import nothing_measured

    states = dispatch.status(sweep, sweep.load())
    if any(s.state in dispatch.ACTIVE for s in states):
        return
    status_cmd(sweep.root)
    unwell = [s for s in states if s.state != "completed"]
    missing, failed = sum(s.missing for s in states), sum(s.failed for s in states)
    if unwell or missing or failed:
        ended = ", ".join(f"task {s.task.index} {s.state}" for s in unwell)
        raise fail(
            f"{ended + '; ' if ended else ''}{missing} case(s) without a record, {failed} "
            f"failed: `jaxbench submit --resume {sweep.root}` runs them again",
            code=1,
        )
    if not sum(s.ok for s in states):  # every case recorded, none ok and none failed
        manifest = sweep.load()
        records = [sweep.record_of(case, task.jax)[0] for task in manifest.tasks
                   for case in task.cases]  # fmt: skip
        if (why := nothing_measured([r for r in records if r is not None])) is not None:
            raise fail(why, code=1)


def _resume(ctx: typer.Context, sweep: Sweep, dry_run: bool) -> Submission | None:
    from jaxbench.cluster import dispatch

    own = {"resume", "wait", "dry_run"}
    given = [
        f"--{name.replace('_', '-')}"
        for name in ctx.params
        if name not in own and getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"
    ]
    if given:
        raise fail(
            f"--resume runs the sweep's own cases with its own profile and timing; "
            f"drop {', '.join(given)}"
        )
    try:
        sweep.load()
    except (OSError, ValueError) as exc:
        raise fail(f"--resume {ctx.params['resume']}: "
                   f"{str(exc).removeprefix(f'{sweep.root}: ')}") from None  # fmt: skip
    try:
        if dry_run:
            _, only = dispatch.resume_plan(sweep)
        else:
            return dispatch.resume(sweep, on_progress=_say) or _nothing_left(sweep)
    except (OSError, ValueError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise _interrupted(sweep) from None
    for index, cases in only.items():
        console.print(f"task {index}: {len(cases)} case(s) without an ok record", highlight=False)
    console.print(f"dry run: {len(only)} task(s) would be submitted again; nothing submitted")
    return None


def _nothing_left(sweep: Sweep) -> None:
    console.print(f"{sweep.root}: every case has an ok record; nothing to submit", soft_wrap=True)


def _first_missing(folder: Path) -> Path | None:
    """The outermost folder on the way to ``folder`` that does not exist yet (``None``: none)."""
    missing = None
    for path in (folder, *folder.parents):
        if path.exists():
            return missing
        missing = path
    return missing


def _submit_new(opts: dict[str, Any], select: Selection) -> tuple[Sweep, Submission | None]:
    from jaxbench.cluster import dispatch, preflight
    from jaxbench.cluster.pyenvs import WorkloadNotFound
    from jaxbench.cluster.sweep import CaseSpec

    if opts["profile"] is None:
        raise fail("--profile is required (slurm/<name>.toml or a name), or use --resume")
    versions = [v.strip() for v in (opts["jax"] or "").split(",")]
    if opts["jax"] is not None and not all(versions):
        raise fail(f"--jax {opts['jax']!r}: expected JAX versions separated by commas, none "
                   "empty (e.g. 0.11.2,0.12.0.1)")  # fmt: skip
    versions = [v for v in versions if v]
    prof = profile_option(opts["profile"])
    try:
        cases = select.cases()
        reqs, users = _version_requirements(cases, versions, opts)
        request = dispatch.SweepRequest(
            profile=prof,
            cases=[CaseSpec(workload=c.workload, params=dict(c.params)) for c in cases],
            timing=timing_fields(
                opts["budget"], opts["min_samples"], opts["warmup"], opts["pipeline"]
            ),
            jax_versions=versions,
            cases_per_task=opts["cases_per_task"],
            time_limit_min=opts["time_limit"],
            sweeps_dir=opts["sweeps_dir"],
            requirements=reqs,
            user_workloads=users,
        )
        made = _first_missing(Path(opts["sweeps_dir"] or prof.sweeps_dir).absolute())
        sweep, manifest = dispatch.plan(request)
    except (ValueError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    console.print(
        f"{len(cases)} case(s) in {len(manifest.tasks)} task(s), "
        f"{manifest.tasks[0].time_limit_min} min each, profile {prof.name} ({prof.executor})",
        highlight=False,
    )
    for warning in preflight.sharing_warnings(prof):
        say("warning:", warning)
    if opts["dry_run"]:
        _print_scripts(prof, sweep, manifest)
        if made is not None and not any(p.is_file() for p in made.rglob("*")):
            shutil.rmtree(made, ignore_errors=True)  # the probe's folders: a dry run leaves none
        return sweep, None
    if prof.executor == "local" and preflight.exclusive(prof):
        console.print(
            "local tasks run one after another, so they cannot time each other: this waits "
            "for them (Ctrl-C stops the one running; `submit --resume` finishes the sweep)",
            highlight=False,
        )
    try:
        submission = dispatch.submit(sweep, manifest, on_progress=_say)
    except WorkloadNotFound as exc:
        raise fail(f"{exc} (nothing was submitted)") from None
    except (OSError, RuntimeError) as exc:
        kept = f"sweep folder: {sweep.root}" if sweep.root.exists() else "nothing was submitted"
        raise fail(f"{exc} ({kept})", code=1) from None
    except KeyboardInterrupt:
        raise _interrupted(sweep) from None
    return sweep, submission


def _interrupted(sweep: Any) -> typer.Exit:
    """Ctrl-C while submitting, or while local tasks ran in turn (exit 130)."""
    if not sweep.root.exists():
        return fail("interrupted before anything was submitted", code=130)
    return fail(f"interrupted: the task running was stopped; the cases recorded so far are in "
                f"{sweep.root}; `jaxbench submit --resume {sweep.root}` runs the rest",
                code=130)  # fmt: skip


def _version_requirements(
    cases: list, versions: list[str], opts: dict[str, Any]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What ``--jax`` environments install beyond JAX, and the user workloads they must find.

    Nothing without ``--jax``: the profile's own interpreter is used as it is.
    """
    from jaxbench.workloads.source import environment_requirements, user_workload_names

    if not versions:
        if opts["with_"] or opts["requirements"]:
            raise ValueError("--with and --requirements apply to --jax environments only")
        return (), ()
    users = user_workload_names([c.workload for c in cases])
    reqs, said = environment_requirements(users, opts["with_"] or [], opts["requirements"])
    for line in said:
        err_console.print(line, highlight=False, markup=False)
    return reqs, tuple(users)


def _print_scripts(prof: Profile, sweep: Sweep, manifest: SweepManifest) -> None:
    from jaxbench.cluster.executors import sbatch_script

    if prof.executor == "slurm":
        for version in dict.fromkeys(t.jax for t in manifest.tasks):
            group = [t for t in manifest.tasks if t.jax == version]
            console.print(f"# sbatch script, jax {version or 'of the profile'}:", highlight=False)
            script = sbatch_script(
                prof, sweep.submitit_dir / "%j", group[0].python, len(group),
                group[0].time_limit_min, f"jaxbench-{manifest.sweep_id[-8:]}",
            )  # fmt: skip
            console.print(script, highlight=False, markup=False, soft_wrap=True)
    console.print("dry run: nothing submitted")


def _say(line: str) -> None:
    console.print(line, highlight=False)


def status_cmd(sweep_dir: SweepArg) -> None:
    """Show each task's state (from submitit's job results) and its records so far."""
    from jaxbench.cluster import dispatch
    from jaxbench.cluster.sweep import Sweep

    try:
        sweep = Sweep(sweep_dir)
        states = dispatch.status(sweep, sweep.load())
    except (OSError, ValueError) as exc:
        raise fail(str(exc)) from None
    table = Table(title=f"sweep {sweep.root.name}")
    for column in ("task", "jax", "job", "state", "ok", "other", "missing", "detail"):
        table.add_column(column)
    for s in states:
        table.add_row(
            str(s.task.index), s.task.jax or "-", s.job_id or "-", s.state,
            str(s.ok), str(s.other), str(s.missing), s.detail,
        )  # fmt: skip
    console.print(table)


#: Cases without a record that ``collect`` names, at most.
MISSING_NAMED = 10


def collect_cmd(sweep_dir: SweepArg) -> None:
    """Gather finished records into `<sweep>/results.jsonl`; exit 1 if one is missing or failed.

    Exit 1 too where no case is `ok` (nothing measured: a backend absent, say).
    """
    from jaxbench.cluster import dispatch
    from jaxbench.cluster.sweep import Sweep
    from jaxbench.store import case_label
    from jaxbench.tables import nothing_measured, problems, records_table

    try:
        sweep = Sweep(sweep_dir)
        result = sweep.collect(sweep.load())
    except (OSError, ValueError) as exc:
        raise fail(str(exc)) from None
    if result.records:
        console.print(records_table(result.records, title=str(result.path)))
    for line in problems(result.records):
        console.print(line, style="yellow", highlight=False)
    for line in result.unreadable:
        console.print(f"unreadable record: {line}", style="yellow", highlight=False, soft_wrap=True)
    where = f"in {result.path}"
    if not result.written:
        where = f"readable; {result.path} left as it was, since a record file is unreadable"
    console.print(
        f"{len(result.records)} record(s) {where}; "
        f"{len(result.missing) + len(result.unreadable)} case(s) without a readable record",
        highlight=False,
        soft_wrap=True,  # a path is never broken across lines
    )
    for task, case in result.missing[:MISSING_NAMED]:
        console.print(f"no record: task {task}: {case_label(case.workload, case.params)}",
                      style="yellow", highlight=False)  # fmt: skip
    if len(result.missing) > MISSING_NAMED:
        console.print(f"no record: ... and {len(result.missing) - MISSING_NAMED} more",
                      style="yellow", highlight=False)  # fmt: skip
    failed = [r for r in result.records if r.status == "failed"]
    if result.missing or result.unreadable or failed:
        active = [s for s in dispatch.status(sweep, sweep.load()) if s.state in dispatch.ACTIVE]
        way = (f"{len(active)} task(s) still {'/'.join(sorted({s.state for s in active}))}: "
               "collect again once they end (`jaxbench status`)" if active else
               f"`jaxbench submit --resume {sweep.root}` runs them again")  # fmt: skip
        raise fail(
            f"{len(result.missing) + len(result.unreadable)} case(s) without a readable record, "
            f"{len(failed)} failed: {way}",
            code=1,
        )
    if (why := nothing_measured(result.records)) is not None:
        raise fail(why, code=1)


def register(app: typer.Typer) -> None:
    """Add ``submit``, ``status`` and ``collect`` to the ``jaxbench`` command."""
    app.command("submit")(submit_cmd)
    app.command("status")(status_cmd)
    app.command("collect")(collect_cmd)
