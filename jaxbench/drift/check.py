"""Save a drift reference once; later, recompute every set and compare with it by tolerance.

:func:`save_reference` computes every regression set (:mod:`jaxbench.drift.sets`) with the
current JAX and backend and writes the reference (:mod:`jaxbench.drift.reference`).
:func:`check_drift` reads a reference, recomputes every set it holds from the saved inputs,
compares each output with :func:`jaxbench.drift.tolerance.compare` (a changed output dtype is a
finding too) and writes one JSON Lines file ``<out>/drift-<run id>.jsonl`` of
:class:`~jaxbench.store.drift.DriftRow`: one row per output of each valid set, one row
(``output="raises"``) per ``invalid_shape`` set. A set that fails to compute does not stop the
check: each of its outputs becomes a finding with the error.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from jaxbench import env as env_mod
from jaxbench.drift.reference import (
    LoadedSet,
    Reference,
    ReferenceExistsError,
    SavedSet,
    manifest_path,
    read_reference,
    write_reference,
)
from jaxbench.drift.sets import RegressionSet, families, qualified_name, regression_sets
from jaxbench.drift.tolerance import (
    BASE_REDUCTION,
    BFLOAT16_FLOOR,
    DRIFT_TOLERANCES,
    compare,
    tolerance,
)
from jaxbench.drift.user import reduction_length, user_compute
from jaxbench.store import write_jsonl
from jaxbench.store.drift import (
    DRIFT_FILE_PREFIX,
    MANIFEST_NAME,
    RAISES_OUTPUT,
    ROW_ENV_KEYS,
    DriftRow,
    ReferenceInfo,
)
from jaxbench.workloads.base import LeafTolerance, leaf_tolerance
from jaxbench.workloads.regression import SET_NAMES, SIZE
from jaxbench.workloads.sizes import DTYPES


class DriftComputeError(RuntimeError):
    """A set could not be computed for a reference (error, non-finite output, missing raise)."""


@dataclass
class DriftRun:
    """The result of :func:`check_drift`.

    Attributes:
        path: The JSON Lines file written.
        rows: Every row, in file order.
        reference: The reference compared with.
        notes: Things worth saying that are not findings (e.g. tolerances that changed).
    """

    path: Path
    rows: list[DriftRow]
    reference: Reference
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[DriftRow]:
        """Rows beyond tolerance, of another dtype, not computed, or a missing raise."""
        return [r for r in self.rows if not r.within_tolerance]


def _resolve(device: Any | None) -> Any:
    """``device``, or JAX's default device for ``None`` (one jit cache entry for both)."""
    import jax

    return jax.devices()[0] if device is None else device


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


class SetMethod(NamedTuple):
    """How a set is computed, and what its tolerance is derived from.

    Attributes:
        compute: ``(inputs, dtype, device) -> outputs``, as a family's
            :attr:`DriftSets.outputs <jaxbench.workloads.regression.DriftSets.outputs>`.
        reduction_length: The most terms summed into one element of an output.
        bfloat16_floor: The least bfloat16 tolerance.
        leaves: Outputs with a tolerance of their own, or left out: a user step's
            ``Step.tolerances`` (patterns over the output's key path joined by ``/``).
    """

    compute: Callable[..., dict[str, np.ndarray]]
    reduction_length: int
    bfloat16_floor: float = BFLOAT16_FLOOR
    leaves: Mapping[str, LeafTolerance] = {}

    def tolerance(self, dtype: str) -> dict[str, float]:
        """:func:`jaxbench.drift.tolerance.tolerance` of ``dtype`` on this basis."""
        return tolerance(dtype, self.reduction_length, self.bfloat16_floor)


