"""The record table: a JAX column where versions differ, no column that is n/a everywhere.

The comparison tables: one model per table, the terminal's columns a subset of the report's,
each cell the same text in both."""

from __future__ import annotations

import pytest
from analysis_data import record, write
from rich.console import Console

from jaxbench.analysis import compare_versions, load_results, report_tables
from jaxbench.analysis import markdown as md
from jaxbench.analysis.text_table import Column, TextTable
from jaxbench.store import Record
from jaxbench.tables import comparison_table, nothing_measured, records_table, rich_table


def _record(jax="0.12.0.1", kind="cpu", peak=None):
    return Record(run_id="r", benchmark="train_step", params={"size": "tiny", "dtype": "bfloat16"},
                  status="ok", samples_s=[1e-3, 2e-3], flops=1e9, device_peak_bytes=peak,
                  env={"jax": jax, "device_kind": kind})  # fmt: skip


def test_nothing_measured_only_where_every_record_is_skipped():
    skipped = _record().model_copy(update={"status": "skipped", "error": "no tpu"})
    assert nothing_measured([]) is None
    assert nothing_measured([_record(), skipped]) is None  # some measured: the skip is a row
    assert nothing_measured([skipped.model_copy(update={"status": "failed"}), skipped]) is None
    assert nothing_measured([skipped, skipped]) == (
        "nothing was measured: none of the 2 case(s) is ok (2 skipped); the first: no tpu"
    )
    recompiled = skipped.model_copy(update={"status": "recompiled", "error": "shape changed"})
    assert nothing_measured([recompiled, skipped]) == (  # a step that never reached steady state
        "nothing was measured: none of the 2 case(s) is ok (1 recompiled, 1 skipped); the first: "
        "shape changed"
    )


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
    assert [str(c) for c in table.columns[1]._cells] == ["0.11.2", "0.12.0.1"]


def test_a_case_under_two_conditions_is_two_rows_told_apart_by_a_condition_column(tmp_path):
    for version in ("0.11.2", "0.12.0.1"):
        for p, flags in enumerate(("--a", "--a", "--b", "--b")):
            env = {"env_vars": {"XLA_FLAGS": flags}}
            rec = record(version, [1e-3] * 5, run_id=f"{version}-{p}", env=env)
            write(tmp_path / f"{version}-{p}.jsonl", [rec])
    result = compare_versions(load_results(tmp_path)[0], "0.11.2", "0.12.0.1")
    table = comparison_table(result)
    assert _headers(table)[:3] == ["metric", "case", "condition"]
    steady = [str(c) for c, m in zip(table.columns[2]._cells, table.columns[0]._cells,
                                     strict=True) if str(m) == "steady state"]  # fmt: skip
    assert len(steady) == 2 and len(set(steady)) == 2
    assert "never pooled" in table.caption


def _compared(tmp_path, slow=1.0):
    for version, scale in (("0.11.2", 1.0), ("0.12.0.1", slow)):
        for p in range(3):
            rec = record(version, [scale * (1e-3 + 1e-5 * p)] * 5, run_id=f"{version}-{p}",
                         compile_s=0.5 + 0.01 * p)  # fmt: skip
            write(tmp_path / f"{version}-{p}.jsonl", [rec])
    return compare_versions(load_results(tmp_path)[0], "0.11.2", "0.12.0.1")


def test_the_terminal_and_the_report_show_one_comparison_cell_for_cell(tmp_path):
    result = _compared(tmp_path, slow=1.5)
    full = report_tables.comparison_table(result.table, versions=False, verdict=True)
    compact = report_tables.comparison_table(result.table, compact=True)
    assert set(compact.headers) < {"metric", *full.headers}
    for header in compact.headers:
        if header != "metric":
            assert compact.column(header) == full.column(header), header
    assert compact.column("metric") == ["steady state", "compile time"]
    rendered = md.table(full)
    for cell in full.column("ratio [CI]"):
        assert f" {cell} |" in rendered  # the Markdown holds the very same text
    assert "|:--" in rendered and "--:|" in rendered  # names left, figures right
    terminal = Console(width=250, record=True)
    terminal.print(comparison_table(result))
    text = terminal.export_text()
    assert compact.column("ratio [CI]")[0] in text and "slower" in text


def test_rich_cells_are_text_never_markup_and_verdicts_are_coloured():
    cells = {Column("case"): ["w x=[bold]"], Column("verdict", verdict=True): ["slower"]}
    model = TextTable.of(cells, title="t", notes=["one", "two"])
    table = rich_table(model)
    assert table.caption == "one; two" and table.title == "t"
    (case,), (verdict,) = (c._cells for c in table.columns)
    assert case.plain == "w x=[bold]" and str(verdict.style) == "bold red"
    assert md.table(model).endswith("_one; two_") and md.table(model).startswith("**t**")


def test_a_row_must_fill_every_column():
    with pytest.raises(ValueError, match="2 columns"):
        TextTable((Column("a"), Column("b")), (("only one",),))


def test_a_case_has_one_spelling_the_label_its_records_carry():
    from jaxbench.cases import Case, select_cases
    from jaxbench.store import case_label

    params = {"wrt": "input", "strategy": "vmap_jvp", "k": 8, "size": "tiny", "dtype": "float32"}
    case = Case("forward", params)
    assert case.label == "forward/vmap_jvp dtype=float32 k=8 size=tiny strategy=vmap_jvp wrt=input"
    assert case.label == case_label("forward/vmap_jvp", params)  # as a record of it is labelled
    for c in select_cases(["train_step", "forward"]):
        name = "train_step" if c.workload == "train_step" else f"forward/{c.params['strategy']}"
        assert c.label.split()[0] == name


def test_the_commands_print_text_as_it_is_never_as_markup(capsys):
    """An error's `[/x]` would end a print with MarkupError and `[n, 4]` would be dropped as a
    style: the commands' consoles read no markup, and a label's style is given as a style."""
    from jaxbench.cli.options import console, say

    console.print("shape [n, 4] and [/x] tag")
    say("warning:", "bad [/x] and [bold]")
    table = records_table([_record(), _record().model_copy(update={"status": "failed"})], "t")
    status = next(c for c in table.columns if c.header == "status")._cells
    assert [(c.plain, str(c.style)) for c in status] == [("ok", ""), ("failed", "yellow")]
    out, err = capsys.readouterr()
    assert "shape [n, 4] and [/x] tag" in out
    assert err.strip() == "warning: bad [/x] and [bold]"
