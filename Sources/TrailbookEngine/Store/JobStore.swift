import TrailbookPostgres
import TrailbookSQLite

/// The persistent job store: one SQLite database in WAL mode under `$TRAILBOOK_JOBS_HOME`.
///
/// It owns all SQL about jobs. The daemon is its only writer and uses it from the loop thread; the CLI never
/// opens it (it asks the daemon). Every write is a transaction (`commitGroup` puts a loop turn's writes in one), so
/// a `kill -9` at any moment leaves either the old or the new rows, never half of them. A checkpoint is written by the job only after the work it
/// describes is durable (see `JobContext.saveCheckpoint`), so resuming from it never skips work.
public final class JobStore {
    let database: Database
    static var columnList: String { columns }
    static func decodeRecord(_ row: Row) -> JobRecord? { record(row) }
    static let columns = """
        id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt, params, progress,
        cancellation, error, result, retry_at, created_at, updated_at, sequence, resumes_attempt, give_up_after_s,
        idempotency_key
        """

    /// Opens (creating and migrating if needed) the store at `path`.
    ///
    /// - Throws: `SQLiteError` if the file cannot be opened, is not a database, or is from a newer version.
    public init(path: String) throws {
        database = try Database(path: path)
        if let note = try Self.useIncrementalVacuum(database) { DaemonLog.write(note) }
        // NORMAL: the store is written on the loop thread, and an fsync per checkpoint or progress write would
        // stall every job. It is still exact after `kill -9`; after a power loss a job may resume from an earlier
        // checkpoint, which is safe because a checkpoint only ever describes work already durable.
        try database.enableWriteAheadLog(synchronous: .normal)
        try database.migrate(Self.migrations)
    }

    /// From now on a statement that meets another process's lock fails at once with `SQLITE_BUSY` instead of
    /// waiting for it: the daemon's loop thread must never sit in SQLite's busy wait (the scheduler retries such
    /// writes later, and reads in WAL mode are not blocked by a writer). Opening and migrating still wait up to 5 s.
    public func failFastOnLocks() {
        database.setBusyTimeout(milliseconds: 0)
    }

    /// Adds a new job; fills in its `sequence` (submission order) and its timestamps as stored.
    /// - Throws: `SQLiteError` (for example, a duplicate id or idempotency key, or a full disk).
    public func insert(_ job: inout JobRecord, digest: String? = nil) throws {
        let now = Timestamp.now()
        job.sequence = try insertRow(job, digest: digest, at: now)
        inserted(&job, at: now)
    }

    // MARK: Jobs inserted and not written since

    /// A job as this store inserted it, and the time it wrote as its `updated_at` then.
    private struct FreshJob {
        var record: JobRecord
        var insertedAt: Double
    }

    /// The jobs this store inserted and has not written since, as a read would decode them (at most
    /// `freshCapacity`): `queuedJobs` takes such a job from here instead of decoding its row, which is most of the
    /// reads of a busy queue (jobs start soon after they are submitted). Any write to a job's row forgets it; a
    /// row whose `updated_at` or attempt is not what this store wrote (another writer) is decoded. When it is full
    /// new jobs are not kept: the queue runs the older ones first, so those are the ones to keep. Bounded, so a
    /// million queued jobs are not held in memory (issue 14).
    private var fresh: [String: FreshJob] = [:]
    static let freshCapacity = 4_096

    /// After a commit that stored `job` at `now`: gives it the timestamps a read would (`createdAt`, `updatedAt`)
    /// and keeps it as fresh when there is room and its progress reads back as it is (a job's first progress
    /// always does).
    private func inserted(_ job: inout JobRecord, at now: Double) {
        let time = Timestamp.iso8601(unixSeconds: now)
        job.createdAt = time
        job.updatedAt = time
        let progress = job.progress
        if checkpointless.count < Self.freshCapacity { checkpointless.insert(job.id) }
        guard fresh.count < Self.freshCapacity, progress.ratePerSecond == nil, progress.etaSeconds == nil,
            progress.items.isEmpty, !progress.isFinished
        else { return }
        fresh[job.id] = FreshJob(record: job, insertedAt: now)
    }

    /// Whether `duplicate_keys` holds any row (its first B-tree entry).
    private func anyDuplicateKeys() throws -> Bool {
        try database.query("SELECT EXISTS (SELECT 1 FROM duplicate_keys)").first?.int(0) == 1
    }

    /// Jobs this store inserted that have had no checkpoint written since (at most `freshCapacity`): their first
    /// `checkpoint(id:)`, at their first start, answers `nil` without reading the row. A checkpoint written,
    /// the first read or the job's end forgets one.
    private var checkpointless: Set<String> = []

