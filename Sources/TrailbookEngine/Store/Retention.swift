import TrailbookLoop

/// How long ended jobs stay in the store, by how they ended (`daemon --keep-succeeded`, `--keep-failed`,
/// `--keep-cancelled`). `nil` keeps them for good. A job's age counts from its end (its last change).
public struct RetentionPolicy: Sendable, Equatable {
    /// Succeeded jobs: 7 days (long enough to look back over a trip's uploads, short enough that a steady stream
    /// of jobs does not grow the store without bound).
    public var keepSucceededSeconds: Double? = 7 * 24 * 3600
    /// Failed jobs: 30 days, longer than succeeded ones, since someone may still have to look into why.
    public var keepFailedSeconds: Double? = 30 * 24 * 3600
    /// Cancelled jobs: 7 days, like succeeded ones (someone chose to end them).
    public var keepCancelledSeconds: Double? = 7 * 24 * 3600
    /// Rows deleted per transaction: small, so a batch holds the loop for milliseconds, not seconds.
    public var batchSize = 500
    /// Free pages given back to the file system per step (`PRAGMA incremental_vacuum`): 2048 pages, 8 MiB.
    public var vacuumPagesPerStep = 2048

    /// The defaults described on each property.
    public init() {}

    /// How long jobs that ended in `state` are kept, in seconds; `nil` for good (and for states that are not ends).
    public func keepSeconds(_ state: JobState) -> Double? {
        switch state {
        case .succeeded: keepSucceededSeconds
        case .failed: keepFailedSeconds
        case .cancelled: keepCancelledSeconds
        default: nil
        }
    }

    /// How often the daemon looks for jobs past their retention, in seconds: every 10 minutes, or half the
    /// shortest retention when that is shorter, at least every second.
    public var sweepIntervalSeconds: Double {
        let shortest = JobState.ended.compactMap(keepSeconds).min() ?? .infinity
        return min(600, max(1, shortest / 2))
    }
}

/// What one prune removed (`Retention.prune`), for the `prune` reply and the daemon's log.
public struct PruneReport: Sendable, Equatable {
    /// Jobs deleted, by the state they ended in.
    public var pruned: [JobState: Int] = [:]
    /// Jobs old enough to go that were kept because their clean-up (a tus `DELETE`, an S3 abort) is not done yet.
    public var keptForCleanUp = 0
    /// Store size before the prune, in bytes (the database file; see `JobStore.sizeInBytes`).
    public var bytesBefore: Int64 = 0
    /// Store size after the prune and its incremental vacuum, in bytes.
    public var bytesAfter: Int64 = 0
    /// The store refused a write (another process's lock, a full disk): the prune stopped there.
    public var error: String?
    /// Another daemon sharing the store was pruning: this one pruned nothing (that one prunes for all).
    public var busy = false

    /// Jobs deleted in all.
    public var total: Int { pruned.values.reduce(0, +) }

    /// The protocol's reply members (`prune` op).
    public var json: JSONValue {
        var byState: [String: JSONValue] = [:]
        for state in JobState.ended { byState[state.rawValue] = .number(Double(pruned[state] ?? 0)) }
        return [
            "pruned": .object(byState), "total": .number(Double(total)),
            "kept_for_cleanup": .number(Double(keptForCleanUp)),
            "store_bytes_before": .number(Double(bytesBefore)), "store_bytes_after": .number(Double(bytesAfter)),
            "error": error.map { .string($0) } ?? .null,
        ]
    }
}

/// Deletes ended jobs past their retention: on a timer (`RetentionPolicy.sweepIntervalSeconds`) and on demand
/// (`prune`). It works in batches of `RetentionPolicy.batchSize` rows, one transaction each, with a turn of the
/// loop between batches, so a backlog of a million ended jobs never holds the loop for more than one batch. A
/// job with a pending clean-up is never deleted before the clean-up is done or given up. After a drain it gives
/// the freed pages back to the file system (`PRAGMA incremental_vacuum`, in steps) and truncates the WAL, so the
/// store's size stays bounded under a steady stream of jobs.
@LoopActor
public final class Retention {
    /// The retention periods and batch sizes it was made with.
    public let policy: RetentionPolicy
    /// The store it prunes.
    private let store: any JobStoring
    /// Tells the job kinds which of their ended jobs a batch deleted (`Scheduler.forgetPruned`).
    private let forgetPruned: @LoopActor ([PrunedJob]) -> Void
    private var timer: LoopTimer?
    private var sweeping = false
    private var closed = false
    /// Whether the last refusal was logged, so a store that stays locked logs one line, not one per sweep.
    private var refusalLogged = false

    /// Makes a retention over `store`; `forgetPruned` hears of each batch of deleted jobs (for their kinds).
    /// Nothing runs until `start`.
    public init(store: any JobStoring, policy: RetentionPolicy, forgetPruned: @escaping @LoopActor ([PrunedJob]) -> Void) {
        self.store = store
        self.policy = policy
        self.forgetPruned = forgetPruned
    }

