import TrailbookLoop

/// Where a job kind's code may run (docs/explanation/design.md, "Execution targets").
public enum ExecutionTarget: String, Sendable, Codable, CaseIterable {
    /// On the daemon's loop thread: the single writer of the stores. Only short, non-blocking steps.
    case daemonLoop = "daemon_loop"
    /// On libuv's thread pool: blocking file I/O and CPU work, no writes to the stores.
    case threadPool = "thread_pool"
    /// In an isolated worker process: decoding untrusted files, so a crash or hang cannot take the daemon down.
    case workerProcess = "worker_process"
}

/// Static facts about a job kind that the scheduler uses.
public struct JobKindTraits: Sendable {
    /// The unit its progress counts.
    public var unit: ProgressUnit
    /// Long-running kinds get a 1 h default deadline; others the classic 30 s (docs/explanation/design.md).
    public var isLongRunning: Bool
    /// Where its code may run; the engine refuses the others (`execution_target_not_allowed`).
    public var executionTargets: Set<ExecutionTarget>
    /// Whether a job that ends `failed` or `cancelled` leaves something behind that `JobKind.cleanUp` must remove
    /// (a partial file, an unfinished upload on a server). Then the engine records a pending clean-up with the
    /// job's end, in the same store transaction, and runs it until it is done, across daemon restarts.
    public var cleansUpAfterEnd: Bool
    /// Whether its jobs read their input from the submitting host's disks (source files, the photo library). On a
    /// store several daemons share, such a job is pinned at submit to the host of the daemon it was submitted
    /// through (`JobRecord.pinnedHost`), unless the submit says the paths are shared (`any_host`); only daemons
    /// of that host claim it. No effect on the embedded SQLite store (one daemon, one host).
    public var readsHostFiles: Bool

    /// Traits; see the members.
    public init(
        unit: ProgressUnit, isLongRunning: Bool, executionTargets: Set<ExecutionTarget>, cleansUpAfterEnd: Bool = false,
        readsHostFiles: Bool = false
    ) {
        self.unit = unit
        self.isLongRunning = isLongRunning
        self.executionTargets = executionTargets.union([.daemonLoop])
        self.cleansUpAfterEnd = cleansUpAfterEnd
        self.readsHostFiles = readsHostFiles
    }

    /// Default deadline of one attempt, in seconds.
    public var defaultTimeoutSeconds: Double { isLongRunning ? 3_600 : 30 }
}

/// A kind of job: the code that does one kind of long, cancellable work (an upload, a tagging run).
///
/// Modelled on App Intents' long-running, cancellable intents (`LongRunningIntent`, `CancellableIntent`:
/// `performBackgroundTask { … } onCancel: { reason in … }`): `run` does the work and reports progress through its
/// `JobContext` in the kind's own unit (progress is the liveness signal: a job whose progress stops moving is
/// stopped for `timeout`), saves a checkpoint whenever the work behind it is durable, and returns a typed `Output`.
/// When the scheduler stops a job, the task running `run` is cancelled (`Task.checkCancellation()`,
/// `Task.isCancelled` and `withTaskCancellationHandler` work as usual, and `JobContext.stopReason` says why), then
/// `onCancel` is told the reason, to remove partial output (`user_stop`) or just leave the checkpoint for the next
/// attempt (`timeout`, `resource_reclaim`). Kinds never touch libuv or SQLite: the context gives them what they
/// need.
///
/// Register a kind with `Scheduler.register` (or `TrailbookCommandLine.main(kinds:)` for a whole command line) and
/// test it with `TrailbookJobsTesting.JobKindHarness` (docs/how-to/write-a-job-kind.md).
///
/// Kinds run on the daemon's loop (`LoopActor`); blocking work goes through `JobContext.runOnPool`.
@LoopActor
public protocol JobKind: Sendable {
    /// The kind's parameters, as submitted (JSON).
    associatedtype Params: Codable & Sendable
    /// What a successful `run` returns (App Intents' `PerformResult`): stored with the job as JSON (its `Encodable`
    /// form) and shown by `show`, sent to clients in the job's `result`. `JSONValue` for a kind that builds its JSON
    /// itself.
    associatedtype Output: Encodable & Sendable = JSONValue

    /// The name used by `submit`, in `list` and in the JSON (`"upload"`).
    static var name: String { get }
    /// Unit, deadline class and execution targets.
    static var traits: JobKindTraits { get }
    /// The members `params` may have, for refusing any other at submit with `invalid_params` naming it (a typo
    /// such as `max_rat` would otherwise be dropped by decoding, and the job run without what it asked for, or a
    /// value that does not belong in params, such as a secret, stored and shown): `""` lists the top level, any
    /// other key the members of the object under that top-level member (`"s3"`). `nil` (the default): not checked.
    static var paramsMembers: [String: [String]]? { get }

