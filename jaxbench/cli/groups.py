"""Groups of options declared once and taken by several commands as one object.

A command names the group by one parameter (e.g. ``select: Selection``); :func:`option_group`
puts the group's options in the command's signature where that parameter stands, so typer
shows and parses them as the command's own, and hands the command one object made of them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any


def option_group(
    param: str, options: Mapping[str, Any], defaults: Mapping[str, Any], make: Callable[..., Any]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that gives a command the ``options`` in place of its parameter ``param``.

    Args:
        param: The command's parameter that stands for the group.
        options: Each option's parameter name and typer annotation, in the order shown.
        defaults: Each option's default (``None`` where not named).
        make: Called with the options' values as keywords; what it returns is passed as
            ``param``.

    Raises:
        TypeError: The command has no parameter ``param`` (a programming error).
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        if param not in signature.parameters:
            raise TypeError(f"{command.__name__} has no parameter {param}")
        added = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=defaults.get(name), annotation=note
            )
            for name, note in options.items()
        ]
        params: list[inspect.Parameter] = []
        for p in signature.parameters.values():
            if p.name == param:
                params += added
            else:
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            group = make(**{name: kwargs.pop(name) for name in options})
            return command(**{param: group}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate
