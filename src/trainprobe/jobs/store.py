"""The job store: every training job's request, status and runner, in one SQLite file.

The file is ``$TRAINPROBE_HOME/jobs.sqlite`` (``~/.trainprobe`` by default), or any path given.
Several processes use it at once (the CLI, each job's supervisor, a server): the database runs in
WAL mode so readers never wait for writers, each operation opens its own connection and holds it
for one short transaction, and a read-modify-write takes the write lock first (``BEGIN
IMMEDIATE``), so two updates of one job never interleave.

A job row also says who runs the job (``runner_pid`` on ``runner_host``, started at
``runner_started``, told apart from a later process of the same id by ``runner_identity``) and
when that runner last said it was alive (``heartbeat_time``), so that a job whose runner died is
found out (``trainprobe.jobs.runner.liveness``) instead of staying InProgress forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from trainprobe import settings
from trainprobe.config.statuses import (
    TERMINAL_JOB_STATUSES,
    TERMINAL_SECONDARY_STATUSES,
    TrainingJobStatus,
)
from trainprobe.jobs.errors import JobNameInUse

__all__ = [
    "STORE_FILE",
    "JobRecord",
    "JobStore",
    "trainprobe_home",
]

STORE_FILE = "jobs.sqlite"

_BUSY_TIMEOUT_SECONDS = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS training_jobs (
    name TEXT PRIMARY KEY COLLATE NOCASE,
    arn TEXT NOT NULL,
    request TEXT NOT NULL,
    job_dir TEXT NOT NULL,
    status TEXT NOT NULL,
    secondary_status TEXT NOT NULL,
    transitions TEXT NOT NULL,
    failure_reason TEXT,
    creation_time REAL NOT NULL,
    training_start_time REAL,
    training_end_time REAL,
    last_modified_time REAL NOT NULL,
    profiler_config TEXT,
    profiler_rules TEXT NOT NULL,
    stop_reason TEXT,
    runner_pid INTEGER,
    runner_host TEXT,
    runner_started REAL,
    heartbeat_time REAL,
    runner_done INTEGER NOT NULL DEFAULT 0,
    runner_identity TEXT
);
CREATE INDEX IF NOT EXISTS training_jobs_by_creation ON training_jobs (creation_time);
"""

_ADDED_COLUMNS = {"runner_identity": "TEXT"}
"""Columns added since the first release, with their types: a store made before has them added
when it is opened."""

_JSON_COLUMNS = frozenset({"request", "transitions", "profiler_config", "profiler_rules"})


def trainprobe_home() -> str:
    """trainprobe's home directory: ``$TRAINPROBE_HOME``, else ``~/.trainprobe``."""
    return os.path.abspath(os.path.expanduser(settings.HOME.get()))


@dataclass
class JobRecord:
    """One training job as the store holds it (times in seconds since the epoch)."""

    name: str
    arn: str
    request: dict[str, Any]
    """The CreateTrainingJob request, as it was accepted."""
    job_dir: str
    status: TrainingJobStatus
    secondary_status: str
    """A ``SecondaryStatus``, kept as it was written: SageMaker's set of them is open."""
    creation_time: float
    last_modified_time: float
    transitions: list[dict[str, Any]] = field(default_factory=list)
    """SageMaker's SecondaryStatusTransitions, with times in seconds since the epoch."""
    failure_reason: str | None = None
    training_start_time: float | None = None
    training_end_time: float | None = None
    profiler_config: dict[str, Any] | None = None
    """The ProfilerConfig in force (the request's, with every UpdateTrainingJob applied)."""
    profiler_rules: list[dict[str, Any]] = field(default_factory=list)
    """ProfilerRuleConfigurations: the request's, plus those added by UpdateTrainingJob."""
    stop_reason: str | None = None
    """Set by StopTrainingJob: the runner stops the training and records this reason."""
    runner_pid: int | None = None
    runner_host: str | None = None
    runner_started: float | None = None
    """When the runner started, for people to read (``runner_identity`` tells it apart)."""
    heartbeat_time: float | None = None
    runner_done: bool = False
    runner_identity: str | None = None
    """What tells the runner's process apart from a later one given its id
    (``trainprobe.jobs.runner.liveness.process_identity``), where it can be read."""

    @property
    def finished(self) -> bool:
        """Whether the training has reached its final status."""
        return self.status in TERMINAL_JOB_STATUSES


