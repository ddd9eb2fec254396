/// What the scheduler and the daemon need from a job store: the SQLite `JobStore` (one daemon, the default) and
/// the PostgreSQL `PostgresJobStore` (several daemons sharing one queue, issue 15) both provide it.
///
/// Calls are made on the loop thread and answer synchronously: a SQLite call waits for its commit (and fsync), a
/// PostgreSQL call for its round trip (docs/explanation/shared-store.md), except where a call says it does not wait. Errors
/// are the store's own (`SQLiteError`, `JobStoreError`); the scheduler treats any error as a refused write (kept in
/// memory and retried) unless it is a lost lease (`JobStoreError.leaseLost`).
public protocol JobStoring: AnyObject {
    /// Adds new jobs in one transaction, all or none; fills in each one's `sequence`. `digests[i]` is `jobs[i]`'s
    /// request digest (`nil` without a key), `duplicateKeys[i]` what it works on (`JobKind.duplicateKeys`).
    /// - Throws: the store's error; then no job of the batch is stored.
    func insert(_ jobs: inout [JobRecord], digests: [String?], duplicateKeys: [[String]]) throws
    /// The job submitted with idempotency key `key` and its request digest, or `nil`.
    /// - Throws: the store's error.
    func job(key: String) throws -> (job: JobRecord, digest: String?)?
    /// The unfinished jobs of `kind` that work on any of `keys` (`JobKind.duplicateKeys`).
    /// - Throws: the store's error.
    func unfinishedJobs(sharing keys: [String], kind: String) throws -> [JobRecord]
    /// Whether jobs stored before duplicate keys were recorded have been indexed (`indexDuplicateKeys`).
    /// - Throws: the store's error.
    func duplicateKeysIndexed() throws -> Bool
    /// Records what each unfinished job works on (`keys(job)`), once, and notes it done.
    /// - Throws: the store's error.
    func indexDuplicateKeys(_ keys: (JobRecord) -> [String]) throws
    /// Writes a job's lifecycle fields (state, attempt, cancellation, error, result, retry time, progress); an end
    /// durably. With `addingCleanUp`, records a pending clean-up in the same transaction.
    /// - Throws: the store's error; `JobStoreError.leaseLost` if the job's run is no longer this daemon's.
    func update(_ job: JobRecord, addingCleanUp: Bool) throws
    /// Writes new jobs and lifecycle writes in one transaction (the scheduler's group commit), all or nothing;
    /// fills in the new jobs' `sequence`. `durable`: the commit survives a power loss (an fsync).
    /// - Throws: the store's error; then nothing was written.
    func commitGroup(
        inserting: inout [JobRecord], digests: [String?], duplicateKeys: [[String]],
        updating: [(job: JobRecord, addingCleanUp: Bool)], durable: Bool) throws
    /// Replaces a job's params (a paused job given new credentials on `resume`).
    /// - Throws: the store's error; a shared store's `JobStoreError.leaseLost` when the job is no longer paused
    ///   there (another daemon changed it since it was read).
    func updateParams(id: String, _ params: JSONValue) throws
    /// `commitGroup` without waiting, for the scheduler's group commit: `completion` is called on the loop thread
    /// with the new jobs (their `sequence` filled in) and the lifecycle writes fenced off, or with the error
    /// `commitGroup` would have thrown (nothing written). The SQLite store writes at once and calls `completion`
    /// before it returns (`durable` as `commitGroup`'s). A shared store sends it (every commit of its is durable):
    /// its request timeout applies as to a call that waits: past it, `completion` gets
    /// `JobStoreError.unavailable`, and a group not sent by then never is; the group lands before any later
    /// request of this daemon.
    func sendGroup(
        inserting: [JobRecord], digests: [String?], duplicateKeys: [[String]],
        updating: [(job: JobRecord, addingCleanUp: Bool)], durable: Bool,
        completion: @escaping (Result<GroupWritten, any Error>) -> Void)
    /// The jobs whose lifecycle write in a `commitGroup` since the last call was fenced off (not written: the
    /// lease was lost, or another daemon runs the job), once each. Always empty on the SQLite store, which fences
    /// nothing off.
    func takeLostWrites() -> Set<String>
    /// The run of job `id` whose lease was lost is over without writing its end: writes about the job are no longer
    /// fenced by that run's lost lease. Until then they are, so that a late end of the lost run cannot overwrite
    /// what another daemon wrote. Nothing to do on the SQLite store, which leases nothing.
    func forgetLostLease(of id: String)
    /// Writes a running job's latest progress (throttled by the caller).
    /// A shared store may send it without waiting (`LeasingJobStoring.onLeaseLost` then reports a lost lease).
    /// - Throws: the store's error; `JobStoreError.leaseLost` if the run is no longer this daemon's.
    func saveProgress(id: String, _ progress: JobProgress) throws
    /// Replaces a running job's checkpoint and progress in one transaction.
    /// - Throws: the store's error; `JobStoreError.leaseLost` if the run is no longer this daemon's.
    func saveCheckpoint(id: String, _ checkpoint: JSONValue, progress: JobProgress) throws
    /// A job's checkpoint, or `nil` if it has none yet.
    /// - Throws: the store's error.
    func checkpoint(id: String) throws -> JSONValue?
    /// The job with `id`, or `nil`.
    /// - Throws: the store's error.
    func job(id: String) throws -> JobRecord?
    /// The jobs whose id starts with `prefix` (at most `limit`), in id order.
    /// - Throws: the store's error.
    func jobs(idPrefix prefix: String, limit: Int) throws -> [JobRecord]
    /// Jobs in submission order, optionally only those in `states` and of `kind` and with a `sequence` smaller
    /// than `before` (a page's cursor), the newest `limit` of them; an indexed read on every page.
    /// - Throws: the store's error.
    func jobs(states: [JobState]?, kind: String?, before: Int64?, limit: Int) throws -> [JobRecord]
    /// The first `limit` queued jobs in run order (higher priority first, FIFO within a priority), passing over
    /// those whose id is in `skipping` (the scheduler's jobs whose newer state is not written yet; a store need
    /// not load their rows).
    /// - Throws: the store's error.
    func queuedJobs(limit: Int, skipping: Set<String>) throws -> [JobRecord]
    /// The priority of the first queued job in run order not in `skipping`, `nil` if none waits (whether a
    /// waiting job outranks a running one). A store need not read the job itself.
    /// - Throws: the store's error.
    func highestQueuedPriority(skipping: Set<String>) throws -> Int?
    /// How many jobs are in each state (states with none are absent).
    /// - Throws: the store's error.
    func countsByState() throws -> [JobState: Int]
    /// Reserves `count` feed sequence numbers above any handed out before (by any daemon of the store); returns
    /// the first.
    /// - Throws: the store's error.
    func reserveSequenceBlock(count: Int64) throws -> Int64
    /// The pending clean-ups due at `now` (Unix seconds), earliest first.
    /// - Throws: the store's error.
    func dueCleanUps(now: Double) throws -> [PendingCleanUp]
    /// Records a failed try of a job's clean-up: tries so far, the next due time (Unix seconds), the last error.
    /// - Throws: the store's error.
    func rescheduleCleanUp(jobID: String, tries: Int, nextAt: Double, error: String) throws
    /// Forgets a job's pending clean-up (done, or given up).
    /// - Throws: the store's error.
    func removeCleanUp(jobID: String) throws
    /// Reads the jobs `query` selects without holding the loop (a `show` or `list` of a client), with
    /// `countsByState()` of the unfinished states in the same round trip when `counting`: `completion` is called on
    /// the loop thread with what those calls would have returned or thrown. The SQLite store answers at once (before
    /// the call returns); a shared store once the database answered, the loop going on meanwhile, within its request
    /// timeout (then `JobStoreError.unavailable`).
    func read(_ query: JobQuery, counting: Bool, completion: @escaping (Result<JobReading, any Error>) -> Void)
    /// `countsByState()` of the unfinished states (`queued`, `running`, `paused`, `needs_retry`), answered as `read`
    /// answers: at once on SQLite, without holding the loop on a shared store.
    func countUnfinished(completion: @escaping (Result<[JobState: Int], any Error>) -> Void)
    /// From now on, a write that meets another writer's lock fails at once instead of waiting (the scheduler
    /// retries it later); the loop thread must not sit in a lock wait.
    func failFastOnLocks()
}

