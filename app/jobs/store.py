"""The job store: every verification job's record and report in one SQLite file (issue 29).

With several uvicorn workers, a job posted to one worker is asked about on another, so a job
cannot live in one process's memory. Every process of a server opens the same file,
``<data>/jobs.sqlite3`` (:func:`app.jobs.election.data_dir`), with the standard library's
``sqlite3``:

* **WAL mode** (write-ahead log): readers never wait for the writer, and a reader sees every
  commit made before its read began, whichever process made it. ``synchronous=NORMAL``: a
  commit survives the process dying; only a power cut may lose the last commits.
* **Admission is one transaction.** ``BEGIN IMMEDIATE`` takes the database's write lock before
  counting, so the queue limit and the per-client limit hold across every worker: two workers
  that admit at once are serialised, and the second counts the first one's job.
* **The queue is the table's order** (``seq``); the one runner process (app/jobs/election.py)
  claims the oldest queued job in a transaction of its own.
* **Bounded**: after each insert, finished jobs beyond the newest ``keep`` and those older than
  ``max_age_s`` are deleted (reports and traces with them).

Reports, verdict fields and traces are stored as JSON text (``json``, which keeps NaN and
infinities as the verdict had them).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from app.jobs.job import DONE, ClientBusy, Job, QueueFull

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,  -- submission order: the queue's order
    id           TEXT NOT NULL UNIQUE,
    scene        TEXT NOT NULL,
    status       TEXT NOT NULL,                      -- queued, running, passed, failed, error
    client       TEXT NOT NULL DEFAULT '',           -- the requester's address
    source       TEXT NOT NULL DEFAULT 'server',     -- server or uploaded
    world        INTEGER NOT NULL,
    backend      TEXT NOT NULL,
    device       TEXT NOT NULL DEFAULT '',
    max_abs_diff REAL,
    detail       TEXT NOT NULL DEFAULT '',
    report       TEXT NOT NULL DEFAULT '{}',         -- JSON
    fields       TEXT NOT NULL DEFAULT '{}',         -- JSON
    trace        TEXT,                               -- JSON, or NULL
    query        TEXT,                               -- the scene query it runs, or NULL
    extra_args   TEXT NOT NULL DEFAULT '[]',         -- JSON list
    created      REAL NOT NULL,                      -- wall-clock seconds
    started      REAL,
    finished     REAL,
    owner        INTEGER                             -- pid of the process that ran it
);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, seq);
CREATE INDEX IF NOT EXISTS jobs_by_client ON jobs (client, status);
"""

COLUMNS = ("id", "scene", "status", "client", "source", "world", "backend", "device",
           "max_abs_diff", "detail", "report", "fields", "trace", "query", "extra_args",
           "created", "started", "finished")
JSON_COLUMNS = {"report": {}, "fields": {}, "trace": None, "extra_args": []}
NOT_DONE = "('queued', 'running')"

WEEK_S = 7 * 24 * 3600.0


