"""The drift kinds: the reference manifest and the drift row (pydantic, no JAX).

A reference folder holds ``reference.json`` (:class:`ReferenceManifest`) and one ``.npz`` per
regression set (inputs and outputs; see :mod:`jaxbench.drift.reference`). A check writes one JSON
Lines file ``drift-<run id>.jsonl`` with one :class:`DriftRow` per (set, output): the outputs of a
valid set one row each, an ``invalid_shape`` set one row named :data:`RAISES_OUTPUT`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DRIFT_FILE_PREFIX",
    "DRIFT_SCHEMA_VERSION",
    "MANIFEST_NAME",
    "RAISES_OUTPUT",
    "ROW_ENV_KEYS",
    "ArrayInfo",
    "DriftRow",
    "ReferenceInfo",
    "ReferenceManifest",
    "SetEntry",
]

#: Version 2: a set's ``params`` and ``reduction_length``, the manifest's ``size`` optional
#: (user workloads); version-1 references still load.
DRIFT_SCHEMA_VERSION = 2
#: Name prefix of the JSON Lines files of ``jaxbench drift`` (:mod:`jaxbench.drift`).
DRIFT_FILE_PREFIX = "drift-"
MANIFEST_NAME = "reference.json"
RAISES_OUTPUT = "raises"
#: Keys of :func:`jaxbench.env.collect` copied into every row (the full env is in the manifest).
ROW_ENV_KEYS = (
    "jax",
    "jaxlib",
    "python",
    "numpy",
    "backend",
    "device_kind",
    "device_count",
    "platform_version",
    "jax_flags",
)


class ArrayInfo(BaseModel):
    """One array of a set's ``.npz``.

    Attributes:
        name: Key in the ``.npz`` without its ``input.``/``output.`` prefix, e.g. ``grad.0.w``.
        shape: Its shape.
        dtype: Its dtype as computed (``bfloat16`` arrays are stored as float32, exactly).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    shape: list[int]
    dtype: str


class SetEntry(BaseModel):
    """One regression set of a reference.

    Attributes:
        workload: One of :func:`jaxbench.drift.sets.families` (``train_step``, ``loop``, ...)
            or a user workload's name (``package.module:factory`` or an entry point's).
        dtype: The workload dtype, ``float32`` or ``bfloat16``; picks the tolerance.
        set: ``standard``, ``single``, ``zeros``, ``boundary`` or ``invalid_shape``.
        file: The ``.npz`` file name, relative to the reference folder.
        inputs: The arrays the outputs are computed from (params, batch, tangents).
        outputs: The reference outputs (none for ``invalid_shape``).
        expect_error: For ``invalid_shape``: the workload's error class that must be raised,
            e.g. ``jaxbench.workloads.mlp.BatchShapeError``; ``None`` otherwise.
        raised: For ``invalid_shape``: what was raised when the reference was saved,
            ``"<type>: <message>"``, or ``None`` if nothing was.
        params: A user workload's factory parameters, from which a check rebuilds its step;
            empty for the built-in families.
        reduction_length: The most terms summed into one element of an output when saved
            (what the tolerance was derived for); ``None`` in version-1 references. A check
            takes it from the workload's code, not from here.
    """

    model_config = ConfigDict(extra="forbid")

    workload: str
    dtype: str
    set: str
    file: str
    inputs: list[ArrayInfo]
    outputs: list[ArrayInfo] = Field(default_factory=list)
    expect_error: str | None = None
    raised: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    reduction_length: int | None = None