    /// Checks `params` at submit time, so a bad request is refused at once with a clear error and never queued.
    ///
    /// The same conditions may change before the job runs (a file deleted later): `run` checks again.
    /// - Throws: `JobError` with a stable code and a message saying what to do.
    func validate(_ params: Params) async throws(JobError)

    /// Does the work, from the checkpoint if there is one (`JobContext.loadCheckpoint(as:)`).
    ///
    /// Runs in a task of its own that is cancelled when the job is stopped; `job.stopReason` then says why.
    /// - Returns: the job's result, stored as JSON and shown by `show`.
    /// - Throws: `JobError` on failure (a retryable one ends the attempt `needs_retry` while attempts remain);
    ///   anything else is reported as code `internal`. When the job is being stopped, throw whatever cancellation
    ///   produced (`CancellationError`, `JobStopped`): the scheduler knows why.
    func run(_ params: Params, in job: JobContext) async throws -> Output

    /// Cleans up after a stop: for `user_stop` remove partial output for good; for `timeout` and
    /// `resource_reclaim` keep what the checkpoint needs. Not called after a crash.
    func onCancel(_ reason: CancellationReason, params: Params, in job: JobContext) async

    /// `params` changed by `changes` (a JSON object the protocol's `resume` op carries, e.g. `{"headers": […]}`),
    /// for a paused job that needs new input to go on (credentials that expired). Validate what changes.
    /// - Throws: `JobError` `invalid_params` for changes the kind does not take; the default takes none.
    func amend(_ params: Params, with changes: JSONValue) throws(JobError) -> Params

    /// What a job with `params` works on, as keys a person can read (`"/photos/a.jpg to file:///srv"`): a new job
    /// sharing a key with a job of this kind that has not ended (queued, running, paused, waiting to retry) is
    /// refused at submit with `duplicate_<kind>` naming that job, unless submitted with `allow_duplicate`. Empty
    /// (the default): never a duplicate.
    func duplicateKeys(_ params: Params) -> [String]

    /// Called once the job's end (`succeeded`, `failed` or `cancelled`) is recorded in the job store, so it will
    /// never run again: drop what only another run would need, such as a checkpoint the kind keeps outside the job
    /// store. Quick and best effort (errors are the kind's to log or ignore); not called if the daemon dies in
    /// between, which leaves that state behind.
    func jobEnded(id: String, state: JobState)

    /// Called after retention deleted these ended jobs of the kind from the job store (`daemon --keep-*`,
    /// `prune`): drop anything still kept for them elsewhere, such as a checkpoint that `jobEnded` missed because
    /// the daemon died in between. Quick and best effort, once per batch (at most a few hundred ids).
    func jobsPruned(ids: [String])

    /// Removes what a job that ended `failed` or `cancelled` left behind (kinds with
    /// `JobKindTraits.cleansUpAfterEnd`). Called once right after the end is recorded, and again with backoff
    /// (1 s doubling, at most 10 min apart, also after a daemon restart) for as long as it returns `.retry`, until
    /// `SchedulerOptions.cleanUpBudgetSeconds` after the end; then the engine logs that it gave up, with the
    /// last message. `job` is a context of the ended job: its checkpoint is still there to read.
    func cleanUp(after state: JobState, params: Params, in job: JobContext) async -> CleanUpOutcome
}

/// What one try of `JobKind.cleanUp` achieved.
public enum CleanUpOutcome: Sendable, Equatable {
    /// Nothing is left behind (or nothing was).
    case done
    /// Not yet (a server that did not answer): try again later. The message says what is left and where (a URL),
    /// for the log.
    case retry(String)
    /// It can never be done (the server refuses termination): stop trying. The message says what stays behind.
    case giveUp(String)
}

