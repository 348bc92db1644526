"""What the commands share: consoles, one-line errors, case selection, timing and side options."""

from __future__ import annotations

import importlib.metadata
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from jaxbench.cli.groups import option_group
from jaxbench.inference.paired import MIN_ROUNDS
from jaxbench.store.kinds import VERDICTS

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from jaxbench.cluster.pyenvs import VersionEnvs

# No rich markup in what is printed: a user's value or an error's text (`[n, 4]`, `[/x]`) shows
# as it is; a style is given as a style (`say`, `fail`, `rich.text.Text`), never in the text.
console = Console(markup=False)
if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
    console = Console(width=160, markup=False)
err_console = Console(stderr=True, soft_wrap=True, markup=False)  # one error, one line


def say(label: str, message: str, style: str = "yellow", to: Console | None = None) -> None:
    """Print ``label message`` on one line of stderr (or ``to``), the label in ``style``.

    Args:
        label: What the line is, e.g. ``"warning:"``, ``"skipped:"`` or ``"problem:"``.
        message: Plain text, printed as it is (no rich markup, as in :func:`fail`).
        style: A rich style of the label.
        to: The console; :data:`err_console` (stderr) when ``None``.
    """
    (to or err_console).print(Text.assemble((label, style), " ", message), highlight=False)


