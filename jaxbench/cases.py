"""Cases: one workload at one point of its grid; selection from grids; backends to devices."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jaxbench.backends import BACKENDS, check_backend
from jaxbench.store import case_label
from jaxbench.workloads import WORKLOADS, get_workload

__all__ = ["BACKENDS", "Case", "check_backend", "resolve_device", "select_cases"]


@dataclass(frozen=True)
class Case:
    """One workload at one point of its grid."""

    workload: str
    params: Mapping[str, Any]

    @property
    def key(self) -> tuple[Any, ...]:
        """Hashable identity: workload plus sorted params."""
        return (self.workload, *sorted(self.params.items()))

    @property
    def label(self) -> str:
        """``benchmark k=v ...`` (parameters sorted): the one spelling of a case everywhere.

        Its records, live comparisons and calibrations carry the same label
        (:func:`jaxbench.store.case_label` of the workload's benchmark name), so a case reads
        the same in progress lines, tables, reports and files.

        Raises:
            ValueError: The workload cannot be found (:func:`jaxbench.workloads.get_workload`).
        """
        return case_label(get_workload(self.workload).benchmark(self.params), self.params)


def select_cases(
    workloads: Iterable[str] | None = None,
    quick: bool = True,
    overrides: Mapping[str, list[Any]] | None = None,
    texts: Mapping[str, list[str]] | None = None,
    options: Mapping[str, str] | None = None,
    refused: list[tuple[Case, str]] | None = None,
) -> list[Case]:
    """The cases of the chosen workloads' grids, with some parameters replaced.

    Args:
        workloads: Workload names (built-in, installed, or ``module:factory``); ``None`` for
            the built-in ones.
        quick: Start from the quick grid (about a minute on 2 CPU cores) or the full one.
        overrides: Parameter name -> values to use instead of the grid's, e.g.
            ``{"size": ["small"], "k": [64]}``; repeated values count once.
        texts: Parameter name -> values as text (``--param NAME=VALUE`` and its aliases),
            converted by each workload that has the parameter
            (:meth:`~jaxbench.workloads.base.Workload.parse_param`, the one parser of
            ``--param``, its aliases and ``--set-a/-b``).
        options: Parameter name -> the option that gave its texts, named in errors (default
            ``--param``; e.g. ``{"size": "--size"}`` for an alias).
        refused: Where given, a case whose workload refuses its parameters (its factory
            raises) is kept, and it and the reason are appended here, instead of raising:
            where it runs, it is recorded ``failed`` with that reason. For cases that run under
            another JAX version than this process's (a factory may fail under one version only).

    Raises:
        ValueError: Unknown workload, a parameter no chosen workload has, or a bad value (the
            message names the option and the parameter).
    """
    names = list(dict.fromkeys(workloads)) if workloads else list(WORKLOADS)  # -w x -w x: once
    chosen = [get_workload(n) for n in names]
    overrides = {k: list(dict.fromkeys(v)) for k, v in (overrides or {}).items() if v}
    texts = {k: list(dict.fromkeys(v)) for k, v in (texts or {}).items() if v}
    for param in overrides:
        if not any(param in w.param_names for w in chosen):
            raise ValueError(f"no selected workload has a parameter {param!r}")
    for param in texts:
        if not any(param in w.param_names for w in chosen):
            takes = "; ".join(f"{w.name} takes {', '.join(w.param_names) or 'no --param'}"
                              for w in chosen)  # fmt: skip
            option = (options or {}).get(param, "--param")
            named = f"--param {param}" if option == "--param" else option
            raise ValueError(f"{named}: no selected workload has it ({takes})")
    cases = []
    for workload in chosen:
        grid = workload.grid(quick)
        grid.update({k: list(v) for k, v in overrides.items() if k in workload.param_names})
        for param, values in texts.items():
            if param in workload.param_names:
                # typed, then once each: lr=0.01 and lr=1e-2 are one value
                grid[param] = _once([workload.parse_param(param, v) for v in values])
        for values in itertools.product(*(grid[p] for p in workload.param_names)):
            params = dict(zip(workload.param_names, values, strict=True))
            try:
                workload.validate(params)
            except ValueError as exc:
                if refused is not None:
                    refused.append((Case(workload.name, params), str(exc)))
                    cases.append(refused[-1][0])
                    continue
                message = _name_the_option(str(exc), params, overrides, texts, options or {})
                if len(names) > 1 and not message.startswith("workload "):
                    message = f"{workload.name}: {message}"  # which family rejected it
                raise ValueError(message) from None
            cases.append(Case(workload.name, params))
        workload.release()  # a user factory's last Step: the cases run in a worker
    return cases


def _once(values: list[Any]) -> list[Any]:
    """``values`` without repeats, in order (by equality, unhashable values too)."""
    out: list[Any] = []
    for v in values:
        if not any(type(v) is type(u) and v == u for u in out):
            out.append(v)
    return out


def _name_the_option(
    message: str,
    params: Mapping[str, Any],
    overrides: Mapping[str, list[Any]],
    texts: Mapping[str, list[str]],
    options: Mapping[str, str],
) -> str:
    """Prefix a workload's error with the option and value the user gave, e.g. ``--param trip=0``.

    The one parameter the user set (by ``--param``, an alias such as ``--size``, or a typed
    override) that the message names is the one it is about; of several, the one that leads
    the message; with none, or several and none leading, the message is returned as it is.
    """
    named = [p for p in (*texts, *overrides) if re.search(rf"\b{re.escape(p)}\b", message)]
    if len(named) > 1:  # "mesh 'x': ... axis:size pairs": the one the message is about leads it
        named = [p for p in named if re.match(rf"{re.escape(p)}\b", message)]
    if len(named) != 1:
        return message
    (param,) = named
    value = params[param]
    option = options.get(param, "--param") if param in texts else "--" + param.replace("_", "-")
    given = f"--param {param}={value}" if option == "--param" else f"{option} {value}"
    return message if message.startswith(given) else f"{given}: {message}"


def resolve_device(backend: str) -> Any:
    """The first device of ``backend`` (``"default"``: JAX's default device).

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
        RuntimeError: That backend is not present here.
    """
    import jax

    check_backend(backend)
    if backend == "default":
        return jax.local_devices()[0]
    try:
        return jax.local_devices(backend=backend)[0]
    except RuntimeError as exc:
        raise RuntimeError(f"backend {backend!r} is not present: {exc}") from None