extension JobKind {
    /// Members are not checked: whatever decodes is taken.
    public static var paramsMembers: [String: [String]]? { nil }
    /// Accepts any params that decode: a kind without submit-time checks.
    public func validate(_ params: Params) async throws(JobError) {}
    /// Nothing to clean up: a kind whose partial output needs no removal.
    public func onCancel(_ reason: CancellationReason, params: Params, in job: JobContext) async {}
    /// Refuses every change: params are fixed at submit.
    public func amend(_ params: Params, with changes: JSONValue) throws(JobError) -> Params {
        throw JobError(code: "invalid_params", message: "a \(Self.name) job's params cannot be changed on resume")
    }
    /// No keys: jobs of the kind never duplicate each other.
    public func duplicateKeys(_ params: Params) -> [String] { [] }
    /// Nothing to drop: a kind that keeps no state outside the job store.
    public func jobEnded(id: String, state: JobState) {}
    /// Nothing to drop.
    public func jobsPruned(ids: [String]) {}
    /// Nothing left behind.
    public func cleanUp(after state: JobState, params: Params, in job: JobContext) async -> CleanUpOutcome { .done }
}

/// Thrown by `JobContext.checkCancellation()` when the job is being stopped.
public struct JobStopped: Error, Sendable {
    /// Why the job is being stopped.
    public let reason: CancellationReason
}

/// A type-erased job kind, as the scheduler's registry holds it.
@LoopActor
struct AnyJobKind {
    let name: String
    let traits: JobKindTraits
    /// The kind's `validate` on params as JSON (and its unknown-member check), returning the params'
    /// `duplicateKeys` from the same decoding: a submit decodes each job's params once.
    let validate: (JSONValue) async throws(JobError) -> [String]
    /// The kind's `run` on params as JSON, in the caller's task: the caller runs it in a task that a stop
    /// cancels (`JobContext.cancelOnStop`), and `onCancel` in another, which is not cancelled.
    let run: (JSONValue, JobContext) async throws -> JSONValue
    let onCancel: (CancellationReason, JSONValue, JobContext) async -> Void
    let jobEnded: (String, JobState) -> Void
    let jobsPruned: ([String]) -> Void
    /// The kind's `amend`, on params as JSON.
    let amend: (JSONValue, JSONValue) throws(JobError) -> JSONValue
    /// The kind's `duplicateKeys` of params as JSON; empty for params that do not decode.
    let duplicateKeys: (JSONValue) -> [String]
    let cleanUp: (JobState, JSONValue, JobContext) async -> CleanUpOutcome

    init<K: JobKind>(_ kind: K) {
        name = K.name
        traits = K.traits
        validate = { (json: JSONValue) async throws(JobError) -> [String] in
            if let members = K.paramsMembers { try Self.refuseUnknownMembers(of: json, members) }
            let params = try Self.decode(json, as: K.Params.self)
            try await kind.validate(params)
            return kind.duplicateKeys(params)
        }
        run = { json, context in
            let params = try Self.decode(json, as: K.Params.self)
            let output = try await kind.run(params, in: context)
            return K.Output.self == JSONValue.self ? output as! JSONValue : JSONCoding.value(of: output)
        }
        onCancel = { reason, json, context in
            guard let params = try? Self.decode(json, as: K.Params.self) else { return }
            await kind.onCancel(reason, params: params, in: context)
        }
        jobEnded = { id, state in kind.jobEnded(id: id, state: state) }
        jobsPruned = { ids in kind.jobsPruned(ids: ids) }
        amend = { (json: JSONValue, changes: JSONValue) throws(JobError) -> JSONValue in
            JSONCoding.value(of: try kind.amend(try Self.decode(json, as: K.Params.self), with: changes))
        }
        duplicateKeys = { json in (try? Self.decode(json, as: K.Params.self)).map { kind.duplicateKeys($0) } ?? [] }
        cleanUp = { state, json, context in
            guard let params = try? Self.decode(json, as: K.Params.self) else {
                return .giveUp("the job's params no longer decode")
            }
            return await kind.cleanUp(after: state, params: params, in: context)
        }
    }

    /// Throws `invalid_params` naming the first member of `params` (or of one of its objects listed in `members`)
    /// that `members` does not list (`JobKind.paramsMembers`).
    static func refuseUnknownMembers(of params: JSONValue, _ members: [String: [String]]) throws(JobError) {
        for (path, known) in members.sorted(by: { $0.key < $1.key }) {
            let object = path.isEmpty ? params : params[path]
            guard let object, case .object = object else { continue }
            try ControlServer.refuseUnknownMembers(
                of: object, known: known, in: path.isEmpty ? "params" : "params.\(path)", code: "invalid_params")
        }
    }

    static func decode<P: Decodable>(_ json: JSONValue, as type: P.Type) throws(JobError) -> P {
        do {
            return try JSONCoding.convert(json, to: type)
        } catch {
            throw JobError(code: "invalid_params", message: "bad params: \(JSONCoding.describe(error))")
        }
    }
}
