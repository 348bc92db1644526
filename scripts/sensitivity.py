"""Sensitivity of live comparisons over process pairs: power, false alarms, time to a verdict.

A study of jaxbench itself on the machine at hand, not part of the package or the test suite::

    python scripts/sensitivity.py run [--repeats 10] [--pairs 10] [--effects 1.0,1.03,1.05] [--hog]
    python scripts/sensitivity.py summarize results/sensitivity/sensitivity-*.json [--markdown F]

**Controlled slowdowns.** The baseline is one train step (``--size``, default ``small``;
float32, SGD, params donated). The candidate of effect ``e`` is the same step on ``e`` times the
batch rows (``small*1.03``: :func:`jaxbench.workloads.sizes.scaled`), so ``e`` times the FLOP of
every matmul while weights and strides stay the same; effect 1.0 is an A/A comparison (the very
same parameters on both sides). Another workload's case is given by ``--workload`` and
``--param``, and ``--scale NAME`` names the integer parameter an effect multiplies (e.g. ``-w
loop --param trip=40000 --param width=64 --scale trip``: ``e`` times the loop's iterations). The
time ratio a FLOP ratio causes is not assumed: the study measures it (the reference below).

**A pool of pairs.** A *pair* is two fresh worker processes of this interpreter
(:class:`jaxbench.interleave.session.Worker`). In each pair, every effect is run as one case
(:func:`jaxbench.interleave.session.interleave_case`: both workers prepare it, untimed warm-up
rounds, then timed rounds of one block a side in a random order), the effects in a random
order per pair; each case gives one pair log ratio
(:func:`jaxbench.inference.paired.pair_log_ratio`). ``--repeats R`` independent repeats of
``--pairs P`` pairs each make a pool of ``R * P`` pairs per effect.

**A repeat** is one sequential comparison per effect with the design of ``jaxbench compare
--interleave`` (:class:`jaxbench.interleave.Schedule` defaults: a look after every pair from the
first look, up to ``max_pairs``): at each look, each open effect is judged by
:func:`jaxbench.inference.verdicts.estimate_paired` at the repeated-CI level of that look
(:func:`jaxbench.inference.sequential.nominal_level`) and
:func:`jaxbench.inference.stability.veto` of
:func:`jaxbench.inference.stability.pairs_disturbances`; an effect called ``slower``,
``faster`` or ``same`` gets no more pairs. So the share of repeats called ``slower`` is the
measured power at that effect, and on A/A the share called ``slower`` or ``faster`` the
measured false-alarm rate, each with an exact (Clopper-Pearson) 95 % interval; the pairs and
seconds each took are the time to a verdict.

**Hog scenario** (``--hog``): in each repeat a CPU hog on all usable cores (``stress-ng --cpu
N`` when on PATH, else ``N`` Python busy loops) starts after ``--hog-after`` pairs (default
:data:`HOG_AFTER`; 0 for a hog from the first pair) and stops at
the repeat's end, so the machine changes part-way through a comparison; every pair records
whether the hog was on. The question is whether the stability checks call those repeats ``unstable``
instead of letting the hog make a false call.

**Summary** (``summarize``), per effect: the long-run reference ratio ``exp(mean)`` of all the
effect's pair log ratios in the pool with the hog off, with its t interval over pairs; each
repeat's distance from it (``|ratio - reference|``, percentage points: median and max); the
between-pair standard deviation, and from it the *model-based* figures: the smallest slowdown
``jaxbench compare --interleave`` with its default schedule detects at 80 % and 95 % power
(``P`` pairs at the first look and ``max_pairs`` at the last, ``alpha / looks`` each:
:func:`jaxbench.calibrate.design_detectable`), and the chance that a one-look repeat of ``P``
pairs calls the reference ratio ``slower`` or ``faster`` (noncentral t), to set beside the
measured shares; the median time to a verdict per repeat (worker starts plus that effect's
cases, over its ``P`` pairs). Pair figures are also given with the hog on and off apart.

**File.** ``sensitivity-<run id>.json`` under ``--out`` (default ``results/sensitivity/``), kind
``sensitivity``, schema version 2, rewritten atomically after every pair so an interruption
keeps everything measured: ``host``, ``python``, ``jax``, ``jaxlib``, ``settings`` (workload,
params, size, effects, repeats, pairs, hog, hog tool, backend, threshold, alpha, schedule and
the default design), ``pairs`` (one entry per pair and effect: repeat, pair, effect, candidate
size, position, status, log ratio, hog, seconds, per round the block medians and noise
indicators) and ``repeats`` (one entry per repeat and effect: ratio, interval, p-value,
verdict, advice, seconds to the verdict). Files of the older study design (schema 1,
``python -m jaxbench.interleave.sensitivity``) are refused by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
import typer
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from scipy import stats as sps

from jaxbench.calibrate import default_design, design_detectable, proportion_interval
from jaxbench.env import host
from jaxbench.inference import sequential, stability, verdicts
from jaxbench.inference.paired import pair_log_ratio
from jaxbench.interleave.session import (
    DEFAULT_CALLS_PER_BLOCK,
    DEFAULT_MAX_PAIRS,
    DEFAULT_PAIRS,
    DEFAULT_ROUNDS,
    DEFAULT_WARMUP_ROUNDS,
    Gated,
    Schedule,
    Variant,
    Worker,
    interleave_case,
)
from jaxbench.store import new_run_id, write_atomic
from jaxbench.store.calibration import Design
from jaxbench.store.live import Round, now

FILE_PREFIX = "sensitivity-"
#: Verdicts that end an effect's comparison.
DECIDED = ("slower", "faster", "same")
#: Pairs of a repeat before the hog starts (the default schedule's first look is at 3).
HOG_AFTER = 3
SCHEMA_VERSION = 2
EFFECTS = (1.0, 1.03, 1.05)
DEFAULT_REPEATS = 10
WORKLOAD = "train_step"
#: Settings that must agree for studies to be pooled by ``summarize``.
POOLED = ("workload", "params", "schedule", "pairs", "threshold", "alpha", "backend")


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


class RoundFigures(BaseModel):
    """One timed round of a pair: which side went first, each block's median and noise."""

    model_config = ConfigDict(extra="forbid")

    order: Literal["AB", "BA"]
    baseline_median_s: float
    candidate_median_s: float
    baseline_noise: dict[str, Any] = Field(default_factory=dict)
    candidate_noise: dict[str, Any] = Field(default_factory=dict)