def set_method(workload: str, params: Mapping[str, Any]) -> SetMethod:
    """How a set of ``workload`` is computed and the basis of its tolerance.

    Built-in families: the outputs, reduction length and bfloat16 floor of their
    :class:`~jaxbench.workloads.regression.DriftSets`; a user workload (a name with a ``:`` or
    an installed entry point): its step rebuilt from ``params`` (:mod:`jaxbench.drift.user`)
    and its reduction length.

    Raises:
        ValueError: Neither a built-in family nor a user workload that builds (the message names
            it, or is the factory's).
    """
    declared = families().get(workload)
    if declared is not None:
        floor = declared.bfloat16_floor or BFLOAT16_FLOOR
        return SetMethod(declared.outputs, declared.reduction_length, floor)
    from jaxbench.workloads.user import find, installed

    if ":" not in workload and workload not in installed():
        raise ValueError(f"unknown workload {workload!r}")
    found = find(workload)
    step = found.build(params)
    return SetMethod(user_compute(found, params), reduction_length(step),
                     leaves=dict(step.tolerances))  # fmt: skip


def save_reference(
    folder: str | Path,
    force: bool = False,
    device: Any | None = None,
    workloads: tuple[str, ...] | None = None,
    dtypes: tuple[str, ...] = DTYPES,
    sets: list[RegressionSet] | None = None,
) -> Path:
    """Compute every regression set now and save it as the drift reference.

    Args:
        folder: The reference folder (e.g. ``results/drift/reference``).
        force: Overwrite an existing reference.
        device: The ``jax.Device`` to compute on; ``None`` for the default.
        workloads: Built-in families to include (``None``: every family with drift sets).
        dtypes: Dtypes to include (default both).
        sets: Instead of the built-in sets, these (a user workload's,
            :func:`jaxbench.drift.user.user_sets`).

    Returns:
        The path of the manifest written.

    Raises:
        ReferenceExistsError: A reference exists and ``force`` is false (checked before any
            work; nothing is written).
        DriftComputeError: A valid set raised or gave a non-finite output, or an
            ``invalid_shape`` set did not raise its workload's error; nothing is written.
        ValueError: An unknown workload or dtype, or a user factory that refuses its
            parameters.
        OSError: The folder cannot be written.
    """
    if manifest_path(folder).exists() and not force:
        raise ReferenceExistsError(
            f"a drift reference already exists in {folder} ({MANIFEST_NAME}); "
            "pass --force to overwrite it"
        )
    device = _resolve(device)
    saved = []
    for s in regression_sets(workloads, dtypes) if sets is None else sets:
        method = set_method(s.workload, s.params)
        compute, length = method.compute, method.reduction_length
        if s.expect_error is not None:
            try:
                compute(s.inputs, s.dtype, device)
            except s.expect_error as exc:
                raised = _error_text(exc)
            except Exception as exc:
                raise DriftComputeError(
                    f"{s.label}: raised {_error_text(exc)}, expected "
                    f"{s.expect_error.__name__}; no reference written"
                ) from exc
            else:
                raise DriftComputeError(
                    f"{s.label}: the wrong-shape input did not raise "
                    f"{s.expect_error.__name__}; no reference written"
                )
            saved.append(
                SavedSet(s.workload, s.dtype, s.name, s.inputs, {},
                         qualified_name(s.expect_error), raised, s.params, length)
            )  # fmt: skip
            continue
        try:
            outputs = compute(s.inputs, s.dtype, device)
        except Exception as exc:
            raise DriftComputeError(f"{s.label}: {_error_text(exc)}; no reference written") from exc
        bad = [k for k, v in outputs.items() if not np.isfinite(np.asarray(v, np.float64)).all()]
        if bad:
            raise DriftComputeError(
                f"{s.label}: output(s) {', '.join(bad)} not finite; no reference written"
            )
        saved.append(
            SavedSet(s.workload, s.dtype, s.name, s.inputs, outputs, params=s.params,
                     reduction_length=length)
        )  # fmt: skip
    return write_reference(
        folder,
        saved,
        env=env_mod.collect(device),
        tolerances={d: tolerance(d) for d in dtypes},
        size=SIZE if sets is None else None,
        created_at=_now(),
        force=force,
    )


