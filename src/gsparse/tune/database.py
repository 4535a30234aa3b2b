"""The tuning database: the best schedule of each tuning key, and every measured sample.

One SQLite file in WAL mode, shared by processes: readers never wait, each write is one
short ``BEGIN IMMEDIATE`` transaction that waits for the others (busy timeout) and is
retried when SQLite still reports the file locked.

Tables are versioned by name (``best_v1``, ``samples_v1``) and the file carries an
application id and ``user_version``: a file of another schema version, of another
program, or that SQLite cannot read is moved aside (renamed with a ``.corrupt-<time>`` or
``.old-<time>`` suffix) with a warning, and an empty database takes its place.

Location: ``$GSPARSE_TUNING_DB`` when set, else ``tuning.sqlite`` in
``gsparse.runtime.default_cache_dir()``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import random
import sqlite3
import statistics
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..runtime import default_cache_dir
from .interfaces import check_schedule

SCHEMA_VERSION = 1
"""The version of the tables' layout, part of their names (``best_v1``, ``samples_v1``)."""
_APPLICATION_ID = 0x67735455  # "gsTU"
_BEST = f"best_v{SCHEMA_VERSION}"
_SAMPLES = f"samples_v{SCHEMA_VERSION}"
_EXPORT_FORMAT = "gsparse-tuning-database"
_KEY_FIELDS = ("target", "operator", "graph", "feature_shape", "dtype", "codegen")
_KEY_COLUMNS = ", ".join(f"{f} TEXT NOT NULL" for f in _KEY_FIELDS)
_SCHEMA = (
    (f"CREATE TABLE {_BEST} ({_KEY_COLUMNS}, schedule_class TEXT NOT NULL, schedule TEXT NOT NULL, "
     f"time_ms REAL NOT NULL, updated REAL NOT NULL, PRIMARY KEY ({', '.join(_KEY_FIELDS)}))"),
    (f"CREATE TABLE {_SAMPLES} (id INTEGER PRIMARY KEY AUTOINCREMENT, {_KEY_COLUMNS}, "
     f"schedule_class TEXT NOT NULL, schedule TEXT NOT NULL, times_ms TEXT NOT NULL, error TEXT, "
     f"features BLOB, created REAL NOT NULL)"),
    f"CREATE INDEX {_SAMPLES}_key ON {_SAMPLES} ({', '.join(_KEY_FIELDS)})",
)

T = TypeVar("T")


class TuningDatabaseWarning(UserWarning):
    """A tuning database file was unusable and has been moved aside."""


def default_database_path() -> Path:
    """``$GSPARSE_TUNING_DB``, else ``tuning.sqlite`` in the cache directory (read at each call)."""
    if override := os.environ.get("GSPARSE_TUNING_DB"):
        return Path(override).expanduser()
    return default_cache_dir() / "tuning.sqlite"


@dataclasses.dataclass(frozen=True)
class TuningKey:
    """What a tuning record is for. Every field is a string; ``feature_shape`` may be given
    as a sequence of ints and is then stored as its JSON (``(4, 64)`` -> ``"[4, 64]"``).

    Attributes:
        target: the GPU (from the Target: architecture, SMs, memory).
        operator: the operator signature (operator, message, reducer, operand targets).
        graph: the graph signature (a hash of its structure).
        feature_shape: the feature shape.
        dtype: the feature dtype.
        codegen: the code generator's version: records of another version never match.
    """

    target: str
    operator: str
    graph: str
    feature_shape: str
    dtype: str
    codegen: str

    def __post_init__(self) -> None:
        if not isinstance(self.feature_shape, str) and isinstance(self.feature_shape, Sequence):
            object.__setattr__(self, "feature_shape", json.dumps([int(d) for d in self.feature_shape]))
        for name in _KEY_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise TypeError(f"TuningKey.{name} must be a non-empty string, got {value!r}")

    def values(self) -> tuple[str, ...]:
        """The fields in the database's key order."""
        return tuple(getattr(self, f) for f in _KEY_FIELDS)


def decode_schedule(class_name: str, text: str, classes: Iterable[type]) -> Any:
    """The schedule of class ``class_name`` (one of ``classes``) written as ``text``."""
    for cls in classes:
        if cls.__name__ == class_name:
            return cls.from_json(text)
    names = sorted({c.__name__ for c in classes})
    raise KeyError(f"a record names schedule class {class_name!r}, which is none of {names}")


