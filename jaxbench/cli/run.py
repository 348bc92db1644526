"""``jaxbench list``, ``run`` and ``show``: the registries, one run of cases, result tables."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from jaxbench.cli.options import (
    Budget,
    MinSamples,
    Pipeline,
    TraceRecords,
    Warmup,
    console,
    err_console,
    fail,
    given_path,
    say,
    timing_fields,
    whole_number,
    writable_folder,
)
from jaxbench.cli.selection import Selection, selects_cases
from jaxbench.distributed import DEFAULT_JOIN_TIMEOUT_S
from jaxbench.live_defaults import DEFAULT_CASE_TIMEOUT_S

#: Most JAX processes ``--jax-processes`` starts per CPU core of this machine: CPU collectives
#: run oversubscribed (8 processes on 2 cores do), but each process is a whole JAX runtime.
MAX_JAX_PROCESSES_PER_CPU = 8

if TYPE_CHECKING:
    from jaxbench.cases import Case
    from jaxbench.distributed import ProcessGroup
    from jaxbench.measure import TimingConfig
    from jaxbench.runner import RunResult
    from jaxbench.store import Record


def register(app: typer.Typer) -> None:
    """Add ``list``, ``run`` and ``show`` to ``app``."""
    app.command("list")(list_workloads)
    app.command("run")(run_cmd)
    app.command("show")(show_cmd)


def list_workloads() -> None:
    """List workloads and their parameter grids (quick grid first, then full)."""
    from jaxbench.workloads import SIZES, WORKLOADS
    from jaxbench.workloads.base import choice_text
    from jaxbench.workloads.transformer import LM_SIZES

    for workload in WORKLOADS.values():
        names = ", ".join(workload.param_names)
        console.print(Text.assemble((workload.name, "bold"), f"  parameters: {names}"))
        for label, quick in (("quick", True), ("full", False)):
            grid = workload.grid(quick)
            console.print(
                f"  {label}: " + "; ".join(f"{k}={v}" for k, v in grid.items()), highlight=False
            )
        for param, values in workload.choices.items():
            shown = ", ".join(choice_text(v, workload.aliases.get(param, {})) for v in values)
            console.print(f"  {param}: {shown}", highlight=False)
    _list_installed()
    console.print(Text.assemble(("sizes", "bold"), " (train_step, forward)"))
    for s in SIZES.values():
        console.print(
            f"  {s.name:7} d_in={s.d_in} width={s.width} depth={s.depth} "
            f"d_out={s.d_out} batch={s.batch} params={s.params_count:,} ({s.device})",
            highlight=False,
        )
    console.print(Text.assemble(("sizes", "bold"), " (transformer)"))
    for m in LM_SIZES.values():
        console.print(
            f"  {m.name:7} d_model={m.d_model} layers={m.n_layers} heads={m.n_heads} "
            f"seq={m.seq_len} batch={m.batch} vocab={m.vocab} params={m.params_count:,} "
            f"({m.device})",
            highlight=False,
        )


def _list_installed() -> None:
    """Workloads of installed packages (entry points of ``jaxbench.workloads``), each loaded."""
    from jaxbench.workloads import get_workload
    from jaxbench.workloads.user import GROUP, installed

    for name, target in installed().items():
        try:
            spec = get_workload(name)
        except ValueError as exc:
            say("warning:", str(exc))
            continue
        grid = "; ".join(f"{k}={v[0]!r}" for k, v in spec.grid(True).items()) or "none"
        console.print(Text.assemble((name, "bold"), f"  ({GROUP} entry point {target})"),
                      highlight=False)  # fmt: skip
        console.print(f"  parameters (--param NAME=VALUE): {grid}", highlight=False)


@selects_cases()
def run_cmd(
    select: Selection,
    backend: Annotated[
        str, typer.Option("--backend", "-b", help="default, cpu, gpu, cuda, rocm or tpu.")
    ] = "default",
    out: Annotated[str, typer.Option("--out", "-o", help="Results folder.")] = "results",
    budget: Budget = 0.2,
    min_samples: MinSamples = 20,
    warmup: Warmup = 3,
    pipeline: Pipeline = 1,
    compilation_cache: Annotated[
        str, typer.Option(help="Persistent compile cache: off, fresh, or a folder.")
    ] = "off",
    cache_min_compile_time: Annotated[
        float | None,
        typer.Option(help="Seconds a compile must take to be cached (JAX default 1.0)."),
    ] = None,
    allow_debug: Annotated[
        bool,
        typer.Option(
            "--allow-debug",
            metavar="",
            help="Time even with jax_disable_jit on (JAX_DISABLE_JIT): op by op, not compiled.",
        ),
    ] = False,
    case_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Most seconds a case may take, preparing and timing; a case past it is killed "
            "and recorded failed (timed out). 0: no limit.",
        ),
    ] = DEFAULT_CASE_TIMEOUT_S,
    trace: TraceRecords = False,
    jax_processes: Annotated[
        int,
        typer.Option(
            metavar="N",
            parser=whole_number,
            help="Run each case as one program over N JAX processes on this machine "
            "(jax.distributed; CPU collectives over Gloo): its mesh spans every process's "
            "devices, each takes exactly --min-samples samples, process 0's record is written.",
        ),
    ] = 1,
    join_timeout: Annotated[
        int,
        typer.Option(
            metavar="SECONDS",
            parser=whole_number,
            help="With --jax-processes: most seconds the processes may take to meet (>= 1).",
        ),
    ] = DEFAULT_JOIN_TIMEOUT_S,
    in_process: Annotated[
        bool,
        typer.Option(
            "--in-process",
            metavar="",
            help="Measure in this process (for a debugger): no --case-timeout, and a case that "
            "crashes ends the run.",
        ),
    ] = False,
    record_refused: Annotated[
        bool,
        typer.Option(
            "--record-refused",
            metavar="",
            help="Record a case whose factory refuses its parameters as failed and go on, "
            "instead of exit 2 (review's runs under each JAX: a factory may refuse under one).",
        ),
    ] = False,
) -> None:
    """Run the selected cases and write one JSON Lines file of records; exit 1 if any failed.

    Exit 1 too where no case is ok (all skipped or recompiled): nothing was measured.

    Cases are measured one at a time in a worker process that this one watches: a case that
    takes longer than --case-timeout is killed and recorded failed (timed out, with the phase
    it was in), a case that kills its process (an XLA abort, a segfault, the OOM killer) is
    recorded failed with the signal and the last lines of its stderr, and the next case runs in
    a fresh worker. JAX's debug modes are read from `jax.config` once the workloads are
    loaded: with `jax_disable_jit` on, nothing is timed (exit 2) unless `--allow-debug` is
    given; every debug mode that is on is warned of, and records keep them in
    `env.jax_flags`.
    """
    from jaxbench.cases import check_backend
    from jaxbench.interleave import WorkerError
    from jaxbench.measure import TimingConfig, configure_compilation_cache
    from jaxbench.measure.trace import TRACE_CALLS
    from jaxbench.supervised import Supervised, spare_the_device

    environ = None if in_process else spare_the_device()
    try:
        check_backend(backend)
        timing = TimingConfig(**timing_fields(budget, min_samples, warmup, pipeline))
        cases = select.cases(refused=[] if record_refused else None)
        if cache_min_compile_time is not None and not 0 <= cache_min_compile_time < math.inf:
            raise ValueError(f"--cache-min-compile-time {cache_min_compile_time:g}: expected "
                             "seconds >= 0")  # fmt: skip
        configure_compilation_cache(compilation_cache, min_compile_time_s=cache_min_compile_time)
    except ValueError as exc:
        raise fail(str(exc)) from None
    if not (case_timeout >= 0 and case_timeout != float("inf")):
        raise fail(f"--case-timeout must be a number of seconds >= 0 (0: no limit), got "
                   f"{case_timeout}")  # fmt: skip
    if in_process and case_timeout != DEFAULT_CASE_TIMEOUT_S:
        raise fail(f"--case-timeout {case_timeout:g}: a case in this process cannot be killed; "
                   "drop --in-process or --case-timeout")  # fmt: skip
    groups = _process_groups(jax_processes, join_timeout, in_process, min_samples, cases)
    _check_debug_modes(allow_debug)
    _warn_cpu_clock()
    out_dir = writable_folder(out)
    trace_calls = TRACE_CALLS if trace else 0
    supervised = Supervised(backend, timing, case_timeout, compilation_cache,
                            cache_min_compile_time, trace_calls=trace_calls,
                            environ=environ, groups=groups)  # fmt: skip
    with supervised:
        try:
            _warn_gpu_sizes_on_cpu(cases, _platform(backend) if in_process else
                                   supervised.platform())  # fmt: skip
            result = _run(cases, out_dir, backend, timing,
                          None if in_process else supervised.measure, trace_calls)  # fmt: skip
        except WorkerError as exc:
            chosen = os.environ.get("JAX_PLATFORMS")  # JAX's error names its backends, not it
            hint = f" (JAX_PLATFORMS={chosen} is set; unset it or fix it)" if chosen else ""
            raise fail(f"cannot measure: {exc}{hint}", code=1) from None
    _report(result, cases)


def _process_groups(
    count: int, timeout_s: int, in_process: bool, min_samples: int, cases: list[Case]
) -> list[ProcessGroup]:
    """``--jax-processes``' groups (none for 1); a bad value is one line and exit 2.

    Says once that every process takes exactly ``--min-samples`` samples, and names the
    selected workloads that have no mesh to span the processes (each process runs a copy).
    """
    from jaxbench.distributed import local_groups

    if count < 1:
        raise fail(f"--jax-processes must be a whole number >= 1, got {count}")
    most = MAX_JAX_PROCESSES_PER_CPU * (os.cpu_count() or 1)
    if count > most:  # each is a whole JAX runtime: 100,000 of them exhausted the memory
        raise fail(f"--jax-processes {count}: at most {most} on this machine "
                   f"({MAX_JAX_PROCESSES_PER_CPU} per CPU core; each is a whole JAX "
                   "process)")  # fmt: skip
    if timeout_s < 1:
        raise fail(f"--join-timeout must be a whole number of seconds >= 1, got {timeout_s}")
    if count == 1:
        if timeout_s != DEFAULT_JOIN_TIMEOUT_S:
            raise fail(f"--join-timeout {timeout_s} applies with --jax-processes N > 1 only")
        return []
    if in_process:
        raise fail(f"--jax-processes {count} needs a worker per process; drop --in-process")
    err_console.print(f"note: --jax-processes {count}: every process takes exactly "
                      f"--min-samples {min_samples} samples (the processes must make the same "
                      "calls; --budget is not used)", highlight=False)  # fmt: skip
    unmeshed = sorted({c.workload for c in cases if "devices" not in c.params
                       and str(c.params.get("mesh", "none")) == "none"})  # fmt: skip
    if unmeshed:
        err_console.print(f"warning: {', '.join(unmeshed)}: no mesh (mesh= or devices=), so "
                          f"each of the {count} processes runs its own copy of the program",
                          highlight=False)  # fmt: skip
    return local_groups(count, timeout_s)


def _run(
    cases: list[Case],
    out_dir: Path,
    backend: str,
    timing: TimingConfig,
    measure: Callable[[Case, str, Path], Record] | None,
    trace_calls: int,
) -> RunResult:
    """:func:`jaxbench.runner.run` under a progress bar (one line per case when not a terminal)."""
    from jaxbench.runner import run

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task("starting", total=len(cases))

        def on_record(case: Case, rec: Record) -> None:
            progress.advance(task)
            if not console.is_terminal:  # logs, CI, Slurm: one line per finished case
                done = int(progress.tasks[0].completed)
                console.print(f"[{done}/{len(cases)}] {case.label}: {rec.status}", highlight=False)

        return run(
            cases,
            out_dir,
            backend=backend,
            timing=timing,
            on_case=lambda case: progress.update(task, description=case.label),
            on_record=on_record,
            measure=measure,
            trace_calls=trace_calls,
        )


def _report(result: RunResult, cases: list[Case]) -> None:
    """The run's table, its problems and file; exit 1 on a write error, failure, or no measure."""
    from jaxbench.tables import nothing_measured, problems, records_table

    console.print(records_table(result.records, title=f"jaxbench run {result.path.stem}"))
    for line in problems(result.records):
        console.print(line, style="yellow", highlight=False)
    if result.moved_from is not None:
        say("warning:", f"{result.moved_from} was removed or replaced while this run wrote it; "
                        f"its records were copied whole to {result.path}")  # fmt: skip
    if result.path.exists():
        console.print(f"results: {result.path}", highlight=False)
    if result.write_error:
        raise fail(f"cannot write {result.write_error}; the {len(result.records)} record(s) "
                   "before it are whole in that file", code=1)  # fmt: skip
    if result.interrupted and not result.records:
        raise fail(f"interrupted before the first of {len(cases)} cases finished; nothing was "
                   "written", code=130)  # fmt: skip
    if result.interrupted:
        raise fail(
            f"interrupted after {len(result.records)} of {len(cases)} cases; "
            f"their records are in {result.path}",
            code=130,
        )
    if result.failed:
        raise fail(f"{len(result.failed)} of {len(result.records)} cases failed", code=1)
    if (why := nothing_measured(result.records)) is not None:
        raise fail(why, code=1)


