"""Wall time of one live pair, phase by phase, on the code path of ``compare --interleave``.

Runs ``--pairs`` pairs of the ``small`` train step (or ``--workload``/``--param``) one after the
other, each as :func:`jaxbench.interleave.session._interleaved_pair` runs it: two fresh
workers started at once, both sides prepared (:func:`prepare_pair`: at once on the CPU; the
first pair gating in full and the later ones reusing the gate), the default schedule's warm-up
and timed rounds (:func:`timed_block`, in a random order per round), then both asked to quit
and waited for. Each phase gets a clock: starting the two processes, preparing both sides, the
rounds, and the end (quit and exit). The results of commit c4ad24e (before both sides prepared
at once and workers ended without teardown) have the phases "prepare A" and "prepare B".
Prints a Markdown table of each phase's median and range over the pairs after the first
(seconds) and the first pair apart.

Run it on an idle machine: on a shared one the figures are rough.
Usage: .venv/bin/python scripts/bench_pair.py [--pairs 6] [--workload train_step]
       [--param size=small] [--backend cpu] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import time

import numpy as np

from jaxbench.cli.selection import Selection
from jaxbench.interleave.session import Schedule, Worker, prepare_pair, timed_block

PHASES = ("start both", "prepare both", "rounds", "quit and exit", "pair")


def one_pair(python: str, workload: str, params: dict, backend: str, s: Schedule, gated: dict,
             rng: np.random.Generator) -> dict[str, float]:  # fmt: skip
    """The phases of one pair, in seconds."""
    t = [time.perf_counter()]
    wa, wb = Worker(python, backend), Worker(python, backend)
    t.append(time.perf_counter())
    prepare_pair(wa, wb, workload, (params, params), backend, s, gated)
    t.append(time.perf_counter())
    workers = (wa, wb)
    for _ in range(s.warmup_rounds + s.rounds):
        for i in rng.permutation(2):
            timed_block(workers[i], s.calls_per_block)
    t.append(time.perf_counter())
    wa.quit()
    wb.quit()
    wa.close()
    wb.close()
    t.append(time.perf_counter())
    spans = [b - a for a, b in itertools.pairwise(t)]
    return dict(zip(PHASES, [*spans, t[-1] - t[0]], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--workload", default="train_step")
    parser.add_argument("--param", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--out", help="also save the raw figures here (JSON)")
    args = parser.parse_args()
    texts = args.param or (["size=small", "dtype=float32", "optimizer=sgd"]
                           if args.workload == "train_step" else [])  # fmt: skip
    (case,) = Selection(workload=[args.workload], param=texts).cases()
    s = Schedule()
    gated: dict = {}
    rng = np.random.default_rng(0)
    pairs = [one_pair(sys.executable, case.workload, dict(case.params), args.backend, s, gated,
                      rng) for _ in range(args.pairs)]  # fmt: skip
    later = pairs[1:] or pairs
    print(
        f"{case.label}: {args.pairs} pairs, {s.warmup_rounds} + {s.rounds} rounds of "
        f"{s.calls_per_block} calls a side; seconds (pairs after the first: median [min, max])"
    )
    print("\n| phase | first pair | later pairs |\n| --- | --- | --- |")
    for phase in PHASES:
        values = [p[phase] for p in later]
        print(
            f"| {phase} | {pairs[0][phase]:.2f} | {statistics.median(values):.2f} "
            f"[{min(values):.2f}, {max(values):.2f}] |"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"kind": "pair-cost", "case": case.label, "host": platform.node(),
                       "schedule": {"warmup_rounds": s.warmup_rounds, "rounds": s.rounds,
                                    "calls_per_block": s.calls_per_block},
                       "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "pairs": pairs}, f, indent=2)  # fmt: skip


if __name__ == "__main__":
    main()
