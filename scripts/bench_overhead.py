"""Harness overhead: jaxbench's p50 for a warmed call vs a bare timing loop, side by side.

Both time the same warmed call with perf_counter_ns + jax.block_until_ready (or, with
--pipeline N, N calls dispatched back to back and one block, divided by N); the two are run in
alternating blocks within one process so drift hits both alike. The call is a trivial jitted
``x + 1`` on 8 floats, or with --workload the timed unit of any workload (a user's
``package.module:factory`` included), prepared as ``jaxbench run`` prepares it. Prints a
Markdown table.
Usage: .venv/bin/python scripts/bench_overhead.py [--rounds 20] [--calls 2000] [--pipeline 1]
       [--workload NAME [--param NAME=VALUE ...]]
"""

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.cli.selection import Selection
from jaxbench.env import host
from jaxbench.measure import TimingConfig, measure
from jaxbench.prepared import prepare


def bare_loop(call, state, n, pipeline=1):
    """Per-call seconds of ``n`` samples: a bare clock around ``pipeline`` calls and one block."""
    clock, block = time.perf_counter_ns, jax.block_until_ready
    samples = []
    for _ in range(n):
        t0 = clock()
        if pipeline == 1:
            block(call(state))
        else:
            block([call(state) for _ in range(pipeline)])
        samples.append((clock() - t0) / pipeline)
    return [s / 1e9 for s in samples]


def timed_unit(workload, params):
    """``(call, state, label)``: the trivial call, or a prepared workload's timed unit."""
    if workload is None:
        return jax.jit(lambda x: x + 1), jnp.ones((8,), jnp.float32), "x + 1 on 8 floats"
    (case,) = Selection(workload=[workload], param=params).cases()
    prepared = prepare(case.workload, case.params, "cpu")
    if prepared.step.next_args is not None:
        raise SystemExit(f"{workload}: its outputs feed the next call; pick one whose do not")
    return prepared.step.call, prepared.state, case.label


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--pipeline", type=int, default=1, help="calls per sample")
    parser.add_argument("--workload", default=None, help="a workload name or module:factory")
    parser.add_argument("--param", action="append", default=[], help="NAME=VALUE")
    args = parser.parse_args()
    call, state, label = timed_unit(args.workload, args.param)
    cfg = TimingConfig(budget_s=0, min_samples=args.calls, max_samples=args.calls,
                       warmup_calls=10, pipeline=args.pipeline)  # fmt: skip
    bare_loop(call, state, 1000, args.pipeline)
    bare, ours, ratios = [], [], []
    for i in range(args.rounds):
        order = ("bare", "ours") if i % 2 == 0 else ("ours", "bare")
        got = {}
        for which in order:
            if which == "bare":
                got[which] = bare_loop(call, state, args.calls, args.pipeline)
            else:
                got[which] = measure(call, state, cfg).samples_s
        bare += got["bare"]
        ours += got["ours"]
        ratios.append(np.median(got["ours"]) / np.median(got["bare"]))
    h = host()
    print(
        f"machine: {h['cpu_model']}, {h['cpu_count']} CPUs; Python {platform.python_version()}, "
        f"jax {jax.__version__}, backend {jax.devices()[0].platform}"
    )
    mode = "blocked" if args.pipeline == 1 else f"pipelined, {args.pipeline} calls per sample"
    print(f"{label}; {mode}; {args.rounds} alternating rounds of {args.calls} samples each\n")
    print("| loop | p50 per call | p95 per call |")
    print("| --- | --- | --- |")
    for name, s in (("bare perf_counter_ns + block_until_ready", bare), ("jaxbench measure", ours)):
        p50, p95 = np.percentile(s, [50, 95])
        print(f"| {name} | {p50 * 1e6:.2f} µs | {p95 * 1e6:.2f} µs |")
    lo, mid, hi = np.percentile(ratios, [25, 50, 75])
    print(
        f"\np50 ratio jaxbench / bare, per round: median {mid:.4f} (IQR {lo:.4f}-{hi:.4f}); "
        f"pooled {np.median(ours) / np.median(bare):.4f}"
    )


if __name__ == "__main__":
    main()
