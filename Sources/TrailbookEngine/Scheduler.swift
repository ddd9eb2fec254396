import TrailbookLoop
import TrailbookSQLite

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Defaults and limits of the scheduler, set by the daemon's command line.
public struct SchedulerOptions: Sendable {
    /// Jobs running at once (`--concurrency`, default 4: two cores, jobs mostly waiting on I/O).
    public var concurrency: Int = 4
    /// Default stall timeout in seconds (`--stall-timeout`, default 60 s).
    public var stallTimeoutSeconds: Double = 60
    /// Default deadline in seconds of one attempt (`--timeout`); `nil` uses the kind's (1 h long-running, 30 s).
    public var timeoutSeconds: Double?
    /// Default attempts (`--max-attempts`, default 5).
    public var maxAttempts: Int = 5
    /// Default time a job waits out a service's outage before giving up, in seconds (`--give-up-after`, 24 h).
    public var giveUpAfterSeconds: Double = JobOptions.defaultGiveUpAfterSeconds
    /// Backoff between attempts (`--retry-base`, default 1 s doubling up to 5 min).
    public var backoff = RetryBackoff()
    /// How often a running job's progress is written to the store, in seconds (the feed gets it live).
    public var progressPersistInterval: Double = 1
    /// How long shutdown waits for running jobs to checkpoint, in seconds (the daemon must exit within 2 s).
    public var shutdownGraceSeconds: Double = 1.5
    /// How long after a job's end its clean-up (`JobKind.cleanUp`) is retried before the engine gives up and logs
    /// what was left behind, in seconds (`daemon --cleanup-budget`): 7 days (a server down for a long weekend is
    /// still cleaned up).
    public var cleanUpBudgetSeconds: Double = 7 * 24 * 3600
    /// Longest wait between two tries of a clean-up, in seconds: 10 min (the wait starts at 1 s and doubles).
    public var cleanUpMaxDelaySeconds: Double = 600
    /// How long a submit waits for another process to release the store's write lock before it is refused with
    /// `store_busy`, in seconds (the loop goes on serving meanwhile).
    public var storeLockWaitSeconds: Double = 10
    /// Tests only (`TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT`, honoured with the test kinds): the daemon exits with
    /// this status right after a submit's commit, before its reply, as a `kill -9` at that moment would.
    public var exitAfterSubmitCommitForTests: Int32?

    /// The furthest ahead a retry may be due, in seconds: the backoff's cap. A stored due time further ahead
    /// than this (the wall clock stepped back while the daemon was down) is brought back to it on start.
    public var longestRetryDelaySeconds: Double { backoff.capSeconds }

    /// The defaults described on each property.
    public init() {}
}

/// Per-submission overrides of the defaults; `nil` takes the daemon's default.
public struct SubmitOptions: Codable, Sendable, Equatable {
    /// Higher runs first; `nil` is 0.
    public var priority: Int?
    /// Deadline of one attempt, in seconds; `nil` takes the daemon's or the kind's default.
    public var timeoutSeconds: Double?
    /// Seconds without progress before the job is stopped with `timeout`; `nil` takes the daemon's default.
    public var stallTimeoutSeconds: Double?
    /// Attempts before failing; `nil` takes the daemon's default.
    public var maxAttempts: Int?
    /// Seconds of a service's outage to wait out before giving up; `nil` takes the daemon's default.
    public var giveUpAfterSeconds: Double?

    public init(
        priority: Int? = nil, timeoutSeconds: Double? = nil, stallTimeoutSeconds: Double? = nil, maxAttempts: Int? = nil,
        giveUpAfterSeconds: Double? = nil
    ) {
        self.priority = priority
        self.timeoutSeconds = timeoutSeconds
        self.stallTimeoutSeconds = stallTimeoutSeconds
        self.maxAttempts = maxAttempts
        self.giveUpAfterSeconds = giveUpAfterSeconds
    }

    /// The same JSON keys as `JobOptions`.
    typealias CodingKeys = JobOptions.CodingKeys
}

/// One job to submit: a `submit` request, or one entry of a `submit_batch`.
public struct SubmitRequest: Sendable, Equatable {
    /// The job kind's name.
    public var kind: String
    /// The kind's params.
    public var params: JSONValue
    /// Overrides of the daemon's defaults.
    public var options: SubmitOptions
    /// Skip the duplicate check (`options.allow_duplicate`).
    public var allowDuplicate: Bool
    /// The idempotency key: a submit with a key already stored returns that key's job instead of a new one.
    public var key: String?
    /// The queue to put it in (`options.queue`); `nil` for `JobRecord.defaultQueue`. Only daemons of a shared
    /// store started with it claim it; the SQLite store has only the default queue.
    public var queue: String?
    /// Its paths are shared by every host (`options.any_host`): not pinned to the submitting host even if its
    /// kind reads that host's files (`JobKindTraits.readsHostFiles`).
    public var anyHost: Bool

    /// A request; see the members.
    public init(
        kind: String, params: JSONValue, options: SubmitOptions = SubmitOptions(), allowDuplicate: Bool = false,
        key: String? = nil, queue: String? = nil, anyHost: Bool = false
    ) {
        self.kind = kind
        self.params = params
        self.options = options
        self.allowDuplicate = allowDuplicate
        self.key = key
        self.queue = queue
        self.anyHost = anyHost
    }

    /// SHA-256 (hex) of the request's kind, params and options as canonical JSON (sorted keys): what a retry with
    /// the same key must repeat. `allow_duplicate` is left out (it does not describe the job).
    public var digest: String {
        var canonical: [String: JSONValue] = [
            "kind": .string(kind), "params": params, "options": JSONCoding.value(of: options),
        ]
        // Only when given, so that the digests of keys stored before queues existed still match.
        if let queue { canonical["queue"] = .string(queue) }
        if anyHost { canonical["any_host"] = true }
        return SHA256.hexDigest(of: JSONCoding.encode(JSONValue.object(canonical)))
    }
}

/// A job a submit returned: new, or found by its idempotency key.
public struct Submitted: Sendable, Equatable {
    /// The job.
    public var job: JobRecord
    /// Whether it was already stored (a submit retried with its key) rather than made now.
    public var existing: Bool

    /// A result; see the members.
    public init(job: JobRecord, existing: Bool) {
        self.job = job
        self.existing = existing
    }
}

/// Why a submit (of one job or a batch) queued nothing.
public struct SubmitRefusal: Error, Sendable, Equatable {
    /// The refused entry's index in the batch (from 0); `nil` when no one entry is to blame (the store refused
    /// the write, the daemon is shutting down).
    public var index: Int?
    /// The reason, with its stable code.
    public var error: JobError

    /// A refusal; see the members.
    public init(index: Int?, error: JobError) {
        self.index = index
        self.error = error
    }
}

/// Owns every job's state transitions: queueing by priority, the concurrency limit, deadlines and stall
/// timeouts, retries with backoff, preemption, pause, cancel and shutdown.
///
/// It applies `JobLifecycle` (the one place where transitions are decided), persists each transition in the
/// `JobStore` before announcing it on the `ProgressFeed`, and runs each job as a task on the loop. Timers exist only
/// while something is due (a running job's watchdog, the next retry), so an idle daemon uses no CPU.
@LoopActor
public final class Scheduler {
    /// A job that holds a slot.
    final class RunningJob {
        var record: JobRecord
        let context: JobContext
        let kind: AnyJobKind
        let watchdog: LoopTimer
        let startedAt = Timestamp.monotonic()
        var lastMoveAt = Timestamp.monotonic()
        var lastCompleted: Int64
        var lastSample: (at: Double, completed: Int64)
        /// Whether progress has stepped forward since the first report, so rate samples are taken.
        var sampling = false
        /// Units in the last report before sampling began.
        var previousReport: Int64?
        var rate: Double?
        var lastPersistAt = Timestamp.monotonic()
        var pausing = false
        /// Seconds this run spent waiting out outages (`JobContext.waitOut`): they extend its deadline.
        var excusedSeconds = 0.0
        /// When the wait in progress began (monotonic), if the job is waiting out an outage now.
        var waitingSince: Double?
        var stopDetail = ""
        /// Set when the store refused its checkpoint or progress (disk full): the job is stopped and ends with
        /// this retryable error instead of its stop reason.
        var storeFailure: JobError?
        /// Set when this daemon lost the job's lease (shared store): the run stops and its end is not written.
        var leaseLost = false
        var waiters: [CheckedContinuation<Void, Never>] = []

        init(record: JobRecord, context: JobContext, kind: AnyJobKind) {
            self.record = record
            self.context = context
            self.kind = kind
            watchdog = LoopTimer(loop: .main)
            lastCompleted = record.progress.completed
            lastSample = (Timestamp.monotonic(), record.progress.completed)
        }
    }

    enum Outcome {
        case succeeded(JSONValue)
        case failed(JobError)
        case stopped(CancellationReason)
    }

    /// The defaults and limits it was made with.
    public let options: SchedulerOptions
    /// The feed it announces every transition and progress report on.
    public let feed: ProgressFeed
    /// The worker processes job kinds reach through `JobContext.runInWorker`; `nil` until the daemon sets it.
    public var workerPool: WorkerPool?
    let store: any JobStoring
    /// `store` when several daemons share it (runs are leased), else `nil`.
    let leasing: (any LeasingJobStoring)?
    private var kinds: [String: AnyJobKind] = [:]
    private var running: [String: RunningJob] = [:]
    private var retryTimer: LoopTimer?
    /// Shared store only: renews this daemon's leases, rescues expired ones and claims work, every third of a lease.
    private var leaseTimer: LoopTimer?
    /// Whether a `maintainLeases` is in flight.
    private var tendingLeases = false
    private var cleanUpTimer: LoopTimer?
    /// Jobs whose clean-up is being tried now (one try at a time per job).
    private var cleaningUp: Set<String> = []
    /// When each `needs_retry` job is due, on the monotonic clock (`Timestamp.monotonic()`): a step of the wall
    /// clock neither delays nor hastens a retry. The stored `retry_at` (wall clock) is for display and for the
    /// next start, which turns it back into a monotonic due time (clamped, see `start()`).
    private var retryDueAt: [String: Double] = [:]
    /// When each pending clean-up's next try is due, on the monotonic clock, like `retryDueAt` (the store's
    /// `next_at` is wall-clock time for the next start).
    private var cleanUpDueAt: [String: Double] = [:]
    private var isShuttingDown = false
    /// Idempotency keys of submits under way (validated, not yet stored), and the submits waiting for them.
    private var keysInFlight: Set<String> = []
    private var keyWaiters: [CheckedContinuation<Void, Never>] = []

    // Writes the store refused (another process holds its lock, or its disk is full). The new state is kept
    // here, already announced, and written by the store retry timer; reads overlay it on the store's last
    // committed state, so the daemon keeps answering with the truth.
    /// Job records not yet written, by id.
    private var unsavedRecords: [String: JobRecord] = [:]
    /// Checkpoints deferred while the store was locked (the newest per job; each describes durable work).
    private var unsavedCheckpoints: [String: (checkpoint: JSONValue, progress: JobProgress)] = [:]
    /// Unwritten ends that record a pending clean-up (`JobStore.update(_:addingCleanUp:)`) when written.
    private var unsavedCleanUps: Set<String> = []
    /// Cancelled waiting jobs whose `onCancel(user_stop)` waits until the cancellation is written.
    private var cancelledWhileWaiting: Set<String> = []
    /// Shared store: the jobs of `unsavedRecords` whose new state is not announced yet, with the state announced
    /// before it. Until the store has it another daemon may take the job over (and fence the write off), so it
    /// is announced, logged and handed to `jobEnded` only once written (`retryStoreWrites`), and reported as
    /// fenced off otherwise (`reportFencedOff`). On SQLite no other writer can, and a kept state is announced
    /// at once.
    private var unannounced: [String: JobState] = [:]
    /// Shared store: the waits of this daemon's `cancel`/`pause` requests for runs on other daemons, by job id.
    private var controlWaits: [String: [ControlledEndWait]] = [:]
    /// The current fault: its cause and since when (monotonic seconds), from the first refused write until
    /// everything is written again.
    private var storeFault: (cause: String, since: Double)?
    private var storeRetryTimer: LoopTimer?
    private var storeRetryArmed = false
    private var storeRetryDelay = Scheduler.firstStoreRetryDelay

