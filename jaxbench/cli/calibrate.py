"""``jaxbench calibrate``: A/A live comparisons of one case: false alarms, spread, detectable."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from jaxbench.cli.options import (
    Alpha,
    Backend,
    Rounds,
    Threshold,
    check_rule_options,
    console,
    err_console,
    fail,
    writable_folder,
)
from jaxbench.cli.selection import ALIASES, Selection, selects_cases
from jaxbench.live_defaults import (
    DEFAULT_CALIBRATION_PAIRS,
    DEFAULT_CALLS_PER_BLOCK,
    DEFAULT_COMPARISONS,
    DEFAULT_ROUNDS,
    DEFAULT_WARMUP_ROUNDS,
)

#: Parameter -> the option that selects it, for the "exactly one case" error.
OPTION_OF = {"workload": "--workload/-w", "size": "--size/-s", "dtype": "--dtype/-d",
             "k": "--k/-k", "strategy": "--strategy", "optimizer": "--optimizer",
             "wrt": "--wrt"}  # fmt: skip
Workload = Annotated[
    list[str] | None, typer.Option("--workload", "-w", help="Workload; default train_step.")
]


def one_case(select: Selection) -> Any:
    """The single selected case, unselected parameters at :data:`DEFAULT_SELECTION` values.

    Exits 2 with one line naming the option to narrow when the selection is not one case.
    """
    from jaxbench.calibrate import DEFAULT_SELECTION
    from jaxbench.workloads import get_workload

    names = select.workload or [DEFAULT_SELECTION["workload"]]
    try:
        specs = [get_workload(n) for n in names]
    except ValueError as exc:
        raise fail(str(exc)) from None
    given = {text.partition("=")[0].strip() for text in select.param or []}
    defaults = {"workload": names}
    for param, value in DEFAULT_SELECTION.items():
        unset = param in ALIASES and not getattr(select, param) and param not in given
        if unset and all(param in s.param_names for s in specs):
            defaults[param] = [value]
    try:
        cases = replace(select, **defaults).cases()
    except ValueError as exc:
        raise fail(str(exc)) from None
    if len(cases) != 1:
        if len({c.workload for c in cases}) > 1:
            varying = ["workload"]
        else:
            varying = [k for k in cases[0].params
                       if len({repr(c.params[k]) for c in cases}) > 1]  # fmt: skip
        options = ", ".join(OPTION_OF.get(k, f"--param {k}=VALUE") for k in varying)
        raise fail(f"calibrate needs exactly one case, {len(cases)} are selected: give one "
                   f"value of {options or 'the selection'}")  # fmt: skip
    return cases[0]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _secs(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:.0f} s" if x < 120 else f"{x / 60:.1f} min"


def comparisons_table(record: Any) -> Table:
    """One row per A/A comparison: ratio, interval, verdict."""
    level = 1 - record.alpha
    table = Table(title=f"A/A comparisons of {record.case.label} "
                        f"({record.schedule['pairs']} pairs each, one look)")  # fmt: skip
    for col in ("#", "ratio", f"{level:.0%} CI", "verdict"):
        table.add_column(col, justify="left" if col == "verdict" else "right")
    for c in record.comparisons:
        ci = "" if c.ci_low is None else f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"
        ratio = "" if c.ratio is None else f"{c.ratio:.3f}"
        style = "bold red" if c.verdict in ("slower", "faster") else None
        verdict = Text(c.verdict, style=style or "")
        table.add_row(str(c.index), ratio, ci, verdict)
    return table


def summary_table(record: Any) -> Table:
    """The calibration's figures, one per row."""
    s, d = record.summary, record.summary.design
    table = Table(title=f"calibration on {record.host.get('hostname')} (threshold "
                        f"{record.threshold:.0%}, alpha {record.alpha:g})")  # fmt: skip
    table.add_column("figure")
    table.add_column("value", justify="right")
    counts = ", ".join(f"{n} {v}" for v, n in s.verdicts.items() if n)
    ci = ("" if s.false_alarm_ci_low is None
          else f" [{s.false_alarm_ci_low:.0%}, {s.false_alarm_ci_high:.0%}]")  # fmt: skip
    rows = [
        ("A/A comparisons (verdicts)", f"{s.comparisons} ({counts or 'none'})"),
        ("false alarms (slower or faster), exact 95 % CI",
         f"{s.false_alarms}/{s.comparisons} = {_pct(s.false_alarm_rate)}{ci}"),
        ("A/A ratio over all pairs", "n/a" if s.ratio is None else f"{s.ratio:.4f}"),
        (f"sd of the pair log ratio ({s.pairs} pairs)",
         "n/a" if s.sd_log is None else f"{s.sd_log:.4f}"),
        (f"detectable at 80 % / 95 % power, {d.pairs} pairs (first look, alpha "
         f"{d.alpha_per_look:.3g})", f"{_pct(s.detectable_80)} / {_pct(s.detectable_95)}"),
        (f"detectable at 80 % / 95 % power, {d.max_pairs} pairs (last look)",
         f"{_pct(s.detectable_80_max_pairs)} / {_pct(s.detectable_95_max_pairs)}"),
        ("seconds per pair (median)", _secs(s.seconds_per_pair)),
        (f"time to a verdict: {d.pairs} pairs / {d.max_pairs} pairs",
         f"{_secs(s.seconds_to_verdict)} / {_secs(s.seconds_to_verdict_max)}"),
    ]  # fmt: skip
    for name, value in rows:
        table.add_row(name, value)
    return table


