import Dispatch
import Foundation
import Synchronization
import TrailbookLoop
import TrailbookPostgres

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Where a daemon keeps its jobs: the embedded SQLite store in its home (the default), or a PostgreSQL database
/// that several daemons share (`daemon --store postgres://…`, issue 15).
public enum JobStoreLocation: Sendable, Equatable {
    /// `$TRAILBOOK_JOBS_HOME/jobs.sqlite3`.
    case sqlite
    /// A shared PostgreSQL database, and how this daemon takes part (lease length, host, queues).
    case postgres(PostgresConnectionString, SharedStoreOptions)
}

/// How a daemon takes part in a shared store (`daemon --store postgres://… --lease --host --queues`).
public struct SharedStoreOptions: Sendable, Equatable {
    /// How long a run's lease lasts unless renewed (by progress and a heartbeat), in seconds.
    public var leaseSeconds: Double
    /// The host name its leases carry and its pinned jobs name (`--host`); `nil` for the machine's (`gethostname`).
    /// Two daemons on one machine given different names act as two hosts (tests).
    public var host: String?
    /// The queues it claims from (`--queues`), at least one.
    public var queues: [String]
    /// The longest a store call waits for the database's answer, the longest requests in flight may go without a
    /// byte back before the connection is given up as lost, and the longest a reconnection attempt may take
    /// (`--store-timeout`), in seconds.
    public var requestTimeoutSeconds: Double

    /// Options; see the members.
    public init(
        leaseSeconds: Double = 30, host: String? = nil, queues: [String] = [JobRecord.defaultQueue],
        requestTimeoutSeconds: Double = 10
    ) {
        self.leaseSeconds = leaseSeconds
        self.host = host
        self.queues = queues
        self.requestTimeoutSeconds = requestTimeoutSeconds
    }
}

/// The job store on PostgreSQL, shared by several daemons (docs/explanation/shared-store.md): the SQLite store's contract
/// (`JobStoring`) plus leases (`LeasingJobStoring`): a daemon claims queued jobs with `FOR UPDATE SKIP LOCKED`,
/// holds a lease (token + expiry on the database's clock) on each job it runs, renews it with progress writes
/// and a heartbeat, and every write about a running job is fenced by its token, so a daemon that lost a lease
/// (it was cut off, and another daemon rescued the job) writes nothing more about that run.
///
/// The connection (`PostgresConnection`, libpq's non-blocking API) runs on a loop of its own, on its own thread;
/// each call of this class, on the daemon's loop thread, waits for its answer (one round trip, a pipeline of
/// statements in one transaction), as a SQLite call waits for its commit, at most `requestTimeoutSeconds`. While
/// the database is unreachable calls fail at once (`JobStoreError.unavailable`) and the connection reconnects
/// with backoff. Messages never contain the connection string's password.
public final class PostgresJobStore: LeasingJobStoring {
    /// This daemon as a lease holder (host name + a random id per start).
    public let owner: PostgresJobQueue.Owner
    /// How long a claimed job's lease lasts without renewal, in seconds (`daemon --lease`); renewed every third.
    public let leaseSeconds: Double
    /// The host this daemon claims pinned jobs for (`daemon --host`, else the host name).
    public var host: String { owner.host }
    /// The queues whose jobs this daemon claims (`daemon --queues`; `default` unless given).
    public let queues: [String]
    /// The longest a call waits for PostgreSQL's answer before it fails with `JobStoreError.unavailable`, in seconds;
    /// also how long requests in flight may go without a byte from the server before the connection is dropped
    /// as lost and made again (`PostgresConnection.responseTimeoutSeconds`), and the longest one reconnection
    /// attempt may take: `SharedStoreOptions`'s, 10 s by default.
    public let requestTimeoutSeconds: Double
    /// Where it connects (its description has no password).
    public let connectionString: PostgresConnectionString
    private let database: PostgresStoreActor
    /// Leases this daemon holds, by job id (loop thread only).
    private var leases: [String: PostgresJobQueue.Lease] = [:]
    /// Runs whose lease was found lost, by job id, until the run is over (`forgetLostLease`, or its fenced write):
    /// writes about the job stay fenced by the lost token. Without it the job would read as one no daemon runs
    /// here, and an end written after another daemon ended the job would pass that fence.
    private var lostLeases: [String: PostgresJobQueue.Lease] = [:]
    /// Jobs whose fenced write in the last `commitGroup` found the lease gone (see `takeLostWrites`).
    private var lostWrites: Set<String> = []
    private let wake = WorkSignal()

    /// Called on the loop thread when another daemon announced work (`NOTIFY`): a submit, a retry that came due.
    public var onWorkAvailable: (() -> Void)? {
        get { wake.callback }
        set { wake.callback = newValue }
    }

    /// Called on the loop thread with a job id and the control (cancel, pause) another daemon asked for a job
    /// this daemon runs (`NOTIFY trailbook_control`).
    public var onControl: ((String, JobControl) -> Void)? {
        get { wake.control }
        set { wake.control = newValue }
    }

    /// Called on the loop thread with the id of a job whose run ended while another daemon's control request
    /// was pending (`NOTIFY trailbook_control 'ended <job>'`, sent by the end's own statement).
    public var onControlledEnd: ((String) -> Void)? {
        get { wake.controlledEnd }
        set { wake.controlledEnd = newValue }
    }

    /// Called on the loop thread with the id of a running job whose lease a renewal sent without waiting (its
    /// progress, the heartbeat) found lost.
    public var onLeaseLost: ((String) -> Void)? {
        get { wake.leaseLost }
        set { wake.leaseLost = newValue }
    }

    /// Called on the loop thread with the events of a feed payload another daemon sent (`publishFeed`).
    public var onFeed: ((String) -> Void)? {
        get { wake.feed }
        set { wake.feed = newValue }
    }

    /// Called on the loop thread when the connection is back after it was lost: feed payloads sent meanwhile by
    /// other daemons are gone (`NOTIFY` reaches only the sessions listening when it is committed).
    public var onFeedInterrupted: (() -> Void)? {
        get { wake.feedInterrupted }
        set { wake.feedInterrupted = newValue }
    }

    /// Feed payloads sent so far: numbers each one's header, so that two equal payloads of one transaction are
    /// both delivered (PostgreSQL folds equal notifications of a transaction into one).
    private var feedPayloads = 0