    // Group commit (issue 14): submits and the ends of runs that arrive within one loop turn are written in one
    // transaction with one fsync at the end of the turn (a check handle, after the loop's I/O callbacks), and
    // only then acknowledged: a submit's reply and a kind's `jobEnded` wait for it.
    /// A run's end (or other transition out of `running`) waiting for the turn's commit.
    private struct PendingEnd {
        var job: JobRecord
        var from: JobState
        var cleansUp: Bool
        /// What follows the write: `true` when it is written, `false` when the store refused it (then it is in
        /// `unsavedRecords`, as a refused write always is).
        var written: @LoopActor (Bool) -> Void
    }
    /// Submits (each a batch of one or more new jobs, stored all or none) waiting for the turn's commit.
    private var pendingSubmits: [PendingSubmit] = []
    /// What the submits under way do, for the duplicate check (`submit(_:)`, `refuseDuplicate`).
    private var submitClaims = SubmitClaims()
    /// The number of the last `submit(_:)` call, which names its claims.
    private var lastSubmit = 0
    private struct PendingSubmit {
        var jobs: [JobRecord]
        var digests: [String?]
        var duplicateKeys: [[String]]
        var reply: SubmitTicket
    }
    private var pendingEnds: [PendingEnd] = []
    /// The records of `pendingEnds` by id, for the duplicate check. Reads (`show`, `list`) do not overlay them:
    /// until the end is written and announced they show the job as the feed last did (at most one loop turn, or
    /// on a shared store the group's round trip).
    private var pendingRecords: [String: JobRecord] = [:]
    /// The group commit's check handle: started by what the turn queues for it, also from the commit's own check
    /// callback (`schedule()`'s starts), whose next call then comes at once (see `CheckHandle`).
    private var groupCommitHandle: CheckHandle?
    private var groupCommitClosed = false
    /// A shared store's group is sent and not answered yet (`commitGroup`); what comes meanwhile waits for the next.
    private var groupInFlight = false
    /// A shared store's claim (`claim(from:)`): one in flight at a time.
    private var claimState = ClaimState.none
    /// The checkpoints claims read with their jobs (a value of `nil`: the job had none), by job id, until the run
    /// first loads its checkpoint, saves one or ends: the first `loadCheckpoint` of a claimed run costs no round
    /// trip. Once that run saved or ended, the store has the newer state.
    private var claimedCheckpoints: [String: JSONValue?] = [:]
    /// `claimSettled()` callers, resumed when the claim in flight is answered.
    private var claimAnswerWaiters: [CheckedContinuation<Void, Never>] = []
    /// `groupAnswered()` callers, resumed when the group in flight is answered.
    private var groupAnswerWaiters: [CheckedContinuation<Void, Never>] = []
    /// Starts of runs (the jobs as they started: `running`, attempt counted) not yet written, by id: written with
    /// the turn's group commit, or not at all when the run's end is in the same group (the end's row says all the
    /// start's would, a no-op job's start and end cost one write). Until then the store says `queued`; reads
    /// overlay these (as they do `unsavedRecords`) and `queuedJobs` skips them. A crash before the write leaves the
    /// job queued on its earlier attempt, as a crash before the start always did.
    private var pendingStarts: [String: JobRecord] = [:]
    /// Called after each group commit that was written, with its new jobs and transitions (tests count them).
    var groupCommitted: ((_ submits: Int, _ transitions: Int) -> Void)?
    private static let firstStoreRetryDelay = 0.05
    /// What `write` returns for a write the shared store fenced off (not a fault: nothing to retry).
    fileprivate static let fencedOff = StoreRefusal(code: -1, isLocked: false, cause: "fenced off", description: "another daemon holds the job")
    private static let longestStoreRetryDelay = 1.0

    /// Makes a scheduler over `store`, publishing to `feed`.
    public init(store: any JobStoring, feed: ProgressFeed, options: SchedulerOptions) {
        self.store = store
        leasing = store as? any LeasingJobStoring
        self.feed = feed
        self.options = options
    }

    /// Makes `kind` available to `submit`.
    public func register<K: JobKind>(_ kind: K) {
        kinds[K.name] = AnyJobKind(kind)
    }

    /// The names of the registered kinds.
    public var kindNames: [String] { kinds.keys.sorted() }

    /// The jobs holding a slot now.
    public var runningCount: Int { running.count }

    /// How many jobs are queued, running, paused and waiting to retry, as the daemon knows them (transitions the
    /// store has not taken yet included). Counted once on `start()` (an index-only scan), then kept up to date by
    /// every transition, so summaries (`watch`, the service status) never load or count jobs. Ended jobs are not
    /// counted (they are pruned).
    public private(set) var activeCounts: [JobState: Int] = [:]

    /// The counts of unfinished jobs by state for a summary (`list`'s `counts`, which `watch` shows): this
    /// daemon's counters on SQLite; on a shared store every daemon's jobs, counted by the store (the counters,
    /// if the store cannot answer).
    public func summaryCounts() -> [JobState: Int] {
        guard leasing != nil, let counts = try? store.countsByState() else { return activeCounts }
        return counts.filter { !$0.key.isTerminal }
    }

    /// On daemon start: puts jobs left `running` by a crash back in the queue (they resume from their checkpoint),
    /// arms the retry timer and starts what can run.
    /// - Throws: `SQLiteError` if the store cannot be read or written.
    public func start() throws {
        activeCounts = try store.countsByState().filter { !$0.key.isTerminal }
        if try !store.duplicateKeysIndexed() {
            try store.indexDuplicateKeys { [kinds] job in kinds[job.kind]?.duplicateKeys(job.params) ?? [] }
        }
        // On a shared store other daemons' jobs are running legitimately: a job of a daemon that died is rescued
        // when its lease expires (`leaseTick`), not here.
        for var job in try store.jobs(states: [.running], kind: nil, limit: Int.max) where leasing == nil {
            var lifecycle = job.lifecycle
            guard lifecycle.handle(.recoverAfterCrash) != nil else { continue }
            job.adopt(lifecycle)
            job.progress.inFlight = job.progress.inFlight.map { _ in 0 }
            try store.update(job, addingCleanUp: false)
            announce(job, from: .running)
            log(job, .warning, "was running when the daemon stopped unexpectedly; queued to resume from its checkpoint")
        }
        let now = Timestamp.now()
        let longest = options.longestRetryDelaySeconds
        for var job in try store.jobs(states: [.needsRetry], kind: nil, limit: Int.max) {
            let remaining = (job.retryAt ?? now) - now
            if remaining > longest {
                job.retryAt = now + longest
                try store.update(job, addingCleanUp: false)
                log(
                    job, .warning,
                    "its retry was due in \(Int(remaining)) s, further ahead than the longest backoff "
                        + "(\(Self.seconds(longest))), so the wall clock stepped back; due in \(Self.seconds(longest)) instead")
            }
            retryDueAt[job.id] = Timestamp.monotonic() + min(max(0, remaining), longest)
        }
        // Clean-ups waiting for their next try: due in what is left of their wait, at most the longest wait
        // between tries (a `next_at` further ahead means the wall clock stepped back while the daemon was down).
        let wallNow = Timestamp.now()
        for pending in try store.dueCleanUps(now: .infinity) {
            let remaining = min(max(0, pending.nextAt - wallNow), options.cleanUpMaxDelaySeconds)
            cleanUpDueAt[pending.jobID] = Timestamp.monotonic() + remaining
        }
        store.failFastOnLocks()
        armRetryTimer()
        armCleanUpTimer()
        armLeaseTimer()
        schedule()
    }

    // MARK: - Requests

    /// Validates and queues a new job; with `key`, a job already submitted with that key is returned instead.
    ///
    /// - Parameter allowDuplicate: queue it even if an unfinished job of its kind works on the same thing (see
    ///   `JobKind.duplicateKeys`); the protocol's `options.allow_duplicate`. Not stored with the job.
    /// - Parameter key: the idempotency key (see `submit(_:)`).
    /// - Returns: the job as stored (state `queued`), and whether it already existed (found by its key).
    /// - Throws: `JobError` `unknown_kind`, `invalid_params`, `invalid_options`, the kind's own validation codes,
    ///   `duplicate_<kind>`, `bad_key`, `key_reused`, `shutting_down`, `store_write_failed` (the store cannot be
    ///   written: disk full, I/O error), or `store_busy` (another process held the store's lock for
    ///   `storeLockWaitSeconds`).
    public func submit(
        kind name: String, params: JSONValue, options submitted: SubmitOptions, allowDuplicate: Bool = false,
        key: String? = nil
    ) async throws(JobError) -> Submitted {
        try await submit(
            SubmitRequest(kind: name, params: params, options: submitted, allowDuplicate: allowDuplicate, key: key))
    }

    /// `submit(kind:params:options:allowDuplicate:key:)` of one request.
    /// - Throws: `JobError`, as that does.
    public func submit(_ request: SubmitRequest) async throws(JobError) -> Submitted {
        do {
            return try await submit([request])[0]
        } catch {
            throw error.error
        }
    }

    /// Validates and queues many jobs at once (the protocol's `submit_batch`): all of them are stored in one
    /// transaction, or none is.
    ///
    /// An entry with an idempotency `key` already stored is not queued again: its job is returned (marked
    /// `existing`), as long as its request (kind, params, options) is the same; keys are remembered as long as
    /// their job is kept. Entries are checked in order; the first refused one refuses the whole batch.
    /// - Returns: one `Submitted` per entry, in order.
    /// - Throws: `SubmitRefusal`: the index of the entry refused (`nil` when no one entry is to blame: the store,
    ///   a shutdown) and the `JobError` of `submit(kind:params:options:allowDuplicate:key:)`; within the batch,
    ///   a key given twice is `key_reused` and two entries doing the same thing are `duplicate_<kind>`.
    public func submit(_ requests: [SubmitRequest]) async throws(SubmitRefusal) -> [Submitted] {
        guard !isShuttingDown else {
            throw SubmitRefusal(index: nil, error: JobError(code: "shutting_down", message: "the daemon is shutting down"))
        }
        var firstIndexOfKey: [String: Int] = [:]
        for (index, request) in requests.enumerated() {
            guard let key = request.key else { continue }
            if let problem = Self.keyProblem(key) {
                throw SubmitRefusal(index: index, error: JobError(code: "bad_key", message: problem))
            }
            if let earlier = firstIndexOfKey[key] {
                throw SubmitRefusal(
                    index: index,
                    error: JobError(
                        code: "key_reused",
                        message: "job \(index) of the batch has the same key as job \(earlier) ('\(key)'); give each job its own key"))
            }
            firstIndexOfKey[key] = index
        }
        // One submit per key at a time: a retry that arrives while the first try is still being validated waits
        // for it and then finds its job, instead of both passing the lookup and queueing two.
        let keys = Set(firstIndexOfKey.keys)
        while !keys.isDisjoint(with: keysInFlight) {
            await withCheckedContinuation { keyWaiters.append($0) }
        }
        keysInFlight.formUnion(keys)
        defer {
            keysInFlight.subtract(keys)
            let waiters = keyWaiters
            keyWaiters = []
            for waiter in waiters { waiter.resume() }
        }

        var results: [Submitted?] = Array(repeating: nil, count: requests.count)
        // `keys`: what the job works on (`JobKind.duplicateKeys`, which decodes its params), found once.
        var fresh: [(index: Int, job: JobRecord, digest: String?, keys: [String])] = []
        // What each entry does is claimed once it passes the check, until this submit is answered: entries after
        // it, here or in submits checked meanwhile (this one lets the loop run), are refused as its duplicates.
        lastSubmit += 1
        let submit = lastSubmit
        var stored = false
        defer { submitClaims.release(submit: submit, stored: stored) }
        // A big batch is checked in slices of `LoopSlice.seconds`, so the loop answers other clients and runs jobs
        // in between (issue 14: 3 600 entries held it for 3.7 s); a batch checked within one slice takes no turn.
        var slice = LoopSlice()
        for (index, request) in requests.enumerated() {
            if index > 0, await slice.pause() {
                guard !isShuttingDown else {
                    throw SubmitRefusal(index: nil, error: JobError(code: "shutting_down", message: "the daemon is shutting down"))
                }
            }
            let digest = request.key.map { _ in request.digest }
            if let key = request.key, let known = try await lookUp(key: key, index: index) {
                guard known.digest == digest else {
                    throw SubmitRefusal(
                        index: index,
                        error: JobError(
                            code: "key_reused",
                            message: "key '\(key)' was used for job \(known.job.id) (\(known.job.kind)) with different "
                                + "params or options; use a new key for a new job"))
                }
                results[index] = Submitted(job: current(known.job.id, stored: known.job) ?? known.job, existing: true)
                continue
            }
            do throws(JobError) {
                let (job, kind) = try await prepare(request)
                let keys = kind.duplicateKeys(job.params)
                if !request.allowDuplicate {
                    try await refuseDuplicate(of: keys, kind: kind, submit: submit)
                }
                submitClaims.claim(keys, kind: kind.name, by: SubmitClaims.Holder(jobID: job.id, submit: submit, index: index))
                fresh.append((index, job, digest, keys))
            } catch {
                throw SubmitRefusal(index: index, error: error)
            }
        }
        guard !fresh.isEmpty else { return results.map { $0! } }
        // Written with the loop turn's group commit (see `commitGroup`), which announces the jobs; answered after it.
        guard !isShuttingDown else {
            throw SubmitRefusal(index: nil, error: JobError(code: "shutting_down", message: "the daemon is shutting down"))
        }
        let ticket = SubmitTicket()
        pendingSubmits.append(PendingSubmit(
            jobs: fresh.map(\.job), digests: fresh.map(\.digest),
            duplicateKeys: fresh.map(\.keys), reply: ticket))
        armGroupCommit()
        let jobs: [JobRecord]
        do {
            jobs = try await ticket.jobs()
        } catch {
            throw SubmitRefusal(index: nil, error: error)
        }
        stored = true
        if let hook = options.exitAfterSubmitCommitForTests {
            // Test hook (TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT): die as a kill would, after the commit and before
            // the reply, so tests can show that a retried key finds the job.
            DaemonLog.write("test hook: exiting with status \(hook) after committing a submit, before its reply")
            DaemonLog.flush()
            _exit(hook)
        }
        // As stored: the store gave them back with their sequence numbers and timestamps (no read of each).
        for (job, entry) in zip(jobs, fresh) { results[entry.index] = Submitted(job: job, existing: false) }
        return results.map { $0! }
    }