class ReferenceManifest(BaseModel):
    """``reference.json``: what a reference holds and where it was computed.

    Attributes:
        kind: Always ``jaxbench-drift-reference``; tells this file from other JSON.
        schema_version: :data:`DRIFT_SCHEMA_VERSION`.
        created_at: ISO-8601 UTC time of saving.
        size: The MLP size of the built-in sets (``tiny``); ``None`` for a user workload's.
        env: :func:`jaxbench.env.collect` of the generating process: ``jax``, ``jaxlib``,
            ``backend``, ``device_kind``, ``platform_version``, host, git commit, ...
        tolerances: ``{dtype: {"rtol", "atol"}}`` in force when saved, at 64 terms. A check
            applies the tolerances of its own code (:func:`jaxbench.drift.tolerance.tolerance`
            of each set's dtype and its workload's reduction length), so an edited manifest
            cannot loosen it; rows record the ones applied.
        sets: One :class:`SetEntry` per regression set.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["jaxbench-drift-reference"] = "jaxbench-drift-reference"
    schema_version: Literal[1, 2] = DRIFT_SCHEMA_VERSION
    created_at: str
    size: str | None
    env: dict[str, Any]
    tolerances: dict[str, dict[str, float]]
    sets: list[SetEntry]


class ReferenceInfo(BaseModel):
    """Where the reference of a drift row was computed (from its manifest).

    Attributes:
        path: The reference folder as given to the check.
        created_at: When the reference was saved (ISO-8601 UTC).
        jax: JAX version of the reference.
        jaxlib: jaxlib version of the reference.
        backend: Backend of the reference, e.g. ``cpu``.
        device_kind: Device kind of the reference, e.g. ``cpu`` or ``NVIDIA H200``.
    """

    model_config = ConfigDict(extra="forbid")

    path: str
    created_at: str
    jax: str | None
    jaxlib: str | None
    backend: str | None
    device_kind: str | None


class DriftRow(BaseModel):
    """One line of ``drift-<run id>.jsonl``: one output of one regression set, checked.

    Errors are absolute in the output's own units (a loss, a gradient, a JVP); ``None`` where no
    comparison was possible (the ``finding`` says why). For ``invalid_shape`` the row's
    ``within_tolerance`` is whether the workload's own error was raised.

    Attributes:
        kind: Always ``jaxbench-drift``; tells these lines from result records.
        schema_version: :data:`DRIFT_SCHEMA_VERSION`.
        run_id: Shared by the rows of one check.
        checked_at: ISO-8601 UTC time of the check.
        workload: A built-in family (``train_step``, ``forward``, ``loop``, ``scatter``,
            ``transformer``) or a user workload's name.
        dtype: Workload dtype; with the workload's reduction length, picks ``rtol`` and ``atol``.
        set: Regression set name (a user workload's: ``standard`` and its parameters).
        output: Output name (``loss``, ``grad.0.w``, ``params.1.b``, ``primal``, ``jvp``,
            ``linearize``), or :data:`RAISES_OUTPUT` for ``invalid_shape``.
        shape: Shape of the reference output (``None`` for ``raises``).
        output_dtype: Dtype of the output computed now (``None`` if not computed).
        max_abs_err: ``max |current - reference|``.
        max_rel_err: ``max |current - reference| / |reference|`` over non-zero reference elements.
        worst_ratio: Largest error over its bound ``atol * atol_scale + rtol * |reference|``.
        rtol: Relative tolerance applied.
        atol: Absolute tolerance applied, in units of ``atol_scale``.
        atol_scale: ``max(1, max |reference|)``.
        within_tolerance: Every element within the bound and the output's dtype unchanged (for
            ``raises``: the expected error was raised).
        reference_value: The reference value of a scalar output (the loss).
        current_value: The value computed now of a scalar output.
        raised: ``invalid_shape`` only: whether anything was raised.
        error_type: ``invalid_shape`` only: the raised exception's qualified class name.
        error_message: ``invalid_shape`` only: its message.
        expected_error: ``invalid_shape`` only: the class that must be raised.
        finding: Why this row is a finding; ``None`` when it is within tolerance.
        tolerance_reason: Why this output has the tolerance it has, or was left out
            (``excluded: ...``), where the workload states it (a user step's
            ``Step.tolerances``); ``None`` for the derived tolerance.
        env: :data:`ROW_ENV_KEYS` of :func:`jaxbench.env.collect` of the check, plus ``os``,
            ``hostname`` and ``git_commit``.
        reference: Where the reference was computed (:class:`ReferenceInfo`).
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["jaxbench-drift"] = "jaxbench-drift"
    schema_version: Literal[1, 2] = DRIFT_SCHEMA_VERSION
    run_id: str
    checked_at: str
    workload: str
    dtype: str
    set: str
    output: str
    shape: list[int] | None = None
    output_dtype: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    worst_ratio: float | None = None
    rtol: float
    atol: float
    atol_scale: float = 1.0
    within_tolerance: bool
    reference_value: float | None = None
    current_value: float | None = None
    raised: bool | None = None
    error_type: str | None = None
    error_message: str | None = None
    expected_error: str | None = None
    finding: str | None = None
    tolerance_reason: str | None = None
    env: dict[str, Any]
    reference: ReferenceInfo
