"""The store's cache: what a file loaded into, read back while nothing it depends on changed."""

import json
import os
from pathlib import Path

import pytest
from test_store import make_record

from jaxbench.store import StoreFormatError, load, loader, write_jsonl
from jaxbench.store import cache as store_cache


@pytest.fixture
def cache_in(tmp_path, monkeypatch):
    """A cache folder of this test's own (the folder is found once per process: forgotten here)."""

    def use(setting):
        monkeypatch.setenv(store_cache.ENV, str(setting))
        store_cache.folder.cache_clear()
        return setting

    yield use
    store_cache.folder.cache_clear()


@pytest.fixture
def parses(monkeypatch):
    """How many times a JSON Lines file was parsed and validated (not read from the cache)."""
    count = []
    real = loader._read_lines
    monkeypatch.setattr(loader, "_read_lines", lambda *a: count.append(a[1]) or real(*a))
    return count


def view(loaded):
    """What a caller of ``load`` sees: the models, where they came from, and the problems."""
    items = [(i.model.model_dump(), str(i.path), i.line) for i in loaded.items]
    return items, [str(p) for p in loaded.problems], loaded.passed_over


def records_file(path, *run_ids):
    return write_jsonl(path, [make_record(run_id=r) for r in run_ids])


def test_a_second_load_reads_the_cache_and_gives_the_same_items_and_problems(tmp_path, cache_in,
                                                                             parses):  # fmt: skip
    cache_in(tmp_path / "cache")
    run = records_file(tmp_path / "run.jsonl", "r1", "r2")
    run.write_bytes(run.read_bytes() + b'{"kind": "record", "run_id": "r3", "be')  # cut short
    first = load(run)
    second = load(run)
    assert parses == [run]  # the second load parsed nothing
    assert view(second) == view(first)
    assert [r.run_id for r in second.models("record")] == ["r1", "r2"]
    assert "line 3: not JSON (cut short?)" in str(second.problems[0])
    envs = [i.model.env for i in second.items]
    assert envs[0] is envs[1]  # one environment, one model, as the loader made it


def test_items_name_the_path_as_given_this_time(tmp_path, cache_in, monkeypatch, parses):
    cache_in(tmp_path / "cache")
    records_file(tmp_path / "runs" / "run.jsonl", "r1")
    load(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    (item,) = load("runs/run.jsonl").items
    assert len(parses) == 1  # the same file by another path: its entry
    assert str(item.path) == os.path.join("runs", "run.jsonl")


def test_a_file_rewritten_with_the_same_size_and_time_is_read_again(tmp_path, cache_in, parses):
    cache_in(tmp_path / "cache")
    run = records_file(tmp_path / "run.jsonl", "r1")
    load(run)
    before = run.stat()
    run.write_bytes(run.read_bytes().replace(b'"r1"', b'"r9"'))
    os.utime(run, ns=(before.st_atime_ns, before.st_mtime_ns))  # size and mtime as they were
    assert run.stat().st_size == before.st_size
    assert [r.run_id for r in load(run).models("record")] == ["r9"]
    assert len(parses) == 2


def test_other_store_code_or_a_damaged_entry_is_a_miss(tmp_path, cache_in, parses, monkeypatch):
    folder = cache_in(tmp_path / "cache")
    run = records_file(tmp_path / "run.jsonl", "r1")
    load(run)
    monkeypatch.setattr(store_cache, "code_token", lambda: "other code")
    assert [r.run_id for r in load(run).models("record")] == ["r1"]
    (entry,) = folder.iterdir()
    key = entry.read_bytes().split(b"\n", 1)[0]
    assert json.loads(key)["code"] == "other code"  # rewritten by the code that read it
    entry.write_bytes(key + b"\nnot a pickle")
    assert [r.run_id for r in load(run).models("record")] == ["r1"]
    assert len(parses) == 3


def test_strict_loading_of_a_cached_file_with_a_bad_line_still_raises(tmp_path, cache_in):
    cache_in(tmp_path / "cache")
    run = records_file(tmp_path / "run.jsonl", "r1")
    run.write_bytes(run.read_bytes() + b"{oops\n")
    assert len(load(run).problems) == 1
    with pytest.raises(StoreFormatError, match=r"run.jsonl:2: not JSON"):
        load(run, strict=True)


def test_off_writes_nothing(tmp_path, cache_in, parses):
    cache_in("off")
    run = records_file(tmp_path / "run.jsonl", "r1")
    load(run)
    load(run)
    assert len(parses) == 2
    assert store_cache.folder() is None


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("shared", "must be the user's own and writable by nobody else"),
        ("a file", "is not a folder"),
        ("relative", "expected an absolute folder (or off)"),
        ("no parent", "no folder"),
        ("no such user", "home directory"),
    ],
)
def test_a_setting_that_cannot_serve_turns_the_cache_off_with_one_line(
    tmp_path, cache_in, parses, capfd, monkeypatch, kind, why
):
    monkeypatch.chdir(tmp_path)
    settings = {"relative": "cache", "no parent": str(tmp_path / "no" / "cache"),
                "no such user": "~no-such-user-here/cache"}  # fmt: skip
    where = settings.get(kind, str(tmp_path / "cache"))
    if kind == "shared":
        os.mkdir(where)
        os.chmod(where, 0o777)
    elif kind == "a file":
        (tmp_path / "cache").write_text("")
    cache_in(where)
    run = records_file(tmp_path / "run.jsonl", "r1")
    assert [r.run_id for r in load(run).models("record")] == ["r1"]
    load(run)
    assert len(parses) == 2
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith(f"warning: {store_cache.ENV} {where!r}: ") and why in line
    assert line.endswith("loading without the cache")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["run.jsonl", *(["cache"] if kind in ("shared", "a file") else [])]
    )  # nothing made
    if kind == "shared":
        assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize("value", ["off", "OFF", " 0 ", "false", "No", "none"])
def test_off_and_its_usual_spellings_turn_it_off(cache_in, value):
    cache_in(value)
    assert store_cache.folder() is None


def test_a_file_holding_an_asv_result_is_not_cached(tmp_path, cache_in, parses):
    """An asv result's records depend on its folder's benchmarks.json, not only its bytes."""
    folder = cache_in(tmp_path / "cache")
    asv_result = next(Path("results/asv").rglob("*-jax*.json"))
    (tmp_path / "runs").mkdir()
    run = tmp_path / "runs" / "asv.jsonl"
    run.write_text(json.dumps(json.loads(asv_result.read_text())) + "\n")
    (tmp_path / "benchmarks.json").write_text("{broken")
    assert load(run).problems and not load(run).items
    (tmp_path / "benchmarks.json").write_text("{}")
    assert load(run).items and not load(run).problems  # read again, not the cached failure
    assert list(folder.iterdir()) == [] and len(parses) == 4


def test_a_new_folder_is_the_users_alone(tmp_path, cache_in):
    where = cache_in(tmp_path / "cache")
    load(records_file(tmp_path / "run.jsonl", "r1"))
    assert where.stat().st_mode & 0o777 == 0o700
    (entry,) = where.iterdir()
    assert entry.stat().st_mode & 0o077 == 0