    /// What is wrong with an idempotency key, or `nil`: 1 to 200 bytes of printable ASCII.
    static func keyProblem(_ key: String) -> String? {
        let bytes = Array(key.utf8)
        guard !bytes.isEmpty, bytes.count <= 200, bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            return "an idempotency key is 1 to 200 printable ASCII characters without spaces (a UUID will do)"
        }
        return nil
    }

    /// The job stored with idempotency key `key`, and its request's digest; read without holding the loop from a
    /// shared store (`JobQuery.idempotencyKey`).
    private func lookUp(key: String, index: Int) async throws(SubmitRefusal) -> (job: JobRecord, digest: String?)? {
        let found = await answer(
            .idempotencyKey(key), shared: { reading in reading.jobs.first.map { ($0, reading.submitDigest) } },
            local: { try store.job(key: key) })
        switch found {
        case .success(let known): return known
        case .failure(let error):
            let refusal = StoreRefusal(error)
            throw SubmitRefusal(
                index: nil,
                error: JobError(
                    code: refusal.readErrorCode,
                    message: "cannot look up the key of job \(index): \(refusal.cause) (\(refusal)); submit again"))
        }
    }

    /// A new job record for `request`, its options resolved and its params validated by its kind.
    private func prepare(_ request: SubmitRequest) async throws(JobError) -> (JobRecord, AnyJobKind) {
        guard let kind = kinds[request.kind] else {
            throw JobError(
                code: "unknown_kind",
                message: "unknown job kind '\(request.kind)'; known: \(kindNames.joined(separator: ", "))")
        }
        let submitted = request.options
        let jobOptions = JobOptions(
            priority: submitted.priority ?? 0,
            timeoutSeconds: submitted.timeoutSeconds ?? options.timeoutSeconds ?? kind.traits.defaultTimeoutSeconds,
            stallTimeoutSeconds: submitted.stallTimeoutSeconds ?? options.stallTimeoutSeconds,
            maxAttempts: submitted.maxAttempts ?? options.maxAttempts,
            giveUpAfterSeconds: submitted.giveUpAfterSeconds ?? options.giveUpAfterSeconds)
        let longest = ControlProtocol.longestTimeoutSeconds
        guard jobOptions.timeoutSeconds > 0, jobOptions.timeoutSeconds <= longest, jobOptions.stallTimeoutSeconds > 0,
            jobOptions.stallTimeoutSeconds <= longest, jobOptions.maxAttempts >= 1, jobOptions.maxAttempts <= 1_000,
            jobOptions.giveUpAfterSeconds > 0, jobOptions.giveUpAfterSeconds <= longest,
            abs(jobOptions.priority) <= 1_000_000
        else {
            throw JobError(
                code: "invalid_options",
                message: "timeouts must be more than 0 and at most \(Int(longest)) s (a year), max_attempts between 1 "
                    + "and 1000, priority within ±1000000")
        }
        if let queue = request.queue {
            if let problem = ControlProtocol.queueNameProblem(queue) {
                throw JobError(code: "invalid_options", message: "options.queue: \(problem)")
            }
            guard leasing != nil || queue == JobRecord.defaultQueue else {
                throw JobError(
                    code: "invalid_options",
                    message: "queue '\(queue)': this daemon's SQLite store has only the '\(JobRecord.defaultQueue)' queue; "
                        + "queues are for daemons sharing a PostgreSQL store (daemon --store postgres://… --queues …)")
            }
        }
        try await kind.validate(request.params)
        let now = Timestamp.nowISO8601()
        var job = JobRecord(
            id: UUID.random(), kind: request.kind, state: .queued, options: jobOptions, attempt: 0,
            progress: JobProgress(unit: kind.traits.unit), cancellation: nil, error: nil, createdAt: now,
            updatedAt: now, params: request.params, result: .null, retryAt: nil, sequence: 0, key: request.key)
        job.queue = request.queue ?? JobRecord.defaultQueue
        // The one place pinning is decided: a kind that reads this host's files, on a store other hosts share.
        if let leasing, kind.traits.readsHostFiles, !request.anyHost { job.pinnedHost = leasing.host }
        return (job, kind)
    }

    /// Announces a job the store has just taken.
    private func submitted(_ job: JobRecord) {
        activeCounts[.queued, default: 0] += 1
        feed.submitted(job)
        DaemonLog.write("job \(job.id.prefix(8)) \(job.kind) submitted (priority \(job.options.priority))")
    }

    /// Throws `duplicate_<kind>` when a job of `kind` that has not ended shares one of `newKeys` (its
    /// `duplicateKeys`; issue 11: a second submit of the same file to the same place would upload it twice):
    /// a job of a submit under way here (`submitClaims`; `submit` is the asking one, whose own earlier entries
    /// are named by index), or one the store holds, found by an indexed lookup (`JobQuery.unfinished`), read
    /// without holding the loop from a shared store.
    /// - Throws: also `store_unavailable`, `store_busy` or `store_error` when the store cannot be read.
    private func refuseDuplicate(of newKeys: [String], kind: AnyJobKind, submit: Int) async throws(JobError) {
        guard !newKeys.isEmpty else { return }
        try refuseClaimed(newKeys, kind: kind.name, submit: submit)
        let keys = Set(newKeys)
        // Claims of submits stored while the read is answered are kept until it ends: seen after it.
        let read = submitClaims.beginRead()
        defer { submitClaims.endRead(read) }
        let found = await answer(
            .unfinished(sharing: Array(keys), kind: kind.name), shared: \.jobs,
            local: { try store.unfinishedJobs(sharing: Array(keys), kind: kind.name) })
        let active: [JobRecord]
        switch found {
        case .success(let jobs): active = jobs
        case .failure(let error):
            let refusal = StoreRefusal(error)
            throw JobError(
                code: refusal.readErrorCode,
                message: "cannot look for duplicate jobs: \(refusal.cause) (\(refusal)); submit again")
        }
        try refuseClaimed(newKeys, kind: kind.name, submit: submit)
        // A job whose end the store has not taken yet is over all the same.
        for job in active where !((unsavedRecords[job.id] ?? pendingRecords[job.id])?.state.isTerminal ?? false) {
            guard let key = kind.duplicateKeys(job.params).first(where: keys.contains) else { continue }
            let state = ((running[job.id].map(live) ?? unsavedRecords[job.id]) ?? job).state
            throw JobError(
                code: "duplicate_\(kind.name)",
                message: "job \(job.id) (\(state.rawValue)) is already doing the same: \(key); wait for it or cancel it, or "
                    + "submit again with --allow-duplicate")
        }
    }

    /// Throws `duplicate_<kind>` when a submit under way here claims one of `keys` (see `refuseDuplicate`).
    private func refuseClaimed(_ keys: [String], kind: String, submit: Int) throws(JobError) {
        guard let (holder, key) = submitClaims.holder(of: keys, kind: kind) else { return }
        if holder.submit == submit {
            throw JobError(
                code: "duplicate_\(kind)",
                message: "job \(holder.index) of the batch already does the same: \(key); submit it once, or with --allow-duplicate")
        }
        throw JobError(
            code: "duplicate_\(kind)",
            message: "job \(holder.jobID) (queued) is already doing the same: \(key); wait for it or cancel it, or "
                + "submit again with --allow-duplicate")
    }

    /// The job whose id is `idOrPrefix` or starts with it, with live progress if it is running.
    /// - Throws: `JobError` `no_such_job`, or `ambiguous_id` when the prefix names several jobs.
    public func job(_ idOrPrefix: String) throws(JobError) -> JobRecord {
        let id = try resolve(idOrPrefix)
        if let active = running[id] { return live(active) }
        guard let job = current(id) else { throw JobError(code: "no_such_job", message: "no job \(id)") }
        return job
    }

    /// Jobs, optionally filtered by state and kind, oldest first; running ones with live progress.
    /// Jobs whose new state the store has not taken yet are listed in that state.
    /// - Throws: `JobError` `store_busy` (another process locks even readers out), `store_error`.
    public func list(states: [JobState]?, kind: String?, limit: Int) throws(JobError) -> [JobRecord] {
        let stored: [JobRecord]
        do {
            stored = try store.jobs(states: states, kind: kind, limit: listRoom(limit))
        } catch {
            throw Self.readError(error)
        }
        return overlaid(stored, states: states, kind: kind, limit: limit)
    }

    /// `list`, answered without holding the loop while a shared store reads (one round trip, up to its request
    /// timeout in an outage): the other clients, the feed and the running jobs go on meanwhile. With the SQLite
    /// store it is `list`.
    /// - Throws: what `list` throws; `store_unavailable` when the shared store does not answer.
    /// - Returns: the jobs, and `summaryCounts()` as of the same reading.
    public func fetchList(
        states: [JobState]?, kind: String?, limit: Int
    ) async throws(JobError) -> (jobs: [JobRecord], counts: [JobState: Int]) {
        guard let leasing else { return (try list(states: states, kind: kind, limit: limit), summaryCounts()) }
        let reading = try await Self.read(
            .filtered(states: states, kind: kind, limit: listRoom(limit)), counting: true, from: leasing)
        // What changed here while the store answered is overlaid as it is now.
        return (
            overlaid(reading.jobs, states: states, kind: kind, limit: limit),
            reading.unfinishedCounts?.filter { !$0.key.isTerminal } ?? activeCounts
        )
    }

    /// How many rows a list of `limit` reads: room for those the overlay moves out of the asked states (starts
    /// not written yet).
    private func listRoom(_ limit: Int) -> Int {
        let room = unsavedRecords.count + pendingStarts.count
        return limit > Int.max - room ? Int.max : limit + room
    }

    /// The stored jobs with this daemon's newer states over them (unwritten records and starts), filtered by
    /// `states` and `kind`, the newest `limit` in submission order, running ones with live progress.
    private func overlaid(_ stored: [JobRecord], states: [JobState]?, kind: String?, limit: Int) -> [JobRecord] {
        var jobs = stored
        let unwritten = unsavedRecords.merging(pendingStarts) { unsaved, _ in unsaved }
        if !unwritten.isEmpty {
            jobs = jobs.map { unwritten[$0.id] ?? $0 }
            let listed = Set(jobs.map(\.id))
            jobs += unwritten.values.filter { !listed.contains($0.id) && (kind == nil || $0.kind == kind) }
            jobs = Array(jobs.filter { states?.contains($0.state) ?? true }.sorted { $0.sequence < $1.sequence }.suffix(limit))
        }
        return jobs.map { running[$0.id].map(live) ?? $0 }
    }

    /// `job(_:)`, answered without holding the loop while a shared store reads, as `fetchList` is; a job this
    /// daemon runs or holds unwritten is answered at once, as by `job(_:)`.
    /// - Throws: what `job(_:)` throws; `store_unavailable` when the shared store does not answer.
    public func fetchJob(_ idOrPrefix: String) async throws(JobError) -> JobRecord {
        let key = try Self.idKey(idOrPrefix)
        guard let leasing, running[key] == nil, unsavedRecords[key] == nil else { return try job(idOrPrefix) }
        // The prefix's rows are the jobs themselves: one round trip.
        let matches = try await Self.read(.idPrefix(key, limit: 2), counting: false, from: leasing).jobs
        let id = try Self.chosen(matches, for: idOrPrefix)
        if let active = running[id] { return live(active) }
        return current(id, stored: matches.first { $0.id == id })!
    }

    /// What `query` selects: read from a shared store without holding the loop (`shared` makes the answer of the
    /// reading), else asked of the SQLite store by `local`, the same question as a call.
    private func answer<Answer>(
        _ query: JobQuery, shared: (JobReading) -> Answer, local: () throws -> Answer
    ) async -> Result<Answer, any Error> {
        guard let leasing else { return Result { try local() } }
        return await Self.reading(query, counting: false, from: leasing).map(shared)
    }

    /// `leasing.read(query, counting:)`, awaited.
    private static func reading(
        _ query: JobQuery, counting: Bool, from leasing: any LeasingJobStoring
    ) async -> Result<JobReading, any Error> {
        await withCheckedContinuation { continuation in
            leasing.read(query, counting: counting) { continuation.resume(returning: $0) }
        }
    }

    /// `reading(_:counting:from:)`, its failure thrown as `readError`.
    private static func read(
        _ query: JobQuery, counting: Bool, from leasing: any LeasingJobStoring
    ) async throws(JobError) -> JobReading {
        switch await reading(query, counting: counting, from: leasing) {
        case .success(let reading): return reading
        case .failure(let error): throw readError(error)
        }
    }

    /// The error of a read the store refused.
    private static func readError(_ error: any Error) -> JobError {
        let refusal = StoreRefusal(error)
        return JobError(code: refusal.readErrorCode, message: "cannot read the job store: \(refusal.cause) (\(refusal)); try again")
    }

    /// Cancels a job (reason `user_stop`): a running job is stopped and cleans up; a waiting one is cancelled and
    /// its partial output removed. Returns once the job is `cancelled`, and only then: a run that stopped without
    /// being cancelled (its daemon died and another rescued the job, or it was paused) is cancelled where the job
    /// is now (`CancelVerdict`).
    /// - Throws: `JobError` `no_such_job`, `ambiguous_id`, or `invalid_state` for a job already ended (also when
    ///   its run ended otherwise before the cancel reached it); on a shared store `store_unavailable` when the
    ///   store has not taken the cancel yet (the daemon keeps trying).
    public func cancel(_ idOrPrefix: String) async throws(JobError) -> JobRecord {
        var job = try await fetchJob(idOrPrefix)
        let id = job.id
        // Each turn follows another daemon's change of the job, so a few do (as in `controlElsewhere`).
        for _ in 0..<Self.turnsAfterChangesElsewhere {
            if let stopped = try await controlElsewhere(&job, .cancel) {
                switch try CancelVerdict(stopped, unwritten: false) {
                case .cancelled(let cancelled): return cancelled
                case .again(let now): job = now
                }
                continue
            }
            if let active = running[id] {
                stop(active, .userStop, detail: "cancelled by user")
                await waitUntilStopped(active)
                let now = try await fetchJob(id)
                switch try CancelVerdict(now, unwritten: leasing != nil && unsavedRecords[id] != nil) {
                case .cancelled(let cancelled): return cancelled
                case .again(let now): job = now
                }
                continue
            }
            var cancelled = job
            try transition(&cancelled, .cancelWhileWaiting, verb: "cancel")
            cancelled.cancellation = Cancellation(reason: .userStop, at: Timestamp.nowISO8601(), detail: "cancelled by user")
            retryDueAt[id] = nil
            // Recorded before the clean-up, which may suspend (an upload removes its .part on the pool): a job
            // already cancelled in the store cannot be started in that gap and then have its output removed under
            // it. While the store refuses the write, the clean-up waits for it (a restart before then resumes it).
            let cleansUp = kinds[cancelled.kind]?.traits.cleansUpAfterEnd == true
            switch commit(cancelled, addingCleanUp: cleansUp) {
            case .written: await endWritten(cancelled, cancelledWhileWaiting: true, cleansUp: cleansUp)
            case .kept:
                cancelledWhileWaiting.insert(id)
                if leasing != nil { throw CancelVerdict.notYetWritten(id) }
            case .fencedOff:
                job = try await changedElsewhere(id)
                continue
            }
            return cancelled
        }
        throw Self.changingElsewhere(id, verb: "cancel")
    }

    /// How many times a `cancel` or `pause` starts over after another daemon changed the job under it.
    private static let turnsAfterChangesElsewhere = 4

    /// The error of a request that gave up after `turnsAfterChangesElsewhere` changes by other daemons.
    private static func changingElsewhere(_ id: String, verb: String) -> JobError {
        JobError(
            code: "invalid_state",
            message: "cannot \(verb) job \(id): other daemons sharing the store keep changing it; try again")
    }

    /// Shared store: job `id` as it is now, after a write of this daemon's was fenced off because another daemon
    /// claimed or ended it since it was read (the request then starts over from it).
    private func changedElsewhere(_ id: String) async throws(JobError) -> JobRecord {
        DaemonLog.write("job \(id.prefix(8)): changed by another daemon while this one asked for it; reading it again")
        return try await fetchJob(id)
    }

    /// Shared store: asks the daemon running `job` to `control` it (`requestControl`: a `control` column and a
    /// notification), then waits until the job is no longer running: woken when its end is written
    /// (`onControlledEnd`), and polling the store every 100 ms in case that notice is lost, at most
    /// `shutdownGraceSeconds` + 30 s. Nothing here holds the loop.
    /// - Returns: the job as it is then, or `nil` if it is not running on another daemon (any more): handle it
    ///   here, as `job`, which is then read again if it changed, or as the run this daemon now has.
    /// - Throws: `JobError` `store_error` if the request cannot be written, `control_timeout` if the job is still
    ///   running at the end of the wait (its daemon does not answer: it is rescued once its lease expires), and
    ///   what `fetchJob` throws.
    private func controlElsewhere(_ job: inout JobRecord, _ control: JobControl) async throws(JobError) -> JobRecord? {
        guard let leasing else { return nil }
        // Each turn follows a change of state (the job ended, or was rescued and claimed again), so a few do.
        for _ in 0..<4 {
            guard job.state == .running, running[job.id] == nil else { return nil }
            let id = job.id
            let asked = await withCheckedContinuation { continuation in
                leasing.requestControl(control, of: id) { continuation.resume(returning: $0) }
            }
            switch asked {
            case .success(true): return try await awaitEnd(of: id, asked: control, from: leasing)
            case .success(false): job = try await fetchJob(id)
            case .failure(let error):
                throw JobError(code: "store_error", message: "cannot ask the daemon running job \(id) to \(control.rawValue) it: \(error)")
            }
        }
        return nil
    }

    /// `controlElsewhere`'s wait for the end of job `id`, asked of the daemon running it through `leasing`.
    /// - Returns: the job once it is no longer running, or `nil` if this daemon runs it now.
    private func awaitEnd(
        of id: String, asked control: JobControl, from leasing: any LeasingJobStoring
    ) async throws(JobError) -> JobRecord? {
        let wait = ControlledEndWait()
        controlWaits[id, default: []].append(wait)
        defer {
            wait.close()
            controlWaits[id]?.removeAll { $0 === wait }
            if controlWaits[id]?.isEmpty == true { controlWaits[id] = nil }
        }
        let deadline = Timestamp.monotonic() + options.shutdownGraceSeconds + 30
        while Timestamp.monotonic() < deadline {
            let heard = wait.notices
            let stored = try? await Self.read(.idPrefix(id, limit: 1), counting: false, from: leasing).jobs.first { $0.id == id }
            if running[id] != nil { return nil }
            if let now = current(id, stored: stored), now.state != .running { return now }
            // A notice that came while reading may be about an end the read did not see yet: read again.
            if wait.notices == heard { await wait.sleep(seconds: 0.1) }
        }
        throw JobError(
            code: "control_timeout",
            message: "asked the daemon running job \(id) to \(control.rawValue) it, but it is still running; it "
                + "acts on the request when it renews its lease, or the job is rescued once its lease expires")
    }

    /// Another daemon asked this one to `control` job `id`, which it runs: done as a local `cancel` or `pause`.
    private func controlRequested(_ id: String, _ control: JobControl) {
        guard let active = running[id], active.context.stopReason == nil else { return }
        switch control {
        case .cancel: stop(active, .userStop, detail: "cancelled by user (through another daemon)")
        case .pause:
            active.pausing = true
            stop(active, .resourceReclaim, detail: "paused by user (through another daemon)")
        }
    }

    /// What follows a job's end once it is written: a job cancelled while waiting removes its partial output
    /// (`onCancel(user_stop)`), the first clean-up try runs if the kind has one, and the kind drops its state.
    private func endWritten(_ job: JobRecord, cancelledWhileWaiting: Bool, cleansUp: Bool) async {
        guard let kind = kinds[job.kind] else { return }
        if cancelledWhileWaiting { await kind.onCancel(.userStop, job.params, makeContext(for: job, kind: kind)) }
        if cleansUp { await tryCleanUp(job.id) }
        kind.jobEnded(job.id, job.state)
    }

    /// Pauses a job: a running one checkpoints and stops (`resource_reclaim`, "paused by user"); a queued or
    /// retry-waiting one is held. `resume` puts it back in the queue.
    /// - Throws: `JobError` `no_such_job`, `ambiguous_id`, `invalid_state`.
    public func pause(_ idOrPrefix: String) async throws(JobError) -> JobRecord {
        var job = try await fetchJob(idOrPrefix)
        let id = job.id
        for _ in 0..<Self.turnsAfterChangesElsewhere {
            if let stopped = try await controlElsewhere(&job, .pause) { return stopped }
            if let active = running[id] {
                active.pausing = true
                stop(active, .resourceReclaim, detail: "paused by user")
                await waitUntilStopped(active)
                return try await fetchJob(id)
            }
            var paused = job
            try transition(&paused, .pauseWhileWaiting, verb: "pause")
            paused.retryAt = nil
            retryDueAt[id] = nil
            if commit(paused) == .fencedOff {
                job = try await changedElsewhere(id)
                continue
            }
            armRetryTimer()
            return paused
        }
        throw Self.changingElsewhere(id, verb: "pause")
    }

    /// Puts a paused job back in the queue, first changing its params with `changes` if given (see
    /// `JobKind.amend`; an upload takes `{"headers": [...]}`, for credentials that expired).
    /// - Throws: `JobError` `no_such_job`, `ambiguous_id`, `invalid_state` if it is not paused; the kind's
    ///   `invalid_params` for changes it refuses (then nothing changes); `store_error`.
    public func resume(_ idOrPrefix: String, changes: JSONValue? = nil) async throws(JobError) -> JobRecord {
        var job = try await fetchJob(idOrPrefix)
        let paused = job.state
        try transition(&job, .resume, verb: "resume")
        var fencedOff = false
        if let changes, let kind = kinds[job.kind] {
            job.params = try kind.amend(job.params, changes)
            do {
                try store.updateParams(id: job.id, job.params)
                log(job, .info, "params changed on resume: \(String(decoding: JSONCoding.encode(JobRecord.redacted(changes)), as: UTF8.self))")
            } catch JobStoreError.leaseLost {
                fencedOff = true
            } catch {
                throw JobError(code: "store_error", message: "cannot record the job's new params: \(error)")
            }
        }
        if fencedOff || commit(job, from: paused) == .fencedOff {
            // Another daemon cancelled it since it was read: what it is now says why it cannot be resumed.
            var now = try await changedElsewhere(job.id)
            try transition(&now, .resume, verb: "resume")
            throw JobError(code: "invalid_state", message: "cannot resume job \(job.id): another daemon changed it meanwhile; try again")
        }
        schedule()
        return (try? await fetchJob(job.id)) ?? job
    }

    /// Stops every running job with `resource_reclaim` ("daemon shutting down") and waits up to
    /// `shutdownGraceSeconds` for them to checkpoint. Jobs still running after that are left `running` in the store
    /// and resume on the next start, as after a crash.
    public func shutdown() async {
        isShuttingDown = true
        retryTimer?.close()
        retryTimer = nil
        leaseTimer?.close()
        leaseTimer = nil
        cleanUpTimer?.close()
        cleanUpTimer = nil
        // A claim in flight may hold jobs for this daemon: they run (its answer launches them) and stop with the rest.
        await claimSettled()
        let active = Array(running.values)
        for job in active { stop(job, .resourceReclaim, detail: "daemon shutting down") }
        let deadline = LoopTimer(loop: .main)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            var resumed = false
            let finish = {
                if !resumed {
                    resumed = true
                    continuation.resume()
                }
            }
            deadline.start(milliseconds: UInt64(options.shutdownGraceSeconds * 1000)) { finish() }
            Task.onLoop {
                for job in active { await self.waitUntilStopped(job) }
                finish()
            }
        }
        deadline.close()
        for job in running.values { job.watchdog.close() }
        // What ended meanwhile is written now, after a group still in flight; later ends (after the grace) are
        // written at once.
        while groupInFlight { await groupAnswered() }
        commitGroup(waiting: true)
        groupCommitClosed = true
        groupCommitHandle?.close()
        groupCommitHandle = nil
        // One last try at what the store refused; what is still unwritten resumes from the store's state next time.
        storeRetryTimer?.close()
        storeRetryTimer = nil
        if !unsavedRecords.isEmpty || !unsavedCheckpoints.isEmpty { retryStoreWrites() }
    }

    // MARK: - Running

    private func schedule() {
        guard !isShuttingDown else { return }
        if let leasing { return claim(from: leasing) }
        // A job that ends as it starts (a kind this daemon lacks) frees its slot at once: look again, until the
        // slots are full or nothing more could start. Each pass ends at least one job for good, so this stops.
        var again = true
        while again {
            again = false
            let free = options.concurrency - running.count
            guard free > 0, let queued = queuedJobs(limit: free) else { break }
            var starting: [(job: JobRecord, kind: AnyJobKind)] = []
            for job in queued {
                if let kind = kinds[job.kind] {
                    if let started = startable(job, kind: kind) { starting.append((started, kind)) }
                } else if startUnknownKind(job) == .endedAtOnce {
                    again = true
                }
            }
            guard !starting.isEmpty else { continue }
            // A healthy store: the starts go with the turn's group commit (not fsynced: a crash puts a `running`
            // job back in the queue anyway), the jobs run now.
            if storeFault == nil, !groupCommitClosed {
                for (job, kind) in starting {
                    pendingStarts[job.id] = job
                    launch(job, kind: kind)
                }
                armGroupCommit()
                continue
            }
            // While the store refuses writes, every start of this pass in one transaction first: a refused write
            // leaves them all queued; the store retry runs `schedule()` again once writes succeed.
            var none: [JobRecord] = []
            guard write("the start of \(starting.count) jobs", {
                try store.commitGroup(
                    inserting: &none, digests: [], duplicateKeys: [], updating: starting.map { ($0.job, false) },
                    durable: false)
            }) == nil else { break }
            for (job, kind) in starting { launch(job, kind: kind) }
        }
        preemptIfNeeded()
    }

    /// Where a shared store's claim is.
    private enum ClaimState {
        /// None asked for.
        case none
        /// Put off because a group was in flight: the group's answer claims.
        case putOff
        /// Sent, not answered yet; `again` if something asked for a claim meanwhile (a slot freed, a notice of
        /// work): its answer claims again.
        case inFlight(again: Bool)
    }

    /// Shared store: claims as many queued jobs of the kinds this daemon has as it has free slots (the store
    /// starts them, atomically with the row lock) and runs them once the claim is answered. A refused claim is
    /// retried by the store retry and the lease timer.
    ///
    /// The claim does not wait on the loop: the loop answers pings, reads and controls during its round trip.
    /// One is in flight at a time, its answer claims again if asked to meanwhile, so notices arriving together cost
    /// two claims, not one each. (A claim sent without waiting once held up an idle daemon's reads, one claim per
    /// job another daemon queued; the notices now name the queue and pinned host, and a daemon claims only for
    /// work it may take.)
    private func claim(from leasing: any LeasingJobStoring) {
        let free = options.concurrency - running.count
        guard free > 0 else { return }
        if case .inFlight = claimState {
            claimState = .inFlight(again: true)
            return
        }
        // Not while a group is in flight: a job it puts back in the queue must be announced (and its lease
        // released) before it can be claimed again. The group's answer schedules again.
        guard !groupInFlight else {
            claimState = .putOff
            return
        }
        claimState = .inFlight(again: false)
        leasing.sendClaim(limit: free, kinds: kindNames) { [weak self] result in
            self?.claimAnswered(result, what: "a claim of \(free) jobs")
        }
    }

    /// Runs what a claim took (also while shutting down: `shutdown` waits for the claim, then stops its jobs with
    /// the others), or settles its refusal; then claims again if asked to meanwhile.
    private func claimAnswered(_ result: Result<[ClaimedRun], any Error>, what: String) {
        guard case .inFlight(let again) = claimState else { return }
        claimState = .none
        switch result {
        case .success(let claimed):
            _ = settled(what, nil)
            for run in claimed {
                guard let kind = kinds[run.job.kind] else { continue }  // claims only registered kinds
                claimedCheckpoints.updateValue(run.checkpoint, forKey: run.job.id)
                launch(prepared(run.job, kind: kind), kind: kind)
            }
        case .failure(let error):
            _ = settled(what, error)
        }
        let waiters = claimAnswerWaiters
        claimAnswerWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
        if again { schedule() }
    }

    /// Waits until no claim is in flight.
    private func claimSettled() async {
        guard case .inFlight = claimState else { return }
        await withCheckedContinuation { claimAnswerWaiters.append($0) }
    }

    /// Shared store: every third of a lease, renews the leases of this daemon's running jobs (a job whose lease is
    /// lost stops without writing its end), puts jobs whose lease expired and due retries back in the queue, and
    /// claims what can run (in case a notification was missed).
    private func armLeaseTimer() {
        guard let leasing, leaseTimer == nil else { return }
        leasing.onWorkAvailable = { [weak self] in LoopIsolation.assume { self?.schedule() } }
        leasing.onControl = { [weak self] id, control in LoopIsolation.assume { self?.controlRequested(id, control) } }
        leasing.onControlledEnd = { [weak self] id in
            LoopIsolation.assume { for wait in self?.controlWaits[id] ?? [] { wait.heard() } }
        }
        leasing.onLeaseLost = { [weak self] id in
            LoopIsolation.assume { if let active = self?.running[id] { self?.loseLease(active) } }
        }
        let timer = LoopTimer(loop: .main)
        leaseTimer = timer
        let period = UInt64(max(10, leasing.leaseSeconds * 1000 / 3))
        timer.start(milliseconds: period, repeatMilliseconds: period) { [weak self] in
            LoopIsolation.assume { self?.leaseTick() }
        }
    }

    private func leaseTick() {
        guard let leasing, !isShuttingDown, !tendingLeases else { return }
        // One tick at a time: a store slower than the tick period must not pile them up.
        tendingLeases = true
        leasing.maintainLeases { [weak self] found in
            LoopIsolation.assume { self?.leasesTended(found) }
        }
    }

    private func leasesTended(_ found: LeaseMaintenance) {
        tendingLeases = false
        guard !isShuttingDown else { return }
        // A lost lease found here was also reported through `onLeaseLost`; `loseLease` acts once.
        for id in found.lost { if let active = running[id] { loseLease(active) } }
        // Requests whose notification was lost (this daemon was reconnecting, or claimed the job after).
        for (id, control) in found.controls { controlRequested(id, control) }
        if !found.rescued.isEmpty {
            DaemonLog.write(
                "rescued \(found.rescued.count) jobs whose daemon's lease expired (queued to resume from their checkpoint): "
                    + found.rescued.map { String($0.id.prefix(8)) }.joined(separator: ", "))
            for job in found.rescued { announceRescue(job) }
        }
        // As `retryDue` announces a retry coming due on one daemon; here the store moved it, for every daemon.
        for job in found.queuedAgain where job.state == .queued { feed.stateChanged(job, from: .needsRetry) }
        schedule()
    }

    /// Tells every watcher (through the feed, which the shared store relays to the other daemons) that a job whose
    /// daemon stopped renewing its lease is back in the queue: a `state` event `running` → `queued` and a `log`
    /// event saying why. Without them a watcher shows the job running on the dead daemon until another claims it.
    /// The counts need nothing: on a shared store they are the database's.
    private func announceRescue(_ rescued: JobRecord) {
        guard rescued.state == .queued else { return }
        var job = rescued
        // The stored last stop (if any) is an earlier run's; this is no stop of the job's.
        job.cancellation = nil
        feed.stateChanged(job, from: .running)
        feed.log(
            job: job.id, kind: job.kind, level: .warning,
            message: "rescued: the daemon that ran it stopped renewing its lease (killed or cut off); it resumes "
                + "from its last checkpoint on attempt \(job.attempt)")
    }

    /// Stops a job whose lease this daemon lost (another daemon rescued it): its end will not be written.
    private func loseLease(_ active: RunningJob) {
        guard !active.leaseLost else { return }
        active.leaseLost = true
        log(
            active.record, .warning,
            "this daemon lost the job's lease (it expired and another daemon may run the job now): stopping this run without recording its end")
        stop(active, .resourceReclaim, detail: "lease lost")
    }

    /// A write the shared store fenced off (`JobStoreError.leaseLost`): a running job stops; any other write is
    /// dropped, since another daemon changed the job meanwhile.
    fileprivate func fencedOff(_ id: String) {
        if let active = running[id] {
            loseLease(active)
        } else {
            DaemonLog.write("job \(id.prefix(8)): another daemon sharing the store changed it meanwhile; this daemon's write is dropped")
        }
    }

    /// What `startUnknownKind` did with a queued job.
    private enum StartOutcome {
        /// It ended as it started (its kind is unknown here), and that is recorded.
        case endedAtOnce
        /// Nothing changed (not startable now, or its new state could not be recorded).
        case unchanged
    }

    /// When a job of higher priority waits and every slot is taken, stops the lowest-priority running job
    /// (the most recently started among equals) with `resource_reclaim`; it goes back to the queue.
    private func preemptIfNeeded() {
        // Not on a shared store yet: the freed slot could be claimed by another daemon's job.
        guard leasing == nil, running.count >= options.concurrency else { return }
        // The usual case first, from one row: the most urgent waiting job outranks no running one.
        let lowest = running.values.lazy.filter { $0.context.stopReason == nil }.map(\.record.options.priority).min()
        guard let lowest, let first = highestQueuedPriority(), first > lowest,
            let waiting = queuedJobs(limit: options.concurrency), !waiting.isEmpty
        else { return }
        var freeing = running.values.filter { $0.context.stopReason != nil }.count
        var candidates = running.values.filter { $0.context.stopReason == nil }
            .sorted { ($0.record.options.priority, -$0.startedAt) < ($1.record.options.priority, -$1.startedAt) }
        for job in waiting {
            if freeing > 0 {
                freeing -= 1
                continue
            }
            guard let victim = candidates.first, victim.record.options.priority < job.options.priority else { return }
            candidates.removeFirst()
            stop(victim, .resourceReclaim, detail: "paused to free a slot for job \(job.id) (priority \(job.options.priority))")
        }
    }

    /// Records the start of a queued job of a kind this daemon lacks: a stored job an older or newer version
    /// wrote. It starts and fails at once, through the lifecycle like any other failure, so the feed and the
    /// attempt count stay true. One write (queued -> failed), then both transitions announced: a failed write
    /// leaves it queued, never half-way in `running`.
    private func startUnknownKind(_ queued: JobRecord) -> StartOutcome {
        var job = queued
        var lifecycle = job.lifecycle
        guard lifecycle.handle(.start) == .run else { return .unchanged }
        job.adopt(lifecycle)
        let started = job
        _ = lifecycle.handle(.fail(retryable: false))
        job.adopt(lifecycle)
        job.error = JobError(code: "unknown_kind", message: "this daemon has no job kind '\(job.kind)'")
        guard write("the state of job \(job.id.prefix(8))", { try store.update(job, addingCleanUp: false) }) == nil else { return .unchanged }
        announce(started, from: .queued)
        announce((try? store.job(id: job.id)) ?? job, from: .running)
        return .endedAtOnce
    }

    /// A queued job as it starts (state `running`, its attempt counted), or `nil` if it cannot start.
    private func startable(_ queued: JobRecord, kind: AnyJobKind) -> JobRecord? {
        var job = queued
        var lifecycle = job.lifecycle
        guard lifecycle.handle(.start) == .run else { return nil }
        job.adopt(lifecycle)
        return prepared(job, kind: kind)
    }

    /// A started job (state `running`) as its run begins: no error of an earlier attempt, the kind's unit, no rate.
    private func prepared(_ started: JobRecord, kind: AnyJobKind) -> JobRecord {
        var job = started
        job.error = nil
        job.progress.unit = kind.traits.unit
        job.progress.ratePerSecond = nil
        job.progress.etaSeconds = nil
        job.updatedAt = Timestamp.nowISO8601()
        return job
    }

    /// Runs a job whose start is written.
    private func launch(_ job: JobRecord, kind: AnyJobKind) {
        let active = RunningJob(record: job, context: makeContext(for: job, kind: kind), kind: kind)
        running[job.id] = active
        announce(job, from: .queued)
        armWatchdog(active)
        Task.onLoop {
            let outcome = await self.execute(active)
            self.finish(active, outcome)
        }
    }

    private func makeContext(for job: JobRecord, kind: AnyJobKind) -> JobContext {
        let context = JobContext(
            id: job.id, kind: job.kind, attempt: job.attempt, maxAttempts: job.options.maxAttempts, traits: kind.traits,
            progress: job.progress, giveUpAfterSeconds: job.options.giveUpAfterSeconds,
            stallTimeoutSeconds: job.options.stallTimeoutSeconds)
        context.host = self
        return context
    }

    private func execute(_ active: RunningJob) async -> Outcome {
        let context = active.context
        var outcome: Outcome
        do {
            outcome = .succeeded(try await active.kind.run(active.record.params, context))
        } catch let error as JobError {
            outcome = context.stopReason.map { .stopped($0) } ?? .failed(error)
        } catch {
            outcome =
                context.stopReason.map { .stopped($0) }
                ?? .failed(JobError(code: "internal", message: "job failed unexpectedly: \(error)"))
        }
        if case .stopped(let reason) = outcome {
            await active.kind.onCancel(reason, active.record.params, context)
        }
        return outcome
    }

    private func finish(_ active: RunningJob, _ outcome: Outcome) {
        claimedCheckpoints.removeValue(forKey: active.record.id)
        if active.leaseLost { return endWithoutLease(active) }
        var job = live(active)
        var lifecycle = job.lifecycle
        let effect: JobLifecycle.Effect?
        var outcome = outcome
        if let failure = active.storeFailure {
            if case .succeeded = outcome {} else { outcome = .failed(failure) }
        }
        switch outcome {
        case .succeeded(let result):
            effect = lifecycle.handle(.succeed)
            job.result = result
            job.progress.etaSeconds = 0
            job.progress.isFinished = true
        case .failed(let error):
            effect = lifecycle.handle(error.pausesJob ? .blocked : .fail(retryable: error.retryable))
            job.error = error
        case .stopped(let reason):
            effect = lifecycle.handle(.stopped(reason, pausing: active.pausing))
            job.cancellation = Cancellation(reason: reason, at: Timestamp.nowISO8601(), detail: active.stopDetail)
            if reason == .timeout && lifecycle.state == .failed {
                job.error = JobError(
                    code: "timeout",
                    message: "\(active.stopDetail); gave up after \(job.attempt) of \(job.options.maxAttempts) attempts")
            }
        }
        job.adopt(lifecycle)
        job.retryAt = nil
        if case .scheduleRetry(let attempt)? = effect {
            let delay = options.backoff.delay(afterAttempt: attempt, unitRandom: Double.random(in: 0...1))
            job.retryAt = Timestamp.now() + delay
            retryDueAt[job.id] = Timestamp.monotonic() + delay
        }
        if job.state != .running {
            // Nothing is under way once the run ended: what was in flight is either acknowledged or not.
            job.progress.inFlight = job.progress.inFlight.map { _ in 0 }
            job.progress.ratePerSecond = nil
            if job.state != .succeeded { job.progress.etaSeconds = nil }
        }
        active.watchdog.close()
        running[job.id] = nil
        job.updatedAt = Timestamp.nowISO8601()
        let cleansUp = active.kind.traits.cleansUpAfterEnd && (job.state == .failed || job.state == .cancelled)
        let waiters = active.waiters
        active.waiters.removeAll()
        armRetryTimer()
        // Written with the turn's group commit. A refused write keeps the end in memory (announced, shown,
        // cancellable) until the store retry writes it; kinds drop their state, and clean up, only once it is
        // written. A restart before then recovers the job as after a crash.
        let ended = job
        commitAtTurnEnd(job, from: .running, addingCleanUp: cleansUp) { recorded in
            if recorded && ended.state.isTerminal && !cleansUp { active.kind.jobEnded(ended.id, ended.state) }
            guard cleansUp && recorded else {
                for waiter in waiters { waiter.resume() }
                return
            }
            // The first clean-up try before `cancel` answers, so a cancelled upload is gone from the server by then.
            Task.onLoop {
                await self.tryCleanUp(ended.id)
                active.kind.jobEnded(ended.id, ended.state)
                for waiter in waiters { waiter.resume() }
            }
        }
    }

    /// A run whose lease was lost is over here: the slot is freed and nothing about it is written or announced
    /// (the daemon that rescued the job owns it now).
    private func endWithoutLease(_ active: RunningJob) {
        active.watchdog.close()
        running[active.record.id] = nil
        leasing?.forgetLostLease(of: active.record.id)
        activeCounts[.running, default: 0] -= 1
        DaemonLog.write("job \(active.record.id.prefix(8)) \(active.record.kind): run stopped after its lease was lost; its end is not written")
        for waiter in active.waiters { waiter.resume() }
        active.waiters.removeAll()
        schedule()
    }

    // MARK: - Group commit

    /// Queues `job`'s transition from `from` for the turn's group commit; `written` runs after it, with whether
    /// the store took it. After shutdown (no more turns) it is written at once.
    private func commitAtTurnEnd(
        _ job: JobRecord, from: JobState, addingCleanUp: Bool, written: @escaping @LoopActor (Bool) -> Void
    ) {
        guard !groupCommitClosed else { return written(commitAlone(job, from: from, addingCleanUp: addingCleanUp)) }
        pendingEnds.append(PendingEnd(job: job, from: from, cleansUp: addingCleanUp, written: written))
        pendingRecords[job.id] = job
        armGroupCommit()
    }

    /// `commit` of a run's transition out of the group commit (after the store refused the group, or after
    /// shutdown); a transition fenced off is reported as such (`reportFencedOff`).
    /// - Returns: whether it is written.
    private func commitAlone(_ job: JobRecord, from: JobState, addingCleanUp: Bool) -> Bool {
        switch commit(job, from: from, addingCleanUp: addingCleanUp) {
        case .written: return true
        case .kept: return false
        case .fencedOff:
            reportFencedOff(job, from: from)
            return false
        }
    }

    private func armGroupCommit() {
        let handle = groupCommitHandle ?? CheckHandle(loop: .main)
        groupCommitHandle = handle
        handle.start { [weak self] in
            LoopIsolation.assume { self?.commitGroup() }
        }
    }

    /// Writes the turn's submits and transitions in one transaction (one fsync when any is a submit or an end),
    /// then answers the submits, announces the transitions and runs what waits for them, and starts what can run.
    /// When the store refuses the group, each write is tried alone, so each meets the refusal it would have met
    /// without grouping and is handled as before (a submit waits out a lock or is refused; a transition is kept in
    /// `unsavedRecords`).
    ///
    /// On a shared store the group is sent without waiting (`LeasingJobStoring.sendGroup`): the loop goes on for
    /// the round trip, and what arrives meanwhile goes in the next group, sent when this one is answered. At
    /// shutdown (`waiting`) it waits, as on SQLite.
    private func commitGroup(waiting: Bool = false) {
        groupCommitHandle?.stop()
        // One group in flight at a time: its answer arms the next (`groupAnswered`).
        guard !groupInFlight else { return }
        let submits = pendingSubmits
        let ends = pendingEnds
        pendingSubmits.removeAll()
        pendingEnds.removeAll()
        // A start whose run ended in this turn is not written: the end's row holds all of it. The others with
        // their latest progress (a checkpoint written since the start saved it; the start must not undo that).
        let ended = Set(ends.lazy.map(\.job.id))
        let starts = pendingStarts.values.filter { !ended.contains($0.id) }.map { running[$0.id].map(live) ?? $0 }
        pendingStarts.removeAll()
        guard !submits.isEmpty || !ends.isEmpty || !starts.isEmpty else { return }
        var inserted = submits.flatMap(\.jobs)
        let digests = submits.flatMap(\.digests)
        let duplicateKeys = submits.flatMap(\.duplicateKeys)
        let updating = starts.map { ($0, false) } + ends.map { ($0.job, $0.cleansUp) }
        if let leasing, !waiting {
            groupInFlight = true
            leasing.sendGroup(inserting: inserted, digests: digests, duplicateKeys: duplicateKeys, updating: updating) {
                [weak self] outcome in
                guard let self else { return }
                self.groupInFlight = false
                self.settleGroup(submits, starts, ends, outcome)
                let waiters = self.groupAnswerWaiters
                self.groupAnswerWaiters.removeAll()
                for waiter in waiters { waiter.resume() }
                if !self.pendingSubmits.isEmpty || !self.pendingEnds.isEmpty { self.armGroupCommit() }
            }
            return
        }
        let durable = !submits.isEmpty || ends.contains { $0.job.state.isTerminal }
        let outcome = Result<GroupWritten, any Error> {
            try store.commitGroup(
                inserting: &inserted, digests: digests, duplicateKeys: duplicateKeys, updating: updating, durable: durable)
            return GroupWritten(inserted: inserted, lost: leasing?.takeLostWrites() ?? [])
        }
        settleGroup(submits, starts, ends, outcome)
    }

    /// What follows a group's commit, sent waiting or not: its ends leave `pendingRecords`; then the group's
    /// writes are settled as written (`groupWritten`) or, refused, tried one by one (`groupRefused`); then what
    /// waits for the store is retried and what can run starts.
    private func settleGroup(
        _ submits: [PendingSubmit], _ starts: [JobRecord], _ ends: [PendingEnd], _ outcome: Result<GroupWritten, any Error>
    ) {
        for end in ends { pendingRecords[end.job.id] = nil }
        switch outcome {
        case .success(let written): groupWritten(submits, starts, ends, inserted: written.inserted, lost: written.lost)
        case .failure: groupRefused(submits, starts, ends)
        }
        armRetryTimer()
        // A shared store's claim costs a round trip: made after a group only when a run's end freed a slot or a
        // claim waited for the group. Submits alone wake the daemons that may claim their jobs,
        // this one too, through their notice (`WorkNotice`).
        if leasing == nil || !ends.isEmpty { return schedule() }
        if case .putOff = claimState { schedule() }
    }

    /// Waits until no group is in flight (`commitGroup`'s sent group is answered).
    private func groupAnswered() async {
        guard groupInFlight else { return }
        await withCheckedContinuation { groupAnswerWaiters.append($0) }
    }

    /// After the store took a group: answers its submits (`inserted`, with their sequence numbers, in order) and
    /// announces its transitions except those fenced off (`lost`).
    private func groupWritten(
        _ submits: [PendingSubmit], _ starts: [JobRecord], _ ends: [PendingEnd], inserted: [JobRecord], lost: Set<String>
    ) {
        // A start or end written supersedes an older refused write of the same job still waiting for the retry.
        for id in starts.map(\.id) + ends.map(\.job.id) {
            unsavedRecords[id] = nil
            unannounced[id] = nil
        }
        groupCommitted?(inserted.count, starts.count + ends.count)
        var next = 0
        for submit in submits {
            let stored = Array(inserted[next..<next + submit.jobs.count])
            next += submit.jobs.count
            for job in stored { submitted(job) }
            submit.reply.resolve(.success(stored))
        }
        for end in ends {
            guard !lost.contains(end.job.id) else {
                // Fenced off: another daemon took the job over; this run's end is not the job's.
                if end.from != .running { activeCounts[end.from, default: 0] -= 1 }
                reportFencedOff(end.job, from: end.from)
                end.written(false)
                continue
            }
            announce(end.job, from: end.from)
            end.written(true)
        }
    }

    /// After the store refused a group: each write alone. A start the store refuses is kept for the retry (its
    /// run goes on; it was announced at launch), before the ends, whose refusal then replaces it.
    private func groupRefused(_ submits: [PendingSubmit], _ starts: [JobRecord], _ ends: [PendingEnd]) {
        for start in starts {
            if let error = write("the start of job \(start.id.prefix(8))", { try store.update(start, addingCleanUp: false) }),
                error.code != Self.fencedOff.code
            {
                unsavedRecords[start.id] = start
            }
        }
        for end in ends { end.written(commitAlone(end.job, from: end.from, addingCleanUp: end.cleansUp)) }
        for submit in submits {
            Task.onLoop {
                var jobs = submit.jobs
                do throws(JobError) {
                    try await self.insertWaitingForLock(&jobs, digests: submit.digests, duplicateKeys: submit.duplicateKeys)
                } catch {
                    return submit.reply.resolve(.failure(error))
                }
                for job in jobs { self.submitted(job) }
                self.schedule()
                submit.reply.resolve(.success(jobs))
            }
        }
    }

    // MARK: - Clean-up of ended jobs

    /// One try of the clean-up of ended job `id` (`JobKind.cleanUp`): forgets it when done or given up, else
    /// schedules the next try (1 s doubling, at most `cleanUpMaxDelaySeconds`, times a random factor in [0.5, 1])
    /// until `cleanUpBudgetSeconds` after the end, then logs that it gave up.
    private func tryCleanUp(_ id: String) async {
        guard !cleaningUp.contains(id) else { return }
        cleanUpDueAt[id] = nil
        cleaningUp.insert(id)
        defer { cleaningUp.remove(id) }
        guard let job = try? store.job(id: id), let kind = kinds[job.kind] else {
            try? store.removeCleanUp(jobID: id)
            return
        }
        let pending = (try? store.dueCleanUps(now: .infinity))?.first { $0.jobID == id }
        let tries = (pending?.tries ?? 0) + 1
        let outcome = await kind.cleanUp(job.state, job.params, makeContext(for: job, kind: kind))
        switch outcome {
        case .done:
            try? store.removeCleanUp(jobID: id)
        case .giveUp(let message):
            log(job, .error, "clean-up abandoned: \(message)")
            try? store.removeCleanUp(jobID: id)
        case .retry(let message):
            let now = Timestamp.now()
            if now - (pending?.createdAt ?? now) >= options.cleanUpBudgetSeconds {
                log(job, .error, "clean-up given up after \(tries) tries over \(Self.seconds(options.cleanUpBudgetSeconds)): \(message)")
                try? store.removeCleanUp(jobID: id)
            } else {
                let full = min(options.cleanUpMaxDelaySeconds, pow(2, Double(min(tries - 1, 30))))
                let delay = full * Double.random(in: 0.5...1)
                log(job, .warning, "clean-up try \(tries) failed (\(message)); next try in \((delay * 10).rounded() / 10) s")
                try? store.rescheduleCleanUp(jobID: id, tries: tries, nextAt: now + delay, error: message)
                cleanUpDueAt[id] = Timestamp.monotonic() + delay
            }
        }
        armCleanUpTimer()
    }

    /// Arms the clean-up timer for the next pending clean-up, if any.
    /// Nothing is armed once shutdown began.
    private func armCleanUpTimer() {
        guard !isShuttingDown else { return }
        guard let next = cleanUpDueAt.values.min() else {
            cleanUpTimer?.stop()
            return
        }
        let timer = cleanUpTimer ?? LoopTimer(loop: .main)
        cleanUpTimer = timer
        timer.start(seconds: max(0, next - Timestamp.monotonic())) { [weak self] in self?.cleanUpsDue() }
    }

    private func cleanUpsDue() {
        let now = Timestamp.monotonic() + 0.001
        let due = cleanUpDueAt.filter { $0.value <= now }.keys
        // A timer that fired a little early: arm it again. Those being tried now re-arm it when their try ends.
        if due.isEmpty { return armCleanUpTimer() }
        for id in due where !cleaningUp.contains(id) {
            cleanUpDueAt[id] = nil
            Task.onLoop { await self.tryCleanUp(id) }
        }
    }

    private func stop(_ active: RunningJob, _ reason: CancellationReason, detail: String) {
        guard active.context.stopReason == nil else { return }
        active.stopDetail = detail
        active.context.stop(reason)
        log(active.record, .info, "stopping (\(reason.rawValue)): \(detail)")
    }

    private func waitUntilStopped(_ active: RunningJob) async {
        guard running[active.record.id] === active else { return }
        await withCheckedContinuation { active.waiters.append($0) }
    }

    // MARK: - Timers

    /// One timer per running job, due at whichever comes first: its deadline or its stall limit. Neither clock
    /// runs while the job waits out an outage (`JobContext.waitOut`): the timer is off then, the deadline is moved
    /// by the time waited, and the stall clock starts again when the wait ends.
    private func armWatchdog(_ active: RunningJob) {
        guard active.waitingSince == nil else {
            active.watchdog.stop()
            return
        }
        let now = Timestamp.monotonic()
        let deadline = active.startedAt + active.record.options.timeoutSeconds + active.excusedSeconds
        let stallAt = active.lastMoveAt + active.record.options.stallTimeoutSeconds
        if now >= deadline {
            stop(active, .timeout, detail: "ran past its deadline of \(Self.seconds(active.record.options.timeoutSeconds))")
            return
        }
        if now >= stallAt {
            stop(active, .timeout, detail: "no progress for \(Self.seconds(active.record.options.stallTimeoutSeconds))")
            return
        }
        let due = min(deadline, stallAt) - now
        active.watchdog.start(seconds: due) { [weak self, weak active] in
            guard let self, let active, active.context.stopReason == nil else { return }
            self.armWatchdog(active)
        }
    }

    private func armRetryTimer() {
        guard !isShuttingDown else { return }
        guard let next = retryDueAt.values.min() else {
            retryTimer?.stop()
            return
        }
        let timer = retryTimer ?? LoopTimer(loop: .main)
        retryTimer = timer
        timer.start(seconds: max(0, next - Timestamp.monotonic())) { [weak self] in self?.retryDue() }
    }

    private func retryDue() {
        let now = Timestamp.monotonic() + 0.001
        for (id, _) in retryDueAt.filter({ $0.value <= now }).sorted(by: { $0.value < $1.value }) {
            retryDueAt[id] = nil
            guard var job = current(id), (try? transition(&job, .retryDue, verb: "retry")) != nil else { continue }
            job.retryAt = nil
            commit(job, from: .needsRetry)
        }
        armRetryTimer()
        schedule()
    }

    // MARK: - Helpers

    private func resolve(_ idOrPrefix: String) throws(JobError) -> String {
        let key = try Self.idKey(idOrPrefix)
        // A job this daemon runs or holds unwritten is known without the store (which may be unreachable).
        if running[key] != nil || unsavedRecords[key] != nil { return key }
        let matches: [JobRecord]
        do {
            matches = try store.jobs(idPrefix: key, limit: 2)
        } catch {
            throw Self.readError(error)
        }
        return try Self.chosen(matches, for: idOrPrefix)
    }

    /// `idOrPrefix` in lower case.
    /// - Throws: `JobError` `no_such_job` when it cannot be a job id or its prefix.
    private static func idKey(_ idOrPrefix: String) throws(JobError) -> String {
        let key = idOrPrefix.lowercased()
        guard !key.isEmpty, key.count <= 36, key.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw JobError(code: "no_such_job", message: "'\(idOrPrefix)' is not a job id (a UUID or its prefix)")
        }
        return key
    }

    /// The id of the job `idOrPrefix` names among `matches` (at most two of the jobs whose id starts with it).
    /// - Throws: `JobError` `no_such_job` for none, `ambiguous_id` for several without an exact match.
    private static func chosen(_ matches: [JobRecord], for idOrPrefix: String) throws(JobError) -> String {
        if let exact = matches.first(where: { $0.id == idOrPrefix.lowercased() }) { return exact.id }
        switch matches.count {
        case 0: throw JobError(code: "no_such_job", message: "no job with id \(idOrPrefix); see `trailbook-jobs list`")
        case 1: return matches[0].id
        default:
            throw JobError(code: "ambiguous_id", message: "'\(idOrPrefix)' matches several jobs; give more of the id")
        }
    }

    private func transition(_ job: inout JobRecord, _ event: JobEvent, verb: String) throws(JobError) {
        var lifecycle = job.lifecycle
        guard lifecycle.handle(event) != nil else {
            let now = job.state.isTerminal ? "it has already ended (\(job.state.rawValue))" : "it is \(job.state.rawValue)"
            throw JobError(code: "invalid_state", message: "cannot \(verb) job \(job.id): \(now)")
        }
        job.adopt(lifecycle)
    }

    /// Persists `job` and announces the transition from `from` (the state before, read if `nil`); with
    /// `addingCleanUp`, records its pending clean-up in the same transaction.
    ///
    /// When the store refuses the write (locked, disk full), the new state is kept in `unsavedRecords` and, on
    /// SQLite, announced all the same; the store retry writes it. On a shared store it is announced only once the
    /// retry wrote it (`unannounced`), and a write another daemon's change fenced off (it runs or ended the job
    /// meanwhile) is dropped and not announced.
    /// - Returns: what became of the write.
    @discardableResult
    private func commit(_ job: JobRecord, from: JobState? = nil, addingCleanUp: Bool = false) -> CommitOutcome {
        let previous = from ?? current(job.id)?.state ?? job.state
        if let error = write("the state of job \(job.id.prefix(8))", { try store.update(job, addingCleanUp: addingCleanUp) }) {
            if error.code == Self.fencedOff.code {
                // An older unwritten state of the job is moot too: the store's row is another daemon's now.
                dropUnsaved(job.id)
                return .fencedOff
            }
            unsavedRecords[job.id] = job
            if addingCleanUp { unsavedCleanUps.insert(job.id) }
            guard leasing != nil else {
                announce(job, from: previous)
                return .kept
            }
            if unannounced[job.id] == nil { unannounced[job.id] = previous }
            DaemonLog.write(
                "job \(job.id.prefix(8)) \(job.kind): \(previous.rawValue) -> \(job.state.rawValue) waits for the shared store; "
                    + "announced once written")
            return .kept
        }
        unsavedRecords[job.id] = nil
        unannounced[job.id] = nil
        announce((try? store.job(id: job.id)) ?? job, from: previous)
        return .written
    }

    /// Forgets the unwritten state of job `id` (a shared store fenced its write off: another daemon changed it);
    /// one not announced yet is reported as fenced off.
    private func dropUnsaved(_ id: String) {
        if let job = unsavedRecords.removeValue(forKey: id), let previous = unannounced.removeValue(forKey: id) {
            reportFencedOff(job, from: previous)
        }
        unsavedCleanUps.remove(id)
        cancelledWhileWaiting.remove(id)
    }

    /// Reports a transition the shared store fenced off (another daemon took the job over before it was
    /// written), as such: a warning on the feed and in the log, never a `state` event (the job's state is the
    /// other daemon's to announce). A run's end fenced off leaves this daemon's running count.
    private func reportFencedOff(_ job: JobRecord, from previous: JobState) {
        if previous == .running { activeCounts[.running, default: 0] -= 1 }
        log(job, .warning, FencedOffWrite(job: job, from: previous).message)
    }

    /// What became of a `commit`.
    private enum CommitOutcome {
        /// The store took it.
        case written
        /// The store refused it for now: kept in `unsavedRecords`, announced, written by the store retry.
        case kept
        /// A shared store's other daemon changed the job first (`JobStoreError.leaseLost`): dropped.
        case fencedOff
    }

    /// Publishes a state change on the feed and writes it to the daemon's log (one line, for debugging from the
    /// log alone).
    private func announce(_ job: JobRecord, from previous: JobState) {
        if previous != job.state {
            if !previous.isTerminal { activeCounts[previous, default: 0] -= 1 }
            if !job.state.isTerminal { activeCounts[job.state, default: 0] += 1 }
        }
        feed.stateChanged(job, from: previous)
        // Two of these a job: written as bytes, not by string interpolation (a tenth of `announce`'s cost).
        var line: [UInt8] = []
        line.reserveCapacity(96)
        func append(_ parts: String...) { for part in parts { line.append(contentsOf: part.utf8) } }
        append("job ", String(job.id.prefix(8)), " ", job.kind, " ", previous.rawValue, " -> ", job.state.rawValue)
        if job.state == .running { append(" (attempt ", String(job.attempt), " of ", String(job.options.maxAttempts), ")") }
        if let cancellation = job.cancellation, job.state != .running, job.state != .succeeded {
            append(": ", cancellation.reason.rawValue, ", ", URLRedaction.text(cancellation.detail))
        }
        if let error = job.error, job.state == .failed || job.state == .needsRetry {
            append(": ", error.code, ": ", URLRedaction.text(error.message))
        }
        DaemonLog.write(utf8: line)
    }

    /// Publishes a log line of the scheduler's own about a job, on the feed and in the daemon's log.
    private func log(_ job: JobRecord, _ level: LogLevel, _ message: String) {
        feed.log(job: job.id, kind: job.kind, level: level, message: message)
        DaemonLog.write("job \(job.id.prefix(8)) \(job.kind): \(message)")
    }

    /// A job as the daemon knows it: its unwritten record if the store refused it, else the stored one.
    private func current(_ id: String) -> JobRecord? {
        // The store is read only when needed: on a shared store a read is a round trip on the loop.
        if let unwritten = current(id, stored: nil) { return unwritten }
        return (try? store.job(id: id)) ?? nil
    }

    /// `current(_:)` with the stored row already read (`stored`, `nil` if the store has none or could not say).
    private func current(_ id: String, stored: JobRecord?) -> JobRecord? {
        unsavedRecords[id] ?? pendingStarts[id] ?? stored
    }

    /// The queued jobs in run order, without those whose newer state is not written yet; `nil` if the store
    /// cannot be read.
    private func queuedJobs(limit: Int) -> [JobRecord]? {
        try? store.queuedJobs(limit: limit, skipping: queuedButNotWaiting)
    }

    /// `store.highestQueuedPriority` past the same jobs `queuedJobs(limit:)` skips; `nil` if none waits or the
    /// store cannot be read.
    private func highestQueuedPriority() -> Int? {
        (try? store.highestQueuedPriority(skipping: queuedButNotWaiting)) ?? nil
    }

    /// The jobs the store still has queued whose newer state is not written yet (refused writes, starts waiting
    /// for the turn's group commit): the queue reads pass over them.
    private var queuedButNotWaiting: Set<String> {
        Set(unsavedRecords.keys).union(pendingStarts.keys)
    }

    private func live(_ active: RunningJob) -> JobRecord {
        var job = active.record
        job.progress = active.context.progress
        return job
    }

    /// Tells each kind which of its ended jobs retention deleted (`JobKind.jobsPruned`), one call per kind.
    func forgetPruned(_ jobs: [PrunedJob]) {
        for (kind, pruned) in Dictionary(grouping: jobs, by: \.kind) { kinds[kind]?.jobsPruned(pruned.map(\.id)) }
    }

    nonisolated static func seconds(_ value: Double) -> String {
        value >= 1 && value < 1e15 && value.rounded() == value ? "\(Int(value)) s" : "\(value) s"
    }
}