    /// Connects (waiting at most `connectTimeoutSeconds`) as daemon `daemonID` (a new random id by default) of
    /// host `options.host` (the machine's name by default), claiming from `options.queues`, migrates the schema
    /// (safe when daemons start together) and listens for new work.
    /// - Throws: `JobStoreError.unavailable` if the database cannot be reached or migrated.
    public init(
        connectionString: PostgresConnectionString, options: SharedStoreOptions, daemonID: String? = nil,
        connectTimeoutSeconds: Double = 10
    ) throws {
        self.connectionString = connectionString
        self.leaseSeconds = options.leaseSeconds
        requestTimeoutSeconds = options.requestTimeoutSeconds
        queues = options.queues
        owner = PostgresJobQueue.Owner(host: options.host ?? Self.hostName(), daemonID: daemonID ?? UUID.random())
        let loop = EventLoop()
        let thread = Thread { loop.run() }
        thread.name = "postgres-store"
        thread.start()
        database = PostgresStoreActor(loop: loop)
        let wake = self.wake
        let me = owner.daemonID
        let (queues, host) = (options.queues, owner.host)
        let responseTimeout = requestTimeoutSeconds
        try wait(timeout: connectTimeoutSeconds) { database in
            let connection = PostgresConnection(loop: database.loop, connectionString: connectionString)
            // A silent network cut (no FIN) fails the requests in flight and reconnects once a call would have
            // given up anyway, instead of leaving every later request queued behind the lost ones.
            connection.responseTimeoutSeconds = responseTimeout
            // Likewise a reconnection attempt into the cut: given up after the same silence, so that the next
            // attempt, once the network is back, comes that much sooner.
            connection.reconnectPolicy.attemptTimeoutSeconds = responseTimeout
            connection.onNotification = { notification in
                if notification.channel == PostgresJobQueue.feedChannel {
                    // "<daemon> <number>\n<events>": this daemon's own are not relayed back to it.
                    let payload = notification.payload
                    guard let newline = payload.firstIndex(of: "\n"),
                        !payload[..<newline].hasPrefix(me + " ")
                    else { return }
                    let events = String(payload[payload.index(after: newline)...])
                    return EventLoop.main.execute { wake.feed?(events) }
                }
                guard notification.channel == PostgresJobQueue.controlChannel else {
                    // Work this daemon may not claim (another queue, pinned to another host) costs it no claim.
                    guard WorkNotice(payload: notification.payload).concerns(queues: queues, host: host) else { return }
                    return EventLoop.main.execute { wake.fire() }
                }
                // "<daemon> <control> <job>": only the daemon named acts. "ended <job>": a controlled run's end
                // is written, for whichever daemon asked.
                let parts = notification.payload.split(separator: " ").map(String.init)
                if parts.count == 2, parts[0] == "ended" {
                    return EventLoop.main.execute { wake.controlledEnd?(parts[1]) }
                }
                guard parts.count == 3, parts[0] == me, let control = JobControl(rawValue: parts[1]) else { return }
                EventLoop.main.execute { wake.control?(parts[2], control) }
            }
            // Notifications sent while the connection was down are lost: look for work once it is back.
            connection.onReconnect = {
                EventLoop.main.execute {
                    wake.fire()
                    wake.feedInterrupted?()
                }
            }
            let queue = PostgresJobQueue(connection: connection)
            database.queue = queue
            try await connection.connect()
            try await queue.migrate()
            try await connection.listen(PostgresJobQueue.jobsChannel)
            try await connection.listen(PostgresJobQueue.controlChannel)
            try await connection.listen(PostgresJobQueue.feedChannel)
        }
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(cString: buffer)
    }

    // MARK: waiting for the database

    /// Runs `body` on the database's loop, after every request made before it, and waits for it on the calling
    /// thread, at most `timeout` seconds.
    private func wait<T: Sendable>(
        timeout: Double? = nil, _ body: @escaping @Sendable (isolated PostgresStoreActor) async throws -> T
    ) throws -> T {
        let outcome = Mutex<WaitOutcome<T>>(.waiting)
        let done = DispatchSemaphore(value: 0)
        database.submit { database in
            // A request given up on before it started is not made: the caller was told it failed.
            guard outcome.withLock({ $0.start() }) else { return }
            let result: Result<T, any Error>
            do { result = .success(try await body(database)) } catch { result = .failure(error) }
            outcome.withLock { $0 = .answered(result) }
            done.signal()
        }
        let seconds = timeout ?? requestTimeoutSeconds
        let answered = done.wait(timeout: .now() + seconds) == .success
        let result = outcome.withLock { state -> Result<T, any Error>? in
            if case .answered(let result) = state { return result }
            state.giveUp()
            return nil
        }
        guard answered, let result else { throw unanswered(within: seconds) }
        return try unwrapped(result)
    }

    /// Where a request made by `wait` or `sendWaitingAtMost` is.
    private enum WaitOutcome<T: Sendable>: Sendable {
        case waiting, started, abandoned
        case answered(Result<T, any Error>)

        /// Marks a waiting request started; `false` if it was given up on first (then it must not be made).
        mutating func start() -> Bool {
            guard case .waiting = self else { return false }
            self = .started
            return true
        }

        /// The caller stops waiting: a request not started yet never will be.
        mutating func giveUp() {
            if case .waiting = self { self = .abandoned }
        }
    }

    /// The error of a request the database did not answer within `seconds`.
    private func unanswered(within seconds: Double) -> JobStoreError {
        .unavailable(message: "PostgreSQL (\(connectionString)) did not answer within \(Self.seconds(seconds))")
    }

    /// Runs `body` on the database's loop, after every request made before it, without waiting; `completion` gets
    /// its outcome on the daemon's loop thread (errors as `wait` throws them). With `key`, a newer request of the
    /// same key made before this one started replaces it, and `completion` is not called.
    private func send<T: Sendable>(
        coalescing key: String? = nil, job: String? = nil, ahead: Set<String>? = nil,
        _ body: @escaping @Sendable (isolated PostgresStoreActor) async throws -> T,
        completion: @escaping (Result<T, any Error>) -> Void
    ) {
        let completion = LoopConfined(completion)
        database.submit({ database in
            let result: Result<T, any Error>
            do { result = .success(try await body(database)) } catch { result = .failure(error) }
            EventLoop.main.execute { completion.value(result) }
        }, coalescing: key, job: job, ahead: ahead)
    }

    /// `send`, given up after `requestTimeoutSeconds` as `wait` gives up: `completion` then gets
    /// `JobStoreError.unavailable`, and a request not started by then is never made. A request already under way
    /// may still land; its answer is then dropped.
    private func sendWaitingAtMost<T: Sendable>(
        ahead: Set<String>? = nil, _ body: @escaping @Sendable (isolated PostgresStoreActor) async throws -> T,
        completion: @escaping (Result<T, any Error>) -> Void
    ) {
        let outcome = Mutex<WaitOutcome<T>>(.waiting)
        let seconds = requestTimeoutSeconds
        let timeout = unanswered(within: seconds)
        let timer = LoopTimer(loop: .main)
        var delivered = false
        let deliver: (Result<T, any Error>) -> Void = { result in
            guard !delivered else { return }
            delivered = true
            timer.close()
            completion(result)
        }
        timer.start(seconds: seconds) {
            outcome.withLock { $0.giveUp() }
            deliver(.failure(timeout))
        }
        send(ahead: ahead, { database -> T? in
            guard outcome.withLock({ $0.start() }) else { return nil }
            return try await body(database)
        }) { [weak self] result in
            guard let self else { return }
            // `nil`: given up on before it started; the timer has answered.
            if case .success(nil) = result { return }
            deliver(Result { try self.unwrapped(result)! })
        }
    }