@dataclasses.dataclass(frozen=True)
class BestRecord:
    """The fastest schedule measured for ``key``: its median time and when it was set."""

    key: TuningKey
    schedule_class: str
    schedule_json: str
    time_ms: float
    updated: float

    def schedule(self, classes: Iterable[type]) -> Any:
        """The schedule, read back as the one of ``classes`` it names."""
        return decode_schedule(self.schedule_class, self.schedule_json, classes)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One measurement: the repeated times, or the error, and the features if given."""

    key: TuningKey
    schedule_class: str
    schedule_json: str
    times_ms: tuple[float, ...]
    error: str | None
    features: tuple[float, ...] | None
    created: float

    @property
    def ok(self) -> bool:
        """Whether the measurement succeeded (no ``error``)."""
        return self.error is None

    @property
    def time_ms(self) -> float:
        """Median of the times; ``inf`` for a failure."""
        return statistics.median(self.times_ms) if self.ok else math.inf

    def schedule(self, classes: Iterable[type]) -> Any:
        """The schedule, read back as the one of ``classes`` it names."""
        return decode_schedule(self.schedule_class, self.schedule_json, classes)


class TuningDatabase:
    """Tuning records in one SQLite file (see the module doc).

    Args:
        path: the file; None for :func:`default_database_path`.
        timeout_s: how long a write waits for other writers before SQLite gives up.
        retries: how many times a write SQLite still reports locked is tried again.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 timeout_s: float = 30.0, retries: int = 8) -> None:
        self.path = Path(path) if path is not None else default_database_path()
        self.timeout_s = timeout_s
        self.retries = retries
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = -1
        self._conn()  # open (and repair) now, so a bad file is reported at open

    def __repr__(self) -> str:
        return f"TuningDatabase({str(self.path)!r})"

    def __enter__(self) -> TuningDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this process's connection (the next use opens it again)."""
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    # -- reading --------------------------------------------------------------------------

    def get_best(self, key: TuningKey) -> BestRecord | None:
        """The best record of ``key``, or None."""
        rows = self._read(f"SELECT * FROM {_BEST} WHERE {_where(_KEY_FIELDS)}", key.values())
        return _best_record(rows[0]) if rows else None

    def records(self, key: TuningKey | None = None, **fields: str) -> list[BestRecord]:
        """Best records matching ``key`` or the given key ``fields`` (all when none), by key."""
        names, values = _filter(key, fields)
        sql = f"SELECT * FROM {_BEST}" + (f" WHERE {_where(names)}" if names else "")
        return [_best_record(r) for r in self._read(sql + f" ORDER BY {', '.join(_KEY_FIELDS)}", values)]

    def samples(self, key: TuningKey | None = None, **fields: str) -> list[Sample]:
        """Samples matching ``key`` or the given key ``fields`` (all when none), oldest first."""
        names, values = _filter(key, fields)
        sql = f"SELECT * FROM {_SAMPLES}" + (f" WHERE {_where(names)}" if names else "")
        return [_sample(r) for r in self._read(sql + " ORDER BY id", values)]

    # -- writing --------------------------------------------------------------------------

    def commit_sample(self, key: TuningKey, schedule: object, *, times_ms: Sequence[float] = (),
                      error: str | None = None, features: Sequence[float] | None = None) -> bool:
        """Record one measurement of ``schedule`` for ``key``; True if it became the best.

        Exactly one of ``times_ms`` (finite, > 0) and ``error`` is given. The best record of
        ``key`` is replaced when the median of ``times_ms`` is below its time.
        """
        check_schedule(schedule)
        times = tuple(float(t) for t in times_ms)
        if (error is None) == (not times):
            raise ValueError(f"give exactly one of times_ms and error; got times_ms={times} "
                             f"and error={error!r}")
        if error is not None and not isinstance(error, str):
            raise TypeError(f"error must be a string, got {type(error).__name__}")
        if not all(math.isfinite(t) and t > 0 for t in times):
            raise ValueError(f"times_ms must be finite and > 0, got {times}")
        row = _sample_row(key, schedule)
        feats = _pack(features)
        now = time.time()

        def write(c: sqlite3.Connection) -> bool:
            _insert_sample(c, row, times, error, feats, now)
            return bool(times) and _upsert_best(c, (*row, statistics.median(times), now))

        return self._write(write)

    def commit_confirmation(self, key: TuningKey, measured: Sequence[tuple[object, Sequence[float]]]) -> None:
        """Record finalists measured side by side (``(schedule, times_ms)`` each) as samples,
        and make the one with the lowest median the best record of ``key`` whatever time it
        holds: times taken together outrank those taken apart (see :func:`gsparse.tune.tune`)."""
        if not measured:
            raise ValueError("a confirmation needs at least one measured schedule, got none")
        rows = []
        for schedule, times_ms in measured:
            check_schedule(schedule)
            times = tuple(float(t) for t in times_ms)
            if not times or not all(math.isfinite(t) and t > 0 for t in times):
                raise ValueError(f"times_ms must be finite and > 0 and not empty, got {times} for {schedule}")
            rows.append((_sample_row(key, schedule), times))
        now = time.time()
        winner, winner_times = min(rows, key=lambda r: statistics.median(r[1]))

        def write(c: sqlite3.Connection) -> None:
            for row, times in rows:
                _insert_sample(c, row, times, None, None, now)
            c.execute(f"DELETE FROM {_BEST} WHERE {_where(_KEY_FIELDS)}", key.values())
            _upsert_best(c, (*winner, statistics.median(winner_times), now))

        self._write(write)

    def clear(self, key: TuningKey | None = None, **fields: str) -> tuple[int, int]:
        """Delete records matching ``key`` or ``fields`` (everything when none).

        Returns (best records, samples) deleted.
        """
        names, values = _filter(key, fields)
        where = f" WHERE {_where(names)}" if names else ""

        def write(c: sqlite3.Connection) -> tuple[int, int]:
            best = c.execute(f"DELETE FROM {_BEST}{where}", values).rowcount
            return best, c.execute(f"DELETE FROM {_SAMPLES}{where}", values).rowcount

        return self._write(write)

    def export_json(self) -> str:
        """Every record as JSON; :meth:`import_json` of it into an empty database is exact."""
        best = [dict(zip(_KEY_FIELDS, r.key.values()), schedule_class=r.schedule_class,
                     schedule=r.schedule_json, time_ms=r.time_ms, updated=r.updated)
                for r in self.records()]
        samples = [dict(zip(_KEY_FIELDS, s.key.values()), schedule_class=s.schedule_class,
                        schedule=s.schedule_json, times_ms=list(s.times_ms), error=s.error,
                        features=None if s.features is None else list(s.features), created=s.created)
                   for s in self.samples()]
        return json.dumps({"format": _EXPORT_FORMAT, "version": SCHEMA_VERSION,
                           "best": best, "samples": samples}, indent=1)

    def import_json(self, text: str) -> tuple[int, int]:
        """Merge records written by :meth:`export_json`; returns (best changed, samples added).

        A best record replaces the one of its key when it is faster (or there is none);
        a sample identical to one already stored is skipped.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != _EXPORT_FORMAT:
            raise ValueError(f"not a gsparse tuning export: expected a JSON object with format "
                             f"{_EXPORT_FORMAT!r}, got {str(data)[:80]!r}")
        if data.get("version") != SCHEMA_VERSION:
            raise ValueError(f"a tuning export of schema version {data.get('version')!r}; "
                             f"this gsparse reads version {SCHEMA_VERSION}")

        def write(c: sqlite3.Connection) -> tuple[int, int]:
            changed = added = 0
            for r in data["best"]:
                row = (*(r[f] for f in _KEY_FIELDS), r["schedule_class"], r["schedule"])
                changed += _upsert_best(c, (*row, float(r["time_ms"]), float(r["updated"])))
            for s in data["samples"]:
                feats = _pack(s["features"])
                row = (*(s[f] for f in _KEY_FIELDS), s["schedule_class"], s["schedule"],
                       json.dumps(s["times_ms"]), s["error"], feats, float(s["created"]))
                same = " AND ".join(f"{c} IS ?" for c in (*_KEY_FIELDS, "schedule_class", "schedule",
                                                          "times_ms", "error", "features", "created"))
                if c.execute(f"SELECT 1 FROM {_SAMPLES} WHERE {same}", row).fetchone() is None:
                    c.execute(f"INSERT INTO {_SAMPLES} ({', '.join(_KEY_FIELDS)}, schedule_class, "
                              f"schedule, times_ms, error, features, created) VALUES ({_marks(12)})", row)
                    added += 1
            return changed, added

        return self._write(write)

    # -- connection -----------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._connection is None or self._pid != os.getpid():  # a forked child opens its own
            self._connection = self._open()
            self._pid = os.getpid()
        return self._connection

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            connection = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None,
                                         check_same_thread=False)
            try:
                problem = _check_or_create(connection)
            except sqlite3.DatabaseError as error:
                problem = ("corrupt", f"cannot be read ({error})")
            if problem is None:
                return connection
            connection.close()
            _move_aside(self.path, *problem)
        raise RuntimeError(f"could not open the tuning database {self.path} after moving bad files aside")

    def _read(self, sql: str, values: Sequence[Any]) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn().execute(sql, tuple(values)).fetchall()

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            connection = self._conn()
            for attempt in range(self.retries + 1):
                try:
                    connection.execute("BEGIN IMMEDIATE")
                    try:
                        result = body(connection)
                        connection.execute("COMMIT")
                        return result
                    except BaseException:
                        if connection.in_transaction:
                            connection.execute("ROLLBACK")
                        raise
                except sqlite3.OperationalError as error:
                    busy = "locked" in str(error) or "busy" in str(error)
                    if not busy or attempt == self.retries:
                        raise
                    time.sleep(random.uniform(0.01, 0.05) * 2 ** min(attempt, 5))
        raise AssertionError("unreachable")


def _check_or_create(connection: sqlite3.Connection) -> tuple[str, str] | None:
    """None when ``connection`` holds this schema (creating it in an empty file), else
    (suffix, reason) for moving the file aside."""
    connection.row_factory = sqlite3.Row
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("BEGIN IMMEDIATE")
    try:
        application = connection.execute("PRAGMA application_id").fetchone()[0]
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables and application == 0 and version == 0:
            for statement in _SCHEMA:
                connection.execute(statement)
            connection.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif application != _APPLICATION_ID:
            return "old", f"is not a gsparse tuning database (application id {application:#x})"
        elif version != SCHEMA_VERSION or not {_BEST, _SAMPLES} <= tables:
            return "old", f"has schema version {version}; this gsparse uses version {SCHEMA_VERSION}"
        connection.execute("COMMIT")
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
    check = [r[0] for r in connection.execute("PRAGMA quick_check").fetchall()]
    if check != ["ok"]:
        return "corrupt", f"fails SQLite's integrity check ({'; '.join(check[:3])})"
    return None


def _move_aside(path: Path, suffix: str, reason: str) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.{suffix}-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.{suffix}-{stamp}-{n}")
    try:
        os.replace(path, aside)
    except FileNotFoundError:  # another process moved it first
        return
    for extra in ("-wal", "-shm"):  # a stale log would be replayed into the new file
        try:
            os.replace(f"{path}{extra}", f"{aside}{extra}")
        except FileNotFoundError:
            pass
    warnings.warn(f"the tuning database {path} {reason}; moved it to {aside.name} and started "
                  f"an empty one", TuningDatabaseWarning, stacklevel=5)


def _sample_row(key: TuningKey, schedule: object) -> tuple:
    """A sample's identifying columns: the key's values, the schedule's class and its JSON."""
    return (*key.values(), type(schedule).__name__, schedule.to_json())  # type: ignore[attr-defined]


