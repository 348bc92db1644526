"""Explain from saved artifacts: the programs that records of ``jaxbench run`` name, compared.

Every timed record of a run names its case's program artifact (``Record.programs``, a SHA-256,
stored in ``programs/`` beside the record's file: :mod:`jaxbench.store.programs`). A side of
a comparison is a set of such records of one case (several processes, perhaps several files):
:func:`pick_artifact` takes the artifact most of them name, and says how many distinct
programs the side compiled (more than one means the compile itself was not deterministic, or
the records mix settings). :func:`explain_saved` loads the two sides and explains them as
``jaxbench explain`` does for live workers, without starting any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
    """

    folder: Path
    digest: str
    records: int
    distinct: int

    @property
    def path(self) -> Path:
        """The artifact's file."""
        return self.folder / "programs" / f"{self.digest}.json.gz"


def pick_artifact(entries: Iterable[tuple[str | Path, str | None]]) -> SavedSide | None:
    """The artifact most of a side's records name.

    Args:
        entries: ``(record file, Record.programs)`` of each record of the side; ``None``
            digests (no artifact saved) are passed over.

    Returns:
        The :class:`SavedSide`; ``None`` when no record names an artifact. Ties go to the
        artifact named first.
    """
    entries = [(Path(f), d) for f, d in entries if isinstance(d, str) and d]
    counts = Counter(d for _, d in entries)
    if not counts:
        return None
    digest, n = counts.most_common(1)[0]
    folder = next(f.parent for f, d in entries if d == digest)
    return SavedSide(folder, digest, n, len(counts))


def explain_saved(
    baseline: SavedSide, candidate: SavedSide, verdict: str | None = None
) -> list[str]:
    """The explanation of two saved sides (:func:`jaxbench.explain.explain_lines`).

    A side whose records name several distinct artifacts gets a first line saying so.

    Raises:
        jaxbench.store.ArtifactError: An artifact is missing, corrupt or not what its name
            says (the message names its file).
        ValueError: The two sides compiled different sets of programs.
    """
    base = load_programs(baseline.folder, baseline.digest)
    cand = load_programs(candidate.folder, candidate.digest)
    notes = [
        f"{label}: {side.distinct} distinct programs among its records; compared: the one "
        f"{side.records} of them name"
        for label, side in (("baseline", baseline), ("candidate", candidate))
        if side.distinct > 1
    ]
    return notes + explain_lines(diff_programs(base, cand), verdict)


@dataclass
class ResultSet:
    """The records of one result set (files or folders of ``jaxbench run``), by case.

    Attributes:
        entries: Case label (:func:`jaxbench.store.case_label`) -> ``(record file,
            Record.programs)`` of its ``ok`` records.
        versions: The JAX versions its records ran under.
        problems: Lines that did not load (file and line).
    """

    entries: dict[str, list[tuple[str, str | None]]]
    versions: set[str]
    problems: list[str]


def read_result_set(path: str | Path) -> ResultSet:
    """Load the records under ``path`` (:func:`jaxbench.store.load`), by case.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    from jaxbench.store import case_label, load

    loaded = load([path], kinds={"record"})
    entries: dict[str, list[tuple[str, str | None]]] = {}
    versions = set()
    for item in loaded.of("record"):
        rec = item.model
        if rec.status != "ok":
            continue
        entries.setdefault(case_label(rec.benchmark, rec.params), []).append(
            (str(item.path), rec.programs)
        )
        versions.add(str(rec.env.get("jax")))
    return ResultSet(entries, versions, [str(p) for p in loaded.problems])
