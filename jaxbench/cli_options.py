"""What ``jaxbench run`` and ``jaxbench submit`` share: consoles, selection and timing options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from jaxbench.cluster.pyenvs import VersionEnvs

console = Console()
if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
    console = Console(width=160)
err_console = Console(stderr=True, soft_wrap=True)  # one error, one line


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr; return the ``typer.Exit`` to raise.

    The message is plain text: a user's value such as ``[n, 4]`` or ``mod:factory:`` is shown
    as it is, not read as rich markup or an emoji code.
    """
    err_console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False)
    return typer.Exit(code)


def _whole(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a whole number") from None


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a number") from None


Workloads = Annotated[
    list[str] | None, typer.Option("--workload", "-w", help="Workload(s); default all.")
]
Sizes = Annotated[list[str] | None, typer.Option("--size", "-s", help="Model size(s): see `list`.")]
Dtypes = Annotated[list[str] | None, typer.Option("--dtype", "-d", help="float32 and/or bfloat16.")]
Ks = Annotated[
    list[int] | None, typer.Option("--k", "-k", parser=_whole, help="Tangents (forward).")
]
Strategies = Annotated[
    list[str] | None, typer.Option("--strategy", help="Forward strategy(ies): see `list`.")
]
Optimizers = Annotated[
    list[str] | None, typer.Option("--optimizer", help="Train step: sgd and/or adam.")
]
Wrts = Annotated[list[str] | None, typer.Option("--wrt", help="Forward primal: input or params.")]
Params = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        help=(
            "NAME=VALUE of a parameter without its own option (a user workload's; loop, "
            "scatter, compile): repeat to sweep."
        ),
    ),
]
Full = Annotated[bool, typer.Option("--full", metavar="", help="Full grid instead of quick.")]
JaxExtra = Annotated[
    str | None,
    typer.Option(
        "--jax-extra",
        help="Extra of jax in version venvs: cuda12 or cuda13 (with the matching CUDA plugin "
        "wheels) or tpu.",
    ),
]
ExtraIndexUrl = Annotated[
    str | None,
    typer.Option(
        "--extra-index-url",
        help="Another package index for version venvs (e.g. JAX's nightly wheels); its "
        "development builds count as releases.",
    ),
]
Budget = Annotated[float, typer.Option(parser=_number, help="Timed seconds per case.")]
MinSamples = Annotated[int, typer.Option(parser=_whole, help="Samples per case, at least.")]
Warmup = Annotated[int, typer.Option(parser=_whole, help="Warm-up calls per case.")]
Pipeline = Annotated[
    int,
    typer.Option(
        parser=_whole,
        help="Calls per sample: 1 times each call blocked (latency); N > 1 dispatches N calls "
        "and blocks once (pipelined throughput, per-call time = total / N).",
    ),
]


def selection(
    workload: list[str] | None,
    full: bool,
    params: list[str] | None = None,
    **overrides: list | None,
) -> list:
    """The selected :class:`jaxbench.cases.Case` list (quick grid unless ``full``).

    Args:
        workload: ``--workload`` values; ``None`` for the built-in workloads.
        full: ``--full``.
        params: ``--param NAME=VALUE`` texts.
        overrides: The built-in parameters' options (``size=[...]``).

    Raises:
        ValueError: Unknown workload, parameter or value (from :func:`select_cases`), or a
            ``--param`` without ``=``.
    """
    from jaxbench.cases import select_cases

    texts: dict[str, list[str]] = {}
    for text in params or []:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--param {text!r}: expected NAME=VALUE")
        texts.setdefault(name.strip(), []).append(value)
    return select_cases(workload, quick=not full, overrides=overrides, texts=texts)


def timing_fields(budget: float, min_samples: int, warmup: int, pipeline: int = 1) -> dict:
    """:class:`jaxbench.measure.TimingConfig` fields, validated, as records hold them.

    Raises:
        ValueError: A value out of range; the message names the option (``--budget``, ...).
    """
    from jaxbench.measure import TimingConfig

    try:
        timing = TimingConfig(
            budget_s=budget,
            min_samples=min_samples,
            max_samples=max(100_000, min_samples),
            warmup_calls=warmup,
            pipeline=pipeline,
        )
    except ValueError as exc:  # its messages begin with the field: name the option instead
        message = str(exc)
        for field, option in TIMING_OPTIONS.items():
            message = message.replace(field, option, 1) if message.startswith(field) else message
        raise ValueError(message) from None
    return timing.recorded()


TIMING_OPTIONS = {
    "budget_s": "--budget",
    "min_samples": "--min-samples",
    "warmup_calls": "--warmup",
    "pipeline": "--pipeline",
}
"""The ``TimingConfig`` field each timing option sets."""


def version_envs(env_root: Path, jax_extra: str | None, extra_index_url: str | None) -> VersionEnvs:
    """The :class:`jaxbench.cluster.pyenvs.VersionEnvs` of the options; exit 2 on a bad extra."""
    from jaxbench.cluster.pyenvs import VersionEnvs

    try:
        return VersionEnvs(env_root, jax_extra, extra_index_url)
    except ValueError as exc:
        raise fail(str(exc)) from None


def writable_folder(out: str) -> Path:
    """Create and probe a results folder; exit 2 with one line if it cannot be written."""
    from jaxbench.folders import ensure_writable

    try:
        return ensure_writable(out)
    except ValueError as exc:
        raise fail(str(exc)) from None