class JobStore:
    """One server's jobs, shared by its processes through one SQLite file in ``folder``."""

    def __init__(self, folder: Path, *, keep: int = 200, max_age_s: float = WEEK_S):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "jobs.sqlite3"
        self.keep = keep
        self.max_age_s = max_age_s
        self._lock = threading.Lock()  # one connection, used by one thread at a time
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                   check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self.closed = False

    # -- writes ------------------------------------------------------------------------------

    def admit(self, job: Job, *, queue_limit: int, per_client: int) -> None:
        """Insert a queued ``job`` unless the queue holds ``queue_limit`` waiting jobs already,
        or (with ``job.client``) that client has ``per_client`` jobs queued or running: then
        raise :class:`QueueFull` or :class:`ClientBusy`, saying why."""
        with self._transaction() as db:
            waiting = db.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0]
            if waiting >= queue_limit:
                raise QueueFull(f"{waiting} jobs are already waiting; try again in a moment")
            if job.client:
                mine = db.execute(f"SELECT count(*) FROM jobs WHERE client = ? AND status IN "
                                  f"{NOT_DONE}", (job.client,)).fetchone()[0]
                if mine >= per_client:
                    raise ClientBusy(f"you already have {mine} real run{'s' if mine != 1 else ''}"
                                     f" queued or running (at most {per_client} per client); "
                                     f"wait for {'them' if mine != 1 else 'it'} to end")
            self._insert(db, job)

    def add(self, job: Job) -> None:
        """Insert ``job`` as it is (a finished job: an uploaded report's verdict)."""
        with self._transaction() as db:
            self._insert(db, job)

    def claim(self, owner: int) -> Job | None:
        """The oldest queued job, now running in process ``owner``; None when none waits."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM jobs WHERE status = 'queued' ORDER BY seq "
                             "LIMIT 1").fetchone()
            if row is None:
                return None
            now = time.time()
            db.execute("UPDATE jobs SET status = 'running', started = ?, owner = ? WHERE seq = ?",
                       (now, owner, row["seq"]))
        job = _job(row)
        job.status, job.started = "running", now
        return job

    def save(self, job: Job) -> None:
        """Write what a run found out about ``job`` (its status, verdict, report, times)."""
        if self.closed:
            return  # the server is stopping: the next runner marks the job (abandon)
        values = _row(job)
        columns = [c for c in COLUMNS if c not in ("id", "created", "query", "client")]
        with self._transaction() as db:
            db.execute(f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
                       [values[c] for c in columns] + [job.id])

    def abandon(self, detail: str, owner: int | None = None) -> int:
        """Mark the jobs left running (by process ``owner``, or by anyone) as errors that say
        ``detail``; how many there were. A new runner calls it for jobs whose runner died."""
        where = "status = 'running'" + ("" if owner is None else " AND owner = ?")
        args = () if owner is None else (owner,)
        with self._transaction() as db:
            return db.execute(f"UPDATE jobs SET status = 'error', detail = ?, finished = ? "
                              f"WHERE {where}", (detail, time.time(), *args)).rowcount

    # -- reads -------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        """The job, with ``ahead`` (jobs before it still queued or running) when it is queued."""
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return None
            job = _job(row)
            if job.status == "queued":
                job.ahead = self._db.execute(
                    f"SELECT count(*) FROM jobs WHERE status IN {NOT_DONE} AND seq < ?",
                    (job.seq,)).fetchone()[0]
        return job

    def count(self, *statuses: str) -> int:
        marks = ", ".join("?" for _ in statuses)
        with self._lock:
            return self._db.execute(f"SELECT count(*) FROM jobs WHERE status IN ({marks})",
                                    statuses).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._db.close()

    # -- inside ------------------------------------------------------------------------------

    def _transaction(self):
        return _Transaction(self)

    def _insert(self, db: sqlite3.Connection, job: Job) -> None:
        values = _row(job)
        job.seq = db.execute(f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES "
                             f"({', '.join('?' for _ in COLUMNS)})",
                             [values[c] for c in COLUMNS]).lastrowid
        done = "('" + "', '".join(DONE) + "')"
        db.execute(f"DELETE FROM jobs WHERE status IN {done} AND (seq <= ? OR finished < ?)",
                   (job.seq - self.keep, time.time() - self.max_age_s))


class _Transaction:
    """``with``: this process's connection inside BEGIN IMMEDIATE … COMMIT (ROLLBACK on an
    exception, which then propagates)."""

    def __init__(self, store: JobStore):
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        self.store._lock.acquire()
        try:
            if self.store.closed:
                raise QueueFull("the server is stopping")
            self.store._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.store._lock.release()
            raise
        return self.store._db

    def __exit__(self, kind, error, tb) -> None:
        try:
            self.store._db.execute("ROLLBACK" if kind else "COMMIT")
        finally:
            self.store._lock.release()


def _row(job: Job) -> dict:
    values = {c: getattr(job, c) for c in COLUMNS}
    for column in JSON_COLUMNS:
        value = values[column]
        values[column] = None if value is None else json.dumps(value)
    return values


def _job(row: sqlite3.Row) -> Job:
    values = {c: row[c] for c in COLUMNS}
    for column, empty in JSON_COLUMNS.items():
        text = values[column]
        values[column] = empty if text is None else json.loads(text)
    return Job(**values, seq=row["seq"])
