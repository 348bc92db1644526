"""The ``jaxbench`` command: wires workloads, measurement and records for people; no logic here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from jaxbench.results import Record, read_records
from jaxbench.summary import summarize

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Honest timing of warmed JAX workloads."
)
console = Console()
if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
    console = Console(width=160)
err_console = Console(stderr=True)
BARE_PARAMS = ("size", "dtype", "strategy", "optimizer")


def _fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def _fmt_s(value: float | None) -> str:
    if value is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def _fmt_bytes(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:.1f} MiB"


def _fmt_rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1e9:.3g} GFLOP/s"


def records_table(records: list[Record], title: str) -> Table:
    """A rich table per record: status, p50, p95, IQR, compile s, FLOP/s, MFU, device peak."""
    table = Table(title=title, show_lines=False)
    for col in (
        "benchmark",
        "params",
        "status",
        "n",
        "p50",
        "p95",
        "IQR",
        "compile",
        "FLOP/s",
        "MFU",
        "device peak",
    ):
        table.add_column(
            col, justify="left" if col in ("benchmark", "params", "status") else "right"
        )
    for rec in records:
        s = summarize(rec)
        params = " ".join(
            str(v) if k in BARE_PARAMS else f"{k}={v}"
            for k, v in rec.params.items()
            if k != "strategy"
        )
        status = rec.status if rec.status == "ok" else f"[yellow]{rec.status}[/]"
        table.add_row(
            rec.benchmark,
            params,
            status,
            str(s["n"]),
            _fmt_s(s["p50_s"]),
            _fmt_s(s["p95_s"]),
            _fmt_s(s["iqr_s"]),
            _fmt_s(rec.compile_s),
            _fmt_rate(s["flops_per_s"]),
            "n/a" if s["mfu"] is None else f"{100 * s['mfu']:.1f}%",
            _fmt_bytes(rec.device_peak_bytes),
        )
    return table


@app.command("list")
def list_workloads() -> None:
    """List workloads and their parameter grids (quick grid first, then full)."""
    from jaxbench.workloads import SIZES, WORKLOADS

    for workload in WORKLOADS.values():
        console.print(f"[bold]{workload.name}[/]  parameters: {', '.join(workload.param_names)}")
        for label, quick in (("quick", True), ("full", False)):
            grid = workload.grid(quick)
            console.print(
                f"  {label}: " + "; ".join(f"{k}={v}" for k, v in grid.items()), highlight=False
            )
    console.print("[bold]sizes[/]")
    for s in SIZES.values():
        console.print(
            f"  {s.name:7} d_in={s.d_in} width={s.width} depth={s.depth} "
            f"d_out={s.d_out} batch={s.batch} params={s.params_count:,} ({s.device})",
            highlight=False,
        )


@app.command("run")
def run_cmd(
    workload: Annotated[
        list[str] | None, typer.Option("--workload", "-w", help="Workload(s); default all.")
    ] = None,
    size: Annotated[list[str] | None, typer.Option("--size", "-s")] = None,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", "-d")] = None,
    k: Annotated[list[int] | None, typer.Option("--k", "-k", help="Tangents (forward).")] = None,
    strategy: Annotated[list[str] | None, typer.Option("--strategy")] = None,
    optimizer: Annotated[list[str] | None, typer.Option("--optimizer")] = None,
    wrt: Annotated[
        list[str] | None, typer.Option("--wrt", help="Forward primal: input or params.")
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", "-b", help="default, cpu, gpu, cuda, rocm or tpu.")
    ] = "default",
    full: Annotated[bool, typer.Option("--full", help="Full grid instead of quick.")] = False,
    out: Annotated[Path, typer.Option("--out", "-o", help="Results folder.")] = Path("results"),
    budget: Annotated[float, typer.Option(help="Timed seconds per case.")] = 0.2,
    min_samples: Annotated[int, typer.Option(help="Samples per case, at least.")] = 20,
    warmup: Annotated[int, typer.Option(help="Warm-up calls per case.")] = 3,
    compilation_cache: Annotated[
        str, typer.Option(help="Persistent compile cache: off, fresh, or a folder.")
    ] = "off",
    cache_min_compile_time: Annotated[
        float | None,
        typer.Option(help="Seconds a compile must take to be cached (JAX default 1.0)."),
    ] = None,
) -> None:
    """Run the selected cases and write one JSON Lines file of records; exit 1 if any failed."""
    from jaxbench.measure import TimingConfig, configure_compilation_cache
    from jaxbench.runner import BACKENDS, run, select_cases

    try:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
        timing = TimingConfig(
            budget_s=budget,
            min_samples=min_samples,
            max_samples=max(100_000, min_samples),
            warmup_calls=warmup,
        )
        overrides = {
            "size": size,
            "dtype": dtype,
            "k": k,
            "strategy": strategy,
            "optimizer": optimizer,
            "wrt": wrt,
        }
        cases = select_cases(workload, quick=not full, overrides=overrides)
        configure_compilation_cache(compilation_cache, min_compile_time_s=cache_min_compile_time)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".jaxbench-write-test"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise _fail(f"results folder {str(out)!r} is not writable: {exc.strerror or exc}") from None

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=len(cases))
        result = run(
            cases,
            out,
            backend=backend,
            timing=timing,
            on_case=lambda case: progress.update(task, description=case.label),
            on_record=lambda case, rec: progress.advance(task),
        )
    console.print(records_table(result.records, title=f"jaxbench run {result.path.stem}"))
    for rec in result.records:
        if rec.status != "ok":
            console.print(
                f"[yellow]{rec.status}[/] {rec.benchmark} {rec.params}: {rec.error}",
                highlight=False,
            )
    console.print(f"results: {result.path}", highlight=False)
    if result.failed:
        raise _fail(f"{len(result.failed)} of {len(result.records)} cases failed", code=1)


@app.command("show")
def show_cmd(files: Annotated[list[Path], typer.Argument(help="Result files (.jsonl).")]) -> None:
    """Print the summary table of result files."""
    from jaxbench.results import ResultsFormatError

    for file in files:
        try:
            records = read_records(file)
        except (OSError, ResultsFormatError) as exc:
            raise _fail(str(exc)) from None
        console.print(records_table(records, title=str(file)))


def main() -> None:
    """Entry point for ``python -m jaxbench``."""
    app()
