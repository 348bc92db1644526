"""Replay committed sensitivity pairs through the live schedule's sequential verdicts.

A study of jaxbench itself, not part of the package or the tests::

    python scripts/replay_sensitivity.py results/sensitivity/sensitivity-<id>.json [--draws 1000]

The real pairs of a study (``pairs`` of effect ``e`` with the hog off: each a pair log ratio
of two fresh worker processes on this machine) are drawn with replacement, one at a time, into
comparisons that follow the default live schedule of ``jaxbench compare --interleave``
(:mod:`jaxbench.live_defaults`: a look after every pair from the first look to the cap), each
judged by :func:`jaxbench.inference.verdicts.estimate_paired` at the repeated-CI level of its
look (:func:`jaxbench.inference.sequential.nominal_level`) and stopped when ``slower``,
``faster`` or ``same``. Drawing whole pairs keeps the process as the unit. The stability
checks are not replayed (their block indicators are summaries in the study file). Writes
``replay-<study id>.json`` (kind ``sensitivity-replay``) beside the study: per effect, the
counts of each verdict and the pairs each comparison used.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from jaxbench.inference import sequential, verdicts
from jaxbench.live_defaults import DEFAULT_MAX_PAIRS, DEFAULT_PAIRS, DEFAULT_PAIRS_STEP


def replay(path: Path, draws: int = 1000, seed: int = 0) -> dict:
    """Counts of verdicts per effect over ``draws`` replayed comparisons (see the module)."""
    study = json.loads(path.read_text())
    first, step, cap = DEFAULT_PAIRS, DEFAULT_PAIRS_STEP, DEFAULT_MAX_PAIRS
    grid = sequential.looks_at(cap, first, step, cap)
    level = {n: sequential.nominal_level(sequential.looks_at(n, first, step, cap), cap, 0.05)
             for n in grid}  # fmt: skip
    rng = np.random.default_rng(seed)
    out = {"kind": "sensitivity-replay", "study": path.name, "draws": draws, "seed": seed,
           "schedule": {"pairs": first, "pairs_step": step, "max_pairs": cap},
           "threshold": study["settings"]["threshold"], "effects": {}}  # fmt: skip
    effects = sorted({p["effect"] for p in study["pairs"]})
    for effect in effects:
        pool = np.asarray([p["log_ratio"] for p in study["pairs"] if p["effect"] == effect
                           and p["status"] == "ok" and not p.get("hog")], dtype=float)  # fmt: skip
        counts: Counter[str] = Counter()
        used = []
        for _ in range(draws):
            d = rng.choice(pool, size=cap, replace=True)
            for n in grid:
                est = verdicts.estimate_paired(d[:n], (0, 0), out["threshold"], level[n])
                if est.verdict != "inconclusive":
                    break
            counts[est.verdict] += 1
            used.append(n)
        out["effects"][str(effect)] = {
            "pool_pairs": int(pool.size),
            "pool_ratio": math.exp(float(pool.mean())),
            "pool_sd": float(pool.std(ddof=1)),
            "verdicts": dict(counts),
            "pairs_median": float(np.median(used)),
            "pairs_p90": float(np.percentile(used, 90)),
        }
    return out


if __name__ == "__main__":
    src = Path(sys.argv[1])
    n = int(sys.argv[sys.argv.index("--draws") + 1]) if "--draws" in sys.argv else 1000
    result = replay(src, n)
    dest = src.with_name("replay-" + src.name.removeprefix("sensitivity-"))
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["effects"], indent=1))
    print(f"wrote {dest}")