    /// The row of job `id` is being written: a read must decode it again.
    private func written(_ id: String) {
        if !fresh.isEmpty { fresh[id] = nil }
    }

    private func addDuplicateKeys(_ keys: [String], of id: String) throws {
        for key in Set(keys) {
            try database.query("INSERT OR IGNORE INTO duplicate_keys (key, job_id) VALUES (?, ?)", [.text(key), .text(id)])
        }
    }

    /// The unfinished jobs of `kind` that work on any of `keys` (`JobKind.duplicateKeys`): an indexed lookup.
    /// - Throws: `SQLiteError`.
    public func unfinishedJobs(sharing keys: [String], kind: String) throws -> [JobRecord] {
        guard !keys.isEmpty else { return [] }
        let marks = keys.map { _ in "?" }.joined(separator: ",")
        return try database.query(
            """
            SELECT \(Self.columns) FROM jobs WHERE id IN (SELECT job_id FROM duplicate_keys WHERE key IN (\(marks)))
                AND kind = ? AND state IN ('queued', 'running', 'paused', 'needs_retry') ORDER BY sequence
            """,
            keys.map { .text($0) } + [.text(kind)]
        ).compactMap(Self.record)
    }

    /// Whether jobs stored before `duplicate_keys` existed have been indexed (`indexDuplicateKeys`).
    /// - Throws: `SQLiteError`.
    public func duplicateKeysIndexed() throws -> Bool {
        try database.query("SELECT 1 FROM meta WHERE key = 'duplicate_keys_indexed'").first != nil
    }

    /// Indexes what unfinished jobs work on, `keys(job)` for each (once, after migration 7), and notes it done.
    /// - Throws: `SQLiteError`.
    public func indexDuplicateKeys(_ keys: (JobRecord) -> [String]) throws {
        try database.transaction {
            for job in try jobs(states: [.queued, .running, .paused, .needsRetry], limit: Int.max) {
                try addDuplicateKeys(keys(job), of: job.id)
            }
            try database.query("INSERT OR REPLACE INTO meta (key, value) VALUES ('duplicate_keys_indexed', '1')")
        }
    }