class StudyPair(BaseModel):
    """One effect's case on one pair of workers.

    ``seconds``: wall time of the case (prepare, warm-up and timed rounds);
    ``pair_seconds``: of the whole pair (both workers started, every effect, closed).
    """

    model_config = ConfigDict(extra="forbid")

    index: int
    repeat: int
    pair: int
    effect: float
    candidate_size: str
    position: int
    status: Literal["ok", "failed", "recompiled"]
    error: str | None = None
    log_ratio: float | None
    hog: bool
    seconds: float
    pair_seconds: float
    started_at: str
    rounds: list[RoundFigures] = Field(default_factory=list)


class StudyRepeat(BaseModel):
    """One repeat's verdict on one effect (its ``P`` pairs, one look).

    ``seconds``: time to this verdict, the repeat's worker starts plus this effect's cases.
    """

    model_config = ConfigDict(extra="forbid")

    repeat: int
    effect: float
    hog: bool
    pairs: int
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str
    advice: str
    seconds: float


class Settings(BaseModel):
    """What the study ran (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    workload: str
    params: dict[str, Any]
    size: str
    scale: str = "size"
    effects: list[float]
    repeats: int
    pairs: int
    hog: bool
    hog_tool: str | None
    hog_after: int = HOG_AFTER
    backend: str
    threshold: float
    alpha: float
    seed: int
    schedule: dict[str, Any]
    design: Design


class Study(BaseModel):
    """A sensitivity study file (kind ``sensitivity``, schema version 2)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["sensitivity"] = "sensitivity"
    schema_version: Literal[2] = SCHEMA_VERSION
    run_id: str
    started_at: str
    updated_at: str
    complete: bool = False
    host: dict[str, Any]
    python: str
    jax: str | None = None
    jaxlib: str | None = None
    settings: Settings
    pairs: list[StudyPair] = Field(default_factory=list)
    repeats: list[StudyRepeat] = Field(default_factory=list)


def save(folder: Path, study: Study) -> Path:
    """Write ``study`` atomically to ``folder/sensitivity-<run id>.json``."""
    data = json.dumps(study.model_dump(mode="json"), indent=1).encode()
    return write_atomic(study_path(folder, study), data)