// MARK: - Store faults

extension Scheduler {
    /// Runs one store write. On failure the fault is noted (one warning naming its cause per episode) and the store
    /// retry armed; the caller decides what the refusal means for its write.
    /// - Returns: `nil` when written, else the error.
    fileprivate func write(_ what: String, _ body: () throws -> Void) -> StoreRefusal? {
        do {
            try body()
        } catch {
            return settled(what, error)
        }
        return settled(what, nil)
    }

    /// Settles the outcome of a store write, made waiting (`write`) or not (a checkpoint on a shared store):
    /// `error` is `nil` when written. As `write`.
    fileprivate func settled(_ what: String, _ error: (any Error)?) -> StoreRefusal? {
        guard let error else {
            if storeFault != nil, unsavedRecords.isEmpty, unsavedCheckpoints.isEmpty { storeRecovered() }
            return nil
        }
        if let lost = error as? JobStoreError, case .leaseLost(let id) = lost {
            fencedOff(id)
            return Self.fencedOff
        }
        let refusal = StoreRefusal(error)
        storeRefused(refusal, writing: what)
        return refusal
    }

    private func storeRefused(_ error: StoreRefusal, writing what: String) {
        if storeFault == nil {
            storeFault = (error.cause, Timestamp.monotonic())
            DaemonLog.write(
                "warning: the job store refused a write (\(what)): \(error.cause) (\(error)); it is retried every "
                    + "\(Self.seconds(Self.longestStoreRetryDelay)) at most, and reads show the daemon's own state meanwhile")
        }
        armStoreRetry()
    }