    /// Makes a retention over `scheduler`'s store, telling its kinds of the jobs it deletes; nothing runs until
    /// `start`.
    public convenience init(scheduler: Scheduler, policy: RetentionPolicy) {
        self.init(store: scheduler.store, policy: policy) { [weak scheduler] jobs in scheduler?.forgetPruned(jobs) }
    }

    /// Arms the sweep timer: the first sweep a second after start (a backlog left by a long stop drains at once),
    /// then every `sweepIntervalSeconds`. Nothing is armed when every retention is "for good".
    public func start() {
        guard JobState.ended.contains(where: { policy.keepSeconds($0) != nil }) else { return }
        guard isBuilt else { return }
        arm(seconds: 1)
    }

    /// Whether retention works on the scheduler's store: the SQLite and the shared PostgreSQL stores both prune.
    public var isBuilt: Bool { store is any PruningJobStoring }

    /// Stops the timer (daemon shutdown). A sweep under way ends after its current batch.
    public func close() {
        closed = true
        timer?.close()
        timer = nil
    }

    private func arm(seconds: Double) {
        guard !closed else { return }
        let timer = self.timer ?? LoopTimer(loop: .main)
        self.timer = timer
        timer.start(seconds: seconds) { [weak self] in
            LoopIsolation.assume {
                guard let self, !self.sweeping else { return }
                Task.onLoop { await self.sweep() }
            }
        }
    }

    private func sweep() async {
        sweeping = true
        let report = await prune(olderThan: nil)
        sweeping = false
        if report.total > 0 {
            DaemonLog.write("retention: \(Self.describe(report))")
        }
        if let error = report.error, !refusalLogged {
            refusalLogged = true
            DaemonLog.write("warning: retention could not prune (\(error)); tried again in \(Int(policy.sweepIntervalSeconds)) s")
        } else if report.error == nil {
            refusalLogged = false
        }
        arm(seconds: policy.sweepIntervalSeconds)
    }

    /// Deletes every ended job older than `olderThan` seconds (all ended states), or, with `nil`, than its
    /// state's retention; then gives the freed space back to the file system. Each store call is awaited without
    /// holding the loop (a shared store's round trip, up to its request timeout when a lock or an outage holds it).
    /// - Returns: what was deleted and kept; `error` is set if the store refused a write (what was done stays).
    public func prune(olderThan: Double?) async -> PruneReport {
        var report = PruneReport()
        guard let store = store as? any PruningJobStoring else { return report }
        // Daemons sharing a store prune one at a time (an advisory lock on PostgreSQL); the others skip.
        do {
            guard try await Self.answer(store.beginPruning) else {
                report.busy = true
                return report
            }
        } catch {
            report.error = "\(error)"
            return report
        }
        defer { store.endPruning() }
        report.bytesBefore = (try? await Self.answer(store.sizeInBytes)) ?? 0
        let now = Timestamp.now()
        do {
            for state in JobState.ended {
                guard let keep = olderThan ?? policy.keepSeconds(state) else { continue }
                let cutoff = now - keep
                while true {
                    let batch = try await Self.answer {
                        store.pruneEnded(state: state, endedBefore: cutoff, limit: policy.batchSize, completion: $0)
                    }
                    report.pruned[state, default: 0] += batch.count
                    forgetPruned(batch)
                    if batch.count < policy.batchSize { break }
                    await Scheduler.wait(seconds: 0.001)  // the loop serves requests and jobs between batches
                    if closed { break }
                }
                report.keptForCleanUp += try await Self.answer {
                    store.endedJobsAwaitingCleanUp(state: state, endedBefore: cutoff, completion: $0)
                }
            }
            if report.total > 0 {
                // Until none is left, or a step gave none back (a store that cannot shrink must not loop here
                // for ever: the sweep runs this too).
                var left = Int.max
                while !closed {
                    let now = try await Self.answer { store.reclaimFreePages(atMost: policy.vacuumPagesPerStep, completion: $0) }
                    guard now > 0, now < left else { break }
                    left = now
                    await Scheduler.wait(seconds: 0.001)
                }
                try await Self.answer(store.checkpointLog)
            }
        } catch {
            report.error = "\(error)"
        }
        report.bytesAfter = (try? await Self.answer(store.sizeInBytes)) ?? 0
        return report
    }

    /// A `PruningJobStoring` call's answer, awaited (the loop turns meanwhile).
    private static func answer<T: Sendable>(_ call: (@escaping (Result<T, any Error>) -> Void) -> Void) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in call { continuation.resume(with: $0) } }
    }

    /// One line: "pruned 1200 jobs (1000 succeeded, 150 failed, 50 cancelled); store 4.1 MiB -> 1.0 MiB".
    static func describe(_ report: PruneReport) -> String {
        let parts = JobState.ended.map { "\(report.pruned[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", ")
        var line = "pruned \(report.total) ended jobs (\(parts))"
        if report.keptForCleanUp > 0 { line += "; kept \(report.keptForCleanUp) whose clean-up is not done yet" }
        return line + "; store \(report.bytesBefore) -> \(report.bytesAfter) bytes"
    }
}
