"""Explain from saved artifacts: the programs that records of ``jaxbench run`` name, compared.

Every timed record of a run names its case's program artifact (``Record.programs``, a SHA-256,
stored in ``programs/`` beside the record's file: :mod:`jaxbench.store.programs`). A side of
a comparison is a set of such records of one case (several processes, perhaps several files):
:func:`pick_artifact` takes the artifact most of them name, and says how many distinct
programs the side compiled (more than one means the compile itself was not deterministic, or
the records mix settings), with the median of each program's compile phases over the side's
records (``Record.compile_phases_s``). :func:`explain_saved` loads the two sides and explains
them as ``jaxbench explain`` does for live workers, without starting any.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxbench.explain.diff import diff_programs, explain_lines
from jaxbench.store import load_programs


@dataclass(frozen=True)
class SavedSide:
    """The artifact that stands for one side of a case.

    Attributes:
        folder: Folder of the record file(s) naming it (its ``programs/`` holds the artifact).
        digest: The artifact's SHA-256.
        records: How many of the side's records name it.
        distinct: How many distinct artifacts the side's records name (1 when all agree).
        total: How many of the side's records name an artifact.
        tie: Whether another artifact is named as often (the first named was taken).
        phases_s: Program name -> compile phase -> the median over the side's records of its
            seconds (``trace``, ``lower``, ``backend_compile``); empty where not recorded.
    """

    folder: Path
    digest: str
    records: int
    distinct: int
    total: int = 0
    tie: bool = False
    phases_s: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """The artifact's file."""
        return self.folder / "programs" / f"{self.digest}.json.gz"


Entry = tuple[str | Path, str | None, dict[str, dict[str, float]] | None]


def pick_artifact(entries: Iterable[Entry]) -> SavedSide | None:
    """The artifact most of a side's records name, with the median compile phases.

    Args:
        entries: ``(record file, Record.programs, Record.compile_phases_s)`` of each record of
            the side; records without a digest (no artifact saved) are passed over.

    Returns:
        The :class:`SavedSide`; ``None`` when no record names an artifact. Ties go to the
        artifact named first.
    """
    entries = [(Path(f), d, p) for f, d, p in entries if isinstance(d, str) and d]
    counts = Counter(d for _, d, _ in entries)
    if not counts:
        return None
    (digest, n), *others = counts.most_common()
    folder = next(f.parent for f, d, _ in entries if d == digest)
    seconds: dict[tuple[str, str], list[float]] = {}
    for _, _, phases in entries:
        for name, by_phase in (phases if isinstance(phases, dict) else {}).items():
            for phase, s in by_phase.items():
                seconds.setdefault((name, phase), []).append(float(s))
    medians: dict[str, dict[str, float]] = {}
    for (name, phase), values in seconds.items():
        medians.setdefault(name, {})[phase] = statistics.median(values)
    tie = bool(others) and others[0][1] == n
    return SavedSide(folder, digest, n, len(counts), len(entries), tie, medians)


def _with_phases(programs: list[dict[str, Any]], side: SavedSide) -> list[dict[str, Any]]:
    return [p | {"phases_s": side.phases_s[p["name"]]} if p["name"] in side.phases_s else p
            for p in programs]  # fmt: skip


def explain_saved(
    baseline: SavedSide, candidate: SavedSide, verdict: str | None = None
) -> list[str]:
    """The explanation of two saved sides (:func:`jaxbench.explain.explain_lines`).

    Each side's compile phases are its medians over its records (:attr:`SavedSide.phases_s`).

    A side whose records name several distinct artifacts gets a first line saying so.

    Raises:
        jaxbench.store.ArtifactError: An artifact is missing, corrupt or not what its name
            says (the message names its file).
        ValueError: The two sides compiled different sets of programs.
    """
    base, cand = (_with_phases(load_programs(s.folder, s.digest), s) for s in (baseline, candidate))
    notes = [
        f"{label}: its {side.total} records name {side.distinct} distinct programs (other "
        "flags or settings, or a compile that is not deterministic); compared: "
        f"{side.digest[:12]}, named by {side.records}" + (" (a tie: the first named)"
                                                          if side.tie else "")
        for label, side in (("baseline", baseline), ("candidate", candidate))
        if side.distinct > 1
    ]  # fmt: skip
    return notes + explain_lines(diff_programs(base, cand), verdict)