def load(path: str | os.PathLike[str]) -> Study:
    """Read a study file.

    Raises:
        ValueError: Not JSON, or not a study of this design (the message names the file).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read a study: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "sensitivity":
        raise ValueError(f"{path}: not a sensitivity study of the pair-pool design (schema "
                         f"{SCHEMA_VERSION}); older files (schema 1) are read by hand")  # fmt: skip
    try:
        return Study.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise ValueError(f"{path}: bad study file: {where}: {first['msg']}") from None


class Hog:
    """CPU hog on ``n`` cores: ``stress-ng --cpu n`` if on PATH, else ``n`` Python busy loops.

    Every process is started in its own session and stopped by its own process group.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen[bytes]] = []
        self.tool = f"stress-ng --cpu {n}" if shutil.which("stress-ng") else f"{n} python loops"

    @property
    def on(self) -> bool:
        return bool(self.procs)

    def start(self) -> None:
        if self.procs:
            return
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
                 "start_new_session": True}  # fmt: skip
        if shutil.which("stress-ng"):
            self.procs = [subprocess.Popen(["stress-ng", "--cpu", str(self.n), "--quiet"],
                                           **quiet)]  # fmt: skip
        else:
            loop = [sys.executable, "-c", "while True: pass"]
            self.procs = [subprocess.Popen(loop, **quiet) for _ in range(self.n)]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def candidate(python: str, settings: Settings, effect: float) -> Variant:
    """The candidate of ``effect``: the same case (A/A) at 1.0, else the scaled parameter.

    ``size`` scales a model's batch rows (``small*1.03``); an integer parameter (e.g. the
    loop's ``trip``) is multiplied by ``effect`` and rounded.
    """
    if effect == 1.0:
        return Variant("A/A", python, {})
    name = settings.scale
    if name == "size":
        return Variant(f"x{effect:g}", python, {"size": f"{settings.size}*{effect:g}"})
    return Variant(f"x{effect:g}", python, {name: round(settings.params[name] * effect)})


def _figures(rounds: Sequence[Round]) -> list[RoundFigures]:
    return [
        RoundFigures(
            order=r.order,
            baseline_median_s=float(np.median(r.baseline_s)),
            candidate_median_s=float(np.median(r.candidate_s)),
            baseline_noise=r.baseline_noise,
            candidate_noise=r.candidate_noise,
        )
        for r in rounds
    ]


def as_rounds(figures: Sequence[RoundFigures]) -> list[Round]:
    """Rounds whose blocks are their medians (what the stability checks read)."""
    return [Round(order=f.order, baseline_s=[f.baseline_median_s],
                  candidate_s=[f.candidate_median_s], baseline_noise=f.baseline_noise,
                  candidate_noise=f.candidate_noise) for f in figures]  # fmt: skip


def run_pair(
    study: Study,
    python: str,
    repeat: int,
    pair: int,
    hog: bool,
    rng: np.random.Generator,
    effects: Sequence[float] | None = None,
    gated: Gated | None = None,
) -> list[StudyPair]:
    """One pair of fresh workers running each effect still open once, in a random order.

    ``gated``: the programs gated in full in earlier pairs of the repeat, as ``compare
    --interleave`` keeps them (:func:`jaxbench.interleave.session.prepare_side`), so a pair
    costs what it costs there; ``None`` gates every pair in full.
    """
    st = study.settings
    s = Schedule(**{k: v for k, v in st.schedule.items() if k != "looks"})
    base = Variant("base", python, {})
    index = len({(p.repeat, p.pair) for p in study.pairs})
    out: list[StudyPair] = []
    t0 = time.perf_counter()
    todo = list(st.effects if effects is None else effects)
    with Worker(python, st.backend) as wa, Worker(python, st.backend) as wb:
        for position, e in enumerate(rng.permutation(len(todo))):
            effect = todo[int(e)]
            b = candidate(python, st, effect)
            started, c0 = now(), time.perf_counter()
            run = interleave_case(wa, wb, base, b, st.workload, st.params, st.backend, s, rng,
                                  index, gated)  # fmt: skip
            log = None
            if run.status == "ok":
                log = pair_log_ratio([r.baseline_s for r in run.rounds],
                                     [r.candidate_s for r in run.rounds])  # fmt: skip
            out.append(StudyPair(
                index=index, repeat=repeat, pair=pair, effect=effect,
                candidate_size=str((st.params | b.params)[st.scale]), position=position,
                status=run.status, error=run.error, log_ratio=log, hog=hog,
                seconds=time.perf_counter() - c0, pair_seconds=0.0, started_at=started,
                rounds=_figures(run.rounds),
            ))  # fmt: skip
            if study.jax is None and run.baseline:
                study.jax, study.jaxlib = run.baseline.jax, run.baseline.jaxlib
    total = time.perf_counter() - t0
    return [p.model_copy(update={"pair_seconds": total}) for p in out]