def register(app: typer.Typer) -> None:
    """Add ``calibrate`` to ``app``."""

    @app.command("calibrate")
    @selects_cases(workload=Workload)
    def calibrate_cmd(
        select: Selection,
        comparisons: Annotated[
            int, typer.Option(help="A/A comparisons (each gives one verdict).")
        ] = DEFAULT_COMPARISONS,
        pairs: Annotated[
            int, typer.Option(help="Process pairs per comparison (one look).")
        ] = DEFAULT_CALIBRATION_PAIRS,
        rounds: Rounds = DEFAULT_ROUNDS,
        calls_per_block: Annotated[
            int, typer.Option(help="Timed calls per block.")
        ] = DEFAULT_CALLS_PER_BLOCK,
        warmup_rounds: Annotated[
            int, typer.Option(help="Untimed rounds first.")
        ] = DEFAULT_WARMUP_ROUNDS,
        seed: Annotated[
            int, typer.Option(min=0, help="Seed of the block order (+1 a comparison).")
        ] = 0,
        backend: Backend = "cpu",
        threshold: Threshold = 0.02,
        alpha: Alpha = 0.05,
        out: Annotated[
            str, typer.Option("--out", "-o", help="Folder for `calibration-<id>.json`.")
        ] = "results",
    ) -> None:
        """Measure false alarms and the detectable change of live comparisons on this machine.

        Runs --comparisons A/A comparisons (this interpreter on both sides) of one case
        (default: train_step small float32 sgd), each over --pairs pairs of fresh worker
        processes, and reports the false-alarm rate with its exact 95 % interval, the spread
        between pairs, the smallest slowdown the default `compare --interleave` design finds at
        80 % and 95 % power, and the time per pair. The record is saved after every
        comparison; Ctrl-C keeps the comparisons finished. Exit 2 on bad input.
        """
        from jaxbench.backends import check_backend
        from jaxbench.calibrate import CalibrationFailed, check_pairs, run_calibration
        from jaxbench.interleave import LiveStopped, Schedule

        if comparisons < 1:
            raise fail(f"--comparisons must be >= 1, got {comparisons}")
        try:
            check_rule_options(alpha, {"--threshold": threshold})
        except ValueError as exc:
            raise fail(str(exc)) from None
        case = one_case(select)
        try:
            check_backend(backend)
            check_pairs(pairs)
            schedule = Schedule(pairs=pairs, max_pairs=pairs, rounds=rounds,
                                calls_per_block=calls_per_block, warmup_rounds=warmup_rounds,
                                seed=seed)  # fmt: skip
        except ValueError as exc:
            raise fail(str(exc)) from None

        def on_pair(index: int, done: int) -> None:
            err_console.print(f"comparison {index + 1}/{comparisons}: pair {done}/{pairs} done",
                              highlight=False)  # fmt: skip

        try:
            record, path = run_calibration(case.workload, dict(case.params), writable_folder(out),
                                           comparisons, schedule, backend, threshold, alpha,
                                           on_pair)  # fmt: skip
        except LiveStopped as exc:
            cut = "; a comparison cut short is not kept (complete: false)" if exc.path else ""
            raise fail(f"{exc.line()}{cut}", code=exc.exit_code) from None
        except CalibrationFailed as exc:
            raise fail(str(exc), code=1) from None
        console.print(comparisons_table(record))
        console.print(summary_table(record))
        console.print(f"wrote {path}", highlight=False)
