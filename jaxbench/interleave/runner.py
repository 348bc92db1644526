"""The one live-comparison runner: pairs run, the file rewritten after each, one way to stop.

``jaxbench compare --interleave``/``--back-to-back``, ``jaxbench calibrate``, the live
confirmation of ``jaxbench review`` and the live judge of ``jaxbench bisect`` all run their
pairs through :func:`run_live` (or :func:`resume_live`, which completes a file cut short). After
every process pair the file is replaced whole and atomically (:func:`jaxbench.store.write_jsonl`
or :func:`~jaxbench.store.write_json`), so it always holds every pair finished. A Ctrl-C or a
failed worker ends the run with one exception, :class:`LiveStopped`, which names the file and the
pairs in it; each command prints its :meth:`~LiveStopped.line` and exits with its
:attr:`~LiveStopped.exit_code`.

Files are named ``<prefix>-<run id><suffix>``: ``interleave-<id>.jsonl`` for live comparisons
(:func:`live_path`), ``calibration-<id>.json`` for a calibration (the record's own
``path_name``, the same pattern). What a file holds is read from its content
(:mod:`jaxbench.store.kinds`), never from this name.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from jaxbench.inference import verdicts
from jaxbench.interleave.session import (
    Case,
    Schedule,
    Variant,
    WorkerError,
    run_pairs,
)
from jaxbench.interleave.verdict import cut_short
from jaxbench.store import CaseComparison, new_run_id, write_json, write_jsonl
from jaxbench.store.live import Mode

#: Exit status of a command whose live run was interrupted (128 + SIGINT, as a shell's).
EXIT_INTERRUPTED = 130
#: Exit status of a command whose live run lost a worker.
EXIT_WORKER_FAILED = 1
#: Prefix of a live comparison's file (kind ``live-comparison``).
LIVE_PREFIX = "interleave"

#: What the file holds given every case's comparison so far: a list of models (JSON Lines), one
#: model (a JSON file), or ``None`` (nothing to write yet; the file is left as it is).
Contents = Callable[[list[CaseComparison]], list[BaseModel] | BaseModel | None]
#: Called after each pair once its file is saved, with the pairs in the file and its path.
OnSaved = Callable[[int, Path], None]


class LiveStopped(Exception):
    """A live run ended before its schedule did: interrupted (Ctrl-C) or a worker failed.

    Every pair finished before it is in the file.

    Attributes:
        path: The file holding the pairs finished, or ``None`` when nothing was saved.
        pairs: Process pairs whose results the file holds.
        cause: The ``KeyboardInterrupt`` or :class:`~jaxbench.interleave.WorkerError`.
        interrupted: Whether it was an interruption.
        exit_code: :data:`EXIT_INTERRUPTED` or :data:`EXIT_WORKER_FAILED`.
        note: What else the line says, e.g. why pairs run were not kept (``""``: nothing).
    """

    def __init__(self, path: Path | None, pairs: int, cause: BaseException, note: str = "") -> None:
        self.path, self.pairs, self.cause, self.note = path, pairs, cause, note
        self.interrupted = isinstance(cause, KeyboardInterrupt)
        self.exit_code = EXIT_INTERRUPTED if self.interrupted else EXIT_WORKER_FAILED
        super().__init__(self.line())

    def line(self) -> str:
        """The one line a command prints, e.g. ``interrupted after 3 process pair(s); ...``."""
        what = f"interrupted after {self.pairs} process pair(s)" if self.interrupted else (
            str(self.cause))  # fmt: skip
        what += f" ({self.note})" if self.note else ""
        if self.path is None:
            return f"{what}; nothing was saved"
        return f"{what}; pairs finished before it are in {self.path}"


@dataclass(frozen=True)
class LiveRun:
    """What :func:`run_live` or :func:`resume_live` ran.

    Attributes:
        path: The file, holding every pair (written after each).
        comparisons: One :class:`~jaxbench.store.CaseComparison` per case, as written.
        pairs: Process pairs the file holds (earlier ones included after a resume).
    """

    path: Path
    comparisons: list[CaseComparison]
    pairs: int


def live_path(folder: str | os.PathLike[str], prefix: str = LIVE_PREFIX) -> Path:
    """A new ``folder/<prefix>-<run id>.jsonl`` (:func:`jaxbench.store.new_run_id`)."""
    return Path(folder) / f"{prefix}-{new_run_id()}.jsonl"


def _write(path: Path, content: list[BaseModel] | BaseModel) -> None:
    if isinstance(content, BaseModel):
        write_json(path, content)
    else:
        write_jsonl(path, content)


def _saving(
    path: Path,
    run: Callable[[Callable[[list[CaseComparison]], None]], list[CaseComparison]],
    contents: Contents,
    on_saved: OnSaved | None,
    before: int = 0,
) -> LiveRun:
    """Run ``run(on_pair)``, writing ``contents`` of each pair's comparisons to ``path``."""
    pairs, written = before, path.exists()

    def save(now: list[CaseComparison]) -> None:
        nonlocal pairs, written
        pairs += 1
        content = contents(now)
        if content is not None:
            _write(path, content)
            written = True
        if on_saved is not None:
            on_saved(pairs, path)

    try:
        found = run(save)
    except (KeyboardInterrupt, WorkerError) as exc:
        raise LiveStopped(path if written else None, pairs, exc) from exc
    return LiveRun(path, found, pairs)