def judge(repeat_pairs: Sequence[StudyPair], effect: float, settings: Settings) -> StudyRepeat:
    """One repeat's estimate of one effect from its pairs (at their look, stability checks).

    Args:
        repeat_pairs: Every entry of the repeat (all effects: the worker start of a pair is
            its wall time less all its cases).
        effect: The effect judged.
        settings: The study's settings (threshold, alpha, schedule).
    """
    cases: dict[int, float] = {}
    for p in repeat_pairs:
        cases[p.pair] = cases.get(p.pair, 0.0) + p.seconds
    pairs = [p for p in repeat_pairs if p.effect == effect]
    ok = [p for p in pairs if p.status == "ok" and p.log_ratio is not None]
    seconds = sum(p.pair_seconds - cases[p.pair] + p.seconds for p in pairs)
    fields = {"repeat": pairs[0].repeat, "effect": effect, "hog": any(p.hog for p in pairs),
              "pairs": len(ok), "seconds": seconds}  # fmt: skip
    if not ok:
        errors = "; ".join(sorted({p.error or p.status for p in pairs}))
        return StudyRepeat(**fields, ratio=None, ci_low=None, ci_high=None, p_value=None,
                           verdict="failed", advice=errors)  # fmt: skip
    calls = len(ok) * settings.schedule["rounds"] * settings.schedule["calls_per_block"]
    sch = settings.schedule
    level = sequential.nominal_level(
        sequential.looks_at(len(ok), sch["pairs"], sch["pairs_step"], sch["max_pairs"]),
        sch["max_pairs"], settings.alpha)  # fmt: skip
    est = verdicts.estimate_paired([p.log_ratio for p in ok], (calls, calls),
                                   settings.threshold, level)  # fmt: skip
    est = stability.veto(est, stability.pairs_disturbances([as_rounds(p.rounds) for p in ok],
                                               settings.threshold))  # fmt: skip
    return StudyRepeat(**fields, ratio=_num(est.ratio), ci_low=_num(est.ci_low),
                       ci_high=_num(est.ci_high), p_value=_num(est.p_value),
                       verdict=est.verdict, advice=est.advice)  # fmt: skip


def new_study(
    repeats: int = DEFAULT_REPEATS,
    effects: Sequence[float] = EFFECTS,
    size: str = "small",
    schedule: Schedule | None = None,
    hog: bool = False,
    backend: str = "cpu",
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    workload: str = WORKLOAD,
    params: dict[str, Any] | None = None,
    scale: str = "size",
    hog_after: int = HOG_AFTER,
) -> Study:
    """A study not yet run: ``repeats`` sequential comparisons per effect, each with the
    schedule's looks (default: ``jaxbench compare --interleave``'s), up to ``max_pairs``."""
    s = schedule or Schedule()
    return Study(
        run_id=new_run_id(),
        started_at=now(),
        updated_at=now(),
        host=host(),
        python=sys.executable,
        settings=Settings(
            workload=workload,
            params=params or {"size": size, "dtype": "float32", "optimizer": "sgd",
                              "donate": True},
            size=size, scale=scale, effects=list(effects), repeats=repeats,
            pairs=s.max_pairs, hog=hog,
            hog_tool=Hog(usable_cpus()).tool if hog else None, hog_after=hog_after,
            backend=backend,
            threshold=threshold, alpha=alpha, seed=s.seed, schedule=dataclasses.asdict(s),
            design=default_design(threshold, alpha),
        ),
    )  # fmt: skip


def study_path(out: Path, study: Study) -> Path:
    """Where :func:`save` writes ``study``."""
    return out / f"{FILE_PREFIX}{study.run_id}.json"