    private func unwrapped<T>(_ result: Result<T, any Error>) throws -> T {
        switch result {
        case .success(let value): return value
        case .failure(let error as PostgresError):
            // PostgresConnection redacts its messages; the connection string printed here is redacted too.
            throw JobStoreError.unavailable(message: "\(error) (\(connectionString))")
        case .failure(let error): throw error
        }
    }

    private static func seconds(_ value: Double) -> String { Scheduler.seconds(value) }

    /// One pipeline (one round trip, one transaction). Internal, not private: the entry lists use it
    /// (Entries/PostgresJobStore+Entries.swift).
    func run(_ statements: [PostgresStatement]) throws -> [PostgresResult] {
        try wait { database in try await database.queue!.connection.pipeline(statements) }
    }

    private func rows(_ sql: String, _ parameters: [PostgresValue] = []) throws -> [PostgresRow] {
        try run([PostgresStatement(sql, parameters)])[0].rows
    }

    // MARK: rows

    /// The SQLite store's columns, in its order (`JobStore.record` decodes both).
    private static let columns = """
        id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt, params, progress,
        cancellation, error, result, retry_at - extract(epoch FROM clock_timestamp()), created_at, updated_at, sequence,
        resumes_attempt::int, give_up_after_s,
        idempotency_key, queue, pinned_host
        """
    /// `columns`, one by one.
    private static let columnList = columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    /// How many columns `columns` names: a statement's own columns come after them.
    private static let columnCount = columnList.count

    /// A row of `columns` (the SQLite store's, then the shared store's own `queue` and `pinned_host`). Its
    /// `retry_at` comes as seconds from the database's now (`DatabaseClock`) and is made the daemon's time.
    private static func record(_ row: PostgresRow) -> JobRecord? {
        guard var job = JobStore.record(row) else { return nil }
        job.retryAt = DatabaseClock.local(remaining: job.retryAt)
        job.queue = row.text(20) ?? JobRecord.defaultQueue
        job.pinnedHost = row.text(21)
        return job
    }

    private func records(_ sql: String, _ parameters: [PostgresValue] = []) throws -> [JobRecord] {
        try rows(sql, parameters).compactMap(Self.record)
    }

    private static func optionalText(_ value: JSONValue?) -> PostgresValue {
        guard let value, !value.isNull else { return .null }
        return .text(JobStore.text(value))
    }

    private static func insertStatement(_ job: JobRecord, digest: String?) -> PostgresStatement {
        PostgresStatement(
            """
            INSERT INTO trailbook_jobs (id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt,
                params, progress, created_at, updated_at, give_up_after_s, idempotency_key, submit_digest, queue,
                pinned_host)
            VALUES ($1, $2, $3, $4::integer, $5::float8, $6::float8, $7::integer, $8::integer, $9, $10,
                \(DatabaseClock.now), \(DatabaseClock.now), $11::float8, $12, $13, $14, $15)
            RETURNING sequence, created_at
            """,
            [
                .text(job.id), .text(job.kind), .text(job.state.rawValue), .integer(Int64(job.options.priority)),
                .double(job.options.timeoutSeconds), .double(job.options.stallTimeoutSeconds),
                .integer(Int64(job.options.maxAttempts)), .integer(Int64(job.attempt)), .text(JobStore.text(job.params)),
                .text(job.progress.jsonText), .double(job.options.giveUpAfterSeconds),
                job.key.map { .text($0) } ?? .null, digest.map { .text($0) } ?? .null, .text(job.queue),
                job.pinnedHost.map { .text($0) } ?? .null,
            ])
    }