def _insert_sample(c: sqlite3.Connection, row: tuple, times: tuple[float, ...], error: str | None,
                   features: bytes | None, created: float) -> None:
    """Insert one sample; ``row`` is :func:`_sample_row`'s."""
    c.execute(f"INSERT INTO {_SAMPLES} ({', '.join(_KEY_FIELDS)}, schedule_class, schedule, "
              f"times_ms, error, features, created) VALUES ({_marks(12)})",
              (*row, json.dumps(times), error, features, created))


def _upsert_best(c: sqlite3.Connection, row: tuple) -> bool:
    """Insert the best record ``row`` (key, class, json, time, updated) or replace a slower one."""
    cursor = c.execute(
        f"INSERT INTO {_BEST} VALUES ({_marks(10)}) ON CONFLICT ({', '.join(_KEY_FIELDS)}) DO UPDATE SET "
        "schedule_class = excluded.schedule_class, schedule = excluded.schedule, "
        f"time_ms = excluded.time_ms, updated = excluded.updated WHERE excluded.time_ms < {_BEST}.time_ms",
        row)
    return cursor.rowcount > 0


def _filter(key: TuningKey | None, fields: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if key is not None and fields:
        raise ValueError(f"give a key or key fields, not both; got {key} and {sorted(fields)}")
    if key is not None:
        return _KEY_FIELDS, key.values()
    if unknown := sorted(set(fields) - set(_KEY_FIELDS)):
        raise ValueError(f"unknown key fields {unknown}; the fields are {list(_KEY_FIELDS)}")
    return tuple(fields), tuple(fields.values())


def _where(names: Iterable[str]) -> str:
    return " AND ".join(f"{n} = ?" for n in names)


def _marks(n: int) -> str:
    return ", ".join("?" * n)


@functools.lru_cache(maxsize=1024)
def _cached_key(*values: str) -> TuningKey:
    return TuningKey(*values)


def _key(row: sqlite3.Row) -> TuningKey:
    return _cached_key(*(row[f] for f in _KEY_FIELDS))


def _pack(features: Sequence[float] | None) -> bytes | None:
    """Features as little-endian float64 bytes (exact, and 10x faster to read than JSON)."""
    return None if features is None else np.asarray(features, dtype="<f8").reshape(-1).tobytes()


def _best_record(row: sqlite3.Row) -> BestRecord:
    return BestRecord(_key(row), row["schedule_class"], row["schedule"], row["time_ms"], row["updated"])


def _sample(row: sqlite3.Row) -> Sample:
    features = None if row["features"] is None else tuple(np.frombuffer(row["features"], "<f8").tolist())
    return Sample(_key(row), row["schedule_class"], row["schedule"], tuple(json.loads(row["times_ms"])),
                  row["error"], features, row["created"])