    private func storeRecovered() {
        guard let fault = storeFault else { return }
        storeFault = nil
        storeRetryDelay = Self.firstStoreRetryDelay
        let seconds = ((Timestamp.monotonic() - fault.since) * 10).rounded() / 10
        DaemonLog.write("the job store takes writes again (it refused them for \(seconds) s: \(fault.cause))")
    }

    private func armStoreRetry() {
        guard !storeRetryArmed, !isShuttingDown else { return }
        storeRetryArmed = true
        let timer = storeRetryTimer ?? LoopTimer(loop: .main)
        storeRetryTimer = timer
        timer.start(seconds: storeRetryDelay) { [weak self] in self?.retryStoreWrites() }
        storeRetryDelay = min(storeRetryDelay * 2, Self.longestStoreRetryDelay)
    }

    /// Writes what the store refused, oldest job first, then lets waiting work start. The fault is over only once
    /// a write succeeded: with nothing to write here (an idle daemon whose claim was refused), the next write
    /// proves it, the claim `schedule()` sends on a shared store; until then the retries back off.
    fileprivate func retryStoreWrites() {
        storeRetryArmed = false
        let writing = !unsavedCheckpoints.isEmpty || !unsavedRecords.isEmpty
        for (id, unsaved) in unsavedCheckpoints {
            let refusal = write("the checkpoint of job \(id.prefix(8))", {
                try store.saveCheckpoint(id: id, unsaved.checkpoint, progress: unsaved.progress)
            })
            // Fenced off (the run's lease is lost or released): no one will take it; the rest goes on.
            guard refusal == nil || refusal?.code == Self.fencedOff.code else { return }
            unsavedCheckpoints[id] = nil
        }
        for unsaved in unsavedRecords.values.sorted(by: { $0.sequence < $1.sequence }) {
            // The refused start of a job still running: written with its run's latest progress, so it does not
            // undo a checkpoint written since (a job with an unsaved end is never started again before it is written).
            let job = running[unsaved.id].map(live) ?? unsaved
            let cleansUp = unsavedCleanUps.contains(job.id)
            if let error = write("the state of job \(job.id.prefix(8))", { try store.update(job, addingCleanUp: cleansUp) }) {
                guard error.code == Self.fencedOff.code else { return }
                // Another daemon sharing the store changed the job meanwhile: this write is dropped. Unless the
                // change is this very cancel of a waiting job: a write given up on (its answer lost) may have been
                // committed all the same, and what follows it must still run (a cancelled upload's partial output
                // removed); its cancellation (with its time) is this daemon's own. (A run's end that landed is
                // found by the store itself, by the run's lease token: `PostgresJobStore`'s fenced write.)
                guard cancelledWhileWaiting.contains(job.id), let stored = try? store.job(id: job.id),
                    stored.state == job.state, stored.cancellation == job.cancellation
                else {
                    dropUnsaved(job.id)
                    continue
                }
                DaemonLog.write("job \(job.id.prefix(8)): its end (\(job.state.rawValue)) was written by an earlier try whose answer was lost")
            }
            unsavedRecords[job.id] = nil
            unsavedCleanUps.remove(job.id)
            if let previous = unannounced.removeValue(forKey: job.id) { announce(job, from: previous) }
            let cancelled = cancelledWhileWaiting.remove(job.id) != nil
            guard job.state.isTerminal else { continue }
            Task.onLoop { await self.endWritten(job, cancelledWhileWaiting: cancelled, cleansUp: cleansUp) }
        }
        if writing { storeRecovered() }
        armRetryTimer()
        schedule()
    }