def run_study(study: Study, out: Path, log: Callable[[str], None] | None = None) -> Path:
    """Run ``study`` (filled in place), saving it after every pair; returns its path.

    Each repeat is one sequential comparison per effect, as ``jaxbench compare --interleave``
    runs it: from the schedule's first look on, an effect that is ``slower``, ``faster`` or
    ``same`` (:func:`judge`) gets no more pairs; the repeat ends when no effect is open or at
    ``max_pairs``. The hog (``settings.hog``) is started after ``settings.hog_after`` pairs of
    each repeat (default :data:`HOG_AFTER`; 0: before the first) and stopped at the repeat's
    end, also when a worker fails or on Ctrl-C.
    """
    st = study.settings
    hogger = Hog(usable_cpus()) if st.hog else None
    rng = np.random.default_rng(st.seed)
    path = save(out, study)
    first = st.schedule["pairs"]
    for r in range(st.repeats):
        open_effects = list(st.effects)
        gated: Gated = {}
        try:
            for j in range(st.pairs):
                if hogger and j == st.hog_after:
                    hogger.start()
                runs = run_pair(study, study.python, r, j, bool(hogger and hogger.on), rng,
                                open_effects, gated)  # fmt: skip
                study.pairs.extend(runs)
                study.updated_at = now()
                save(out, study)
                if j + 1 >= first:
                    mine = [p for p in study.pairs if p.repeat == r]
                    open_effects = [e for e in open_effects
                                    if judge(mine, e, st).verdict not in DECIDED]  # fmt: skip
                if log:
                    log(f"repeat {r + 1}/{st.repeats}: pair {j + 1} done "
                        f"({runs[0].pair_seconds:.0f} s), {len(open_effects)} effect(s) open; "
                        f"saved {path}")  # fmt: skip
                if not open_effects:
                    break
        finally:
            if hogger:
                hogger.stop()
        mine = [p for p in study.pairs if p.repeat == r]
        for effect in st.effects:
            study.repeats.append(judge(mine, effect, st))
        study.complete = r == st.repeats - 1
        study.updated_at = now()
        save(out, study)
    return path


def _check_poolable(studies: Sequence[Study], names: Sequence[str]) -> None:
    first = studies[0].settings.model_dump()
    for study, name in zip(studies[1:], names[1:], strict=True):
        other = study.settings.model_dump()
        for key in POOLED:
            if other[key] != first[key]:
                raise ValueError(f"{name}: settings.{key} differs from {names[0]} "
                                 f"({other[key]!r} vs {first[key]!r}): not one pool")  # fmt: skip


def _share(k: int, n: int) -> str:
    if n == 0:
        return ""
    lo, hi = proportion_interval(k, n)
    return f"{k}/{n} = {k / n:.0%} [{lo:.0%}, {hi:.0%}]"


