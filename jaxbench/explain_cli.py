"""``jaxbench explain``: what changed in the compiled program between two interpreters."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from jaxbench.cli_options import (
    Dtypes,
    Full,
    Ks,
    Optimizers,
    Params,
    Sizes,
    Strategies,
    Workloads,
    Wrts,
    console,
    err_console,
    fail,
    selection,
    writable_folder,
)
from jaxbench.compare_cli import CURRENT, assignments, check_overrides, python_for

SIDE_HELP = f"Baseline: {CURRENT}, a path to a python, or a JAX version (its venv, built once)."
#: Warm-up calls when a worker prepares a case for explain (nothing is timed).
WARMUP_CALLS = 1


def programs_of(
    python: str, workload: str, params: dict[str, Any], backend: str
) -> tuple[str, list[dict]]:
    """Prepare one case in a fresh worker of ``python``; its JAX version and its programs.

    Raises:
        jaxbench.interleave.WorkerError: The worker could not start, prepare or capture.
    """
    from jaxbench.interleave.session import Worker

    with Worker(python, backend) as worker:
        ready = worker.request(op="prepare", workload=workload, params=params, backend=backend,
                               warmup=WARMUP_CALLS)  # fmt: skip
        return str(ready["env"].get("jax")), worker.request(op="programs")["programs"]


def _report(title: str, sections: list[tuple[str, list[str], list[str]]]) -> str:
    """The Markdown of one explain run: per case, the artifacts of each side and the lines."""
    out = [f"# {title}", ""]
    for label, hashes, lines in sections:
        files = f"`programs/{hashes[0]}.json.gz`, `programs/{hashes[1]}.json.gz`"
        out += [f"## {label}", "", f"Programs (baseline, candidate): {files}.", "", "```",
                *lines, "```", ""]  # fmt: skip
    return "\n".join(out)


def register(app: typer.Typer) -> None:
    """Add ``explain`` to ``app``."""

    @app.command("explain")
    def explain_cmd(
        baseline: Annotated[str, typer.Argument(help=SIDE_HELP)],
        candidate: Annotated[str, typer.Argument(help="Candidate, the same kinds.")],
        set_a: Annotated[
            list[str] | None, typer.Option("--set-a", help="NAME=VALUE for the baseline.")
        ] = None,
        set_b: Annotated[
            list[str] | None,
            typer.Option("--set-b", help="NAME=VALUE for the candidate (size=small*1.05)."),
        ] = None,
        workload: Workloads = None,
        size: Sizes = None,
        dtype: Dtypes = None,
        k: Ks = None,
        strategy: Strategies = None,
        optimizer: Optimizers = None,
        wrt: Wrts = None,
        param: Params = None,
        full: Full = False,
        backend: Annotated[str, typer.Option("--backend", "-b", help="Backend.")] = "cpu",
        verdict: Annotated[
            str | None,
            typer.Option(help="The cases' timing verdict, if known (slower, faster, same)."),
        ] = None,
        env_root: Annotated[Path, typer.Option(help="Where JAX-version venvs are built.")] = Path(
            "sweeps/envs"
        ),
        out: Annotated[
            str | None,
            typer.Option("--out", "-o", help="Folder for explain-<id>.md and programs/."),
        ] = None,
    ) -> None:
        """Explain what changed in the compiled program of each selected case.

        Each side prepares the case in a fresh worker (``current``, an interpreter, or a JAX
        version's venv) and hands back its jaxpr, StableHLO, optimized HLO and XLA's cost and
        memory figures. Printed per case: which levels are identical (names and metadata set
        aside), the first that differs and what that points at, the changed counts (opcodes,
        fusions by kind, custom calls, copies, ops in while bodies), FLOP, bytes and memory,
        and a bounded diff of the optimized HLO. With identical programs and --verdict slower
        or faster, it says the cause is below HLO. Nothing is timed. With --out, the text goes
        to explain-<id>.md there and each side's programs to programs/<sha256>.json.gz.
        """
        from jaxbench.backends import check_backend
        from jaxbench.explain import diff_programs, explain_lines
        from jaxbench.explain.artifacts import save_programs
        from jaxbench.interleave import WorkerError
        from jaxbench.store import new_run_id, write_atomic

        if verdict is not None and verdict not in ("slower", "faster", "same", "inconclusive",
                                                   "unstable"):  # fmt: skip
            raise fail(f"--verdict {verdict!r}: expected slower, faster, same, inconclusive or "
                       "unstable")  # fmt: skip
        try:
            cases = selection(workload, full, param, size=size, dtype=dtype, k=k,
                              strategy=strategy, optimizer=optimizer, wrt=wrt)  # fmt: skip
            check_backend(backend)
        except ValueError as exc:
            raise fail(str(exc)) from None
        a, b = assignments(set_a, "--set-a"), assignments(set_b, "--set-b")
        check_overrides(cases, a, "--set-a")
        check_overrides(cases, b, "--set-b")
        folder = writable_folder(out) if out else None  # before any environment is built
        python_a = python_for("baseline", baseline, env_root)
        python_b = python_for("candidate", candidate, env_root)
        path = folder / f"explain-{new_run_id()}.md" if folder else None
        sections = []
        for case in cases:
            params = dict(case.params)
            try:
                jax_a, base = programs_of(python_a, case.workload, params | a, backend)
                jax_b, cand = programs_of(python_b, case.workload, params | b, backend)
                diffs = diff_programs(base, cand)
            except (WorkerError, ValueError) as exc:
                kept = f"; the cases before it are in {path}" if sections else ""
                err_console.print(f"{case.label}: {exc}{kept}", highlight=False)
                raise typer.Exit(1) from None
            label = f"{case.label}: {baseline} (JAX {jax_a}) vs {candidate} (JAX {jax_b})"
            lines = explain_lines(diffs, verdict)
            console.print(label, style="bold", highlight=False, markup=False)
            for line in lines:
                console.print(line, highlight=False, markup=False, soft_wrap=True)
            if folder is not None and path is not None:  # rewritten whole after each case
                hashes = [save_programs(folder, side) for side in (base, cand)]
                sections.append((label, hashes, lines))
                write_atomic(path, _report(f"jaxbench explain {baseline} {candidate}",
                                           sections).encode())  # fmt: skip
        if path is not None:
            console.print(f"wrote {path} and the programs under {path.parent / 'programs'}",
                          highlight=False)  # fmt: skip
