"""The ``gsparse tune`` and ``gsparse db`` commands."""

from __future__ import annotations

import json

import pytest
import torch

from gsparse import cli
from gsparse.kernels import spmm
from gsparse.target import H100
from gsparse.tune import select
from gsparse.tune.database import TuningDatabase, TuningKey

from graphs import named_graph


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPARSE_TUNING_DB", str(tmp_path / "default.sqlite"))
    select.use_database(None)
    yield
    select.use_database(None)
    select.set_policy("model")


def _key(operator: str) -> TuningKey:
    return TuningKey(target="NVIDIA H100|sm_90|132", operator=operator, graph="abc123", feature_shape="[32]",
                     dtype="float32", codegen=select.CODEGEN_VERSION)


def _fill(path) -> None:
    with TuningDatabase(path) as database:
        database.commit_sample(_key("spmm:copy_lhs.sum"), spmm.OnePass(rows_per_block=4), times_ms=(0.2, 0.3))
        database.commit_sample(_key("sddmm:dot"), spmm.OnePass(rows_per_block=8), times_ms=(0.1,))


def test_db_shows_exports_imports_and_clears(tmp_path, capsys):
    source, copy = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _fill(source)
    assert cli.main(["db", "show", "--db", str(source), "--operator", "spmm"]) == 0
    shown = capsys.readouterr().out
    assert "spmm:copy_lhs.sum float32 shape [32]" in shown and "0.25 ms" in shown and "1 records" in shown
    exported = tmp_path / "records.json"
    assert cli.main(["db", "export", str(exported), "--db", str(source)]) == 0
    assert json.loads(exported.read_text())["best"]
    assert cli.main(["db", "import", str(exported), "--db", str(copy)]) == 0
    assert "2 best records changed, 2 samples added" in capsys.readouterr().out
    with TuningDatabase(copy) as database:
        assert database.get_best(_key("spmm:copy_lhs.sum")).schedule_json == spmm.OnePass(rows_per_block=4).to_json()
    assert cli.main(["db", "clear", "--db", str(copy), "--operator", "sddmm"]) == 0
    assert "cleared 1 records and 1 samples" in capsys.readouterr().out
    with TuningDatabase(copy) as database:
        assert [r.key.operator for r in database.records()] == ["spmm:copy_lhs.sum"]


def test_db_reports_a_missing_database_and_bad_arguments(tmp_path, capsys):
    assert cli.main(["db", "show", "--db", str(tmp_path / "none.sqlite")]) == 0
    assert "no tuning database at" in capsys.readouterr().out
    assert cli.main(["db", "export", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "db export needs a JSON file argument" in capsys.readouterr().err
    assert cli.main(["db", "import", str(tmp_path / "missing.json")]) == 2
    assert "no file" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    assert cli.main(["db", "import", str(tmp_path / "bad.json"), "--db", str(tmp_path / "c.sqlite")]) == 2
    assert "not a gsparse tuning export" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--cases", "spmm:copy_lhs:prod"], "--cases: unknown ['spmm:copy_lhs:prod']"),
    (["--features", "32,x"], "--features must be comma-separated positive integers, got '32,x'"),
    (["--features", "0"], "--features must be positive, got [0]"),
    (["--dtypes", "float64"], "--dtypes: 'float64' is not one of float32, float16, bfloat16"),
    (["--cases", ","], "--cases needs at least one value"),
])
def test_tune_refuses_bad_arguments_before_anything_runs(argv, message, capsys):
    assert cli.main(["tune", "cora", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_database_a_process_uses_can_be_named(tmp_path):
    named = tmp_path / "named.sqlite"
    assert select.database_path() == tmp_path / "default.sqlite"
    select.use_database(named)
    assert select.database_path() == named
    g = named_graph("random")
    x = torch.randn(g.num_src, 32)
    task = spmm.task_for(g, "copy_lhs", "sum", x, None, (32,))
    assert select.record_of("spmm", g, task, H100) is None  # no file yet
    with TuningDatabase(named) as database:
        database.commit_sample(select.tuning_key("spmm", g, task, H100), spmm.OnePass(rows_per_block=2),
                               times_ms=(0.5,))
    select.use_database(named)
    assert select.record_of("spmm", g, task, H100).time_ms == 0.5


@pytest.mark.gpu
def test_tune_records_what_later_calls_run(tmp_path, capsys):
    named = tmp_path / "tuned.sqlite"
    assert cli.main(["tune", "cora", "--cases", "spmm:copy_lhs:sum", "--features", "16", "--db", str(named)]) == 0
    out = capsys.readouterr().out
    assert "spmm:copy_lhs:sum F=16 float32:" in out and "tuned in" in out
    with TuningDatabase(named) as database:
        [record] = database.records()
    assert record.key.operator.startswith("spmm:copy_lhs.sum") and record.time_ms > 0