def _check_debug_modes(allow_debug: bool) -> None:
    from jaxbench.measure.programs import debug_modes

    modes = debug_modes()
    if "jax_disable_jit" in modes and not allow_debug:
        raise fail(
            "jax_disable_jit is on (JAX_DISABLE_JIT or jax.config): every call would run op by "
            "op, not compiled; unset it, or pass --allow-debug to time it anyway"
        )
    for mode in modes:
        say("warning:", f"{mode} is on ({mode.upper()} or jax.config): it slows every call; "
                        "the records say so in env.jax_flags")  # fmt: skip


def _warn_cpu_clock() -> None:
    """Warn where the CPU's clock can move under the timings: a governor or turbo boost."""
    from jaxbench.env import cpu_frequency_policy

    policy = cpu_frequency_policy()
    if policy["governor"] not in (None, "performance"):
        say("warning:", f"the CPU frequency governor is {policy['governor']}, not performance: "
                        "the clock follows the load, and latencies with it; the records say so "
                        "in env.host.governor")  # fmt: skip
    if policy["turbo"]:
        say("warning:", "turbo boost is on: the clock depends on temperature and on the other "
                        "cores' load; the records say so in env.host.turbo")  # fmt: skip


def _platform(backend: str) -> str:
    """The platform of ``backend`` in this process (``default``: JAX's first device)."""
    import jax

    return jax.devices()[0].platform if backend == "default" else backend