/// A store that several daemons share: a daemon runs a job only while it holds the job's lease (owner + token +
/// expiry on the store's clock), renewed by its progress writes, and another daemon rescues jobs whose lease
/// expired (`PostgresJobStore`, docs/explanation/shared-store.md).
/// A job a shared store's claim took for this daemon: its record as started, and its last checkpoint as the claim
/// read it under the job's row lock (`nil`: none, or not valid JSON, as `JobStoring.checkpoint(id:)` answers), so
/// that the run's first `loadCheckpoint` costs no round trip.
public struct ClaimedRun: Sendable {
    /// The job, `running` under this daemon's new lease.
    public var job: JobRecord
    /// Its last checkpoint when it was claimed.
    public var checkpoint: JSONValue?

    /// A claimed job and its checkpoint.
    public init(job: JobRecord, checkpoint: JSONValue?) {
        self.job = job
        self.checkpoint = checkpoint
    }
}

/// A job store several daemons share (the PostgreSQL store): runs are leased, not just started. Beside
/// `JobStoring`'s calls it claims queued jobs under a lease with a fencing token (`sendClaim`), renews and
/// rescues leases (`maintainLeases`), and sends group commits and checkpoints (`sendGroup`, `sendCheckpoint`)
/// without holding the daemon's loop: each of these takes a completion, called on the loop thread.
public protocol LeasingJobStoring: JobStoring {
    /// How long a lease lasts unless renewed, in seconds.
    var leaseSeconds: Double { get }
    /// This daemon's host name (`daemon --host`, else the machine's): its leases name it, and jobs submitted
    /// through it that read its files are pinned to it.
    var host: String { get }
    /// The queues this daemon claims from (`daemon --queues`; `JobRecord.defaultQueue` by default).
    var queues: [String] { get }
    /// Claims up to `limit` queued jobs of `kinds` for this daemon (atomically `queued` → `running`, each under a
    /// new lease), of its `queues` and pinned to its `host` or to none, in priority then submission order; jobs other daemons are claiming are skipped, not waited for.
    /// Without waiting: `completion` is called on the loop thread with the claimed jobs as started
    /// (`JobLifecycle`'s `.start` applied) and their checkpoints, in run order, or with the store's error (then nothing was claimed, or,
    /// past the store's request timeout, `JobStoreError.unavailable`: a claim under way may still land, and its
    /// jobs are rescued once their lease expires). Requests made after it are answered after it.
    func sendClaim(limit: Int, kinds: [String], completion: @escaping (Result<[ClaimedRun], any Error>) -> Void)
    /// `sendClaim` of at most one job, and only of a priority above `priority`: a daemon whose slots are all taken
    /// claims the job one of its runs of priority `priority` gives its slot to (`Scheduler.preemptOnSharedStore`).
    /// Daemons claiming together never take the same job, so one job preempts one run.
    func sendClaim(
        outranking priority: Int, kinds: [String], completion: @escaping (Result<[ClaimedRun], any Error>) -> Void)
    /// The heartbeat, without waiting: renews every lease this daemon holds (so a job that reports no progress for
    /// a while, waiting out an outage or on a slow unit, is not rescued), reads the control requests waiting for its
    /// jobs (`requestControl`: their notification may have been lost), puts back in the queue every running job
    /// whose lease expired, whichever daemon it was on (same attempt, resumed from its checkpoint), and every
    /// `needs_retry` job whose backoff is over. `completion` is called on the loop thread with what it found; the
    /// loop goes on meanwhile.
    func maintainLeases(completion: @escaping (LeaseMaintenance) -> Void)
    /// Called on the loop thread when another daemon queued or freed work (a notification), so the scheduler
    /// claims at once instead of waiting for its timer.
    var onWorkAvailable: (() -> Void)? { get set }
    /// Asks the daemon running job `id` to `control` it, without waiting (it is notified at once and also finds
    /// the request on its next lease renewal, so a lost notification only delays it). `completion` is called on the
    /// loop thread with `true` once asked, `false` if the job was not running any more (nothing asked), or the
    /// store's error (`JobStoreError.unavailable` past the store's request timeout).
    func requestControl(_ control: JobControl, of id: String, completion: @escaping (Result<Bool, any Error>) -> Void)
    /// Called on the loop thread when another daemon asks this one to control job `id` (a notification).
    var onControl: ((String, JobControl) -> Void)? { get set }
    /// Called on the loop thread with the id of a job whose run ended (or was paused) while a `requestControl`
    /// was pending for it, whichever daemon asked: the run's end is written, so an asking daemon can read it now
    /// instead of at its next poll. A notification, so it can be lost: asking daemons poll as well.
    var onControlledEnd: ((String) -> Void)? { get set }
    /// Replaces a running job's checkpoint and progress as `saveCheckpoint` does, without waiting: `completion` is
    /// called on the loop thread with `nil` once written, else with the error `saveCheckpoint` would have thrown
    /// (`JobStoreError.leaseLost` if the run is no longer this daemon's), or not at all if a newer checkpoint of
    /// the job replaced it before it was sent. This daemon's writes land in the order they were made, so a
    /// checkpoint never lands after the run's end or a later checkpoint.
    func sendCheckpoint(
        id: String, _ checkpoint: JSONValue, progress: JobProgress, completion: @escaping ((any Error)?) -> Void)
    /// Called on the loop thread with the id of a running job whose lease a write made without waiting (a
    /// progress report: on a shared store it renews the lease) found lost: the run must stop and not write its end.
    var onLeaseLost: ((String) -> Void)? { get set }
    /// Sends feed payloads (`FeedRelay.payloads`, each under 8 000 bytes) to every other daemon of the store, in
    /// one transaction and in order, without waiting; `completion` is called on the loop thread with whether the
    /// store took them.
    func publishFeed(_ payloads: [String], completion: @escaping @Sendable (Bool) -> Void)
    /// Starts (`true`) or stops (`false`) receiving the feed payloads other daemons send (`onFeed`), without
    /// waiting; `completion` is called on the loop thread once the store has done it, with (when starting) every
    /// daemon's current relay run as registered (`registerRelay`: origin by instance) once it listens; `nil` if it
    /// could not be asked now (a store that follows tries again once its connection is back, and
    /// `onFeedInterrupted` says so). A store starts not following. Payloads are received only from their
    /// sender's commit after the start.
    func followFeed(_ follow: Bool, completion: @escaping @Sendable ([String: String]?) -> Void)
    /// Records, without waiting, that daemon `instance`'s feed relay now runs as `origin` (`RelayedEventNumbering`),
    /// before its first payload: a daemon that starts following later learns it (`followFeed`), so a run of that
    /// instance it never heard is still known to have started again when the next one is heard.
    func registerRelay(instance: String, origin: String)
    /// Called on the loop thread with each feed payload another daemon sent (`publishFeed`), in the order sent,
    /// while the store follows the feed (`followFeed`).
    var onFeed: ((String) -> Void)? { get set }
    /// Called on the loop thread when the store's connection is back after it was lost: the payloads other
    /// daemons sent meanwhile never arrived (notifications are not kept for a listener that is gone).
    var onFeedInterrupted: (() -> Void)? { get set }
}

