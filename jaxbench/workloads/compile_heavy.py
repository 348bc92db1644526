"""Workload: a program whose point is its compile time: many distinct ops, nested control flow.

The program maps a ``(WIDTH,)`` float32 vector through ``length`` elementwise ops, each with its
own constants (so no two are common subexpressions), at the leaves of ``depth`` levels of
nesting: each level is a ``jax.lax.fori_loop`` of two steps around a ``jax.lax.cond`` whose two
branches are the next level down, with their own constants. The program holds
``length * 2**depth`` ops; running it takes microseconds, compiling it takes the time that
matters (``compile_s``, ``lower_s``; a JAX or XLA version that compiles it slower shows in
``compare``'s compile-time rows). The gate compares the jitted program with the same function
run op by op under ``jax.disable_jit``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads.base import (
    AsvSuite,
    GateFailure,
    Workload,
    check_choice,
    check_close,
    check_int,
)
from jaxbench.workloads.step import Step

WIDTH = 64
LENGTH_MAX = 1 << 14
DEPTH_MAX = 8


class ProgramShapeError(ValueError):
    """The input is not a ``(WIDTH,)`` vector; the message gives the expected shape."""


def _chain(x: jax.Array, seed: int, length: int) -> jax.Array:
    for i in range(length):
        c = 0.5 + 0.4 * math.sin(seed * 131 + i)
        x = jnp.tanh(x * c + 0.01 * (i % 5)) if i % 2 else jnp.sin(x) * c + x * (1 - c)
    return x


def _nested(x: jax.Array, depth: int, length: int, seed: int) -> jax.Array:
    if depth == 0:
        return _chain(x, seed, length)

    def body(_: Any, y: jax.Array) -> jax.Array:
        return jax.lax.cond(
            y[0] > 0,
            lambda z: _nested(z, depth - 1, length, 2 * seed + 1),
            lambda z: _nested(z, depth - 1, length, 2 * seed + 2),
            y,
        )

    return jax.lax.fori_loop(0, 2, body, x)


def program(x: jax.Array, length: int, depth: int) -> jax.Array:
    """The program on ``x`` (shape ``(WIDTH,)``, float32).

    Raises:
        ProgramShapeError: ``x`` is not ``(WIDTH,)``.
    """
    if tuple(x.shape) != (WIDTH,):
        raise ProgramShapeError(f"x has shape {tuple(x.shape)}; expected ({WIDTH},)")
    return _nested(x, depth, length, 0)


@functools.cache
def jitted(length: int, depth: int) -> Any:
    """The jitted program (cached per shape of program, so a rebuilt case reuses it)."""
    return jax.jit(functools.partial(program, length=length, depth=depth))


def compile_nested(length: int = 64, depth: int = 2, dtype: str = "float32") -> Step:
    """The family's factory: the input vector, the jitted program and its gate.

    Args:
        length: Ops per leaf, 1 to :data:`LENGTH_MAX`.
        depth: Levels of ``fori_loop`` + ``cond``, 0 to :data:`DEPTH_MAX`.
        dtype: ``float32`` only.

    Returns:
        A :class:`~jaxbench.workloads.step.Step` of :func:`program`, gated against the same
        program op by op, with ``ops`` (``length * 2**depth``).
    """
    x = jax.random.normal(jax.random.key(4), (WIDTH,), jnp.float32)
    fn = jitted(length, depth)

    def gate() -> dict[str, Any]:
        try:
            fn(x[:-1])
        except ProgramShapeError:
            pass
        else:
            raise GateFailure("an input of the wrong shape did not raise ProgramShapeError")
        with jax.disable_jit():
            want = program(x, length, depth)
        return check_close("compile/nested (jit vs op by op)", fn(x), want, "float32")

    return Step(
        fn=fn,
        args=(x,),
        programs=(CompileTarget("program", ("program", length, depth), fn, (x,)),),
        make_args=lambda: (x,),
        gate=gate,
        metrics={"ops": length * 2**depth},
    )


class CompileHeavy(Workload):
    """Compile time of programs of ``length * 2**depth`` distinct ops in nested control flow.

    Parameters: ``length`` (ops per leaf), ``depth`` (levels of ``fori_loop`` + ``cond``),
    ``dtype`` (``float32``).
    """

    name = "compile"
    factory = staticmethod(compile_nested)
    param_names = ("length", "depth", "dtype")
    asv = (
        AsvSuite("CompileCosts", {"length": [64, 256], "depth": [0, 2]}, {"dtype": "float32"},
                 kind="costs", module="bench_compile"),
    )  # fmt: skip

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: 64 ops a leaf, depth 2. Full: 64 and 256 ops a leaf, depth 0 to 4."""
        if quick:
            return {"length": [64], "depth": [2], "dtype": ["float32"]}
        return {"length": [64, 256], "depth": [0, 2, 4], "dtype": ["float32"]}

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad ``length``, ``depth`` or ``dtype``."""
        check_int("length", params["length"], 1, LENGTH_MAX)
        check_int("depth", params["depth"], 0, DEPTH_MAX)
        check_choice("dtype", params["dtype"], ("float32",))

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """``compile/nested``."""
        return f"{self.name}/nested"
