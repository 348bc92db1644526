"""Every kind the store holds, told apart by its ``kind`` field (pydantic discriminated union).

========================== ====================================== ==============================
kind                       model                                  file
========================== ====================================== ==============================
``record``                 :class:`~jaxbench.store.Record`        run ``*.jsonl``; sweep
                                                                  ``records/*.json``
``live-comparison``        :class:`~jaxbench.store.CaseComparison` ``interleave-*.jsonl``
``jaxbench-drift``         :class:`~jaxbench.store.DriftRow`      ``drift-*.jsonl``
``jaxbench-drift-reference`` :class:`~jaxbench.store.ReferenceManifest` ``reference.json``
``calibration``            :class:`~jaxbench.store.Calibration`   ``calibration-*.json``
``sweep``                  :class:`~jaxbench.store.SweepManifest` ``sweep.json``
========================== ====================================== ==============================

asv result files carry no ``kind``; :mod:`jaxbench.store.asv` turns them into records at the
edge. Files of schema version 1 written before ``kind`` existed are recognised by their fields
(:func:`legacy_kind`) and read as version 1. A ``schema_version`` above a model's ``Literal``
is refused by pydantic, and the loader names it as newer than this jaxbench.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter

from jaxbench.store.calibration import Calibration
from jaxbench.store.drift import DriftRow, ReferenceManifest
from jaxbench.store.live import CaseComparison
from jaxbench.store.record import Record
from jaxbench.store.sweep import SweepManifest

Stored = Annotated[
    Record | CaseComparison | DriftRow | ReferenceManifest | Calibration | SweepManifest,
    Field(discriminator="kind"),
]
#: Validates one stored object (a JSON line or a JSON file) into its model.
STORED: TypeAdapter[Any] = TypeAdapter(Stored)
#: Model per kind.
MODELS: dict[str, type[BaseModel]] = {
    "record": Record,
    "live-comparison": CaseComparison,
    "jaxbench-drift": DriftRow,
    "jaxbench-drift-reference": ReferenceManifest,
    "calibration": Calibration,
    "sweep": SweepManifest,
}
KINDS = frozenset(MODELS)
#: The kind of the verdicts file that ``compare --json`` and ``review --json`` write.
VERDICTS = "jaxbench-verdicts"
#: Kinds this project writes but the store does not model, and who reads them: the loader
#: passes over them without complaint.
UNMODELLED = {
    "sensitivity": "scripts/sensitivity.py (a study, not the product)",
    "sensitivity-replay": "scripts/replay_sensitivity.py (a study, not the product)",
    "store-scale": "scripts/store_scale.py (timings of the store's commands, not records)",
    "prepare_cost": "scripts/bench_prepare.py (a live worker's fixed cost, not records)",
    "pair-cost": "scripts/bench_pair.py (a live pair's wall time by phase, not records)",
    VERDICTS: "compare --json and review --json (verdicts for a CI job, not records)",
}
#: The kind of asv's result files (no ``kind`` field; converted to records).
ASV = "asv"

#: Fields that identify a schema-1 object without ``kind``, per kind.
_LEGACY_FIELDS = {
    "record": ("run_id", "benchmark", "status", "env"),
    "live-comparison": ("mode", "workload", "schedule", "started_at"),
    "sweep": ("sweep_id", "tasks", "profile"),
    "sensitivity": ("load_average_before", "workload", "rows"),
    ASV: ("result_columns", "commit_hash", "env_name"),
}


def legacy_kind(raw: Mapping[str, Any]) -> str | None:
    """The kind of a JSON object without ``kind`` (schema version 1, or asv), or ``None``."""
    for kind, fields in _LEGACY_FIELDS.items():
        if all(f in raw for f in fields):
            return kind
    return None


def kind_of(raw: Any) -> str | None:
    """The kind of a parsed JSON value: its ``kind`` field, else :func:`legacy_kind`."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get("kind")
    return kind if isinstance(kind, str) else legacy_kind(raw)


def upgrade(raw: dict[str, Any], kind: str) -> dict[str, Any]:
    """``raw`` with ``kind`` set, and ``schema_version`` 1 where a kindless file had none."""
    if "kind" in raw:
        return raw
    return {"kind": kind, **raw} | ({} if "schema_version" in raw else {"schema_version": 1})
