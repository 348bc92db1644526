"""``jaxbench drift``: save a numerical drift reference once, then check against it."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from jaxbench.cli.options import console, fail, writable_folder
from jaxbench.drift.reference import DEFAULT_REFERENCE

if TYPE_CHECKING:
    from jaxbench.drift.check import DriftRun
    from jaxbench.store.drift import DriftRow
    from jaxbench.workloads import UserWorkload


def _device(backend: str) -> Any:
    from jaxbench.cases import resolve_device

    try:
        return resolve_device(backend)
    except (ValueError, RuntimeError) as exc:
        raise fail(str(exc)) from None


def drift_cmd(
    ctx: typer.Context,
    save_reference: Annotated[
        bool,
        typer.Option(
            "--save-reference",
            metavar="",
            help="Compute every set now and save it as the reference.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", metavar="", help="With --save-reference: overwrite a reference."),
    ] = False,
    reference: Annotated[
        Path, typer.Option("--reference", help="Reference folder (reference.json and .npz).")
    ] = DEFAULT_REFERENCE,
    out: Annotated[
        str, typer.Option("--out", "-o", help="Folder of the `drift-<run id>.jsonl` file.")
    ] = "results",
    backend: Annotated[
        str, typer.Option("--backend", "-b", help="default, cpu, gpu, cuda, rocm or tpu.")
    ] = "default",
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            "-w",
            help="A user workload (package.module:factory or an entry point's name) instead of "
            "the built-in sets; its reference defaults to `results/drift/<name>`.",
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            help="With --workload and --save-reference: NAME=VALUE of the user workload's "
            "parameters, repeat to save several cases.",
        ),
    ] = None,
) -> None:
    """Check numerical drift against a saved reference; exit 1 on drift or a missing raise.

    Recomputes the regression sets and compares each output with the reference by rtol and atol.
    """
    if param and workload is None:
        raise fail("--param needs --workload: the built-in sets have fixed inputs")
    if param and not save_reference:
        raise fail("--param applies with --save-reference: a check recomputes the saved cases")
    from jaxbench.backends import check_backend

    try:
        check_backend(backend)
    except ValueError as exc:
        raise fail(str(exc)) from None
    found = None if workload is None else _user_workload(workload)  # bad input, not drift
    if workload is not None and ctx.get_parameter_source("reference").name != "COMMANDLINE":
        from jaxbench.drift.user import reference_folder

        reference = reference_folder(workload)
    if any(p.exists() and not p.is_dir() for p in (reference, *reference.parents)):
        raise fail(f"--reference {reference}: a file is in the way, expected a reference folder")
    if save_reference:
        if ctx.get_parameter_source("out").name == "COMMANDLINE":
            raise fail("--out is for a check; --save-reference writes to --reference")
        _refuse_overwrite(reference, force)  # before any set is built
        writable_folder(str(reference), "--reference")
        sets = None if found is None else _user_sets(found, param)
        _save(reference, force, backend, sets)
        return
    if force:
        raise fail("--force only applies with --save-reference")
    _check(reference, out, backend, workload)


def _user_workload(name: str) -> UserWorkload:
    """The user workload ``name``; one line and exit 2 for a built-in family or a bad name."""
    from jaxbench.workloads import WORKLOADS
    from jaxbench.workloads.user import find

    if name in WORKLOADS:
        raise fail(
            f"--workload {name}: a built-in family; `jaxbench drift` without --workload checks "
            "the built-in sets"
        )
    try:  # the names to choose from are the user workloads': drift takes no built-in one
        return find(name, known=())
    except ValueError as exc:
        raise fail(str(exc)) from None


def _user_sets(found: UserWorkload, params: list[str] | None) -> list:
    """The sets of a user workload at each ``--param`` case; one line and exit 2 if bad."""
    from jaxbench.cli.selection import Selection
    from jaxbench.drift.tolerance import BASE_REDUCTION
    from jaxbench.drift.user import user_sets

    name = found.name
    try:
        cases = Selection(workload=[name], param=params).cases()
        sets = user_sets(found, [c.params for c in cases])
    except ValueError as exc:
        raise fail(str(exc)) from None
    if any(found.build(c.params).reduction_length is None for c in cases):
        console.print(
            f"note: {name} gives no Step.reduction_length: its tolerance assumes sums of at most "
            f"{BASE_REDUCTION} terms behind each output",
            highlight=False,
            soft_wrap=True,
        )
    return sets


def _refuse_overwrite(folder: Path, force: bool) -> None:
    from jaxbench.drift.reference import manifest_path

    if manifest_path(folder).exists() and not force:
        raise fail(
            f"a drift reference already exists in {folder} (reference.json); "
            "pass --force to overwrite it"
        )


def _save(folder: Path, force: bool, backend: str, sets: list | None = None) -> None:
    from jaxbench.drift.check import DriftComputeError
    from jaxbench.drift.check import save_reference as save
    from jaxbench.drift.reference import DriftReferenceError

    _refuse_overwrite(folder, force)
    device = _device(backend)
    try:
        path = save(folder, force=force, device=device, sets=sets)
    except DriftReferenceError as exc:
        raise fail(str(exc)) from None
    except DriftComputeError as exc:
        raise fail(f"cannot save a reference: {exc}", code=1) from None
    except OSError as exc:
        raise fail(f"--reference {folder}: cannot write the reference: "
                   f"{exc.strerror or exc}") from None  # fmt: skip
    env = {"jax": _jax_version(), "backend": device.platform, "device_kind": device.device_kind}
    console.print(f"drift reference saved: {path} ({_where(env)})", highlight=False,
                  soft_wrap=True)  # fmt: skip


def _where(env: dict) -> str:
    """``jax 0.12.1, cpu``: the version, backend and device kind (once where it is the backend)."""
    kinds = dict.fromkeys(str(env.get(k)) for k in ("backend", "device_kind"))
    return ", ".join([f"jax {env.get('jax')}", *kinds])


def _jax_version() -> str:
    import jax

    return jax.__version__


def _check(folder: Path, out: str, backend: str, workload: str | None = None) -> None:
    from jaxbench.drift.check import check_drift
    from jaxbench.drift.reference import DriftReferenceError, read_reference

    try:
        ref = read_reference(folder)
    except DriftReferenceError as exc:
        hint = f" --workload {workload}" if workload else ""
        raise fail(str(exc).replace("--save-reference", f"--save-reference{hint}")) from None
    if workload is not None and all(s.workload != workload for s in ref.manifest.sets):
        raise fail(f"--workload {workload}: the reference in {folder} holds no set of it")
    _importable(folder, {s.workload for s in ref.manifest.sets})
    out_dir = writable_folder(out)
    device = _device(backend)
    try:
        run = check_drift(ref, out_dir, device=device)
    except OSError as exc:
        raise fail(f"cannot write the drift file in {out_dir}: {exc.strerror or exc}") from None
    console.print(drift_table(run))
    for note in run.notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    for row in run.findings:
        what = f"{row.workload} {row.dtype} {row.set} {row.output}: {row.finding}"
        console.print(f"finding: {what}", style="yellow", highlight=False, soft_wrap=True)
    console.print(f"drift: {run.path}", highlight=False, soft_wrap=True)
    if run.findings:
        raise fail(f"{len(run.findings)} of {len(run.rows)} drift rows are findings", code=1)


def _importable(folder: Path, names: set[str]) -> None:
    """One line and exit 2 where a user workload of the reference cannot be imported here.

    That is a set-up error (the module is not on this interpreter's path), not drift: a set
    whose factory imports and then fails is a finding of the check, and so is a set of a name
    this code does not know (a retired family, an entry point no longer installed).
    """
    from jaxbench.drift.sets import families
    from jaxbench.workloads import get_workload

    for name in sorted(n for n in names - set(families()) if ":" in n):  # module:factory
        try:
            get_workload(name)
        except ValueError as exc:
            why = str(exc).removeprefix(f"--workload {name!r}: ")
            raise fail(f"--reference {folder}: it holds sets of {name}, which this interpreter "
                       f"cannot load: {why}; run where it imports (its package installed, or "
                       "on PYTHONPATH)") from None  # fmt: skip


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _loss_cell(rows: list[DriftRow]) -> str:
    """What an ``invalid_shape`` set raised, else its loss, reference -> now.

    The loss is the output named ``loss``, else the first floating scalar: a user step's
    outputs may hold integer scalars, such as an optimizer's step count.
    """
    for r in rows:
        if r.output == "raises":
            return r.error_type.rsplit(".", 1)[-1] if r.raised else "nothing raised"
    scalars = [r for r in rows if r.reference_value is not None and r.current_value is not None
               and "float" in (r.output_dtype or "")]  # fmt: skip
    named = [r for r in scalars if r.output == "loss" or r.output.endswith(".loss")]
    for r in named or scalars:
        return f"{r.reference_value:.7g} -> {r.current_value:.7g}"
    return ""


def drift_table(run: DriftRun) -> Table:
    """One line per regression set: the worst errors over its outputs and its verdict.

    Columns: workload, dtype, set, outputs (count), max abs error, max relative error, worst
    error over its bound (at most 1 within tolerance), rtol, atol, the loss (reference ->
    now) or what an ``invalid_shape`` set raised, and the verdict.
    """
    now = run.rows[0].env if run.rows else {}
    table = Table(
        title=f"jaxbench drift {run.path.stem.removeprefix('drift-')}",
        caption=(
            f"checked: {_where(now)}; reference: {_where(run.reference.manifest.env)}; "
            "errors are absolute in the output's units; err/bound <= 1 is within tolerance"
        ),
    )
    columns = ("workload", "dtype", "set", "outputs", "max abs err", "max rel err", "err/bound")
    for col in (*columns, "rtol", "atol", "loss or raised", "verdict"):
        table.add_column(col, justify="left" if col in columns[:3] else "right")
    groups: dict[tuple[str, str, str], list[DriftRow]] = defaultdict(list)
    for row in run.rows:
        groups[(row.workload, row.dtype, row.set)].append(row)

    def worst(rows: list[DriftRow], name: str) -> float | None:
        values = [getattr(r, name) for r in rows if getattr(r, name) is not None]
        return max(values) if values else None

    for (workload, dtype, name), rows in groups.items():
        bad = [r for r in rows if not r.within_tolerance]
        verdict = Text("ok") if not bad else Text(f"{len(bad)} finding(s)", style="bold red")
        table.add_row(
            workload,
            dtype,
            name,
            str(len(rows)),
            _fmt(worst(rows, "max_abs_err")),
            _fmt(worst(rows, "max_rel_err")),
            _fmt(worst(rows, "worst_ratio")),
            f"{rows[0].rtol:.3g}",
            f"{rows[0].atol:.3g}",
            _loss_cell(rows),
            verdict,
        )
    return table


def register(app: typer.Typer) -> None:
    """Add ``drift`` to the ``jaxbench`` command."""
    app.command("drift")(drift_cmd)