    private static func duplicateKeyStatements(_ keys: [String], of id: String) -> [PostgresStatement] {
        Set(keys).sorted().map {
            PostgresStatement(
                "INSERT INTO trailbook_duplicate_keys (key, job_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [.text($0), .text(id)])
        }
    }

    /// A lifecycle write, fenced: a job this daemon holds the lease of is written only while that lease holds (and
    /// the lease is released when the run is over); any other job only while it waits (`queued`, `paused`,
    /// `needs_retry`): not while another daemon runs it, nor once it ended (a cancel read the job queued, and
    /// another daemon ran it to its end before the cancel's write). An end drops the
    /// job's duplicate keys, and `addingCleanUp` records its clean-up, only if the write itself happened.
    ///
    /// A run's write out of `running` also records the run's lease token (`end_token`): the same write tried again
    /// (its first answer was lost, past the request timeout or in a cut) finds that it landed, and counts as
    /// written without writing anything again, where another daemon's end of the job fences it off. Its result
    /// has one row when written (now or by that earlier try), none when fenced off. Times are the database's
    /// (`DatabaseClock`).
    private func writeStatement(_ job: JobRecord, addingCleanUp: Bool) -> PostgresStatement {
        let token = fenceToken(of: job.id)
        let releases = job.state != .running
        let fence =
            token != nil
            ? "lease_token = $10::bigint AND state = 'running'"
            : "lease_token IS NULL AND state IN ('queued', 'paused', 'needs_retry') AND $10::bigint IS NULL"
        let release =
            releases
            ? ", lease_host = NULL, lease_daemon = NULL, lease_token = NULL, lease_expires_at = NULL, control = NULL, "
                + "end_token = $10::bigint" : ""
        // A run that ends with a control request pending tells the daemon waiting for it (`onControlledEnd`).
        // `asked` reads the row as it was before this statement's UPDATE (one snapshot for every part of it); a
        // request committed in between is not seen here, and its daemon finds the end by polling.
        let told =
            releases
            ? ", (SELECT pg_notify('\(PostgresJobQueue.controlChannel)', 'ended ' || id) FROM asked)::text" : ""
        // An earlier try of this very write that landed: the row left `running` under this run's token, for the
        // state this write gives it (both read before this statement's UPDATE, which then finds no running row).
        let landed =
            token != nil && releases
            ? "UNION ALL SELECT id, NULL::text FROM trailbook_jobs WHERE id = $1 AND end_token = $10::bigint AND state = $2"
            : ""
        return PostgresStatement(
            """
            WITH asked AS (
                SELECT 1 FROM trailbook_jobs WHERE id = $1 AND control IS NOT NULL
            ), written AS (
                UPDATE trailbook_jobs SET state = $2, attempt = $3::integer, cancellation = $4, error = $5, result = $6,
                    retry_at = \(DatabaseClock.at(7)), progress = $8, updated_at = \(DatabaseClock.now),
                    resumes_attempt = $9::boolean\(release)
                WHERE id = $1 AND \(fence)
                RETURNING id
            ), dropped AS (
                DELETE FROM trailbook_duplicate_keys WHERE $11::boolean AND job_id IN (SELECT id FROM written)
            ), cleanup AS (
                INSERT INTO trailbook_cleanups (job_id, tries, next_at, created_at)
                SELECT id, 0, \(DatabaseClock.now), \(DatabaseClock.now) FROM written WHERE $12::boolean
                ON CONFLICT DO NOTHING
            )
            SELECT id\(told) FROM written \(landed)
            """,
            [
                .text(job.id), .text(job.state.rawValue), .integer(Int64(job.attempt)),
                Self.optionalText(job.cancellation.map { JSONCoding.value(of: $0) }),
                Self.optionalText(job.error.map { JSONCoding.value(of: $0) }), Self.optionalText(job.result),
                DatabaseClock.offset(of: job.retryAt), .text(job.progress.jsonText), .bool(job.resumesAttempt),
                token.map { .integer($0) } ?? .null, .bool(job.state.isTerminal),
                .bool(addingCleanUp),
            ])
    }

    /// The lease token a write of job `id` is fenced by now (`writeStatement`), `nil` for an unleased write.
    private func fenceToken(of id: String) -> Int64? { (leases[id] ?? lostLeases[id])?.token }

    /// Notes which of the writes of `jobs` (each with the lease token it was fenced by; results `results`) were
    /// fenced off, and releases the leases of runs that are over. A lease that changed since the write was made
    /// (the job was claimed again while a group was in flight) is not this write's to release.
    /// - Returns: the ids fenced off.
    private func settle(_ jobs: [(job: JobRecord, token: Int64?)], _ results: ArraySlice<PostgresResult>) -> Set<String> {
        var lost: Set<String> = []
        for ((job, token), result) in zip(jobs, results) {
            if result.rows.isEmpty { lost.insert(job.id) }
            guard result.rows.isEmpty || job.state != .running else { continue }
            if leases[job.id]?.token == token { leases[job.id] = nil }
            if lostLeases[job.id]?.token == token { lostLeases[job.id] = nil }
        }
        return lost
    }

    // MARK: JobStoring

    public func insert(_ jobs: inout [JobRecord], digests: [String?], duplicateKeys: [[String]]) throws {
        try commitGroup(inserting: &jobs, digests: digests, duplicateKeys: duplicateKeys, updating: [], durable: true)
    }

    public func job(key: String) throws -> (job: JobRecord, digest: String?)? {
        let reading = try readWaiting(.idempotencyKey(key))
        return reading.jobs.first.map { ($0, reading.submitDigest) }
    }

    public func unfinishedJobs(sharing keys: [String], kind: String) throws -> [JobRecord] {
        guard !keys.isEmpty else { return [] }
        return try readWaiting(.unfinished(sharing: keys, kind: kind)).jobs
    }

    /// Always: the shared schema records duplicate keys from its first job on.
    public func duplicateKeysIndexed() throws -> Bool { true }

    public func indexDuplicateKeys(_ keys: (JobRecord) -> [String]) throws {}

    /// A write back to `queued` (a resume, a retry coming due) notifies the daemons that may claim the job, in the
    /// same transaction, as a group's does.
    public func update(_ job: JobRecord, addingCleanUp: Bool) throws {
        let token = fenceToken(of: job.id)
        let results = try run([writeStatement(job, addingCleanUp: addingCleanUp)] + Self.workNotices(for: [job]))
        if !settle([(job, token)], results[...]).isEmpty { throw JobStoreError.leaseLost(id: job.id) }
    }

    /// The `NOTIFY`s that wake the daemons that may claim those of `jobs` that are `queued` (`WorkNotice`).
    private static func workNotices(for jobs: [JobRecord]) -> [PostgresStatement] {
        WorkNotice.notices(for: jobs.filter { $0.state == .queued }.map { ($0.queue, $0.pinnedHost) }).map(\.statement)
    }

    /// As the protocol says; a fenced-off write of `updating` (its lease is lost, or another daemon runs the job)
    /// does not fail the group: the rest is written, and `takeLostWrites()` names it.
    public func commitGroup(
        inserting: inout [JobRecord], digests: [String?], duplicateKeys: [[String]],
        updating: [(job: JobRecord, addingCleanUp: Bool)], durable: Bool
    ) throws {
        let group = GroupStatements(self, inserting: inserting, digests: digests, duplicateKeys: duplicateKeys, updating: updating)
        guard !group.statements.isEmpty else { return }
        let written = group.outcome(of: try run(group.statements), inserting, store: self)
        inserting = written.inserted
        lostWrites.formUnion(written.lost)
    }

    /// As the protocol says: `commitGroup` without waiting, fenced the same way, given up after
    /// `requestTimeoutSeconds`.
    public func sendGroup(
        inserting: [JobRecord], digests: [String?], duplicateKeys: [[String]],
        updating: [(job: JobRecord, addingCleanUp: Bool)], completion: @escaping (Result<GroupWritten, any Error>) -> Void
    ) {
        let group = GroupStatements(self, inserting: inserting, digests: digests, duplicateKeys: duplicateKeys, updating: updating)
        guard !group.statements.isEmpty else { return completion(.success(GroupWritten(inserted: inserting, lost: []))) }
        let statements = group.statements
        // Ahead of the other jobs' checkpoints and progress (a busy daemon always has some waiting): its submits
        // are answered and its ends land one round trip after they are made.
        let ahead = Set(updating.map(\.job.id) + inserting.map(\.id))
        sendWaitingAtMost(ahead: ahead, { database in try await database.queue!.connection.pipeline(statements) }) {
            [weak self] result in
            guard let self else { return }
            completion(result.map { group.outcome(of: $0, inserting, store: self) })
        }
    }

    /// The statements of one group commit (one transaction), and where their results are.
    private struct GroupStatements {
        var statements: [PostgresStatement] = []
        /// The index of each new job's `INSERT … RETURNING sequence, created_at`.
        var insertIndices: [Int] = []
        /// The index of the first lifecycle write; they follow in `updating`'s order.
        var firstUpdate = 0
        /// The jobs of the lifecycle writes, and the lease token each write was fenced by (`nil`: unleased).
        var updated: [(job: JobRecord, token: Int64?)] = []

        init(
            _ store: PostgresJobStore, inserting: [JobRecord], digests: [String?], duplicateKeys: [[String]],
            updating: [(job: JobRecord, addingCleanUp: Bool)]
        ) {
            for (index, job) in inserting.enumerated() {
                insertIndices.append(statements.count)
                statements.append(PostgresJobStore.insertStatement(job, digest: index < digests.count ? digests[index] : nil))
                if index < duplicateKeys.count {
                    statements += PostgresJobStore.duplicateKeyStatements(duplicateKeys[index], of: job.id)
                }
            }
            firstUpdate = statements.count
            statements += updating.map { store.writeStatement($0.job, addingCleanUp: $0.addingCleanUp) }
            updated = updating.map { ($0.job, store.fenceToken(of: $0.job.id)) }
            // Wakes the other daemons that may claim the jobs (delivered at commit).
            statements += PostgresJobStore.workNotices(for: inserting + updating.map(\.job))
        }

        /// The new jobs as stored (their sequence numbers and timestamps), and the writes fenced off (their leases
        /// settled).
        func outcome(of results: [PostgresResult], _ inserting: [JobRecord], store: PostgresJobStore) -> GroupWritten {
            var inserted = inserting
            for (index, at) in insertIndices.enumerated() {
                guard let row = results[at].rows.first else { continue }
                inserted[index].sequence = row.int(0) ?? 0
                if let created = row.double(1) {
                    inserted[index].createdAt = Timestamp.iso8601(unixSeconds: created)
                    inserted[index].updatedAt = inserted[index].createdAt
                }
            }
            let lost = store.settle(updated, results[firstUpdate..<firstUpdate + updated.count])
            return GroupWritten(inserted: inserted, lost: lost)
        }
    }

    /// Fenced as a waiting job's write is (`writeStatement`), and only while the job is `paused` (its one use:
    /// `resume`): another daemon's change since the job was read stands.
    /// - Throws: `JobStoreError.leaseLost` when fenced off; the connection's errors.
    public func updateParams(id: String, _ params: JSONValue) throws {
        let written = try rows(
            """
            UPDATE trailbook_jobs SET params = $2, updated_at = \(DatabaseClock.now)
            WHERE id = $1 AND state = 'paused' AND lease_token IS NULL RETURNING id
            """,
            [.text(id), .text(JobStore.text(params))])
        if written.isEmpty { throw JobStoreError.leaseLost(id: id) }
    }

    /// A running job's progress is its lease's renewal, sent without waiting (the loop goes on while it travels);
    /// a renewal that finds the lease gone is reported through `onLeaseLost`, and one the database could not take
    /// (unreachable) is made good by the next report or the heartbeat. Any other job's progress is written waiting.
    public func saveProgress(id: String, _ progress: JobProgress) throws {
        // A run whose lease is lost writes nothing more: the row is another run's (or the queue's) now.
        guard lostLeases[id] == nil else { return }
        guard let lease = leases[id] else {
            _ = try rows(
                """
                UPDATE trailbook_jobs SET progress = $2, updated_at = \(DatabaseClock.now)
                WHERE id = $1 AND lease_token IS NULL
                """,
                [.text(id), .text(progress.jsonText)])
            return
        }
        let renewal = PostgresJobQueue.Renewal(lease: lease, progress: progress.jsonText)
        let seconds = leaseSeconds
        send(coalescing: "progress " + id, job: id, { database in try await database.queue!.renew([renewal], leaseSeconds: seconds) }) {
            [weak self] result in
            self?.renewed([lease], result)
        }
    }

    /// Settles renewals of `sent` (`result`: the renewed leases, `nil` for one lost): a lease still held under the
    /// same token is updated or, if lost, dropped and reported (`onLeaseLost`). One released or replaced meanwhile
    /// (the run ended, or the job was claimed again) is left alone.
    /// - Returns: the ids whose lease is lost.
    @discardableResult
    private func renewed(_ sent: [PostgresJobQueue.Lease], _ result: Result<[PostgresJobQueue.Lease?], any Error>) -> [String] {
        guard case .success(let renewed) = result else { return [] }
        var lost: [String] = []
        for (lease, new) in zip(sent, renewed) where leases[lease.jobID]?.token == lease.token {
            guard let new else {
                markLost(lease.jobID)
                lost.append(lease.jobID)
                continue
            }
            leases[lease.jobID] = new
        }
        for id in lost { wake.leaseLost?(id) }
        return lost
    }

    public func saveCheckpoint(id: String, _ checkpoint: JSONValue, progress: JobProgress) throws {
        guard let lease = leases[id] else { throw JobStoreError.leaseLost(id: id) }
        let checkpointText = JobStore.text(checkpoint)
        let progressText = progress.jsonText
        let saved = try wait { database in
            try await database.queue!.saveCheckpoint(lease, checkpoint: checkpointText, progress: progressText)
        }
        guard saved else {
            markLost(id)
            throw JobStoreError.leaseLost(id: id)
        }
    }

    public func sendCheckpoint(
        id: String, _ checkpoint: JSONValue, progress: JobProgress, completion: @escaping ((any Error)?) -> Void
    ) {
        guard let lease = leases[id] else { return completion(JobStoreError.leaseLost(id: id)) }
        let checkpointText = JobStore.text(checkpoint)
        let progressText = progress.jsonText
        // A newer checkpoint of the job, made before this one is sent, makes it moot.
        send(coalescing: "checkpoint " + id, job: id, { database in
            try await database.queue!.saveCheckpoint(lease, checkpoint: checkpointText, progress: progressText)
        }) { [weak self] result in
            guard let self else { return }
            let saved: Bool
            do { saved = try self.unwrapped(result) } catch { return completion(error) }
            if saved { return completion(nil) }
            if leases[id]?.token == lease.token {
                markLost(id)
            } else if lostLeases[id]?.token != lease.token {
                return  // that run is over and another holds the job now: nothing to report, nothing written
            }
            completion(JobStoreError.leaseLost(id: id))
        }
    }

    public func checkpoint(id: String) throws -> JSONValue? {
        guard let text = try rows("SELECT checkpoint FROM trailbook_jobs WHERE id = $1", [.text(id)]).first?.text(0)
        else { return nil }
        return try? JSONCoding.decode(JSONValue.self, from: Array(text.utf8))
    }

    public func job(id: String) throws -> JobRecord? {
        try records("SELECT \(Self.columns) FROM trailbook_jobs WHERE id = $1", [.text(id)]).first
    }

    public func jobs(idPrefix prefix: String, limit: Int) throws -> [JobRecord] {
        try readWaiting(.idPrefix(prefix, limit: limit)).jobs
    }

    public func jobs(states: [JobState]?, kind: String?, limit: Int) throws -> [JobRecord] {
        try readWaiting(.filtered(states: states, kind: kind, limit: limit)).jobs
    }

    public func read(_ query: JobQuery, counting: Bool, completion: @escaping (Result<JobReading, any Error>) -> Void) {
        let statements = [Self.statement(query)] + (counting ? [Self.countsStatement] : [])
        sendWaitingAtMost({ database in try await database.queue!.connection.pipeline(statements).map(\.rows) }) { result in
            completion(result.map { Self.reading(query, $0) })
        }
    }

    /// `read(query, counting: false)`, waited for on the calling thread (the `JobStoring` calls).
    private func readWaiting(_ query: JobQuery) throws -> JobReading {
        Self.reading(query, try run([Self.statement(query)]).map(\.rows))
    }

    /// What `statement(query)`'s rows (and `countsStatement`'s after them, when sent) say.
    private static func reading(_ query: JobQuery, _ rows: [[PostgresRow]]) -> JobReading {
        let digest: String? = if case .idempotencyKey = query { rows[0].first?.text(columnCount) } else { nil }
        return JobReading(
            jobs: rows[0].compactMap(Self.record), unfinishedCounts: rows.count > 1 ? Self.counts(rows[1]) : nil,
            submitDigest: digest)
    }

    /// The `SELECT` of `query`, of `columns`.
    private static func statement(_ query: JobQuery) -> PostgresStatement {
        switch query {
        case .idPrefix(let prefix, let limit):
            let escaped = prefix.lowercased().filter { $0.isHexDigit || $0 == "-" }
            return PostgresStatement(
                "SELECT \(columns) FROM trailbook_jobs WHERE id >= $1 AND id < $2 ORDER BY id LIMIT $3::bigint",
                [.text(escaped), .text(escaped + "\u{7f}"), .integer(Int64(limit))])
        case .filtered(let states, let kind, let limit):
            return PostgresStatement(
                """
                SELECT * FROM (
                    SELECT \(columns) FROM trailbook_jobs
                    WHERE ($1::text[] IS NULL OR state = ANY($1::text[])) AND ($2::text IS NULL OR kind = $2)
                    ORDER BY sequence DESC LIMIT $3::bigint
                ) newest ORDER BY sequence
                """,
                [states.map { .textArray($0.map(\.rawValue)) } ?? .null, kind.map { .text($0) } ?? .null, .integer(Int64(limit))])
        case .idempotencyKey(let key):
            // `submit_digest` after the record's columns (`columnCount`).
            return PostgresStatement(
                "SELECT \(columns), submit_digest FROM trailbook_jobs WHERE idempotency_key = $1", [.text(key)])
        case .unfinished(let keys, let kind):
            return PostgresStatement(
                """
                SELECT \(columns) FROM trailbook_jobs WHERE id IN (
                    SELECT job_id FROM trailbook_duplicate_keys WHERE key = ANY($1::text[]))
                AND kind = $2 AND state IN ('queued', 'running', 'paused', 'needs_retry') ORDER BY sequence
                """, [.textArray(keys), .text(kind)])
        }
    }

    public func queuedJobs(limit: Int, skipping: Set<String>) throws -> [JobRecord] {
        let queued = try records(
            "SELECT \(Self.columns) FROM trailbook_jobs WHERE state = 'queued' ORDER BY priority DESC, sequence LIMIT $1::bigint",
            [.integer(Int64(limit + skipping.count))])
        return Array(queued.lazy.filter { !skipping.contains($0.id) }.prefix(limit))
    }

    public func highestQueuedPriority(skipping: Set<String>) throws -> Int? {
        try queuedJobs(limit: 1, skipping: skipping).first?.options.priority
    }

    public func countsByState() throws -> [JobState: Int] {
        Self.counts(try run([Self.countsStatement])[0].rows)
    }

    /// Ended jobs are most of the table and no summary shows them: only unfinished states are counted.
    private static let countsStatement = PostgresStatement(
        "SELECT state, count(*) FROM trailbook_jobs WHERE state IN ('queued', 'running', 'paused', 'needs_retry') GROUP BY state")

    /// The counts of `countsStatement`'s rows, by state.
    private static func counts(_ rows: [PostgresRow]) -> [JobState: Int] {
        var counts: [JobState: Int] = [:]
        for row in rows {
            if let state = row.text(0).flatMap(JobState.init(rawValue:)) { counts[state] = Int(row.int(1) ?? 0) }
        }
        return counts
    }

    /// The block comes from the shared sequence `trailbook_feed_seq`, under an advisory lock so that two daemons
    /// starting together get disjoint blocks.
    public func reserveSequenceBlock(count: Int64) throws -> Int64 {
        let results = try run([
            PostgresStatement("SELECT pg_advisory_xact_lock($1::bigint)", [.integer(Self.feedSequenceLockKey)]),
            PostgresStatement(
                "SELECT setval('trailbook_feed_seq', nextval('trailbook_feed_seq') + $1::bigint - 1)", [.integer(count)]),
        ])
        return (results[1].rows.first?.int(0) ?? count) - count + 1
    }

    /// "tbfeed" in ASCII: the advisory lock of `reserveSequenceBlock`.
    static let feedSequenceLockKey: Int64 = 0x7462_6665_6564

    /// `now` and the times returned are the daemon's wall clock; the rows' are the database's (`DatabaseClock`).
    public func dueCleanUps(now: Double) throws -> [PendingCleanUp] {
        try rows(
            """
            SELECT job_id, tries, \(DatabaseClock.remaining("created_at")), \(DatabaseClock.remaining("next_at"))
            FROM trailbook_cleanups WHERE $1::float8 IS NULL OR next_at <= \(DatabaseClock.at(1)) ORDER BY next_at
            """,
            [now.isFinite ? DatabaseClock.offset(of: now) : .null]
        ).compactMap { row in
            row.text(0).map {
                PendingCleanUp(
                    jobID: $0, tries: Int(row.int(1) ?? 0),
                    createdAt: DatabaseClock.local(remaining: row.double(2)) ?? 0,
                    nextAt: DatabaseClock.local(remaining: row.double(3)) ?? 0)
            }
        }
    }

    /// `nextAt` is the daemon's wall clock, kept on the database's (`DatabaseClock`).
    public func rescheduleCleanUp(jobID: String, tries: Int, nextAt: Double, error: String) throws {
        _ = try rows(
            """
            UPDATE trailbook_cleanups SET tries = $2::integer, next_at = \(DatabaseClock.at(3)), last_error = $4
            WHERE job_id = $1
            """,
            [.text(jobID), .integer(Int64(tries)), DatabaseClock.offset(of: nextAt), .text(error)])
    }

    public func removeCleanUp(jobID: String) throws {
        _ = try rows("DELETE FROM trailbook_cleanups WHERE job_id = $1", [.text(jobID)])
    }

    /// Nothing to do: PostgreSQL's row locks are never waited for here (claims skip locked rows).
    public func failFastOnLocks() {}

    // MARK: LeasingJobStoring

    public func sendClaim(limit: Int, kinds: [String], completion: @escaping (Result<[ClaimedRun], any Error>) -> Void) {
        guard limit > 0, !kinds.isEmpty else { return completion(.success([])) }
        sendWaitingAtMost(claimRequest(limit: limit, kinds: kinds)) { [weak self] result in
            guard let self else { return }
            completion(result.map { self.took($0) })
        }
    }

    /// The request of a claim: the claimed jobs (passing over those under a lease this daemon holds or lost) with
    /// their rows, in one statement (the claim's `RETURNING`): one round trip.
    private func claimRequest(
        limit: Int, kinds: [String]
    ) -> @Sendable (isolated PostgresStoreActor) async throws -> [PostgresJobQueue.ClaimedJob] {
        let owner = self.owner
        let seconds = leaseSeconds
        let queues = self.queues
        let running = Array(leases.keys) + Array(lostLeases.keys)
        return { database in
            try await database.queue!.claim(
                owner: owner, queues: queues, kinds: kinds, limit: limit, leaseSeconds: seconds, excluding: running,
                alsoReturning: Self.columnList)
        }
    }

    /// The claimed jobs as records with their checkpoints, in run order, their leases now held by this daemon.
    private func took(_ claimed: [PostgresJobQueue.ClaimedJob]) -> [ClaimedRun] {
        claimed.compactMap { claimed in
            leases[claimed.id] = claimed.lease
            lostLeases[claimed.id] = nil
            guard let job = Self.record(claimed.returned) else { return nil }
            let checkpoint = claimed.checkpoint.flatMap { try? JSONCoding.decode(JSONValue.self, from: Array($0.utf8)) }
            return ClaimedRun(job: job, checkpoint: checkpoint)
        }
    }

    /// Four statements in the order `LeaseMaintenance` lists them, then the rows of the jobs it moved, on the
    /// store's thread; `completion` runs on the loop thread. A lease found lost is also reported through
    /// `onLeaseLost`.
    public func maintainLeases(completion: @escaping (LeaseMaintenance) -> Void) {
        let sent = Array(leases.values)
        let renewals = sent.map { PostgresJobQueue.Renewal(lease: $0) }
        let seconds = leaseSeconds
        let daemon = owner.daemonID
        let columns = Self.columns
        send({ database -> Tended in
            let queue = database.queue!
            let renewed = try await queue.renew(renewals, leaseSeconds: seconds)
            let controls = try await queue.connection.query(
                "SELECT id, control FROM trailbook_jobs WHERE lease_daemon = $1 AND state = 'running' AND control IS NOT NULL",
                [.text(daemon)]
            ).rows.compactMap { row -> Tended.Control? in
                guard let id = row.text(0), let control = row.text(1).flatMap(JobControl.init(rawValue:)) else { return nil }
                return Tended.Control(id: id, control: control)
            }
            let rescued = try await queue.rescueExpiredLeases()
            let queuedAgain = try await queue.queueDueRetries()
            let moved = rescued + queuedAgain
            let rows = moved.isEmpty ? [] : try await queue.connection.query(
                "SELECT \(columns) FROM trailbook_jobs WHERE id = ANY($1::text[])", [.textArray(moved)]
            ).rows
            return Tended(renewed: renewed, controls: controls, rescued: rescued, queuedAgain: queuedAgain, rows: rows)
        }) { [weak self] result in
            guard let self else { return }
            let lost = self.renewed(sent, result.map(\.renewed))
            guard case .success(let tended) = result else {
                return completion(LeaseMaintenance(lost: [], controls: [], rescued: [], queuedAgain: []))
            }
            var byID: [String: JobRecord] = [:]
            for row in tended.rows { if let job = Self.record(row) { byID[job.id] = job } }
            completion(
                LeaseMaintenance(
                    lost: lost, controls: tended.controls.map { ($0.id, $0.control) },
                    rescued: tended.rescued.compactMap { byID[$0] }, queuedAgain: tended.queuedAgain.compactMap { byID[$0] }))
        }
    }

    /// What `maintainLeases` brings back from the store's thread.
    private struct Tended: Sendable {
        struct Control: Sendable {
            var id: String
            var control: JobControl
        }
        var renewed: [PostgresJobQueue.Lease?]
        var controls: [Control]
        var rescued: [String]
        var queuedAgain: [String]
        var rows: [PostgresRow]
    }

    public func requestControl(_ control: JobControl, of id: String, completion: @escaping (Result<Bool, any Error>) -> Void) {
        let statement = PostgresStatement(
            """
            WITH asked AS (
                UPDATE trailbook_jobs SET control = $2 WHERE id = $1 AND state = 'running' RETURNING id, lease_daemon
            )
            SELECT pg_notify($3, lease_daemon || ' ' || $2 || ' ' || id) FROM asked
            """, [.text(id), .text(control.rawValue), .text(PostgresJobQueue.controlChannel)])
        sendWaitingAtMost({ database in try await database.queue!.connection.pipeline([statement])[0].rows }) { result in
            completion(result.map { !$0.isEmpty })
        }
    }

    /// One pipeline of `SELECT pg_notify('trailbook_feed', …)`, one per payload, each headed `<daemon id> <n>`;
    /// sent from the store's thread while the loop goes on.
    public func publishFeed(_ payloads: [String], completion: @escaping @Sendable (Bool) -> Void) {
        var statements: [PostgresStatement] = []
        for payload in payloads {
            feedPayloads += 1
            statements.append(
                PostgresStatement(
                    "SELECT pg_notify($1, $2)",
                    [.text(PostgresJobQueue.feedChannel), .text("\(owner.daemonID) \(feedPayloads)\n\(payload)")]))
        }
        let sent = statements
        send({ database in try await database.queue!.connection.pipeline(sent) }) { result in
            if case .success = result { completion(true) } else { completion(false) }
        }
    }

    /// Moves a lease found lost to `lostLeases`.
    private func markLost(_ id: String) {
        if let lease = leases.removeValue(forKey: id) { lostLeases[id] = lease }
    }

    public func forgetLostLease(of id: String) { lostLeases[id] = nil }

    public func takeLostWrites() -> Set<String> {
        defer { lostWrites.removeAll() }
        return lostWrites
    }
}

extension PostgresJobStore: PruningJobStoring {
    /// "tbprune" in ASCII: the session advisory lock one pruning daemon holds.
    static let pruneLockKey: Int64 = 0x74_6270_7275_6e65