    /// Stops a running job whose progress or checkpoint the store refused for good (disk full, I/O error): it
    /// ends with `failure` (retryable, so `needs_retry`) instead of running on with nothing recorded.
    fileprivate func failForStore(_ active: RunningJob, _ failure: JobError) {
        guard active.context.stopReason == nil else { return }
        active.storeFailure = failure
        stop(active, .resourceReclaim, detail: failure.message)
    }

    /// Inserts new jobs in one transaction; while another process holds the store's lock, tries again on a timer
    /// (the loop serves everything else meanwhile) for up to `storeLockWaitSeconds`.
    /// - Throws: `JobError` `store_busy` when the lock outlasts the wait, `store_write_failed` for any other refusal;
    ///   then none of the jobs is stored.
    fileprivate func insertWaitingForLock(_ jobs: inout [JobRecord], digests: [String?], duplicateKeys: [[String]])
        async throws(JobError)
    {
        let started = Timestamp.monotonic()
        var delay = Self.firstStoreRetryDelay
        let what = jobs.count == 1 ? "a new job" : "\(jobs.count) new jobs"
        while true {
            var inserted = jobs
            guard let error = write(what, { try store.insert(&inserted, digests: digests, duplicateKeys: duplicateKeys) }) else {
                jobs = inserted
                return
            }
            let nothing = jobs.count == 1 ? "nothing was submitted" : "none of the \(jobs.count) jobs was submitted"
            if error.code == StoreRefusal.unavailableCode {
                // The shared store is down: fail fast (the CLI exits 3, as when the daemon is not reachable).
                throw JobError(
                    code: "store_unavailable",
                    message: "cannot store the job: \(error.cause) (\(error)); \(nothing): submit again once it is back")
            }
            guard error.isLocked else {
                throw JobError(
                    code: "store_write_failed",
                    message: "cannot store the job: \(error.cause) (\(error)); \(nothing): free space where "
                        + "the daemon keeps its state (TRAILBOOK_JOBS_HOME) and submit again")
            }
            guard Timestamp.monotonic() - started < options.storeLockWaitSeconds else {
                throw JobError(
                    code: "store_busy",
                    message: "cannot store the job: another process has held the job store's write lock for "
                        + "\(Self.seconds(options.storeLockWaitSeconds)) (\(error)); \(nothing): end that "
                        + "process (an open sqlite3 shell, a backup) and submit again")
            }
            await Self.wait(seconds: delay)
            delay = min(delay * 2, Self.longestStoreRetryDelay)
        }
    }