def _t_interval(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    se = float(x.std(ddof=1)) / math.sqrt(x.size)
    q = float(sps.t.ppf(0.5 + level / 2, x.size - 1))
    return mean, mean - q * se, mean + q * se


def judge_sequential(repeat_pairs: Sequence[StudyPair], effect: float, settings: Settings) -> str:
    """One repeat's verdict read the sequential way: the pairs' processes as independent.

    Each pair's baseline worker and candidate worker are two processes; each is summarised by
    the median of its block medians, and the ``P`` baseline processes are compared with the
    ``P`` candidate processes as recorded runs are
    (:func:`jaxbench.inference.verdicts.estimate_independent`, one look). This tests the
    recorded-runs estimator on the same A/A and slowdown processes (their blocks were
    interleaved, so slow machine drift is spread alike over both sides).
    """
    ok = [p for p in repeat_pairs if p.effect == effect and p.status == "ok" and p.rounds]
    if len(ok) < 2:
        return "failed"
    a = [[float(np.median([r.baseline_median_s for r in p.rounds]))] for p in ok]
    b = [[float(np.median([r.candidate_median_s for r in p.rounds]))] for p in ok]
    return verdicts.estimate_independent(a, b, settings.threshold, settings.alpha).verdict


def model_calls(
    log_ratio: float, sd: float, pairs: int, threshold: float, alpha: float
) -> tuple[float, float]:
    """Chance that a one-look comparison of ``pairs`` pairs calls ``slower`` and ``faster``.

    With pair log ratios normal (mean ``log_ratio``, sd ``sd``), ``slower`` needs the lower end
    of the t interval above ``log(1 + threshold)``: ``T > q`` for a noncentral t with ``pairs -
    1`` degrees of freedom and noncentrality ``(log_ratio - log(1 + t)) / se``.
    """
    if pairs < 2 or not (math.isfinite(sd) and sd > 0):
        return math.nan, math.nan
    df, se, bound = pairs - 1, sd / math.sqrt(pairs), math.log1p(threshold)
    q = float(sps.t.ppf(1 - alpha / 2, df))
    slower = float(sps.nct.sf(q, df, (log_ratio - bound) / se))
    faster = float(sps.nct.sf(q, df, -(log_ratio + bound) / se))  # = P(T < -q)
    return slower, faster


def summarize(
    studies: Sequence[Study], names: Sequence[str] | None = None
) -> dict[str, pd.DataFrame]:
    """The study's figures, pooled over ``studies`` (same settings, hog on or off).

    Returns:
        ``repeats``: one row per effect and scenario (``quiet``, or ``hog`` for a repeat with
        the hog on part of the time): ``repeats``, the share of each verdict (``k/n = x %
        [95 % CI]``), ``reference`` (the effect's long-run ratio, hog off), ``abs_dev_median_pp``
        and ``abs_dev_max_pp`` (``|ratio - reference|`` of the repeats, percentage points),
        ``model_slower`` and ``model_faster`` (:func:`model_calls` at the reference and the
        scenario's sd), ``median_seconds`` (time to a verdict per repeat).
        ``pairs``: one row per effect and hog state: ``pairs``, ``reference`` with
        ``ref_low``/``ref_high`` (95 % t interval over pairs), ``sd_log``, ``detectable_80``
        and ``detectable_95`` at the default first look, ``detectable_80_cap`` and
        ``detectable_95_cap`` at ``max_pairs``, ``median_case_s``.
        ``sequential``: per effect and scenario, the share of each verdict when every repeat
        is read the sequential way (:func:`judge_sequential`).

    Raises:
        ValueError: No study, or studies whose settings differ (named).
    """
    if not studies:
        raise ValueError("no study to summarize")
    names = list(names or [s.run_id for s in studies])
    _check_poolable(studies, names)
    st = studies[0].settings
    d = st.design
    pairs = [p for s in studies for p in s.pairs if p.status == "ok" and p.log_ratio is not None]
    reps = [r for s in studies for r in s.repeats]
    scenario = {(s.run_id, r.repeat): ("hog" if r.hog else "quiet")
                for s in studies for r in s.repeats}  # fmt: skip
    pair_scenario = [scenario.get((s.run_id, p.repeat)) for s in studies for p in s.pairs
                     if p.status == "ok" and p.log_ratio is not None]  # fmt: skip
    effects = sorted({p.effect for p in pairs} | {r.effect for r in reps})
    ref: dict[float, float] = {}
    pair_rows = []
    for e in effects:
        mine = [p for p in pairs if p.effect == e]
        quiet = np.asarray([p.log_ratio for p in mine if not p.hog])
        ref[e] = math.exp(quiet.mean()) if quiet.size else (
            math.exp(np.mean([p.log_ratio for p in mine])) if mine else math.nan)  # fmt: skip
        for hog in (False, True):
            x = np.asarray([p.log_ratio for p in mine if p.hog == hog], dtype=float)
            if not x.size:
                continue
            mean, lo, hi = _t_interval(x)
            sd = float(x.std(ddof=1)) if x.size >= 2 else math.nan
            first = [design_detectable(sd, d.pairs, d.alpha_per_look, st.threshold, p)
                     for p in verdicts.POWERS]  # fmt: skip
            cap = [design_detectable(sd, d.max_pairs, d.alpha_per_look, st.threshold, p)
                   for p in verdicts.POWERS]  # fmt: skip
            pair_rows.append({
                "effect": e, "hog": "on" if hog else "off", "pairs": int(x.size),
                "reference": math.exp(mean), "ref_low": math.exp(lo), "ref_high": math.exp(hi),
                "sd_log": sd, "detectable_80": first[0], "detectable_95": first[1],
                "detectable_80_cap": cap[0], "detectable_95_cap": cap[1],
                "median_case_s": float(np.median([p.seconds for p in mine if p.hog == hog])),
            })  # fmt: skip
    rep_rows, seq_rows = [], []
    for e in effects:
        for sc in ("quiet", "hog"):
            mine = [r for r in reps if r.effect == e and ("hog" if r.hog else "quiet") == sc]
            if not mine:
                continue
            n = len(mine)
            row: dict[str, Any] = {"effect": e, "scenario": sc, "repeats": n}
            for v in (*verdicts.VERDICTS, "failed"):
                k = sum(1 for r in mine if r.verdict == v)
                if v != "failed" or k:
                    row[v] = _share(k, n)
            dev = [abs(r.ratio - ref[e]) * 100 for r in mine if r.ratio is not None]
            row["reference"] = ref[e]
            row["abs_dev_median_pp"] = float(np.median(dev)) if dev else math.nan
            row["abs_dev_max_pp"] = max(dev) if dev else math.nan
            x = np.asarray([p.log_ratio for p, s in zip(pairs, pair_scenario, strict=True)
                            if p.effect == e and s == sc], dtype=float)  # fmt: skip
            sd = float(x.std(ddof=1)) if x.size >= 2 else math.nan
            slower, faster = model_calls(math.log(ref[e]), sd, st.pairs, st.threshold, st.alpha)
            row["model_slower"], row["model_faster"] = slower, faster
            row["median_seconds"] = float(np.median([r.seconds for r in mine]))
            rep_rows.append(row)
            seq = [judge_sequential([p for p in study.pairs if p.repeat == r.repeat], e, st)
                   for study in studies for r in study.repeats
                   if r.effect == e and ("hog" if r.hog else "quiet") == sc]  # fmt: skip
            seq_rows.append({"effect": e, "scenario": sc, "repeats": len(seq)}
                            | {v: _share(seq.count(v), len(seq)) for v in verdicts.VERDICTS
                               if v != "unstable"})  # fmt: skip
    return {"repeats": pd.DataFrame(rep_rows), "pairs": pd.DataFrame(pair_rows),
            "sequential": pd.DataFrame(seq_rows)}  # fmt: skip


def _cell(col: str, value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        if col.startswith(("detectable", "model_")):
            return f"{value:.1%}"
        if col.endswith("_pp"):
            return f"{value:.1f}"
        if col.endswith("_s") or col.endswith("seconds"):
            return f"{value:.0f}"
        return f"{value:.4g}" if col == "effect" else f"{value:.4f}"
    return str(value)


def markdown(frame: pd.DataFrame) -> str:
    """A markdown table of ``frame`` (figures formatted by column name)."""
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for row in frame.to_dict("records"):
        lines.append("| " + " | ".join(_cell(c, row[c]) for c in cols) + " |")
    return "\n".join(lines)


def report(studies: Sequence[Study], names: Sequence[str] | None = None) -> str:
    """The summary as markdown: the settings, then the repeats and pairs tables."""
    tables = summarize(studies, names)
    st, d = studies[0].settings, studies[0].settings.design
    sched = st.schedule
    head = (
        f"{st.workload} {' '.join(f'{k}={v}' for k, v in st.params.items())} (scaled: "
        f"{st.scale}), effects {', '.join(f'{e:g}' for e in st.effects)}; "
        f"{sum(len({r.repeat for r in s.repeats}) for s in studies)} repeats of up to "
        f"{st.pairs} pairs (a look after every pair from pair {sched['pairs']}, threshold "
        f"{st.threshold:.0%}, alpha {st.alpha:g}); {sched['rounds']} "
        f"rounds of {sched['calls_per_block']} calls a pair; host "
        f"{studies[0].host.get('hostname')}, JAX {studies[0].jax}. Model figures: default "
        f"design {d.pairs} pairs (first look) and {d.max_pairs} (cap), alpha "
        f"{d.alpha_per_look:.3g} a look."
    )
    return "\n\n".join([head, "### Repeats (verdicts)", markdown(tables["repeats"]),
                        "### Repeats read the sequential way (processes independent)",
                        markdown(tables["sequential"]),
                        "### Pairs (pool)", markdown(tables["pairs"])]) + "\n"  # fmt: skip


app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])