/// What a `JobStoring.read` found.
public struct JobReading: Sendable {
    /// The jobs the query selected, in its order.
    public var jobs: [JobRecord]
    /// How many jobs are in each unfinished state (every daemon's), when counted.
    public var unfinishedCounts: [JobState: Int]?
    /// For `JobQuery.idempotencyKey`: the digest of the found job's submit request (as `job(key:)` returns it).
    public var submitDigest: String?

    /// A reading of `jobs`, when counted `unfinishedCounts`, and for a key's lookup the `submitDigest`.
    public init(jobs: [JobRecord], unfinishedCounts: [JobState: Int]?, submitDigest: String? = nil) {
        self.jobs = jobs
        self.unfinishedCounts = unfinishedCounts
        self.submitDigest = submitDigest
    }
}

/// Which jobs a read selects (`JobStoring.read`).
public enum JobQuery: Sendable, Equatable {
    /// The jobs whose id starts with the prefix (at most `limit`), in id order: `jobs(idPrefix:limit:)`.
    case idPrefix(String, limit: Int)
    /// The newest `limit` jobs, optionally only those in `states`, of `kind` and with a `sequence` smaller than
    /// `before`, in submission order: `jobs(states:kind:before:limit:)`.
    case filtered(states: [JobState]?, kind: String?, before: Int64? = nil, limit: Int)
    /// The job submitted with this idempotency key (none or one), with `JobReading.submitDigest`: `job(key:)`.
    case idempotencyKey(String)
    /// The jobs of `kind` not ended (`queued`, `running`, `paused`, `needs_retry`) that do any of `keys` (their
    /// duplicate keys), in submission order: `unfinishedJobs(sharing:kind:)`.
    case unfinished(sharing: [String], kind: String)
}