def _warn_gpu_sizes_on_cpu(cases: list[Case], platform: str | None) -> None:
    from jaxbench.workloads import get_workload

    big = sorted({c.label for c in cases if get_workload(c.workload).meant_for(c.params) == "gpu"})
    if big and platform == "cpu":
        say("warning:", f"{len(big)} case(s) are meant for a GPU (e.g. {big[0]}); on the CPU "
                        "one case can take minutes")  # fmt: skip


def show_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(parser=given_path, help="Result files, or folders searched for them."),
    ],
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            metavar="",
            help="Stop at the first line that is not a valid record (exit 2).",
        ),
    ] = False,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            min=0,
            help="Show the last N records loaded (files in name order, so the newest runs "
            "last); 0 shows all.",
        ),
    ] = 500,
) -> None:
    """Print the summary table of result files.

    Lines that do not load (cut short, foreign, a newer schema) are named on stderr and the rest
    is shown, as in `compare` and `report`; `--strict` stops at the first one instead. A
    history of thousands of records is cut to the last `--limit` ones, and stderr says how
    many were left out.
    """
    from jaxbench.store import collector_paused

    with collector_paused():  # a long history: see jaxbench.store.collector_paused
        _show(paths, strict, limit)


def _show(paths: list[Path], strict: bool, limit: int) -> None:
    from jaxbench.store import StoreFormatError, load
    from jaxbench.store.scan import sweep_of
    from jaxbench.tables import records_table

    try:
        loaded = load(paths, kinds={"record"}, strict=strict)
    except (FileNotFoundError, StoreFormatError) as exc:
        raise fail(str(exc)) from None
    for problem in loaded.problems:
        say("skipped:", str(problem))
    items = loaded.of("record")
    if not items:
        raise fail(f"no records in {', '.join(map(str, paths))}")
    shown = items[-limit:] if limit else items
    if len(shown) < len(items):
        err_console.print(
            f"showing the last {len(shown)} of {len(items)} records; --limit 0 shows all",
            highlight=False,
        )
    by_file: dict[Path, list[Record]] = {}
    sweeps: dict[Path, Path | None] = {}  # a record file's folder -> its sweep, if a sweep's
    for item in shown:
        folder = item.path.parent
        if folder not in sweeps:
            sweeps[folder] = sweep_of(folder)
        by_file.setdefault(sweeps[folder] or item.path, []).append(item.model)
    for file, records in by_file.items():  # a table a file, or a sweep (a file a case)
        console.print(records_table(records, title=str(file)))