def _fail(message: str) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(2)


Opt = typer.Option


@app.command("run")
def run_cmd(
    repeats: Annotated[int, Opt(help="Independent repeats.")] = DEFAULT_REPEATS,
    pairs: Annotated[int, Opt(help="Pairs of the first look.")] = DEFAULT_PAIRS,
    max_pairs: Annotated[int, Opt(help="Most pairs of a repeat (the cap).")] = DEFAULT_MAX_PAIRS,
    effects: Annotated[str, Opt(help="Comma-separated FLOP factors; 1.0 = A/A.")] = "1.0,1.03,1.05",
    size: Annotated[str, Opt("--size", "-s", help="Train-step size of the baseline.")] = "small",
    workload: Annotated[
        str, Opt("--workload", "-w", help="Workload (default train_step).")
    ] = WORKLOAD,
    param: Annotated[
        list[str] | None, Opt("--param", help="NAME=VALUE of the baseline case (not train_step).")
    ] = None,
    scale: Annotated[
        str, Opt(help="The parameter an effect scales: size, or an integer one (e.g. trip).")
    ] = "size",
    rounds: Annotated[int, Opt(help="Timed rounds per case and pair.")] = DEFAULT_ROUNDS,
    calls_per_block: Annotated[int, Opt(help="Timed calls per block.")] = DEFAULT_CALLS_PER_BLOCK,
    warmup_rounds: Annotated[int, Opt(help="Untimed rounds first.")] = DEFAULT_WARMUP_ROUNDS,
    hog: Annotated[bool, Opt(help="CPU hog on all cores, part-way through each repeat.")] = False,
    hog_after: Annotated[
        int, Opt(help="Pairs of each repeat before the hog starts (0: from the first).")
    ] = HOG_AFTER,
    backend: Annotated[str, Opt("--backend", "-b", help="Worker backend.")] = "cpu",
    seed: Annotated[int, Opt(help="Seed of the effect and block orders.")] = 0,
    out: Annotated[Path, Opt("--out", "-o", help="Output folder.")] = Path("results/sensitivity"),
    markdown_out: Annotated[Path | None, Opt("--markdown", help="Also write the summary.")] = None,
) -> None:
    """Run a study (see the module docstring); the file is saved after every pair."""
    from jaxbench.backends import check_backend
    from jaxbench.cli.selection import Selection
    from jaxbench.interleave import WorkerError
    from jaxbench.workloads import get_workload
    from jaxbench.workloads.sizes import get_size

    try:
        factors = [float(e) for e in effects.split(",") if e.strip()]
    except ValueError:
        raise _fail(f"--effects {effects!r}: give factors, e.g. 1.0,1.03,1.05") from None
    try:
        if not factors or any(f <= 0 for f in factors):
            raise ValueError(f"--effects {effects!r}: give positive factors, e.g. 1.0,1.05")
        if repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {repeats}")
        if hog_after < 0:
            raise ValueError(f"--hog-after must be >= 0, got {hog_after}")
        if workload == WORKLOAD:
            params = None
            for f in factors:
                get_size(size if f == 1.0 else f"{size}*{f:g}")
        else:
            cases = Selection(workload=[workload], param=param).cases()
            if len(cases) != 1:
                raise ValueError(
                    f"-w {workload}: a study times one case, {len(cases)} are "
                    "selected; give one value of each swept parameter by --param"
                )
            params = dict(cases[0].params)
            if not isinstance(params.get(scale), int):
                raise ValueError(f"--scale {scale!r}: expected an integer parameter of "
                                 f"{workload} ({', '.join(params)})")  # fmt: skip
            for f in factors:
                get_workload(workload).validate(params | {scale: round(params[scale] * f)})
        check_backend(backend)
        s = Schedule(pairs=pairs, max_pairs=max_pairs, rounds=rounds,
                     calls_per_block=calls_per_block, warmup_rounds=warmup_rounds,
                     seed=seed)  # fmt: skip
    except ValueError as exc:
        raise _fail(str(exc)) from None
    study = new_study(repeats, factors, size, s, hog, backend, workload=workload, params=params,
                      scale=scale if params else "size", hog_after=hog_after)  # fmt: skip
    path = study_path(out, study)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        run_study(study, out, log)
    except KeyboardInterrupt:
        print(f"interrupted; every finished pair is saved in {path}", file=sys.stderr)
        raise typer.Exit(130) from None
    except WorkerError as exc:
        print(f"error: {exc}; every finished pair is saved in {path}", file=sys.stderr)
        raise typer.Exit(1) from None
    text = report([study], [str(path)])
    print(text)
    if markdown_out:
        write_atomic(markdown_out, text.encode())
    print(f"wrote {path}")


@app.command("summarize")
def summarize_cmd(
    files: Annotated[list[Path], typer.Argument(help="Study files (pooled: same settings).")],
    markdown_out: Annotated[Path | None, Opt("--markdown", help="Also write it here.")] = None,
) -> None:
    """Print the summary of one or more study files as markdown."""
    try:
        studies = [load(f) for f in files]
        text = report(studies, [str(f) for f in files])
    except ValueError as exc:
        raise _fail(str(exc)) from None
    print(text)
    if markdown_out:
        write_atomic(markdown_out, text.encode())
        print(f"wrote {markdown_out}")


if __name__ == "__main__":
    app()
