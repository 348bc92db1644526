"""The Method section of a version-upgrade report: what is compared, the unit, the verdict rule.

The text follows :mod:`jaxbench.inference.verdicts` (the statistics) and
:mod:`jaxbench.inference.stability` (the ``unstable`` checks); the figures in it (thresholds,
alpha) are the review's settings.
"""

from __future__ import annotations

import pandas as pd

from jaxbench.analysis.conditions import DEFAULT_FIELDS
from jaxbench.analysis.report_context import ReportContext
from jaxbench.store.calibration import newest_calibration, partial_note

KALIBERA_JONES = 'T. Kalibera and R. Jones, "Rigorous benchmarking in reasonable time", ISMM 2013'
PINPOINT = "Chromium's Pinpoint bisection service"


def method_section(ctx: ReportContext) -> str:
    """Comparison design, what is compared, the unit, the verdict rule and its error rate."""
    review = ctx.review
    s = review.settings
    t, tc, a = s.threshold, s.compile_threshold, s.alpha
    return "\n".join(
        [
            "## Method",
            "",
            f"**Comparison design: {review.design.name}.** {review.design.description}",
            "",
            "**What is compared.** Each pair of versions is compared case by case (benchmark and "
            "parameters) under one measurement condition at a time "
            f"(fields: {', '.join(DEFAULT_FIELDS)}, each recorded environment variable and JAX "
            "flag). Steady state and compile time are separate rows, never mixed:",
            "",
            "- *steady state*: per process, the median of every timed call of its `ok` records "
            "(latency per call, blocked on the whole output); `recompiled` records are left out;",
            "- *compile time*: per process, the XLA compile time of the case; a compile shared "
            "by several cases of one process counts once, and persistent-cache hits are left "
            "out.",
            "",
            "**The process is the unit.** Calls of one process are not independent draws: they "
            "share its memory layout, thread placement, clocks and neighbours, so two processes "
            "of the very same build differ by a few percent for their whole lives. Every "
            "interval is therefore taken over processes, with the calls nested inside them "
            f"({KALIBERA_JONES}: the variation that matters is the one at the highest level "
            "that is repeated). More calls per process make each process's median more exact; "
            "only more processes narrow the interval.",
            "",
            "- *recorded runs* (independent processes, this report's tables): each process is "
            "summarised by the median of its calls; the two versions' means of the log medians "
            "are compared with Welch's t interval (Student's pooled interval when one side has a "
            "single process). The ratio is exp of the difference: the geometric mean over "
            "processes of candidate / baseline. One process a side gives no interval at all: "
            "the verdict is then `inconclusive`;",
            "- *live comparisons* (`jaxbench compare --interleave`): each pair of fresh worker "
            "processes gives one log ratio, the median of its per-round log ratios (which "
            "cancels slow drift within the pair); the interval is the one-sample t interval "
            "over pairs. One pair gives none.",
            "",
            f"**Verdict rule**, with [lo, hi] the {1 - a:.0%} interval of the ratio (candidate / "
            f"baseline) and t the threshold. Like {PINPOINT}, which decides different, same or "
            "unknown (collect more data), it may say that it does not know:",
            "",
            "- `slower`: lo > 1 (a change is shown) and the estimate, the interval's geometric "
            "midpoint, is at least 1 + t (it is as large as the threshold);",
            "- `faster`: hi < 1 and the estimate is at most 1 / (1 + t);",
            "- `same`: 1 / (1 + t) < lo and hi < 1 + t (no change as large as the threshold: "
            "equivalence shown, two one-sided tests);",
            "- `inconclusive` otherwise: neither a change beyond the threshold nor its absence "
            "is shown. The row says the smallest slowdown the comparison would have found with "
            "80 % power (`detectable`) and about how many more processes (or pairs) would "
            "settle it (`advice`);",
            "- `unstable`: the noise indicators recorded beside the timings say the machine "
            "changed under the comparison (the timed region's CPU share moved, the hypervisor "
            "stole CPU time, or a process's or pair's timings drifted between its halves); such "
            "a row is never called `slower` or `faster`, and its `advice` gives the reason.",
            "",
            f"**Error rate.** With no change at all, `slower` is called with probability at "
            f"most alpha / 2 = {a / 2:.1%} per case (the lower end of a {1 - a:.0%} interval "
            "lies above the truth that often), and likewise `faster`; `same` is called with "
            "probability at most alpha / 2 when the truth lies beyond the threshold. A true "
            "change smaller than the threshold may be called `slower` or `faster` when its "
            "estimate reaches the threshold: the rule asks that a change be shown and its "
            "estimate be at least t, not that the whole interval lie beyond t. A "
            "live comparison that looks again after adding pairs reads a repeated confidence "
            "interval at each look, its level from O'Brien-Fleming-type error spending over "
            "the looks (almost nothing at the first ones), so all of them together keep the "
            "rate. The rate "
            "assumes the processes of a side are independent draws from one machine state; the "
            "`unstable` checks look for evidence against that.",
            "",
            f"Thresholds t: steady state {t:.1%}, compile time {tc:.1%}. alpha {a:g} "
            f"(intervals at {1 - a:.0%}).",
        ]
    )


def calibration_section(ctx: ReportContext) -> str:
    """What A/A calibration says about each machine of the review (``jaxbench calibrate``).

    Calibration records (``calibration-*.json``) read with the review's sources: each machine
    of the records gets its newest one, or a line saying how to make one.
    """
    machines = sorted(set(ctx.review.frame.get("machine", pd.Series(dtype=object)).dropna()))
    lines = ["## Calibration", ""]
    for machine in machines:
        cal = newest_calibration(ctx.review.calibrations, host=machine)
        if cal is None:
            lines.append(
                f"- `{machine}`: no calibration under the sources; `jaxbench calibrate -o "
                "<folder>` measures the A/A false-alarm rate and the smallest detectable change "
                "there (add the folder to the report's inputs)."
            )
            continue
        s = cal.summary
        ci = (
            ""
            if s.false_alarm_ci_high is None
            else f" (95 % interval up to {s.false_alarm_ci_high:.0%})"
        )
        det = [("n/a" if v is None else f"{v:.1%}") for v in (s.detectable_80, s.detectable_95)]
        per = "n/a" if s.seconds_per_pair is None else f"{s.seconds_per_pair:.0f} s"
        lines.append(
            f"- `{machine}` ({cal.started_at}, JAX {cal.jax}, {cal.case.label})"
            f"{partial_note(cal)}: "
            f"{s.false_alarms} of {s.comparisons} A/A comparisons called `slower` or `faster`"
            f"{ci}; over {s.pairs} pairs the live default design detects {det[0]} at 80 % "
            f"power and {det[1]} at 95 %; a pair takes {per} (`calibration-{cal.run_id}.json`)."
        )
    return "\n".join(lines) if machines else ""