def row_env(env: dict[str, Any]) -> dict[str, Any]:
    """The part of :func:`jaxbench.env.collect` that every drift row carries.

    :data:`~jaxbench.store.drift.ROW_ENV_KEYS` plus ``os`` and ``hostname`` (from ``host``) and
    ``git_commit``.
    """
    out = {k: env.get(k) for k in ROW_ENV_KEYS}
    host = env.get("host") or {}
    out |= {
        "os": host.get("os"),
        "hostname": host.get("hostname"),
        "git_commit": (env.get("git") or {}).get("commit"),
    }
    return out


def _invalid_row(loaded: LoadedSet, compute: Callable, device: Any, base: dict) -> DriftRow:
    entry = loaded.entry
    expected = families()[entry.workload].expected_error
    fields: dict[str, Any] = {"output": RAISES_OUTPUT, "expected_error": qualified_name(expected)}
    try:
        compute(loaded.inputs, entry.dtype, device)
    except Exception as exc:
        ok = isinstance(exc, expected)
        fields |= {
            "raised": True,
            "within_tolerance": ok,
            "error_type": qualified_name(type(exc)),
            "error_message": str(exc),
            "finding": None if ok else f"raised {type(exc).__name__}, not {expected.__name__}",
        }
    else:
        fields |= {
            "raised": False,
            "within_tolerance": False,
            "finding": f"a wrong-shape input did not raise {expected.__name__}",
        }
    return DriftRow(**base, **fields)


def _output_rows(
    loaded: LoadedSet,
    compute: Callable,
    device: Any,
    base: dict,
    leaves: Mapping[str, LeafTolerance] | None = None,
) -> list[DriftRow]:
    try:
        current = compute(loaded.inputs, loaded.entry.dtype, device)
    except Exception as exc:
        current, failure = {}, f"computing the set raised {_error_text(exc)}"
    else:
        failure = None
    rows = []
    ref_dtypes = {o.name: o.dtype for o in loaded.entry.outputs}
    for name, ref in loaded.outputs.items():
        got = current.get(name)
        fields: dict[str, Any] = {"output": name, "shape": list(ref.shape)}
        if got is None:
            fields |= {"within_tolerance": False, "finding": failure or "output not computed"}
            rows.append(DriftRow(**base, **fields))
            continue
        tol = {"rtol": base["rtol"], "atol": base["atol"]}
        # the output's key path as Step.tolerances names it: "out.0.w" -> "0/w"
        stated = leaf_tolerance(name.removeprefix("out.").replace(".", "/"), leaves or {})
        if stated is not None:
            fields["tolerance_reason"] = stated[1].reason
            if stated[1].exclude:
                fields |= {"within_tolerance": True,
                           "tolerance_reason": f"excluded: {stated[1].reason}"}  # fmt: skip
                rows.append(DriftRow(**(base | fields)))
                continue
            tol = {k: tol[k] if getattr(stated[1], k) is None else getattr(stated[1], k)
                   for k in tol}  # fmt: skip
            fields |= tol
        c = compare(got, ref, tol)
        dtype = np.asarray(got).dtype.name
        finding = c.finding
        if dtype != ref_dtypes[name]:
            finding = "; ".join(
                filter(None, [f"dtype {dtype}, reference {ref_dtypes[name]}", finding])
            )
        fields |= {
            "output_dtype": dtype,
            "max_abs_err": c.max_abs_err,
            "max_rel_err": c.max_rel_err,
            "worst_ratio": c.worst_ratio,
            "atol_scale": c.scale,
            "within_tolerance": finding is None,
            "finding": finding,
        }
        if ref.dtype.kind in "iub":  # compared exactly (tolerance.compare)
            fields |= {"rtol": 0.0, "atol": 0.0}
        if ref.shape == () and np.shape(got) == ():
            fields |= {"reference_value": float(ref), "current_value": float(np.asarray(got))}
        rows.append(DriftRow(**(base | fields)))
    return rows


