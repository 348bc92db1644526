"""The record store: every kind the project writes, one writer, one scanner, one loader.

Kinds (:mod:`jaxbench.store.kinds`) are pydantic models with a ``kind`` discriminator and a
schema version; :mod:`jaxbench.store.files` writes them (append, or replace atomically),
:mod:`jaxbench.store.scan` finds them and :mod:`jaxbench.store.loader` reads them back with one
bad-line policy. asv results are converted to records at the edge (:mod:`jaxbench.store.asv`).
This package imports nothing else of jaxbench: every other layer may use it.
"""

from jaxbench.store.calibration import Calibration, CalibrationComparison, CalibrationSummary
from jaxbench.store.drift import DriftRow, ReferenceManifest
from jaxbench.store.files import Appender, write_atomic, write_json, write_jsonl
from jaxbench.store.kinds import KINDS
from jaxbench.store.live import CaseComparison, PairRun, Round, SideInfo
from jaxbench.store.loader import (
    Item,
    Loaded,
    Problem,
    StoreFormatError,
    collector_paused,
    load,
    read_file,
    read_model,
)
from jaxbench.store.programs import ArtifactError, load_programs, save_programs
from jaxbench.store.record import Env, Metrics, Noise, Record, Trace, case_label, new_run_id
from jaxbench.store.sweep import SweepManifest
from jaxbench.store.traces import load_trace, save_trace

__all__ = [
    "KINDS",
    "Appender",
    "ArtifactError",
    "Calibration",
    "CalibrationComparison",
    "CalibrationSummary",
    "CaseComparison",
    "DriftRow",
    "Env",
    "Item",
    "Loaded",
    "Metrics",
    "Noise",
    "PairRun",
    "Problem",
    "Record",
    "ReferenceManifest",
    "Round",
    "SideInfo",
    "StoreFormatError",
    "SweepManifest",
    "Trace",
    "case_label",
    "collector_paused",
    "load",
    "load_programs",
    "load_trace",
    "new_run_id",
    "read_file",
    "read_model",
    "save_programs",
    "save_trace",
    "write_atomic",
    "write_json",
    "write_jsonl",
]