#: Set once a command has said how it was interrupted (:func:`fail` with exit status 130): the
#: entry point (:func:`jaxbench.cli.app.main`) then adds no line of its own.
INTERRUPTION_SAID = threading.Event()


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr; return the ``typer.Exit`` to raise.

    The message is plain text: a user's value such as ``[n, 4]`` or ``mod:factory:`` is shown
    as it is, not read as rich markup or an emoji code. With ``code`` 130 (interrupted) it
    sets :data:`INTERRUPTION_SAID`.
    """
    err_console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False)
    if code == 130:
        INTERRUPTION_SAID.set()
    return typer.Exit(code)


def profile_option(name: str) -> Any:
    """The cluster profile ``--profile name`` names (:func:`jaxbench.cluster.profile.load_profile`).

    Raises:
        typer.Exit: No such profile, or one that cannot be read or is not valid: one line
            naming ``--profile`` and the value (exit 2).
    """
    from jaxbench.cluster.profile import load_profile

    try:
        return load_profile(name)
    except (ValueError, OSError) as exc:
        raise fail(f"--profile {name!r}: {str(exc).removeprefix(f'profile {name!r} ')}") from None


def check_rule_options(alpha: float, thresholds: dict[str, float]) -> None:
    """Check the verdict rule's options (:func:`jaxbench.inference.verdicts.check_rule`).

    Args:
        alpha: The value of ``--alpha``.
        thresholds: Option name (``--threshold``, ``--compile-threshold``) to its value.

    Raises:
        ValueError: A threshold is not a finite number >= 0, or ``alpha`` is not in (0, 1);
            the message begins with the option's name.
    """
    from jaxbench.inference.verdicts import check_rule

    for option, value in thresholds.items():
        try:
            check_rule(value, alpha)
        except ValueError as exc:
            what = "--alpha" if "alpha" in str(exc) else option
            raise ValueError(f"{what}: {exc}") from None


def whole_number(value: str) -> int:
    """An option's whole number (typer's ``parser``); anything else names the value."""
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a whole number") from None


def given_path(value: str) -> Path:
    """A path argument (typer's ``parser``): an empty one is refused, not read as ``.``."""
    if not value.strip():
        raise typer.BadParameter(f"{value!r}: expected a file or folder")
    return Path(value)


def given_text(value: str) -> str:
    """A side's argument (a path or a version; typer's ``parser``): an empty one is refused."""
    if not value.strip():
        raise typer.BadParameter(f"{value!r}: expected a results path or a JAX version")
    return value


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
    list[int] | None, typer.Option("--k", "-k", parser=whole_number, help="Tangents (forward).")
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
            "NAME=VALUE of any parameter (a user workload's; loop, scatter, compile; the "
            "options above are its aliases): repeat to sweep."
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
#: Where the JAX-version environments of live comparisons are built (``--env-root``).
DEFAULT_ENV_ROOT = Path("sweeps/envs")
EnvRoot = Annotated[Path, typer.Option(help="Where JAX-version venvs are built.")]
With = Annotated[
    list[str] | None,
    typer.Option(
        "--with",
        metavar="REQ",
        help="Also install REQ (a pip requirement or a local project folder) into the "
        "JAX-version venvs; repeat it. The -w workload's own package goes in by itself.",
    ),
]
Requirements = Annotated[
    Path | None,
    typer.Option(
        "--requirements",
        metavar="FILE",
        help="Also install this pip requirements file into the JAX-version venvs.",
    ),
]
#: The second side of ``compare`` and ``explain``.
Candidate = Annotated[str, typer.Argument(parser=given_text, help="Candidate, the same kinds.")]
#: Parameters of one side's workers (``compare --interleave``, ``explain``): the same parser as
#: ``--param`` (:func:`side_params`).
SetA = Annotated[
    list[str] | None,
    typer.Option(
        "--set-a", help="NAME=VALUE for the baseline's workers (not result sets); each name once."
    ),
]
SetB = Annotated[
    list[str] | None,
    typer.Option(
        "--set-b",
        help="NAME=VALUE for the candidate's workers (`size=small*1.05`); each name once.",
    ),
]
JsonOut = Annotated[
    Path | None,
    typer.Option(
        "--json",
        metavar="FILE",
        help="Also write the verdicts, one object per case, and the exit status as JSON to "
        "FILE (for a CI job).",
    ),
]
MarkdownOut = Annotated[
    Path | None,
    typer.Option(
        "--markdown",
        metavar="FILE",
        help="Also append the verdicts as a Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY).",
    ),
]
#: ``--backend`` of the commands whose workers run the cases (live pairs, bisect, explain).
Backend = Annotated[str, typer.Option("--backend", "-b", help="Backend the workers use.")]
#: The verdict rule's options, one declaration for every command that judges (their defaults:
#: ``jaxbench.inference.verdicts.DEFAULT_THRESHOLD`` and ``DEFAULT_ALPHA``, and
#: ``jaxbench.analysis.compare.DEFAULT_COMPILE_THRESHOLD``).
Threshold = Annotated[
    float, typer.Option(help="Smallest relative change that counts (0.02 = 2 %).")
]
CompileThreshold = Annotated[float, typer.Option(help="The same, for compile time.")]
Alpha = Annotated[
    float,
    typer.Option(help="1 - the confidence level of the intervals (a false slower: <= alpha/2)."),
]
#: Exit status of ``compare`` and ``review`` with --fail-on-undecided when no case is slower but
#: one is undecided (a verdict other than slower, faster or same).
EXIT_UNDECIDED = 3
#: What each exit status of a command that judges means, for the Markdown summaries.
EXIT_MEANINGS = {
    0: "no case is slower",
    1: "a case is slower, or a case failed",
    EXIT_UNDECIDED: "no case is slower, but one is undecided (--fail-on-undecided)",
}
FailOnUndecided = Annotated[
    bool,
    typer.Option(
        "--fail-on-undecided",
        metavar="",
        help=f"Exit {EXIT_UNDECIDED} when a case is inconclusive, unstable or otherwise "
        "undecided (and none is slower).",
    ),
]


def exit_status(
    verdicts: Iterable[str], fail_on_undecided: bool = False, failed: bool = False
) -> int:
    """The exit status of the verdicts of ``compare`` or ``review``, for a CI gate.

    1 when any verdict is ``slower``, or ``failed`` is true (a case that the baseline timed
    fails on the candidate); else :data:`EXIT_UNDECIDED` when ``fail_on_undecided`` and one is not
    ``faster`` or ``same`` (``inconclusive``, ``unstable``, a review's ``disagree``); else 0.
    Bad input exits 2 before there are verdicts.
    """
    verdicts = list(verdicts)
    if "slower" in verdicts or failed:
        return 1
    if fail_on_undecided and any(v not in ("faster", "same") for v in verdicts):
        return EXIT_UNDECIDED
    return 0


Rounds = Annotated[int, typer.Option(help=f"Live: timed rounds per pair (at least {MIN_ROUNDS}).")]
Budget = Annotated[float, typer.Option(parser=_number, help="Timed seconds per case.")]
MinSamples = Annotated[int, typer.Option(parser=whole_number, help="Samples per case, at least.")]
Warmup = Annotated[int, typer.Option(parser=whole_number, help="Warm-up calls per case.")]
TraceRecords = Annotated[
    bool,
    typer.Option(
        "--trace",
        metavar="",
        help="After each case's samples, trace a few steady-state calls (jax.profiler): the "
        "record keeps the per-op table, traces/ the trace.",
    ),
]
Pipeline = Annotated[
    int,
    typer.Option(
        parser=whole_number,
        help="Calls per sample: 1 times each call blocked (latency); N > 1 dispatches N calls "
        "and blocks once (pipelined throughput, per-call time = total / N).",
    ),
]


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


@dataclass(frozen=True)
class VersionEnvOptions:
    """The options of the JAX-version environments, taken by :data:`takes_version_envs`.

    Attributes:
        env_root: ``--env-root``.
        jax_extra: ``--jax-extra``.
        extra_index_url: ``--extra-index-url``.
        with_: ``--with``.
        requirements: ``--requirements``.
    """

    env_root: Path = DEFAULT_ENV_ROOT
    jax_extra: str | None = None
    extra_index_url: str | None = None
    with_: list[str] | None = None
    requirements: Path | None = None

    def __post_init__(self) -> None:
        """Refuse an ``--env-root`` that is not a folder, before anything runs.

        Raises:
            typer.Exit: ``--env-root`` names a file (exit 2).
        """
        if self.env_root.exists() and not self.env_root.is_dir():
            raise fail(f"--env-root {self.env_root}: a file, expected a folder for the "
                       "JAX-version venvs")  # fmt: skip

    def envs(
        self,
        workloads: list[str] | None = None,
        jax_extra: str | None = None,
        specs: Sequence[str] | None = None,
    ) -> VersionEnvs:
        """The :class:`jaxbench.cluster.pyenvs.VersionEnvs` of the options.

        Every environment gets the distributions of the selected user workloads
        (:func:`jaxbench.workloads.source.environment_requirements`), ``--with`` and
        ``--requirements``, and must find those workloads before anything is measured; what
        goes in is said on stderr.

        Args:
            workloads: The selected cases' workload names (built-in ones are left out).
            jax_extra: In place of ``--jax-extra`` (e.g. a cluster profile's).
            specs: What the sides name (``current``, a python, a JAX version; default: JAX
                versions): what the environments get is said only where one is a version.

        Raises:
            typer.Exit: A bad extra, or a requirements file that cannot be read (exit 2).
        """
        from jaxbench.cluster.pyenvs import VersionEnvs
        from jaxbench.workloads.source import environment_requirements, user_workload_names

        users = user_workload_names(workloads or [])
        extra = jax_extra or self.jax_extra
        try:
            reqs, said = environment_requirements(users, self.with_ or [], self.requirements)
            envs = VersionEnvs(self.env_root, extra, self.extra_index_url, reqs, tuple(users))
        except ValueError as exc:
            raise fail(str(exc)) from None
        if specs is None or any(interpreter(spec) is None for spec in specs):
            for line in said:
                err_console.print(line, highlight=False, markup=False)
        return envs


#: Gives a command the options of :class:`VersionEnvOptions` in place of its parameter
#: ``venvs: VersionEnvOptions``, declared once for every command that builds version venvs.
takes_version_envs = option_group(
    "venvs",
    {"env_root": EnvRoot, "jax_extra": JaxExtra, "extra_index_url": ExtraIndexUrl,
     "with_": With, "requirements": Requirements},
    {"env_root": DEFAULT_ENV_ROOT},
    VersionEnvOptions,
)  # fmt: skip


def check_output_files(json_out: Path | None, markdown: Path | None) -> None:
    """Before anything runs: ``--json`` and ``--markdown`` can be written where they point.

    Raises:
        typer.Exit: Both name one file, one is a folder, its folder does not exist or cannot
            be written, or it is a jaxbench file (results; for ``--json``, any but an earlier
            verdicts file) (exit 2); nothing is created.
    """
    import os

    if json_out is not None and markdown is not None and json_out.resolve() == markdown.resolve():
        raise fail(f"--json and --markdown both name {json_out}: the summary would be appended "
                   "to the JSON")  # fmt: skip
    for option, path in (("--json", json_out), ("--markdown", markdown)):
        if path is None:
            continue
        if path.is_dir():
            raise fail(f"{option} {path}: a folder, expected a file")
        folder = path.parent
        if not folder.is_dir():
            what = "is a file" if folder.exists() else "does not exist"
            raise fail(f"{option} {path}: its folder {folder} {what}")
        if not os.access(folder, os.W_OK):
            raise fail(f"{option} {path}: its folder {folder} is not writable")
        if (held := _stored_kind(path)) and not (option == "--json" and held == VERDICTS):
            raise fail(f"{option} {path}: a jaxbench {held} file; give a new file (results "
                       "are never overwritten or appended to)")  # fmt: skip


def _stored_kind(path: Path) -> str | None:
    """The jaxbench kind an existing file holds (a JSON Lines file's first line), or ``None``."""
    import json

    from jaxbench.store.kinds import kind_of

    if not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            text = f.readline() if path.suffix == ".jsonl" else f.read()
        return kind_of(json.loads(text))
    except (OSError, ValueError):
        return None


def write_verdicts(path: Path | None, command: str, cases: list[dict[str, Any]],
                   exit_status: int, **context: Any) -> None:  # fmt: skip
    """Write ``--json`` atomically; nothing without ``path``.

    The object: ``{"kind": "jaxbench-verdicts", "command", **context, "exit_status",
    "cases"}``.

    Args:
        path: ``--json``, or ``None``.
        command: ``compare`` or ``review``.
        cases: One JSON object per case (its verdict, ratio and interval, ...).
        exit_status: The status the command exits with (0, 1, or 3 with
            ``--fail-on-undecided``).
        **context: The sides, the mode and the rule (threshold, alpha).

    Raises:
        typer.Exit: ``path`` cannot be written (exit 2).
    """
    import json

    from jaxbench.store import write_atomic

    if path is None:
        return
    payload = {"kind": VERDICTS, "command": command, **context,
               "exit_status": exit_status, "cases": cases}  # fmt: skip
    try:
        write_atomic(path, (json.dumps(payload, indent=2, default=str) + "\n").encode())
    except OSError as exc:
        raise fail(f"--json {path}: cannot be written ({exc.strerror})") from None


def write_summary(path: Path | None, heading: str, table: Any, lines: list[str]) -> None:
    """Append ``--markdown``: a heading, the verdict table and lines; nothing without ``path``.

    Appended, not replaced, so several commands of one CI step can add to one summary (GitHub
    Actions' ``$GITHUB_STEP_SUMMARY`` is such a file).

    Args:
        path: ``--markdown``, or ``None``.
        heading: The section's heading (Markdown level 2), e.g. the sides compared.
        table: The verdict table, a :class:`jaxbench.analysis.text_table.TextTable` (the
            terminal's columns).
        lines: Paragraphs after it (the counts of verdicts, the exit status's meaning).

    Raises:
        typer.Exit: ``path`` cannot be written (exit 2).
    """
    from jaxbench.analysis import markdown as md

    if path is None:
        return
    text = "\n\n".join([f"## {heading}", md.table(table), *lines]) + "\n\n"
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise fail(f"--markdown {path}: cannot be written ({exc.strerror})") from None


def writable_folder(out: str, option: str = "--out") -> Path:
    """Create and probe the folder of ``option``; if it cannot be written, exit 2 naming both."""
    from jaxbench.folders import ensure_writable

    try:
        return ensure_writable(out, option)
    except ValueError as exc:
        raise fail(str(exc)) from None


#: The side that names this interpreter (``sys.executable``) in live comparisons.
CURRENT = "current"


def interpreter(spec: str) -> str | None:
    """``spec``'s interpreter where it names one (``current``, a path), else ``None``.

    ``None``: ``spec`` is a JAX version, whose environment is built.
    """
    if spec == CURRENT:
        return sys.executable
    return spec if "/" in spec or Path(spec).exists() else None


def pythons_for(
    sides: Sequence[tuple[str, str]], envs: VersionEnvs, distinct: bool = False
) -> list[str]:
    """The interpreter of each side: ``current``, a path to a python, or a JAX version.

    Every side is checked before any environment is built, so a version the index lacks on the
    second side costs no build of the first: a version must be on the index, and an
    interpreter must import JAX and jaxbench (as its workers will). A version's environment is
    then built once as ``envs`` says (its folder, ``jax``'s extra, another package index, what
    else it installs: :class:`jaxbench.cluster.pyenvs.VersionEnvs`). A version's or a path's
    interpreter must find ``envs``' user workloads.

    Args:
        sides: ``(name, spec)`` pairs, e.g. ``("baseline", "0.11.2")``; the name leads errors.
        envs: How versions' environments are built.
        distinct: Refuse, before building, two sides that would import one JAX version
            (``review``; ``compare`` of one version twice is an A/A comparison).

    Returns:
        One interpreter path a side, in the order of ``sides``.

    Raises:
        typer.Exit: No such interpreter, one that cannot import JAX and jaxbench, a version the
            index lacks or that does not build, an interpreter that cannot find a selected user
            workload, or with ``distinct`` one JAX version twice (exit 2).
    """
    from jaxbench.cluster import pyenvs

    base = None
    versions: dict[str, str] = {}  # side -> the JAX version it will import
    for side, spec in sides:
        try:
            if spec == CURRENT:
                versions[side] = importlib.metadata.version("jax")
                continue
            if interpreter(spec) is not None:
                if not Path(spec).is_file():
                    raise ValueError(f"no such interpreter (expected {CURRENT}, a path to a "
                                     "python, or a JAX version)")  # fmt: skip
                try:
                    versions[side] = pyenvs.imported_jax(spec)
                except pyenvs.PyEnvError as exc:  # its last line: the reason
                    raise ValueError(f"cannot run a worker: {str(exc).splitlines()[-1]}") from None
                envs.check(spec, spec)
                continue
            base = base or pyenvs.base_python(None)
            pyenvs.check_versions(base, [spec], envs.extra, envs.extra_index_url)
            versions[side] = spec
        except (ValueError, pyenvs.PyEnvError) as exc:
            raise fail(f"{side} {spec!r}: {str(exc).removeprefix('--jax: ')}") from None
    if distinct and len(set(versions.values())) < len(sides):
        (a, _), (b, _) = sides[:2]
        raise fail(f"{dict(sides)[a]} and {dict(sides)[b]} both import JAX {versions[a]}: a "
                   "review compares two versions")  # fmt: skip
    pythons = []
    for side, spec in sides:
        if (python := interpreter(spec)) is None:
            try:
                folder, built = envs.folder(spec, base)
                own = " (its own: it installs the workload's packages)" if envs.requirements else ""
                how = (
                    "reused"
                    if built
                    else "building it now, once (jax, jaxlib and jaxbench's dependencies)"
                )
                err_console.print(f"{side}: JAX {spec} environment {folder}{own}: {how}",
                                  highlight=False, soft_wrap=True)  # fmt: skip
                python = str(envs.python(spec, base))
            except (ValueError, pyenvs.PyEnvError) as exc:
                raise fail(f"{side} {spec!r}: {exc}") from None
        pythons.append(python)
    return pythons


def side_params(cases: list, values: list[str] | None, option: str) -> dict[str, Any]:
    """One side's ``--set-a``/``--set-b`` texts ``NAME=VALUE``, typed and checked on every case.

    A text is typed by the one parser of ``--param``
    (:meth:`jaxbench.workloads.base.Workload.parse_param`: a user factory's signature, else the
    parameter's grid). Every selected workload must have the
    parameter, and every selected case, with these values, must validate.

    Args:
        cases: The selected :class:`jaxbench.cases.Case` list.
        values: The option's texts; ``None`` for none.
        option: ``--set-a`` or ``--set-b``, named in errors.

    Returns:
        Parameter name -> value, applied to every case of this side.

    Raises:
        typer.Exit: A text without ``=`` or a name, a parameter given twice or that a selected
            workload lacks, or a value a workload refuses (one line naming ``option``, exit 2).
    """
    from jaxbench.workloads import get_workload

    workloads = [get_workload(w) for w in dict.fromkeys(c.workload for c in cases)]
    out: dict[str, Any] = {}
    for item in values or []:
        name, eq, text = item.partition("=")
        if not eq or not name:
            raise fail(f"{option} {item!r}: expected NAME=VALUE, e.g. size=small*1.05")
        if name in out:  # one side has one value of a parameter; --param sweeps
            raise fail(f"{option} {item!r}: {name} is set twice; give each parameter once")
        owner = next((w for w in workloads if name in w.param_names), None)
        try:
            out[name] = owner.parse_param(name, text) if owner else text
        except ValueError as exc:
            raise fail(f"{option}: {str(exc).removeprefix('--param ')}") from None
    for case in cases:
        workload = get_workload(case.workload)
        unknown = [n for n in out if n not in workload.param_names]
        if unknown:
            raise fail(f"{option} {unknown[0]!r}: {case.workload} has no such parameter "
                       f"({', '.join(workload.param_names)})")  # fmt: skip
        try:
            workload.validate(dict(case.params) | out)
        except ValueError as exc:
            raise fail(f"{option}: {exc}") from None
        finally:
            workload.release()  # the sides run in workers
    return out


def side_label(spec: str, overrides: dict[str, Any]) -> str:
    """A side's name: a version, ``current``, or a path's last part, then its overrides.

    ``ENV/bin/python`` is ``ENV``: two venvs' interpreters are both ``python``.
    """
    path = Path(spec)
    if "/" not in spec:
        name = spec
    elif path.parent.name == "bin" and path.parent.parent.name:
        name = path.parent.parent.name
    else:
        name = path.name
    return " ".join([name, *(f"{k}={v}" for k, v in overrides.items())])
