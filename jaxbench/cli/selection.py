"""The case-selection options, declared once for every command that selects cases.

A command takes them by a parameter ``select: Selection`` and the :func:`selects_cases`
decorator, which puts ``--workload``, ``--size``, ``--dtype``, ``-k``, ``--strategy``,
``--optimizer``, ``--wrt``, ``--param`` (and ``--full`` unless told not to) in the command's
signature where ``select`` stands, and hands the command one :class:`Selection`.

The parameters' own options are aliases of ``--param NAME=VALUE``: their values go through the
same parser (:meth:`jaxbench.workloads.base.Workload.parse_param`) as ``--param``, ``--set-a``
and ``--set-b``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from jaxbench.cli.groups import option_group
from jaxbench.cli.options import (
    Dtypes,
    Full,
    Ks,
    Optimizers,
    Params,
    Sizes,
    Strategies,
    Workloads,
    Wrts,
    err_console,
    takes_version_envs,
)

if TYPE_CHECKING:
    import typer

#: Seconds of selecting cases (user factories checking their parameters) before it is said.
SLOW_SELECTION_S = 10.0
#: The parameters that have an option of their own: each is an alias of ``--param NAME=VALUE``.
ALIASES: dict[str, Any] = {
    "size": Sizes,
    "dtype": Dtypes,
    "k": Ks,
    "strategy": Strategies,
    "optimizer": Optimizers,
    "wrt": Wrts,
}


@dataclass(frozen=True)
class Selection:
    """The case-selection options of one command line (``None``: not given).

    Attributes:
        workload: ``--workload`` values; ``None`` for every built-in workload.
        size, dtype, k, strategy, optimizer, wrt: The aliases of ``--param NAME=VALUE``.
        param: ``--param NAME=VALUE`` texts.
        full: ``--full``: the full grid instead of the quick one.
    """

    workload: list[str] | None = None
    size: list[str] | None = None
    dtype: list[str] | None = None
    k: list[int] | None = None
    strategy: list[str] | None = None
    optimizer: list[str] | None = None
    wrt: list[str] | None = None
    param: list[str] | None = None
    full: bool = False

    @property
    def given(self) -> bool:
        """Whether any selection option was given."""
        return any(getattr(self, f.name) for f in fields(self))

    def cases(self, refused: list | None = None) -> list:
        """The selected :class:`jaxbench.cases.Case` list (quick grid unless ``full``).

        ``refused``: as :func:`jaxbench.cases.select_cases`.

        Raises:
            ValueError: Unknown workload, parameter or value (from
                :func:`jaxbench.cases.select_cases`, naming the option), or a ``--param``
                without ``=``.
        """
        from jaxbench.cases import select_cases

        texts: dict[str, list[str]] = {}
        options: dict[str, str] = {}
        for name in ALIASES:
            for value in getattr(self, name) or []:
                texts.setdefault(name, []).append(str(value))
                options[name] = "--" + name
        for text in self.param or []:
            name, sep, value = text.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"--param {text!r}: expected NAME=VALUE")
            texts.setdefault(name.strip(), []).append(value)
            options[name.strip()] = "--param"
        # A user's factory runs here once per case to check its parameters (and again where
        # the case runs): one that takes long is said, rather than a silent wait.
        note = threading.Timer(SLOW_SELECTION_S, lambda: err_console.print(
            f"selecting cases: a workload's factory has run for {SLOW_SELECTION_S:g} s (each "
            "runs here once to check its parameters, then again where its case runs)",
            highlight=False))  # fmt: skip
        note.daemon = True
        note.start()
        try:
            return select_cases(self.workload, quick=not self.full, texts=texts, options=options,
                                refused=refused)  # fmt: skip
        finally:
            note.cancel()

    def recorded(self) -> RecordedSelection:
        """What this selection admits of cases already recorded: a filter, not a grid.

        A recorded case is admitted when its benchmark is one of the selected workloads'
        (any of their strategies or programs) and, for each parameter given (an alias or
        ``--param``), its value is one of those given, parsed as ``--param`` parses them.
        Parameters not given are not constrained: ``-w forward`` admits every recorded K, not
        only the grid's (whose K values were the only ones compared before, so a sweep of
        other K values lost its scaling exponent). ``--full`` changes nothing here.

        Raises:
            ValueError: As :meth:`cases` (an unknown workload, parameter or value).
        """
        from jaxbench.workloads import get_workload

        cases = replace(self, full=True).cases()
        given = {name for name in ALIASES if getattr(self, name)}
        given |= {text.partition("=")[0].strip() for text in self.param or []}
        values = {n: frozenset(c.params[n] for c in cases if n in c.params) for n in given}
        benchmarks = frozenset(get_workload(c.workload).benchmark(c.params) for c in cases)
        return RecordedSelection(benchmarks, values)

    def argv(self) -> list[str]:
        """These options as a ``jaxbench run`` command line takes them."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "full":
                out += ["--full"] if value else []
            else:
                out += [x for v in value or [] for x in (f"--{f.name}", str(v))]
        return out


@dataclass(frozen=True)
class RecordedSelection:
    """A selection as a filter of recorded cases (:meth:`Selection.recorded`).

    Attributes:
        benchmarks: The benchmark names of the selected workloads (``forward/jacfwd``, ...).
        values: Each parameter given, and the values admitted for it (typed as recorded).
    """

    benchmarks: frozenset[str]
    values: dict[str, frozenset[Any]]

    def admits(self, frame: Any) -> Any:
        """Which rows of ``frame`` are of admitted cases.

        Args:
            frame: Rows of :func:`jaxbench.analysis.load_results` (``benchmark``,
                ``param.*`` columns).

        Returns:
            A boolean ``pandas.Series`` on ``frame``'s index. A record without a given
            parameter (a family that does not take it) is not held to it.
        """
        mask = frame["benchmark"].isin(self.benchmarks)
        for name, admitted in self.values.items():
            column = f"param.{name}"
            if column in frame.columns:
                mask &= frame[column].isna() | frame[column].isin(admitted)
        return mask


def selects_cases(
    full: bool = True, workload: Any = Workloads
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the selection options in place of its ``select: Selection`` parameter.

    Args:
        full: Whether the command takes ``--full`` (a command that runs one case per step, such
            as ``bisect``, does not).
        workload: The ``--workload`` option's annotation, for a command whose help says more
            (e.g. its default workload).

    Raises:
        TypeError: The command has no ``select`` parameter (a programming error).
    """
    chosen = {"workload": workload, **ALIASES, "param": Params}
    chosen |= {"full": Full} if full else {}
    return option_group("select", chosen, {"full": False}, Selection)


def version_command(
    app: typer.Typer, name: str, full: bool = True, workload: Any = Workloads
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that adds a command over JAX versions to ``app`` as ``name``.

    The command takes the selection options in place of its ``select: Selection`` parameter
    (:func:`selects_cases`) and the version-environment options in place of its
    ``venvs: VersionEnvOptions`` parameter
    (:data:`jaxbench.cli.options.takes_version_envs`).

    Args:
        app: The typer application the command is added to.
        name: The command's name on the command line.
        full: As :func:`selects_cases`.
        workload: As :func:`selects_cases`.

    Returns:
        The decorator; it returns the command with the options in its signature.

    Raises:
        TypeError: The command has no ``select`` or no ``venvs`` parameter (a programming
            error).
    """
    select = selects_cases(full=full, workload=workload)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        return app.command(name)(select(takes_version_envs(command)))

    return decorate
