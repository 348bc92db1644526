"""Harness overhead: jaxbench's p50 for a trivial jitted call vs a bare timing loop, side by side.

Both time the same warmed call with perf_counter_ns + jax.block_until_ready; the two are run in
alternating blocks within one process so drift hits both alike. Prints a Markdown table.
Usage: .venv/bin/python scripts/bench_overhead.py [--rounds 20] [--calls 2000]
"""

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.env import host
from jaxbench.measure import TimingConfig, measure


def bare_loop(f, x, n):
    clock, block = time.perf_counter_ns, jax.block_until_ready
    samples = []
    for _ in range(n):
        t0 = clock()
        block(f(x))
        samples.append(clock() - t0)
    return [s / 1e9 for s in samples]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    f = jax.jit(lambda x: x + 1)
    x = jnp.ones((8,), jnp.float32)
    cfg = TimingConfig(budget_s=0, min_samples=args.calls, max_samples=args.calls, warmup_calls=10)
    bare_loop(f, x, 1000)
    bare, ours, ratios = [], [], []
    for i in range(args.rounds):
        order = ("bare", "ours") if i % 2 == 0 else ("ours", "bare")
        got = {}
        for which in order:
            if which == "bare":
                got[which] = bare_loop(f, x, args.calls)
            else:
                got[which] = measure(f, x, cfg).samples_s
        bare += got["bare"]
        ours += got["ours"]
        ratios.append(np.median(got["ours"]) / np.median(got["bare"]))
    h = host()
    print(
        f"machine: {h['cpu_model']}, {h['cpu_count']} CPUs; Python {platform.python_version()}, "
        f"jax {jax.__version__}, backend {jax.devices()[0].platform}"
    )
    print(f"{args.rounds} alternating rounds of {args.calls} calls each\n")
    print("| loop | p50 | p95 |")
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