/// What one `LeasingJobStoring.maintainLeases` found and did; all empty when the store could not be asked.
public struct LeaseMaintenance {
    /// Running jobs of this daemon whose lease is lost (their runs must stop, their ends not be written).
    public var lost: [String]
    /// Control requests waiting for jobs this daemon runs, by job id.
    public var controls: [(id: String, control: JobControl)]
    /// Jobs put back in the queue because their daemon's lease expired, as they are now.
    public var rescued: [JobRecord]
    /// `needs_retry` jobs put back in the queue because their backoff is over, as they are now.
    public var queuedAgain: [JobRecord]
}

/// What a daemon asks of a job running on another daemon sharing the store.
public enum JobControl: String, Sendable, Equatable {
    /// Stop it and clean up (`cancel`, reason `user_stop`).
    case cancel
    /// Checkpoint and stop it (`pause`).
    case pause
}

/// A store error that is not the SQLite store's own.
public enum JobStoreError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The daemon no longer holds job `id`'s lease (it expired and another daemon rescued the job): it must stop
    /// the job at once and not write its end (fencing).
    case leaseLost(id: String)
    /// The shared store could not be reached or refused the request; `message` has no password.
    case unavailable(message: String)

    public var description: String {
        switch self {
        case .leaseLost(let id): "the lease on job \(id) is lost (another daemon took the job over)"
        case .unavailable(let message): "the shared job store is unavailable: \(message)"
        }
    }
}

/// The SQLite store: its calls are the protocol's, and it answers the asynchronous ones at once
/// (`JobStore+Reading.swift`).
extension JobStore: JobStoring {}

extension JobStoring {
    /// `jobs(states:kind:before:limit:)` from the newest job on: no cursor.
    /// - Throws: the store's error.
    func jobs(states: [JobState]?, kind: String?, limit: Int) throws -> [JobRecord] {
        try jobs(states: states, kind: kind, before: nil, limit: limit)
    }
}

/// What a `sendGroup` wrote.
public struct GroupWritten: Sendable {
    /// The new jobs, in the order given, with their `sequence` filled in.
    public var inserted: [JobRecord]
    /// The ids of the lifecycle writes fenced off (not written: the lease was lost, or another daemon runs the job).
    public var lost: Set<String>
}

