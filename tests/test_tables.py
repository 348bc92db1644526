"""The record table: a JAX column where versions differ, no column that is n/a everywhere."""

from __future__ import annotations

from analysis_data import record, write

from jaxbench.analysis import compare_versions, load_results
from jaxbench.store import Record
from jaxbench.tables import comparison_table, records_table


def _record(jax="0.12.0.1", kind="cpu", peak=None):
    return Record(run_id="r", benchmark="train_step", params={"size": "tiny", "dtype": "bfloat16"},
                  status="ok", samples_s=[1e-3, 2e-3], flops=1e9, device_peak_bytes=peak,
                  env={"jax": jax, "device_kind": kind})  # fmt: skip


def _headers(table):
    return [c.header for c in table.columns]


def test_columns_that_are_n_a_for_every_record_are_left_out_and_said_once():
    table = records_table([_record(), _record()], "cpu")
    assert "MFU" not in _headers(table) and "device peak" not in _headers(table)
    assert table.caption == "MFU and device peak: n/a for every record here, left out"
    gpu = records_table([_record(), _record(kind="NVIDIA H200", peak=2**30)], "mixed")
    assert {"MFU", "device peak"} <= set(_headers(gpu)) and gpu.caption is None


def test_records_of_two_jax_versions_get_a_jax_column():
    assert "jax" not in _headers(records_table([_record(), _record()], "one version"))
    table = records_table([_record("0.11.2"), _record("0.12.0.1")], "sweep")
    assert _headers(table)[:3] == ["benchmark", "jax", "params"]
    assert table.columns[1]._cells == ["0.11.2", "0.12.0.1"]


def test_a_case_under_two_conditions_is_two_rows_told_apart_by_a_condition_column(tmp_path):
    for version in ("0.11.2", "0.12.0.1"):
        for p, flags in enumerate(("--a", "--a", "--b", "--b")):
            env = {"env_vars": {"XLA_FLAGS": flags}}
            rec = record(version, [1e-3] * 5, run_id=f"{version}-{p}", env=env)
            write(tmp_path / f"{version}-{p}.jsonl", [rec])
    result = compare_versions(load_results(tmp_path)[0], "0.11.2", "0.12.0.1")
    table = comparison_table(result)
    assert _headers(table)[:3] == ["metric", "case", "condition"]
    steady = [c for c, m in zip(table.columns[2]._cells, table.columns[0]._cells, strict=True)
              if m == "steady_state"]  # fmt: skip
    assert len(steady) == 2 and len(set(steady)) == 2
    assert "never pooled" in table.caption
