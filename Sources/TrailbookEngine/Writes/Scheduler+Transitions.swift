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

// Transitions: a state change checked by `JobLifecycle`, written, and announced on the feed and in the log.
extension Scheduler {
    func transition(_ job: inout JobRecord, _ event: JobEvent, verb: String) throws(JobError) {
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
    /// When the store refuses the write (locked, disk full), the new state is kept in `pendingWrites` and, on
    /// SQLite, announced all the same; the store retry writes it. On a shared store it is announced only once the
    /// retry wrote it (`PendingWrites.KeptState.unannouncedFrom`), and a write another daemon's change fenced off
    /// (it runs or ended the job meanwhile) is dropped and not announced.
    /// - Returns: what became of the write.
    @discardableResult
    func commit(_ job: JobRecord, from: JobState? = nil, addingCleanUp: Bool = false) -> CommitOutcome {
        let previous = from ?? current(job.id)?.state ?? job.state
        switch write("the state of job \(job.id.prefix(8))", { try store.update(job, addingCleanUp: addingCleanUp) }) {
        case .written: break
        case .fencedOff:
            // An older unwritten state of the job is moot too: the store's row is another daemon's now.
            dropUnsaved(job.id)
            return .fencedOff
        case .refused:
            let announced = dispatcher.keptWriteIsTheJobsState
            pendingWrites.keep(job, addingCleanUp: addingCleanUp, unannouncedFrom: announced ? nil : previous)
            if announced {
                announce(job, from: previous)
                return .kept
            }
            DaemonLog.write(
                "job \(job.id.prefix(8)) \(job.kind): \(previous.rawValue) -> \(job.state.rawValue) waits for the shared store; "
                    + "announced once written")
            return .kept
        }
        pendingWrites.removeState(job.id)
        announce((try? store.job(id: job.id)) ?? job, from: previous)
        return .written
    }

    /// Forgets the unwritten state of job `id` (a shared store fenced its write off: another daemon changed it);
    /// one not announced yet is reported as fenced off.
    func dropUnsaved(_ id: String) {
        if let kept = pendingWrites.removeState(id), let previous = kept.unannouncedFrom {
            reportFencedOff(kept.job, from: previous)
        }
    }

    /// Reports a transition the shared store fenced off (another daemon took the job over before it was
    /// written), as such: a warning on the feed and in the log, never a `state` event (the job's state is the
    /// other daemon's to announce). A run's end fenced off leaves this daemon's running count.
    func reportFencedOff(_ job: JobRecord, from previous: JobState) {
        if previous == .running { activeCounts[.running, default: 0] -= 1 }
        log(job, .warning, FencedOffWrite(job: job, from: previous).message)
    }

    /// What became of a `commit`.
    enum CommitOutcome {
        /// The store took it.
        case written
        /// The store refused it for now: kept in `pendingWrites`, announced, written by the store retry.
        case kept
        /// A shared store's other daemon changed the job first (`JobStoreError.leaseLost`): dropped.
        case fencedOff
    }

    /// Publishes a state change on the feed and writes it to the daemon's log (one line, for debugging from the
    /// log alone).
    func announce(_ job: JobRecord, from previous: JobState) {
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
    func log(_ job: JobRecord, _ level: LogLevel, _ message: String) {
        feed.log(job: job.id, kind: job.kind, level: level, message: message)
        DaemonLog.write("job \(job.id.prefix(8)) \(job.kind): \(message)")
    }
}