    private func insertRow(_ job: JobRecord, digest: String?, at now: Double) throws -> Int64 {
        try database.query(
            """
            INSERT INTO jobs (id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt, params,
                progress, created_at, updated_at, give_up_after_s, idempotency_key, submit_digest)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(job.id), .text(job.kind), .text(job.state.rawValue), .integer(Int64(job.options.priority)),
                .real(job.options.timeoutSeconds), .real(job.options.stallTimeoutSeconds),
                .integer(Int64(job.options.maxAttempts)), .integer(Int64(job.attempt)), .text(Self.text(job.params)),
                .text(job.progress.jsonText), .real(now), .real(now),
                .real(job.options.giveUpAfterSeconds), job.key.map { .text($0) } ?? .null,
                digest.map { .text($0) } ?? .null,
            ])
        return database.lastInsertRowID
    }

    /// Adds new jobs in one transaction, all or none (a batch submit); fills in each one's `sequence`.
    /// `digests[i]` is `jobs[i]`'s request digest (see `insert(_:digest:)`), `nil` for a job without a key.
    /// - Throws: `SQLiteError`; then no job of the batch is stored.
    /// `duplicateKeys[i]` is what `jobs[i]` works on (`JobKind.duplicateKeys`), recorded with it.
    public func insert(_ jobs: inout [JobRecord], digests: [String?], duplicateKeys: [[String]] = []) throws {
        var inserted = jobs
        let now = Timestamp.now()
        try database.transaction {
            for index in inserted.indices {
                inserted[index].sequence = try insertRow(
                    inserted[index], digest: index < digests.count ? digests[index] : nil, at: now)
                if index < duplicateKeys.count { try addDuplicateKeys(duplicateKeys[index], of: inserted[index].id) }
            }
        }
        for index in inserted.indices { self.inserted(&inserted[index], at: now) }
        jobs = inserted
    }

    /// The job submitted with idempotency key `key` and its request digest, or `nil` if no stored job has it (it
    /// was never used, or its job has been pruned).
    /// - Throws: `SQLiteError`.
    public func job(key: String) throws -> (job: JobRecord, digest: String?)? {
        guard let row = try database.query(
            "SELECT \(Self.columns), submit_digest FROM jobs WHERE idempotency_key = ?", [.text(key)]).first,
            let job = Self.record(row)
        else { return nil }
        return (job, row.text(20))
    }

    /// Writes a job's lifecycle fields: state, attempt, cancellation, error, result, retry time and progress.
    ///
    /// A job's end (`succeeded`, `failed`, `cancelled`) is committed durably (`synchronous=FULL` for that commit,
    /// which fsyncs the WAL): kinds drop state they keep elsewhere once the end is recorded (`JobKind.jobEnded`),
    /// so the end must survive a power loss before that happens. Other commits stay `NORMAL`.
    ///
    /// With `addingCleanUp`, records a pending clean-up of the job (due at once) in the same transaction, so an
    /// end that needs one is never recorded without it.
    /// - Throws: `SQLiteError`.
    public func update(_ job: JobRecord, addingCleanUp: Bool = false) throws {
        let durable = job.state.isTerminal
        if durable { try database.execute("PRAGMA synchronous = FULL") }
        defer { if durable { try? database.execute("PRAGMA synchronous = NORMAL") } }
        guard addingCleanUp || durable else { return try write(job) }
        try database.transaction {
            try write(job)
            guard addingCleanUp else { return }
            let now = Timestamp.now()
            try database.query(
                "INSERT OR IGNORE INTO cleanups (job_id, tries, next_at, created_at) VALUES (?, 0, ?, ?)",
                [.text(job.id), .real(now), .real(now)])
        }
    }

    /// Writes `job`'s lifecycle fields. `duplicateKeysStored`: whether `duplicate_keys` holds any row, when the
    /// caller has asked (`anyDuplicateKeys`) for a group of writes; else asked here for an end.
    private func write(_ job: JobRecord, duplicateKeysStored: Bool? = nil) throws {
        written(job.id)
        if job.state.isTerminal {
            checkpointless.remove(job.id)
            // An ended job no longer stands in the way of another doing the same. Most kinds record none (the
            // `sleep` and tag jobs): then the table is empty and a delete per end is one statement per end for
            // nothing.
            if try duplicateKeysStored ?? anyDuplicateKeys() {
                try database.query("DELETE FROM duplicate_keys WHERE job_id = ?", [.text(job.id)])
            }
        }
        var values: [SQLiteValue] = [
            .text(job.state.rawValue), .integer(Int64(job.attempt)),
            job.cancellation.map { .text(Self.text(JSONCoding.value(of: $0))) } ?? .null,
            job.error.map { .text(Self.text(JSONCoding.value(of: $0))) } ?? .null,
            job.result.isNull ? .null : .text(Self.text(job.result)),
            job.retryAt.map { .real($0) } ?? .null, .text(job.progress.jsonText), .real(Timestamp.now()),
            .integer(job.resumesAttempt ? 1 : 0), .text(job.id),
        ]
        let set = """
            UPDATE jobs SET state = ?, attempt = ?, cancellation = ?, error = ?, result = ?, retry_at = ?,
                progress = ?, updated_at = ?, resumes_attempt = ?
            """
        // By rowid when the record knows it (a stored or just inserted job): one B-tree search instead of two (the
        // `id` index, then the row). The id must still match; a record whose sequence is not its row's is written
        // by id.
        if job.sequence > 0 {
            values.append(.integer(job.sequence))
            try database.query(set + " WHERE id = ? AND sequence = ?", values)
            if database.changes > 0 { return }
            values.removeLast()
        }
        try database.query(set + " WHERE id = ?", values)
    }

    /// Writes a group of changes in one transaction, so they share one commit and, when `durable`, one fsync of
    /// the write-ahead log (`synchronous=FULL` for that commit): new jobs (`inserting`, each given its `sequence`
    /// in order) and lifecycle writes (`updating`, each as `update(_:addingCleanUp:)` would write it). All or
    /// nothing: when it throws, none of it is stored.
    ///
    /// This is the scheduler's group commit: what arrives within one loop turn is written here at the end of
    /// the turn, and only then acknowledged.
    /// - Throws: `SQLiteError` (locked, disk full); then nothing was written.
    /// `digests` and `duplicateKeys` are those of `inserting`, as for `insert(_:digests:duplicateKeys:)`.
    public func commitGroup(
        inserting: inout [JobRecord], digests: [String?] = [], duplicateKeys: [[String]] = [],
        updating: [(job: JobRecord, addingCleanUp: Bool)], durable: Bool
    ) throws {
        if durable { try database.execute("PRAGMA synchronous = FULL") }
        defer { if durable { try? database.execute("PRAGMA synchronous = NORMAL") } }
        var sequences: [Int64] = []
        let now = Timestamp.now()
        try database.transaction {
            for (index, job) in inserting.enumerated() {
                sequences.append(try insertRow(job, digest: index < digests.count ? digests[index] : nil, at: now))
                if index < duplicateKeys.count, !duplicateKeys[index].isEmpty { try addDuplicateKeys(duplicateKeys[index], of: job.id) }
            }
            let duplicateKeysStored = try updating.contains { $0.job.state.isTerminal } ? anyDuplicateKeys() : false
            for (job, addingCleanUp) in updating {
                try write(job, duplicateKeysStored: duplicateKeysStored)
                guard addingCleanUp else { continue }
                try database.query(
                    "INSERT OR IGNORE INTO cleanups (job_id, tries, next_at, created_at) VALUES (?, 0, ?, ?)",
                    [.text(job.id), .real(now), .real(now)])
            }
        }
        for index in inserting.indices {
            inserting[index].sequence = sequences[index]
            inserted(&inserting[index], at: now)
        }
    }

    /// Replaces a job's params (a paused job given new credentials on `resume`).
    /// - Throws: `SQLiteError`.
    public func updateParams(id: String, _ params: JSONValue) throws {
        written(id)
        try database.query(
            "UPDATE jobs SET params = ?, updated_at = ? WHERE id = ?",
            [.text(Self.text(params)), .real(Timestamp.now()), .text(id)])
    }

    /// Writes a job's latest progress (throttled by the caller).
    /// - Throws: `SQLiteError`.
    public func saveProgress(id: String, _ progress: JobProgress) throws {
        written(id)
        try database.query(
            "UPDATE jobs SET progress = ?, updated_at = ? WHERE id = ?",
            [.text(progress.jsonText), .real(Timestamp.now()), .text(id)])
    }

    /// Replaces a job's checkpoint (its resumable state, opaque JSON) and progress in one transaction.
    /// - Throws: `SQLiteError`.
    public func saveCheckpoint(id: String, _ checkpoint: JSONValue, progress: JobProgress) throws {
        written(id)
        checkpointless.remove(id)
        try database.query(
            "UPDATE jobs SET checkpoint = ?, progress = ?, updated_at = ? WHERE id = ?",
            [.text(Self.text(checkpoint)), .text(progress.jsonText), .real(Timestamp.now()), .text(id)])
    }

    /// A job's checkpoint, or `nil` if it has none yet.
    /// - Throws: `SQLiteError`.
    public func checkpoint(id: String) throws -> JSONValue? {
        if !checkpointless.isEmpty, checkpointless.remove(id) != nil { return nil }
        guard let text = try database.query("SELECT checkpoint FROM jobs WHERE id = ?", [.text(id)]).first?.text(0)
        else { return nil }
        return try? JSONCoding.decode(JSONValue.self, from: Array(text.utf8))
    }

    /// The job with `id`, or `nil`.
    /// - Throws: `SQLiteError`.
    public func job(id: String) throws -> JobRecord? {
        try database.query("SELECT \(Self.columns) FROM jobs WHERE id = ?", [.text(id)]).first.flatMap(Self.record)
    }

    /// The jobs whose id starts with `prefix` (at most `limit`), for `show 9b2f`-style lookups.
    /// - Throws: `SQLiteError`.
    public func jobs(idPrefix prefix: String, limit: Int = 2) throws -> [JobRecord] {
        let escaped = prefix.lowercased().filter { $0.isHexDigit || $0 == "-" }
        return try database.query(
            "SELECT \(Self.columns) FROM jobs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
            [.text(escaped), .text(escaped + "\u{7f}"), .integer(Int64(limit))]
        ).compactMap(Self.record)
    }

    /// The queued jobs in run order: higher priority first, FIFO within a priority.
    /// - Throws: `SQLiteError`.
    /// The first `limit` queued jobs in run order, passing over the ids in `skipping` without decoding their rows
    /// (decoding a row is most of what reading it costs: the scheduler asks again while its last starts wait for
    /// their group commit).
    /// - Throws: `SQLiteError`.
    public func queuedJobs(limit: Int, skipping: Set<String>) throws -> [JobRecord] {
        let statement = try database.prepare(Self.queueSelect)
        defer { statement.reset() }
        var jobs: [JobRecord] = []
        // Row by row, the id first: a skipped row (a job starting this turn) is not copied out, a fresh one
        // (inserted here, untouched since) is taken as it was inserted.
        while jobs.count < limit, try statement.next() {
            guard let id = statement.text(at: 0) else { continue }
            if !skipping.isEmpty, skipping.contains(id) { continue }
            if let known = fresh[id], statement.int64(at: 7) == 0, statement.double(at: 15) == known.insertedAt {
                jobs.append(known.record)
                continue
            }
            if let job = Self.record(statement.row()) { jobs.append(job) }
        }
        return jobs
    }

    /// The queued jobs in run order, read from `jobs_queue`. `INDEXED BY`: without statistics SQLite would read
    /// them through `jobs_by_state_sequence` and sort every queued job (a million, issue 14) to start the first few.
    private static let queueInRunOrder =
        "FROM jobs INDEXED BY jobs_queue WHERE state = 'queued' ORDER BY priority DESC, sequence"
    /// Every column of the queued jobs in run order (`queueInRunOrder`).
    static let queueSelect = "SELECT \(columns) \(queueInRunOrder)"

    /// The priority of the first queued job in run order that is not in `skipping`, or `nil` when none waits: the
    /// scheduler's check for preemption, from the queue index without reading the job.
    /// - Throws: `SQLiteError`.
    public func highestQueuedPriority(skipping: Set<String>) throws -> Int? {
        let statement = try database.prepare("SELECT id, priority \(Self.queueInRunOrder)")
        defer { statement.reset() }
        while try statement.next() {
            if !skipping.isEmpty, let id = statement.text(at: 0), skipping.contains(id) { continue }
            return statement.int64(at: 1).map { Int($0) }
        }
        return nil
    }

    /// How many jobs are in each state (states with none are absent). An index-only scan of `jobs_by_state_sequence`.
    /// - Throws: `SQLiteError`.
    public func countsByState() throws -> [JobState: Int] {
        var counts: [JobState: Int] = [:]
        for row in try database.query("SELECT state, count(*) FROM jobs GROUP BY state", []) {
            if let state = row.text(0).flatMap(JobState.init(rawValue:)) { counts[state] = Int(row.int(1) ?? 0) }
        }
        return counts
    }

    /// Reserves a block of `count` feed sequence numbers above any handed out before, and returns its first.
    ///
    /// So `seq` keeps increasing across daemon restarts without a write per event.
    /// - Throws: `SQLiteError`.
    public func reserveSequenceBlock(count: Int64) throws -> Int64 {
        try database.transaction {
            let current = try database.query("SELECT value FROM meta WHERE key = 'seq_reserved'").first?.text(0)
            let first = Int64(current ?? "0") ?? 0
            try database.query(
                "INSERT INTO meta (key, value) VALUES ('seq_reserved', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [.text(String(first + count))])
            return first + 1
        }
    }

    static func text(_ value: JSONValue) -> String { String(decoding: JSONCoding.encode(value), as: UTF8.self) }

    private static func json(_ row: some StoredRow, _ index: Int) -> JSONValue? {
        row.text(index).flatMap { try? JSONCoding.decode(JSONValue.self, from: Array($0.utf8)) }
    }

    /// The job in `row` (the columns of `columns`, in order), or `nil` if its id, kind or state is unreadable.
    static func record(_ row: some StoredRow) -> JobRecord? {
        guard let id = row.text(0), let kind = row.text(1), let state = row.text(2).flatMap(JobState.init(rawValue:))
        else { return nil }
        let options = JobOptions(
            priority: Int(row.int(3) ?? 0), timeoutSeconds: row.double(4) ?? 0, stallTimeoutSeconds: row.double(5) ?? 0,
            maxAttempts: Int(row.int(6) ?? 1),
            giveUpAfterSeconds: row.double(18) ?? JobOptions.defaultGiveUpAfterSeconds)
        let progress = json(row, 9).flatMap(JobProgress.init(json:)) ?? JobProgress(unit: .items)
        return JobRecord(
            id: id, kind: kind, state: state, options: options, attempt: Int(row.int(7) ?? 0), progress: progress,
            cancellation: json(row, 10).flatMap { try? JSONCoding.convert($0, to: Cancellation.self) },
            error: json(row, 11).flatMap { try? JSONCoding.convert($0, to: JobError.self) },
            createdAt: Timestamp.iso8601(unixSeconds: row.double(14) ?? 0),
            updatedAt: Timestamp.iso8601(unixSeconds: row.double(15) ?? 0),
            params: json(row, 8) ?? .null, result: json(row, 12) ?? .null, retryAt: row.double(13),
            sequence: row.int(16) ?? 0, resumesAttempt: (row.int(17) ?? 0) != 0, key: row.text(19))
    }
}