    /// `pg_try_advisory_lock`: one daemon prunes at a time; held by this session until `endPruning` (or until
    /// the connection is lost).
    public func beginPruning() throws -> Bool {
        try rows("SELECT pg_try_advisory_lock($1::bigint)", [.integer(Self.pruneLockKey)]).first?.bool(0) ?? false
    }

    public func endPruning() {
        _ = try? rows("SELECT pg_advisory_unlock($1::bigint)", [.integer(Self.pruneLockKey)])
    }

    /// One statement (one transaction): the batch's rows are locked `SKIP LOCKED`, so a row another transaction
    /// holds waits for a later batch; the jobs' duplicate keys go with them. Uses the partial index of schema
    /// migration 4. `endedBefore` is the daemon's wall clock; it is compared as an age on the database's clock
    /// (`DatabaseClock`), the clock that wrote `updated_at`, so a daemon whose clock is ahead prunes no fresh end.
    public func pruneEnded(state: JobState, endedBefore: Double, limit: Int) throws -> [PrunedJob] {
        precondition(state.isTerminal, "only ended jobs are pruned")
        return try rows(
            """
            WITH doomed AS (
                SELECT id FROM trailbook_jobs j
                WHERE state IN ('succeeded', 'failed', 'cancelled') AND state = $1
                    AND updated_at <= \(DatabaseClock.at(2))
                    AND NOT EXISTS (SELECT 1 FROM trailbook_cleanups c WHERE c.job_id = j.id)
                LIMIT $3::bigint FOR UPDATE SKIP LOCKED
            ), keys AS (
                DELETE FROM trailbook_duplicate_keys WHERE job_id IN (SELECT id FROM doomed)
            )
            DELETE FROM trailbook_jobs WHERE id IN (SELECT id FROM doomed) RETURNING id, kind
            """,
            [.text(state.rawValue), DatabaseClock.offset(of: endedBefore), .integer(Int64(limit))]
        ).compactMap { row in
            guard let id = row.text(0), let kind = row.text(1) else { return nil }
            return PrunedJob(id: id, kind: kind)
        }
    }