def _unknown_rows(loaded: LoadedSet, base: dict, reason: str) -> list[DriftRow]:
    names = list(loaded.outputs) or [RAISES_OUTPUT]
    return [DriftRow(**base, output=n, within_tolerance=False, finding=reason) for n in names]


def check_set(loaded: LoadedSet, device: Any, common: dict[str, Any]) -> list[DriftRow]:
    """Recompute one saved set and compare it with its reference outputs.

    Args:
        loaded: The set as read from the reference.
        device: The ``jax.Device`` to compute on; ``None`` for the default.
        common: Row fields shared by the run: ``run_id``, ``checked_at``, ``env``,
            ``reference``.

    Returns:
        One row per reference output, or one ``raises`` row for a set that must raise.
    """
    entry = loaded.entry
    base = common | {"workload": entry.workload, "dtype": entry.dtype, "set": entry.set}
    try:
        method = set_method(entry.workload, entry.params)
    except ValueError as exc:  # the tolerance it was saved with, for the row
        saved = tolerance(entry.dtype, entry.reduction_length or BASE_REDUCTION)
        return _unknown_rows(loaded, base | saved, str(exc))
    base |= method.tolerance(entry.dtype)
    compute = method.compute
    if entry.expect_error is not None:
        return [_invalid_row(loaded, compute, device, base)]
    return _output_rows(loaded, compute, device, base, method.leaves)


def _notes(ref: Reference) -> list[str]:
    notes = []
    saved = ref.manifest.tolerances
    for dtype, tol in DRIFT_TOLERANCES.items():
        if dtype in saved and saved[dtype] != tol:
            notes.append(
                f"{dtype}: the reference was saved with tolerance {saved[dtype]}; "
                f"this check applies {tol}"
            )
    have = {(e.workload, e.dtype, e.set) for e in ref.manifest.sets}
    known = families()
    if not {w for w, _, _ in have} & set(known):
        return notes  # a user workload's reference
    missing = [
        f"{w} {d} {s}"
        for w, declared in known.items()
        for d in declared.dtypes
        for s in SET_NAMES
        if (w, d, s) not in have
    ]
    if missing:
        notes.append(f"not in the reference, not checked: {', '.join(missing)}")
    return notes


def check_drift(
    reference: str | Path | Reference,
    out_dir: str | Path,
    device: Any | None = None,
    run_id: str | None = None,
) -> DriftRun:
    """Recompute every set of a reference and write ``<out_dir>/drift-<run id>.jsonl``.

    Args:
        reference: The reference folder, or a :class:`Reference` already read.
        out_dir: Folder of the drift file (created if missing).
        device: The ``jax.Device`` to compute on; ``None`` for the default.
        run_id: Identifier of this check (default: a new time-sortable id).

    Returns:
        A :class:`DriftRun`; its ``findings`` are the rows beyond tolerance or missing a raise.

    Raises:
        ReferenceMissingError: No reference in the folder.
        ReferenceCorruptError: A reference file is unreadable or disagrees with its manifest.
        OSError: The drift file cannot be written.
    """
    from jaxbench.store import new_run_id

    ref = reference if isinstance(reference, Reference) else read_reference(reference)
    device = _resolve(device)
    run_id = run_id or new_run_id()
    renv = ref.manifest.env
    common = {
        "run_id": run_id,
        "checked_at": _now(),
        "env": row_env(env_mod.collect(device)),
        "reference": ReferenceInfo(
            path=str(ref.folder),
            created_at=ref.manifest.created_at,
            jax=renv.get("jax"),
            jaxlib=renv.get("jaxlib"),
            backend=renv.get("backend"),
            device_kind=renv.get("device_kind"),
        ),
    }
    rows = [row for loaded in ref.sets for row in check_set(loaded, device, common)]
    path = Path(out_dir) / f"{DRIFT_FILE_PREFIX}{run_id}.jsonl"
    write_jsonl(path, rows)
    return DriftRun(path, rows, ref, _notes(ref))
