import Synchronization
import TrailbookLoop
import TrailbookPostgres

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
final class LoopConfined<Value>: @unchecked Sendable {
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