    /// `endedBefore` as `pruneEnded` takes it.
    public func endedJobsAwaitingCleanUp(state: JobState, endedBefore: Double) throws -> Int {
        Int(
            try rows(
                """
                SELECT count(*) FROM trailbook_jobs j JOIN trailbook_cleanups c ON c.job_id = j.id
                WHERE state IN ('succeeded', 'failed', 'cancelled') AND state = $1
                    AND j.updated_at <= \(DatabaseClock.at(2))
                """, [.text(state.rawValue), DatabaseClock.offset(of: endedBefore)]
            ).first?.int(0) ?? 0)
    }

    /// Nothing: PostgreSQL's (auto)vacuum makes deleted rows' space reusable; the files do not shrink.
    public func reclaimFreePages(atMost pages: Int) throws -> Int { 0 }

    /// Nothing: the server manages its write-ahead log.
    public func checkpointLog() throws {}

    /// The job tables with their indexes and TOAST (`pg_total_relation_size`), in bytes.
    public func sizeInBytes() throws -> Int64 {
        try rows(
            """
            SELECT pg_total_relation_size('trailbook_jobs') + pg_total_relation_size('trailbook_duplicate_keys')
                + pg_total_relation_size('trailbook_cleanups')
            """
        ).first?.int(0) ?? 0
    }
}

/// The actor `PostgresJobStore`'s connection lives on: pinned to the store's own loop (its own thread), so the
/// connection's handles and callbacks run there while the daemon's loop goes on.
///
/// Requests (`submit`) start in the order they were made, from any thread, whether the daemon's loop waits for
/// their answer or not, and up to `maxInFlight` of them are in flight at once on the connection's pipeline:
/// PostgreSQL answers them in the order they were sent, so a checkpoint sent without waiting can never land after
/// a later write of the same job. A request with a coalescing key replaces one with the same key that has not
/// started yet (a job's newer checkpoint its older one): the queue stays as short as the jobs are many, however
/// far the store is.
actor PostgresStoreActor {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    /// The queue over the connection; set once, on this actor, when the store connects.
    var queue: PostgresJobQueue?

    /// Requests on the connection at once, at most. Each is one transaction of a few statements.
    static let maxInFlight = 64

    typealias Request = @Sendable (isolated PostgresStoreActor) async -> Void

    private struct Waiting: Sendable {
        var key: String?
        /// The job a coalesced request writes (its checkpoint, its progress), if it writes one.
        var job: String?
        var request: Request
    }

    /// Requests not started yet, oldest first; shared with the threads that submit.
    private nonisolated let waiting = Mutex<[Waiting]>([])
    private var inFlight = 0

    init(loop: EventLoop) { self.loop = loop }

    /// Queues `request` behind every request made before it, from any thread. With `key`, a waiting request of the
    /// same key is dropped (it never runs) and this one goes last, so every other request keeps its order to it;
    /// `job` names the job it writes. With `ahead` (the jobs `request` writes), it goes before the waiting
    /// coalesced writes of other jobs, behind everything else: a job's end is not held up by the checkpoints of
    /// the others, and still lands after its own.
    nonisolated func submit(_ request: @escaping Request, coalescing key: String? = nil, job: String? = nil, ahead: Set<String>? = nil) {
        waiting.withLock { waiting in
            if let key, let index = waiting.firstIndex(where: { $0.key == key }) { waiting.remove(at: index) }
            let entry = Waiting(key: key, job: job, request: request)
            guard let ahead else { return waiting.append(entry) }
            let behind = waiting.lastIndex { $0.key == nil || $0.job.map(ahead.contains) != false }
            waiting.insert(entry, at: behind.map { $0 + 1 } ?? 0)
        }
        // Straight onto the store's loop (no hop through the global executor, whose threads may all be busy).
        loop.execute { self.assumeIsolated { $0.startWaiting() } }
    }

    /// Starts waiting requests, oldest first, while fewer than `maxInFlight` are in flight. Each task runs on the
    /// store's loop (FIFO) up to its first real suspension, which is the sending of its first statements, so
    /// requests are sent in the order they start.
    private func startWaiting() {
        while inFlight < Self.maxInFlight {
            guard let next = waiting.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return }
            inFlight += 1
            // Started on the store loop's task executor, FIFO like the actor's own queue: what a request awaits
            // resumes straight back on the loop (`LoopTaskExecutor`), not through Swift's global executor.
            Task(executorPreference: loop.taskExecutor) { [self] in await run(next) }
        }
    }

    private func run(_ next: Waiting) async {
        await next.request(self)
        inFlight -= 1
        startWaiting()
    }
}

/// A value made on the daemon's loop thread, carried through the store's thread untouched, and used on the loop
/// thread again (a completion of `PostgresJobStore.send`); hence `@unchecked Sendable`.
private final class LoopConfined<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// The scheduler's "work is available" and control callbacks, set and called on the daemon's loop thread only; the store's
/// thread reaches it by `EventLoop.main.execute`.
final class WorkSignal: @unchecked Sendable {
    var callback: (() -> Void)?
    /// `onControl`: a request of another daemon about a job (id) this one runs.
    var control: ((String, JobControl) -> Void)?
    /// `onFeed`: the events of another daemon's feed payload.
    var feed: ((String) -> Void)?
    /// `onLeaseLost`: a job (id) whose lease a renewal found lost.
    var leaseLost: ((String) -> Void)?
    /// `onControlledEnd`: a job (id) whose run ended with a control request pending.
    var controlledEnd: ((String) -> Void)?
    /// `onFeedInterrupted`: the connection is back; other daemons' feed payloads of the meantime are lost.
    var feedInterrupted: (() -> Void)?

    func fire() { callback?() }
}