_COLUMNS = tuple(item.name for item in fields(JobRecord))


def _to_row(values: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for key, value in values.items():
        if key in _JSON_COLUMNS:
            row[key] = None if value is None else json.dumps(value)
        elif key == "runner_done":
            row[key] = int(bool(value))
        else:
            row[key] = value
    return row


def _from_row(row: sqlite3.Row) -> JobRecord:
    values: dict[str, Any] = {}
    for key in _COLUMNS:
        value = row[key]
        if key in _JSON_COLUMNS and value is not None:
            value = json.loads(value)
        values[key] = value
    values["runner_done"] = bool(values["runner_done"])
    values["status"] = TrainingJobStatus(values["status"])
    return JobRecord(**values)


class JobStore:
    """The jobs in the SQLite file at ``path`` (default ``$TRAINPROBE_HOME/jobs.sqlite``)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            path = os.path.join(trainprobe_home(), STORE_FILE)
        self.path = os.path.abspath(os.fspath(path))
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with self._connection() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
            present = {
                row["name"] for row in connection.execute("PRAGMA table_info(training_jobs)")
            }
            for column, kind in _ADDED_COLUMNS.items():
                if column not in present:
                    with contextlib.suppress(sqlite3.OperationalError):  # added by another
                        connection.execute(f"ALTER TABLE training_jobs ADD COLUMN {column} {kind}")

    def __repr__(self) -> str:
        return f"JobStore({self.path!r})"

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None)
        connection.row_factory = sqlite3.Row
        try:
            yield connection
        finally:
            connection.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, holding the write lock from its start."""
        with self._connection() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    # ----- reading ------------------------------------------------------------------------

    def get(self, name: str) -> JobRecord | None:
        """The job called ``name`` (names compare without case), or None."""
        with self._connection() as connection:
            row = connection.execute(
                "SELECT * FROM training_jobs WHERE name = ?", (name,)
            ).fetchone()
        return _from_row(row) if row is not None else None

    def names(self) -> list[str]:
        """Every job's name, oldest first."""
        with self._connection() as connection:
            rows = connection.execute("SELECT name FROM training_jobs ORDER BY creation_time")
            return [str(row["name"]) for row in rows]

    def query(
        self,
        *,
        where: Sequence[tuple[str, object]] = (),
        order_by: str = "creation_time",
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[JobRecord]:
        """Jobs matching every ``(condition, value)`` of ``where`` (SQL with one ``?``), sorted
        by the column ``order_by`` (then by name), ``limit`` of them from ``offset``."""
        if order_by not in _COLUMNS:
            raise ValueError(f"cannot sort jobs by {order_by!r}")
        direction = "DESC" if descending else "ASC"
        sql = "SELECT * FROM training_jobs"
        if where:
            sql += " WHERE " + " AND ".join(condition for condition, _ in where)
        sql += f" ORDER BY {order_by} {direction}, name {direction}"
        if limit is not None:
            sql += f" LIMIT {int(limit)} OFFSET {int(offset)}"
        with self._connection() as connection:
            rows = connection.execute(sql, [value for _, value in where]).fetchall()
        return [_from_row(row) for row in rows]

    # ----- writing ------------------------------------------------------------------------

    def insert(self, record: JobRecord) -> None:
        """Add a new job; JobNameInUse when a job of that name exists."""
        with self.inserting(record):
            pass

    @contextlib.contextmanager
    def inserting(self, record: JobRecord) -> Iterator[None]:
        """Add a new job when the block ends without an exception, and not at all otherwise.

        The job is inserted at the start, holding the store's write lock until the block ends:
        a name already taken is a JobNameInUse before the block runs, a second creation of the
        same name waits and then gets JobNameInUse, and no reader sees the job before it is
        committed. So what the block prepares (the job's directories) exists before the job is
        recorded, and a failed block leaves no record behind. Keep the block short.
        """
        row = _to_row({key: getattr(record, key) for key in _COLUMNS})
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._write() as connection:
            try:
                connection.execute(
                    f"INSERT INTO training_jobs ({columns}) VALUES ({marks})", list(row.values())
                )
            except sqlite3.IntegrityError:
                raise JobNameInUse(
                    "TrainingJobName",
                    record.name,
                    "a name no other job has (job names are unique, whatever their case)",
                ) from None
            yield

    def delete(self, name: str) -> bool:
        """Forget job ``name`` (a creation taken back); whether there was such a job."""
        with self._write() as connection:
            return (
                connection.execute("DELETE FROM training_jobs WHERE name = ?", (name,)).rowcount > 0
            )

    def update(
        self,
        name: str,
        *,
        only_if_status: Sequence[TrainingJobStatus] | None = None,
        touch: bool = True,
        **values: Any,
    ) -> bool:
        """Set columns of job ``name``, and ``last_modified_time`` unless given or ``touch`` is
        False (a change of the runner's bookkeeping is no change of the job); with
        ``only_if_status``, only when the job's status is one of those. Whether it was set."""
        if touch:
            values.setdefault("last_modified_time", time.time())
        unknown = set(values) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"no job column {sorted(unknown)[0]!r}")
        row = _to_row(values)
        sql = "UPDATE training_jobs SET " + ", ".join(f"{key} = ?" for key in row)
        sql += " WHERE name = ?"
        parameters = [*row.values(), name]
        if only_if_status is not None:
            sql += f" AND status IN ({', '.join('?' for _ in only_if_status)})"
            parameters += list(only_if_status)
        with self._write() as connection:
            return connection.execute(sql, parameters).rowcount > 0

    def transition(
        self,
        name: str,
        status: TrainingJobStatus,
        secondary_status: str,
        message: str,
        *,
        only_if_status: Sequence[TrainingJobStatus] | None = None,
        now: float | None = None,
        **values: Any,
    ) -> bool:
        """Move job ``name`` to ``status`` / ``secondary_status``, recording the transition with
        ``message`` (and setting ``values``), in one transaction. With ``only_if_status``, only
        when the job's status is one of those. Whether it moved."""
        now = time.time() if now is None else now
        with self._write() as connection:
            row = connection.execute(
                "SELECT status, transitions FROM training_jobs WHERE name = ?", (name,)
            ).fetchone()
            if row is None or (only_if_status is not None and row["status"] not in only_if_status):
                return False
            transitions: list[dict[str, Any]] = json.loads(row["transitions"])
            if transitions and transitions[-1]["Status"] == secondary_status:
                transitions[-1]["StatusMessage"] = message
            else:
                if transitions and "EndTime" not in transitions[-1]:
                    transitions[-1]["EndTime"] = now
                entry: dict[str, Any] = {
                    "Status": secondary_status,
                    "StartTime": now,
                    "StatusMessage": message,
                }
                if secondary_status in TERMINAL_SECONDARY_STATUSES:
                    entry["EndTime"] = now
                transitions.append(entry)
            changes = _to_row(
                {
                    **values,
                    "status": status,
                    "secondary_status": secondary_status,
                    "transitions": transitions,
                    "last_modified_time": now,
                }
            )
            connection.execute(
                "UPDATE training_jobs SET "
                + ", ".join(f"{key} = ?" for key in changes)
                + " WHERE name = ?",
                [*changes.values(), name],
            )
        return True

    def heartbeat(self, name: str, now: float | None = None) -> None:
        """Record that the job's runner is alive (does not count as a change of the job)."""
        with self._write() as connection:
            connection.execute(
                "UPDATE training_jobs SET heartbeat_time = ? WHERE name = ?",
                (time.time() if now is None else now, name),
            )
