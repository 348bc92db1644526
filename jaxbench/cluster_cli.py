"""``jaxbench submit``, ``status`` and ``collect``: the cluster runner for people."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from jaxbench.cli_options import (
    Budget,
    Dtypes,
    Full,
    Ks,
    MinSamples,
    Optimizers,
    Sizes,
    Strategies,
    Warmup,
    Workloads,
    Wrts,
    console,
    fail,
    selection,
    timing_fields,
)
from jaxbench.tables import problems, records_table

SweepArg = Annotated[Path, typer.Argument(help="The sweep folder (printed by `submit`).")]


def submit_cmd(
    profile: Annotated[
        str | None,
        typer.Option("--profile", "-p", help="slurm/<name>.toml, or a name: cpu, gpu, local."),
    ] = None,
    workload: Workloads = None,
    size: Sizes = None,
    dtype: Dtypes = None,
    k: Ks = None,
    strategy: Strategies = None,
    optimizer: Optimizers = None,
    wrt: Wrts = None,
    full: Full = False,
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
    resume: Annotated[
        Path | None,
        typer.Option(help="Sweep folder: submit again only its cases without an ok record."),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the tasks, then collect the records.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and print the plan; submit nothing.")
    ] = False,
) -> None:
    """Send the selected cases to a cluster as a job array; print the job ids and return."""
    from jaxbench.cluster import dispatch
    from jaxbench.cluster.sweep import Sweep

    if resume is not None:
        try:
            sweep = Sweep(resume)
            submission = dispatch.resume(sweep, on_progress=_say)
        except (OSError, ValueError, RuntimeError) as exc:
            raise fail(str(exc)) from None
        if submission is None:
            console.print(f"{sweep.root}: every case has an ok record; nothing to submit")
            return
    else:
        sweep, submission = _submit_new(
            profile, workload, size, dtype, k, strategy, optimizer, wrt, full, jax,
            cases_per_task, time_limit, sweeps_dir, budget, min_samples, warmup, dry_run,
        )  # fmt: skip
        if submission is None:
            return
    ids = sorted(set(submission.job_ids.values()))
    console.print(f"submitted {len(submission.job_ids)} task(s): jobs {' '.join(ids)}")
    console.print(f"sweep: {sweep.root}", highlight=False)
    if wait:
        dispatch.wait(sweep)
        status_cmd(sweep.root)
        collect_cmd(sweep.root)


def _submit_new(
    profile, workload, size, dtype, k, strategy, optimizer, wrt, full, jax,
    cases_per_task, time_limit, sweeps_dir, budget, min_samples, warmup, dry_run,
):  # fmt: skip
    from jaxbench.cluster import dispatch
    from jaxbench.cluster.executors import sbatch_script
    from jaxbench.cluster.profile import load_profile
    from jaxbench.cluster.sweep import CaseSpec

    if profile is None:
        raise fail("--profile is required (slurm/<name>.toml or a name), or use --resume")
    try:
        prof = load_profile(profile)
        cases = selection(
            workload, full, size=size, dtype=dtype, k=k, strategy=strategy,
            optimizer=optimizer, wrt=wrt,
        )  # fmt: skip
        versions = [v.strip() for v in (jax or "").split(",") if v.strip()]
        request = dispatch.SweepRequest(
            profile=prof,
            cases=[CaseSpec(workload=c.workload, params=dict(c.params)) for c in cases],
            timing=timing_fields(budget, min_samples, warmup),
            jax_versions=versions,
            cases_per_task=cases_per_task,
            time_limit_min=time_limit,
            sweeps_dir=sweeps_dir,
        )
        sweep, manifest = dispatch.plan(request)
    except (ValueError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    console.print(
        f"{len(cases)} case(s) in {len(manifest.tasks)} task(s), "
        f"{manifest.tasks[0].time_limit_min} min each, profile {prof.name} ({prof.executor})",
        highlight=False,
    )
    if dry_run:
        if prof.executor == "slurm":
            console.print(
                sbatch_script(
                    prof, sweep.submitit_dir / "%j", manifest.tasks[0].python,
                    len(manifest.tasks), manifest.tasks[0].time_limit_min, "jaxbench-dryrun",
                ),
                highlight=False, markup=False,
            )  # fmt: skip
        console.print("dry run: nothing submitted")
        return sweep, None
    try:
        submission = dispatch.submit(sweep, manifest, on_progress=_say)
    except (OSError, RuntimeError) as exc:
        raise fail(f"{exc} (sweep folder: {sweep.root})", code=1) from None
    return sweep, submission


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


def collect_cmd(sweep_dir: SweepArg) -> None:
    """Gather every finished record into <sweep>/results.jsonl; exit 1 if any missing or failed."""
    from jaxbench.cluster.sweep import Sweep

    try:
        sweep = Sweep(sweep_dir)
        result = sweep.collect(sweep.load())
    except (OSError, ValueError) as exc:
        raise fail(str(exc)) from None
    if result.records:
        console.print(records_table(result.records, title=str(result.path)))
    for line in problems(result.records):
        console.print(f"[yellow]{line}[/]", highlight=False)
    for line in result.unreadable:
        console.print(f"[yellow]unreadable record: {line}[/]", highlight=False)
    console.print(
        f"{len(result.records)} record(s) in {result.path}; {len(result.missing)} case(s) "
        "without a record",
        highlight=False,
    )
    failed = [r for r in result.records if r.status == "failed"]
    if result.missing or result.unreadable or failed:
        raise fail(
            f"{len(result.missing) + len(result.unreadable)} case(s) without a readable record, "
            f"{len(failed)} failed: `jaxbench submit --resume {sweep.root}` runs them again",
            code=1,
        )


def register(app: typer.Typer) -> None:
    """Add ``submit``, ``status`` and ``collect`` to the ``jaxbench`` command."""
    app.command("submit")(submit_cmd)
    app.command("status")(status_cmd)
    app.command("collect")(collect_cmd)
