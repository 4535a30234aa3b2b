"""The tuning database: records, round trips, several writers at once, bad files."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest
from .landscapes import Other, Toy

from gsparse.tune import TuningDatabase, TuningDatabaseWarning, TuningKey, default_database_path
from gsparse.tune.database import SCHEMA_VERSION

KEY = TuningKey("sm_90:132sm:50MB", "u_mul_e_sum", "g-0123", (64,), "float32", "7")
OTHER_KEY = TuningKey("sm_90:132sm:50MB", "u_mul_e_sum", "g-4567", (64,), "float32", "7")


@pytest.fixture
def database(tmp_path):
    with TuningDatabase(tmp_path / "tuning.sqlite") as db:
        yield db


def fill(db: TuningDatabase, n: int = 60) -> None:
    for i in range(n):
        key = KEY if i % 3 else OTHER_KEY
        if i % 7 == 0:
            db.commit_sample(key, Toy(i), error=f"CompileError: case {i}")
        else:
            db.commit_sample(key, Toy(i, i % 5), times_ms=[1 + (i * 37 % 11) / 10, 0.1 * i + 1 / 3],
                             features=[i / 3, -i, 1e-300, 12345.6789])
    db.commit_sample(KEY, Other(2, 16), times_ms=[0.01])


def test_a_key_names_its_fields_and_stores_shapes_as_json():
    assert KEY.feature_shape == "[64]"
    assert TuningKey("t", "o", "g", (4, 100), "bfloat16", "1").feature_shape == "[4, 100]"
    with pytest.raises(TypeError, match="TuningKey.graph must be a non-empty string"):
        TuningKey("t", "o", "", "[1]", "float32", "1")


def test_the_best_record_is_the_fastest_successful_sample(database):
    assert database.get_best(KEY) is None
    assert database.commit_sample(KEY, Toy(1), times_ms=[2.0, 3.0, 9.0])
    assert not database.commit_sample(KEY, Toy(2), times_ms=[3.5])
    assert not database.commit_sample(KEY, Toy(3), error="LaunchError: too many resources")
    assert not database.commit_sample(KEY, Toy(4), times_ms=[1.0, 5.0])  # median 3.0 is no better
    assert database.commit_sample(KEY, Toy(5), times_ms=[1.0, 2.0])
    best = database.get_best(KEY)
    assert (best.schedule([Toy]), best.time_ms) == (Toy(5), 1.5)
    assert database.get_best(OTHER_KEY) is None
    samples = database.samples(KEY)
    assert [s.schedule([Toy]) for s in samples] == [Toy(1), Toy(2), Toy(3), Toy(4), Toy(5)]
    assert samples[2].error == "LaunchError: too many resources" and samples[2].times_ms == ()
    assert samples[0].times_ms == (2.0, 3.0, 9.0) and samples[0].time_ms == 3.0


def test_a_commit_needs_times_or_an_error_not_both(database):
    with pytest.raises(ValueError, match="exactly one of times_ms and error"):
        database.commit_sample(KEY, Toy(1))
    with pytest.raises(ValueError, match="exactly one of times_ms and error"):
        database.commit_sample(KEY, Toy(1), times_ms=[1.0], error="x")
    with pytest.raises(ValueError, match="finite and > 0"):
        database.commit_sample(KEY, Toy(1), times_ms=[float("nan")])
    with pytest.raises(TypeError, match="frozen dataclass"):
        database.commit_sample(KEY, {"a": 1}, times_ms=[1.0])
    assert database.samples() == []


def test_a_confirmation_replaces_the_best_record_even_with_a_slower_time(database):
    database.commit_sample(KEY, Toy(1), times_ms=[0.9])  # timed apart, and lucky
    database.commit_sample(KEY, Toy(2), times_ms=[1.0])
    database.commit_sample(OTHER_KEY, Toy(1), times_ms=[0.5])
    database.commit_confirmation(KEY, [(Toy(1), [1.1, 1.2, 1.1]), (Toy(2), [1.0, 1.05, 0.95])])
    best = database.get_best(KEY)
    assert (best.schedule([Toy]), best.time_ms) == (Toy(2), 1.0)
    assert database.get_best(OTHER_KEY).time_ms == 0.5
    assert [s.times_ms for s in database.samples(KEY)][2:] == [(1.1, 1.2, 1.1), (1.0, 1.05, 0.95)]


def test_a_confirmation_is_checked_before_anything_is_written(database):
    with pytest.raises(ValueError, match="at least one measured schedule"):
        database.commit_confirmation(KEY, [])
    with pytest.raises(ValueError, match=r"finite and > 0 and not empty, got \(\) for Toy"):
        database.commit_confirmation(KEY, [(Toy(1), [1.0]), (Toy(2), [])])
    with pytest.raises(TypeError, match="frozen dataclass"):
        database.commit_confirmation(KEY, [({"a": 1}, [1.0])])
    assert database.samples() == [] and database.get_best(KEY) is None


def test_samples_records_and_clear_filter_by_key_fields(database):
    fill(database)
    assert len(database.samples()) == 61
    assert len(database.samples(KEY)) == 41
    assert len(database.samples(graph="g-4567")) == 20
    assert len(database.records()) == 2
    assert [r.key for r in database.records(operator="u_mul_e_sum")] == [KEY, OTHER_KEY]
    best = database.get_best(KEY)
    assert best.schedule([Toy, Other]) == Other(2, 16)
    with pytest.raises(KeyError, match="schedule class 'Other'"):
        best.schedule([Toy])
    with pytest.raises(ValueError, match=r"unknown key fields \['shape'\]"):
        database.samples(shape="[64]")
    assert database.clear(graph="g-4567") == (1, 20)
    assert database.clear() == (1, 41)
    assert database.records() == [] and database.samples() == []


def test_export_then_import_into_an_empty_database_is_exact(database, tmp_path):
    fill(database)
    text = database.export_json()
    with TuningDatabase(tmp_path / "copy.sqlite") as copy:
        assert copy.import_json(text) == (2, 61)
        assert copy.export_json() == text
        assert copy.samples() == database.samples()
        assert copy.records() == database.records()
        assert copy.import_json(text) == (0, 0)  # nothing new the second time


def test_import_keeps_the_faster_best_record(database, tmp_path):
    database.commit_sample(KEY, Toy(1), times_ms=[2.0])
    with TuningDatabase(tmp_path / "other.sqlite") as other:
        other.commit_sample(KEY, Toy(2), times_ms=[1.0])
        database.import_json(other.export_json())
    assert database.get_best(KEY).schedule([Toy]) == Toy(2)
    with pytest.raises(ValueError, match="not a gsparse tuning export"):
        database.import_json(json.dumps({"best": []}))
    with pytest.raises(ValueError, match="schema version 99"):
        database.import_json(json.dumps({"format": "gsparse-tuning-database", "version": 99}))


def test_the_location_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GSPARSE_TUNING_DB", str(tmp_path / "mine.sqlite"))
    assert default_database_path() == tmp_path / "mine.sqlite"
    monkeypatch.delenv("GSPARSE_TUNING_DB")
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(tmp_path / "cache"))
    assert default_database_path() == tmp_path / "cache" / "tuning.sqlite"
    with TuningDatabase() as db:
        db.commit_sample(KEY, Toy(1), times_ms=[1.0])
    assert (tmp_path / "cache" / "tuning.sqlite").is_file()


def test_the_file_is_in_wal_mode(database):
    assert sqlite3.connect(database.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def processes():
    """fork where there is one (fast: no re-import), else spawn."""
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def _writer(path: str, worker: int, commits: int, start) -> None:
    with TuningDatabase(path) as db:
        start.wait()  # all writers begin together
        for i in range(commits):
            db.commit_sample(KEY, Toy(worker, i), times_ms=[1.0 + ((worker * 31 + i * 17) % 97) / 10])


def test_several_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    TuningDatabase(path).close()
    context = processes()
    start = context.Barrier(4)
    workers = [context.Process(target=_writer, args=(path, w, 50, start)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=120)
    assert [p.exitcode for p in workers] == [0] * 4
    with TuningDatabase(path) as db:
        samples = db.samples(KEY)
        stored = [s.schedule([Toy]) for s in samples]
        assert len(stored) == 200 and set(stored) == {Toy(w, i) for w in range(4) for i in range(50)}
        assert db.get_best(KEY).time_ms == min(s.time_ms for s in samples) == 1.0


def _reopen(path: Path) -> TuningDatabase:
    with pytest.warns(TuningDatabaseWarning) as caught:
        db = TuningDatabase(path)
    assert len(caught) == 1
    return db


def _asides(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.iterdir() if p.name.startswith(path.name + ".") and "-" in p.name
                  and not p.name.endswith(("-wal", "-shm")))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "zeroed_page"])
def test_a_corrupt_file_is_moved_aside_and_rebuilt(tmp_path, damage):
    path = tmp_path / "tuning.sqlite"
    with TuningDatabase(path) as db:
        fill(db, 300)
    data = path.read_bytes()
    assert len(data) > 4 * 4096
    if damage == "garbage":
        data = os.urandom(len(data))
    elif damage == "truncated":
        data = data[: len(data) // 2 + 100]
    else:
        data = data[:4096] + b"\0" * 4096 + data[8192:]
    path.write_bytes(data)
    db = _reopen(path)
    assert db.samples() == [] and db.records() == []
    db.commit_sample(KEY, Toy(1), times_ms=[1.0])
    assert db.get_best(KEY).time_ms == 1.0
    db.close()
    [aside] = _asides(path)
    assert ".corrupt-" in aside.name and aside.read_bytes() == data


def test_a_file_of_an_old_schema_version_is_moved_aside(tmp_path):
    path = tmp_path / "tuning.sqlite"
    with TuningDatabase(path) as db:
        db.commit_sample(KEY, Toy(1), times_ms=[1.0])
    old = sqlite3.connect(path)
    old.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    old.execute("ALTER TABLE best_v1 RENAME TO best_v0")
    old.commit()
    old.close()
    db = _reopen(path)
    assert db.records() == []
    db.close()
    [aside] = _asides(path)
    assert ".old-" in aside.name
    assert sqlite3.connect(aside).execute("SELECT count(*) FROM best_v0").fetchone()[0] == 1


def test_another_programs_database_is_moved_aside(tmp_path):
    path = tmp_path / "tuning.sqlite"
    foreign = sqlite3.connect(path)
    foreign.execute("CREATE TABLE notes (text TEXT)")
    foreign.commit()
    foreign.close()
    with pytest.warns(TuningDatabaseWarning, match="is not a gsparse tuning database"):
        TuningDatabase(path).close()
    assert len(_asides(path)) == 1


def _crash_after_writing_an_old_schema(path: str) -> None:
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("PRAGMA wal_autocheckpoint=0")
    old.execute("CREATE TABLE best_v0 (schedule TEXT)")
    old.execute("INSERT INTO best_v0 VALUES ('{}')")
    os._exit(0)  # no close: the rows stay in the log, as after a crash


def test_an_old_file_whose_rows_are_still_in_its_log_is_moved_aside_whole(tmp_path):
    path = tmp_path / "tuning.sqlite"
    context = processes()
    writer = context.Process(target=_crash_after_writing_an_old_schema, args=(str(path),))
    writer.start()
    writer.join(timeout=60)
    assert Path(f"{path}-wal").stat().st_size > 0
    db = _reopen(path)
    assert db.records() == [] and db.samples() == []
    db.close()
    [aside] = _asides(path)
    assert sqlite3.connect(aside).execute("SELECT count(*) FROM best_v0").fetchone()[0] == 1


def test_files_moved_aside_in_the_same_second_get_distinct_names(tmp_path):
    path = tmp_path / "tuning.sqlite"
    for _ in range(3):
        path.write_bytes(b"garbage" * 1000)
        _reopen(path).close()
    assert len(_asides(path)) == 3
