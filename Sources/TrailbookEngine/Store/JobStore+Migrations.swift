import TrailbookSQLite

// The SQLite store's schema, one migration per version.
extension JobStore {
    /// Schema migrations; index i moves the schema from version i to i + 1. Append, never edit.
    static let migrations = [
        """
        CREATE TABLE jobs (
            sequence INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            priority INTEGER NOT NULL,
            timeout_s REAL NOT NULL,
            stall_timeout_s REAL NOT NULL,
            max_attempts INTEGER NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 0,
            params TEXT NOT NULL,
            progress TEXT,
            checkpoint TEXT,
            cancellation TEXT,
            error TEXT,
            result TEXT,
            retry_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX jobs_by_state ON jobs (state, priority DESC, sequence);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        """,
        // 2: a reclaimed, paused or crashed run keeps its attempt number; the next start resumes it.
        "ALTER TABLE jobs ADD COLUMN resumes_attempt INTEGER NOT NULL DEFAULT 0;",
        // 3: pending clean-ups of ended jobs (JobKind.cleanUp), retried with backoff until done.
        """
        CREATE TABLE cleanups (
            job_id TEXT PRIMARY KEY,
            tries INTEGER NOT NULL DEFAULT 0,
            next_at REAL NOT NULL,
            created_at REAL NOT NULL,
            last_error TEXT
        );
        """,
        // 4: how long a job waits out a service's outage before giving up (issue 11); 24 h for older jobs.
        "ALTER TABLE jobs ADD COLUMN give_up_after_s REAL NOT NULL DEFAULT 86400;",
        // 5: retention finds ended jobs by state and end time without a scan (JobStore.pruneEnded); partial, so
        // queued and running jobs, written most often, never touch it.
        "CREATE INDEX jobs_ended ON jobs (state, updated_at) WHERE state IN ('succeeded', 'failed', 'cancelled');",
        // 6: idempotency keys (issue 14): a submit retried with its key finds the job it made. The digest is of the
        // request (kind, params, options), so the same key with a different request is told apart.
        """
        ALTER TABLE jobs ADD COLUMN idempotency_key TEXT;
        ALTER TABLE jobs ADD COLUMN submit_digest TEXT;
        CREATE UNIQUE INDEX jobs_by_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
        """,
        // 7: what unfinished jobs work on (`JobKind.duplicateKeys`), so a submit finds a duplicate by index
        // instead of loading every unfinished job of its kind (issue 14). A job's rows go with its end. Jobs
        // stored before it are indexed on the first start (`Scheduler.start`, meta `duplicate_keys_indexed`).
        """
        CREATE TABLE duplicate_keys (
            key TEXT NOT NULL,
            job_id TEXT NOT NULL,
            PRIMARY KEY (key, job_id)
        ) WITHOUT ROWID;
        CREATE INDEX duplicate_keys_by_job ON duplicate_keys (job_id);
        """,
        // 8: `list --state S --limit N` (newest first in a state) walks this index backwards from the newest
        // sequence and stops after N rows; `jobs_by_state` orders by priority first, so with a million queued
        // jobs the same list sorted them all (376 ms, issue 14).
        "CREATE INDEX jobs_by_state_sequence ON jobs (state, sequence);",
        // 9: `jobs_ended` as migration 5 made it, but its condition spelled with `=` and `OR`: SQLite evaluates a
        // partial index's condition on every insert and on both rows of every update, and an `IN` list of three
        // constants is coded as a temporary B-tree built each time (two per update, one per insert: about 15 % of
        // the daemon's instructions in bench/jobs.py's no-op jobs, callgrind). Comparisons cost a few instructions.
        """
        DROP INDEX jobs_ended;
        CREATE INDEX jobs_ended ON jobs (state, updated_at)
            WHERE (state = 'succeeded' OR state = 'failed' OR state = 'cancelled');
        """,
        // 10: the queue (`queuedJobs`: the next jobs to start, by priority then submission) from a partial index of
        // the queued jobs alone. `jobs_by_state` held every job, so each end inserted one more entry that no query
        // needed (`list` and the counts use `jobs_by_state_sequence`): one B-tree insert a job less (issue 14).
        """
        DROP INDEX jobs_by_state;
        CREATE INDEX jobs_queue ON jobs (priority DESC, sequence) WHERE state = 'queued';
        """,
        // 11: jobs' entry lists (a folder upload's files, issue 35; `JobEntries`, JobStore+Entries.swift): one row per
        // entry with its outcome, and the list's seal. They go with their job (the foreign keys cascade).
        """
        CREATE TABLE job_entries (
            job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            size INTEGER NOT NULL,
            item TEXT NOT NULL,
            state TEXT NOT NULL,
            code TEXT,
            message TEXT,
            PRIMARY KEY (job_id, position)
        ) WITHOUT ROWID;
        CREATE INDEX job_entries_by_state ON job_entries (job_id, state, position);
        CREATE TABLE job_entry_lists (
            job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
            count INTEGER NOT NULL
        );
        """,
        // 12: the upload memory (issue 35; `UploadMemory`, UploadMemory/JobStore+UploadMemory.swift): what jobs
        // uploaded to destinations that cannot be listed (tus), by destination and name (hex of its bytes);
        // `sha256` NULL while an upload is only created. It belongs to no job: no foreign key, so retention's
        // prune keeps it.
        """
        CREATE TABLE upload_memory (
            destination TEXT NOT NULL,
            name TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT,
            location TEXT NOT NULL,
            job_id TEXT NOT NULL,
            uploaded_at REAL NOT NULL,
            PRIMARY KEY (destination, name)
        ) WITHOUT ROWID;
        """,
        // 13: the upload memory's stat cache (issue 35; `RememberedSource`): the source file each row was made from
        // with its `stat` when its SHA-256 was known, so a later upload of an unchanged file reads nothing; NULL
        // when not known. The index serves the memory's prune by age (`UploadMemory.forgetOlder`).
        """
        ALTER TABLE upload_memory ADD COLUMN source_path TEXT;
        ALTER TABLE upload_memory ADD COLUMN source_device INTEGER;
        ALTER TABLE upload_memory ADD COLUMN source_inode INTEGER;
        ALTER TABLE upload_memory ADD COLUMN source_mtime_ns INTEGER;
        ALTER TABLE upload_memory ADD COLUMN source_ctime_ns INTEGER;
        CREATE INDEX upload_memory_by_age ON upload_memory (uploaded_at);
        """,
    ]
}