    /// Suspends until the loop's next turn, after it has polled for I/O, so a long piece of work lets other
    /// clients and jobs in between its slices. `Task.yield()` would not: the loop runs every ready task before
    /// it polls again.
    public static func nextTurn() async { await wait(seconds: 0) }

    /// Long work on the loop (a big batch's entries) done in slices of at most `seconds` of the loop's time each:
    /// `pause()` lets the loop take a turn once the current slice has run that long, and costs a clock read
    /// otherwise.
    ///
    /// On the loop's actor, as its callers are: a nested type does not take its outer type's actor, and a
    /// nonisolated `pause()` made every call hop to the global executor's threads and back (two thread switches
    /// per entry of every batch: a futex wake each way, 45 000 futex calls for 10 000 jobs in `strace -c`).
    @LoopActor
    public struct LoopSlice {
        /// How long one slice may hold the loop, in seconds.
        public let seconds: Double
        private var start = Timestamp.monotonic()

        /// A slice starting now; `seconds` is its length (20 ms unless given).
        public init(seconds: Double = 0.02) { self.seconds = seconds }

        /// Takes a loop turn (`nextTurn`) when the slice has run for `seconds`, then starts the next one.
        /// - Returns: whether it took a turn (other work ran meanwhile).
        public mutating func pause() async -> Bool {
            guard Timestamp.monotonic() - start >= seconds else { return false }
            await Scheduler.nextTurn()
            start = Timestamp.monotonic()
            return true
        }
    }