def run_live(
    baseline: Variant,
    candidate: Variant,
    cases: Sequence[Case],
    path: Path,
    backend: str = "default",
    schedule: Schedule | None = None,
    mode: Mode = "interleaved",
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    strict: bool = False,
    on_saved: OnSaved | None = None,
    contents: Contents = list,
) -> LiveRun:
    """Compare two variants live on ``cases``, saving ``path`` after every process pair.

    The pairs are those of :func:`~jaxbench.interleave.run_pairs` in ``mode``.

    Args:
        baseline: Side A.
        candidate: Side B.
        cases: ``(workload, params)`` pairs.
        path: The file (:func:`live_path`); its folder must exist.
        backend: Backend of the workers.
        schedule: Pairs, rounds and blocks; default :class:`~jaxbench.interleave.Schedule`.
        mode: ``interleaved`` or ``back_to_back``.
        threshold: Threshold of the verdicts that decide whether a case needs more pairs.
        alpha: Their level.
        strict: Decide by the minimum-effect rule.
        on_saved: Called after each pair's save (see :data:`OnSaved`).
        contents: What the file holds (see :data:`Contents`); default the comparisons
            themselves, one JSON line each (kind ``live-comparison``).

    Returns:
        The :class:`LiveRun`.

    Raises:
        LiveStopped: Interrupted, or a worker could not start or died; the pairs finished
            before are in the file.
    """

    def pairs(on_pair: Callable[[list[CaseComparison]], None]) -> list[CaseComparison]:
        return run_pairs(baseline, candidate, list(cases), backend, schedule, on_pair=on_pair,
                         threshold=threshold, alpha=alpha, strict=strict, mode=mode)  # fmt: skip

    return _saving(path, pairs, contents, on_saved)


def cut_short_files(
    folder: Path, ran: Callable[[CaseComparison], bool], first_look: int = 0
) -> dict[Path, list[CaseComparison]]:
    """The live files in ``folder`` to complete with :func:`resume_live`.

    Only the folder's own files are read, not its subfolders: :func:`run_live` writes its file
    there (:func:`live_path`), and ``folder`` may be a whole results history. A file qualifies
    when every comparison in it satisfies ``ran`` (it was run by the sides the caller would
    resume it with) and at least one was cut short in its first look (:func:`cut_short`,
    ``first_look`` where a comparison has no schedule of its own).

    Returns:
        Path -> every comparison in it; empty where ``folder`` does not exist yet.
    """
    from jaxbench.store import load  # the loader, only where a command resumes

    if not folder.is_dir():
        return {}
    files = sorted(f for f in folder.iterdir() if f.suffix in (".jsonl", ".json") and f.is_file())
    by_file: dict[Path, list[CaseComparison]] = {}
    for item in load(files, kinds={"live-comparison"}).of("live-comparison"):
        by_file.setdefault(Path(item.path), []).append(item.model)
    return {
        path: found
        for path, found in by_file.items()
        if all(ran(c) for c in found) and any(cut_short(c, first_look) for c in found)
    }


def resume_live(
    path: Path,
    comparisons: list[CaseComparison],
    baseline: Variant,
    candidate: Variant,
    backend: str = "default",
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    on_saved: OnSaved | None = None,
) -> LiveRun:
    """Finish the first look of the comparisons of ``path`` cut short (:func:`cut_short`).

    The pairs still missing from the first look run with the comparisons' own saved design
    (mode, rounds, blocks, warm-up, tracing; the seed moved on by the pairs done), whatever the
    caller would ask now, and each is added to its comparison: what was measured before the
    interruption is kept and pooled, the pairs being independent whenever they ran. A resumed
    comparison stops at its first look. The file is rewritten after every pair, the other
    comparisons in it kept as read.

    Args:
        path: The file.
        comparisons: Every comparison in it (:func:`jaxbench.store.load`).
        baseline: Side A, as it ran (the same versions).
        candidate: Side B.
        backend: Backend of the workers.
        threshold: The verdicts' threshold.
        alpha: Their level.
        on_saved: As :func:`run_live`; the count goes on from the pairs already in the file.

    Returns:
        The :class:`LiveRun` of the comparisons completed (the others are in the file only).

    Raises:
        ValueError: No comparison in ``comparisons`` is cut short.
        LiveStopped: As :func:`run_live`.
    """
    short = [c for c in comparisons if cut_short(c)]
    if not short:
        raise ValueError(f"{path}: no comparison was cut short in its first look")
    done = min(len(c.pairs) for c in short)
    saved = short[0].schedule
    fields = ("pairs_step", "rounds", "calls_per_block", "warmup_rounds", "warmup_calls",
              "trace_calls")  # fmt: skip
    rest = Schedule(pairs=saved["pairs"] - done, max_pairs=saved["pairs"] - done,
                    seed=int(saved.get("seed", 0)) + done,
                    **{f: int(saved[f]) for f in fields if f in saved})  # fmt: skip
    pooled: list[CaseComparison] = short

    def merged(new: list[CaseComparison]) -> list[BaseModel]:
        nonlocal pooled
        pooled = [_pooled(old, add) for old, add in zip(short, new, strict=True)]
        by_id = {id(old): c for old, c in zip(short, pooled, strict=True)}
        return [by_id.get(id(c), c) for c in comparisons]

    def pairs(on_pair: Callable[[list[CaseComparison]], None]) -> list[CaseComparison]:
        run_pairs(baseline, candidate, [(c.workload, dict(c.params)) for c in short],
                  backend, rest, on_pair=on_pair, threshold=threshold, alpha=alpha,
                  mode=short[0].mode)  # fmt: skip
        return pooled

    run = _saving(path, pairs, merged, on_saved, before=done)
    return dataclasses.replace(run, comparisons=pooled)


def _pooled(old: CaseComparison, new: CaseComparison) -> CaseComparison:
    """``old`` with the pairs of ``new`` after its own, numbered on."""
    for pair in new.pairs:
        old = old.with_pair(pair.model_copy(update={"index": len(old.pairs)}))
    if new.status != "ok" and old.status == "ok":
        old = old.model_copy(update={"status": new.status, "error": new.error})
    return old