    /// Suspends for `seconds` on a loop timer (the loop serves everything else meanwhile).
    static func wait(seconds: Double) async {
        let timer = LoopTimer(loop: .main)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            timer.start(seconds: seconds) { continuation.resume() }
        }
        timer.close()
    }
}

extension Scheduler: JobHost {
    func jobDidReportProgress(_ job: JobContext) {
        guard let active = running[job.id], active.context === job else { return }
        let now = Timestamp.monotonic()
        // Bytes under way count as movement (a large tus PATCH confirms nothing until it ends).
        let completed = job.progress.completed + (job.progress.inFlight ?? 0)
        if completed != active.lastCompleted {
            active.lastCompleted = completed
            active.lastMoveAt = now
        }
        // Rate: exponential moving average with a 3 s time constant over samples at least 200 ms apart. Samples
        // start at the first forward step after the job's first report, not at the start: the first report may
        // rewind to the checkpoint, and the work before that step (setup, or the first piece a rate limiter lets
        // through at once) would otherwise inflate the rate for several seconds.
        if !active.sampling {
            if let previous = active.previousReport, completed > previous {
                active.sampling = true
                active.lastSample = (now, completed)
            }
            active.previousReport = completed
        }
        let elapsed = now - active.lastSample.at
        if active.sampling, elapsed >= 0.2 {
            let instant = Double(completed - active.lastSample.completed) / elapsed
            let alpha = 1 - exp(-elapsed / 3)
            active.rate = active.rate.map { $0 + alpha * (instant - $0) } ?? instant
            active.lastSample = (now, completed)
        }
        let remaining = Double(max(0, job.progress.total - completed))
        let eta = active.rate.flatMap { $0 > 0 ? remaining / $0 : nil }
        job.setRate(active.rate.map { max(0, $0) }, eta: eta)
        feed.progress(job: job.id, kind: job.kind, job.progress)
        if now - active.lastPersistAt >= options.progressPersistInterval {
            active.lastPersistAt = now
            if leasing != nil {
                // Sent without waiting (the lease's renewal); a lost lease comes back through `onLeaseLost`, and an
                // answer is no news of the store's health.
                try? store.saveProgress(id: job.id, job.progress)
                return
            }
            // Locked: the next report writes it. Disk full: the job stops, retryable, rather than run on unrecorded.
            if let error = write("the progress of job \(job.id.prefix(8))", { try store.saveProgress(id: job.id, job.progress) }),
                !error.isLocked
            {
                failForStore(active, JobError(
                    code: "store_write_failed", message: "cannot save the progress: \(error.cause) (\(error))",
                    retryable: true))
            }
        }
    }

    func jobSaveCheckpoint(_ job: JobContext, _ checkpoint: JSONValue) throws {
        let id = job.id
        claimedCheckpoints.removeValue(forKey: id)
        if let leasing {
            // A shared store is a round trip away: the loop (every other job) does not wait for it. A checkpoint
            // describes work already durable, so landing one round trip later is as good; the answer settles it.
            let progress = job.progress
            running[id]?.lastPersistAt = Timestamp.monotonic()
            // This one subsumes a refused earlier one: the store retry must not write that one after it.
            unsavedCheckpoints[id] = nil
            leasing.sendCheckpoint(id: id, checkpoint, progress: progress) { [weak self] error in
                LoopIsolation.assume { self?.checkpointSettled(job, checkpoint, progress, error) }
            }
            return
        }
        guard let error = write("the checkpoint of job \(id.prefix(8))", {
            try store.saveCheckpoint(id: id, checkpoint, progress: job.progress)
        }) else {
            unsavedCheckpoints[id] = nil
            running[id]?.lastPersistAt = Timestamp.monotonic()
            return
        }
        if error.isLocked {
            // It describes work already durable, so writing it a little later is as good; the job runs on.
            unsavedCheckpoints[id] = (checkpoint, job.progress)
            return
        }
        let failure = JobError(
            code: "store_write_failed", message: "cannot save the checkpoint: \(error.cause) (\(error))", retryable: true)
        if let active = running[id], active.context === job { failForStore(active, failure) }
        throw failure
    }

    /// The answer to a checkpoint sent without waiting (`jobSaveCheckpoint` on a shared store), as
    /// `jobSaveCheckpoint` handles a refusal: kept for the store retry if the store is down, the run stopped if
    /// its lease is lost (`settled`), else the run fails retryably. Answers come in the order sent.
    private func checkpointSettled(
        _ job: JobContext, _ checkpoint: JSONValue, _ progress: JobProgress, _ error: (any Error)?
    ) {
        let id = job.id
        guard let refusal = settled("the checkpoint of job \(id.prefix(8))", error) else {
            unsavedCheckpoints[id] = nil
            return
        }
        guard refusal.code != Self.fencedOff.code else { return }
        let active = running[id].flatMap { $0.context === job ? $0 : nil }
        // Kept while its run goes on, or has ended with its end not written yet (a final checkpoint at a pause or
        // shutdown, refused in the same outage as the end): the retry writes it before the end.
        if refusal.isLocked, active != nil || unsavedRecords[id] != nil {
            unsavedCheckpoints[id] = (checkpoint, progress)
            return
        }
        guard let active else { return }
        failForStore(active, JobError(
            code: "store_write_failed", message: "cannot save the checkpoint: \(refusal.cause) (\(refusal))", retryable: true))
    }

    func jobLoadCheckpoint(_ job: JobContext) throws -> JSONValue? {
        if let unsaved = unsavedCheckpoints[job.id] { return unsaved.checkpoint }
        if running[job.id]?.context === job, let claimed = claimedCheckpoints.removeValue(forKey: job.id) { return claimed }
        do {
            return try store.checkpoint(id: job.id)
        } catch {
            let refusal = StoreRefusal(error)
            if refusal.isLocked, let active = running[job.id], active.context === job {
                // Not the job's failure (a lock, the shared store down as the run starts): back to the queue on the
                // same attempt, started again once the store answers.
                stop(active, .resourceReclaim, detail: "cannot read its checkpoint now (\(refusal.cause)); queued to start again")
            }
            throw error
        }
    }

    func jobLog(_ job: JobContext, level: LogLevel, message: String) {
        feed.log(job: job.id, kind: job.kind, level: level, message: message)
        if level == .warning || level == .error {
            DaemonLog.write("job \(job.id.prefix(8)) \(job.kind) \(level.rawValue): \(message)")
        }
    }

    func jobWaitBegan(_ job: JobContext) {
        guard let active = running[job.id], active.context === job, active.waitingSince == nil else { return }
        active.waitingSince = Timestamp.monotonic()
        armWatchdog(active)
    }

    func jobWaitEnded(_ job: JobContext) {
        guard let active = running[job.id], active.context === job, let since = active.waitingSince else { return }
        let now = Timestamp.monotonic()
        active.excusedSeconds += now - since
        active.waitingSince = nil
        active.lastMoveAt = now
        if active.context.stopReason == nil { armWatchdog(active) }
    }

    func jobRequestStop(_ job: JobContext, reason: CancellationReason, detail: String) {
        if let active = running[job.id], active.context === job { stop(active, reason, detail: detail) }
    }
}

/// A `cancel`/`pause` asked of another daemon, waiting for the run's end (`Scheduler.awaitEnd`): it sleeps between
/// reads of the job, woken early by a notice that the end is written.
@LoopActor
final class ControlledEndWait {
    /// How many notices came so far: one that came during a read means the read may be too old.
    private(set) var notices = 0
    private var sleeper: CheckedContinuation<Void, Never>?
    private let timer = LoopTimer(loop: .main)

    init() {}

    /// A notice that the run's end is written: ends the sleep at once.
    func heard() {
        notices += 1
        wake()
    }

    /// Sleeps `seconds` at most, less if a notice comes.
    func sleep(seconds: Double) async {
        await withCheckedContinuation { continuation in
            sleeper = continuation
            timer.start(seconds: seconds) { [weak self] in LoopIsolation.assume { self?.wake() } }
        }
    }

    /// The wait is over: its timer is closed.
    func close() { timer.close() }

    private func wake() {
        timer.stop()
        sleeper?.resume()
        sleeper = nil
    }
}

/// A submit waiting for the group commit that stores its jobs (`Scheduler.submit`).
@LoopActor
final class SubmitTicket {
    private var result: Result<[JobRecord], JobError>?
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init() {}

    /// The jobs as stored (state `queued`), once their group commit is written.
    /// - Throws: `JobError` `store_write_failed` or `store_busy` when the store refused them (nothing submitted).
    func jobs() async throws(JobError) -> [JobRecord] {
        if result == nil { await withCheckedContinuation { waiters.append($0) } }
        return try result!.get()
    }

    func resolve(_ outcome: Result<[JobRecord], JobError>) {
        result = outcome
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }
}

/// Why the store refused a write, whichever store it is: SQLite's error, or the shared store being unreachable
/// (`JobStoreError.unavailable`, which is transient like a lock: progress is skipped, checkpoints and transitions
/// are kept and retried).
struct StoreRefusal: Error, CustomStringConvertible {
    /// SQLite's extended result code; `unavailableCode` for an unreachable shared store; -1 for a fenced-off write.
    let code: Int32
    /// Whether trying again later can succeed without anything else changing (a lock, an outage).
    let isLocked: Bool
    /// The cause in a few words, for messages.
    let cause: String
    let description: String

    /// The code of an unreachable shared store.
    static let unavailableCode: Int32 = -2

    /// The protocol's error code for a read the store refused: `store_unavailable` (shared store down: the CLI exits
    /// 3), `store_busy` (a lock), else `store_error`.
    var readErrorCode: String {
        code == Self.unavailableCode ? "store_unavailable" : isLocked ? "store_busy" : "store_error"
    }

    init(code: Int32, isLocked: Bool, cause: String, description: String) {
        self.code = code
        self.isLocked = isLocked
        self.cause = cause
        self.description = description
    }

    init(_ error: any Error) {
        switch error {
        case let sqlite as SQLiteError:
            self.init(code: sqlite.code, isLocked: sqlite.isLocked, cause: sqlite.cause, description: sqlite.description)
        case JobStoreError.unavailable(let message):
            self.init(
                code: Self.unavailableCode, isLocked: true, cause: "the shared job store (PostgreSQL) is unavailable",
                description: message)
        default:
            self.init(code: 1, isLocked: false, cause: "the store refused it", description: "\(error)")
        }
    }
}
