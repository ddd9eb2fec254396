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

// Control: `cancel`, `pause`, `resume`, also of runs on other daemons sharing the store.
extension Scheduler {
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
                let unwritten = !dispatcher.keptWriteIsTheJobsState && pendingWrites.record(id) != nil
                switch try CancelVerdict(now, unwritten: unwritten) {
                case .cancelled(let cancelled): return cancelled
                case .again(let now): job = now
                }
                continue
            }
            var cancelled = job
            try transition(&cancelled, .cancelWhileWaiting, verb: "cancel")
            cancelled.cancellation = Cancellation(reason: .userStop, at: Timestamp.nowISO8601(), detail: "cancelled by user")
            retries[id] = nil
            // Recorded before the clean-up, which may suspend (an upload removes its .part on the pool): a job
            // already cancelled in the store cannot be started in that gap and then have its output removed under
            // it. While the store refuses the write, the clean-up waits for it (a restart before then resumes it).
            let cleansUp = kinds[cancelled.kind]?.traits.cleansUpAfterEnd == true
            switch commit(cancelled, addingCleanUp: cleansUp) {
            case .written: await endWritten(cancelled, cancelledWhileWaiting: true, cleansUp: cleansUp)
            case .kept:
                pendingWrites.markCancelledWhileWaiting(id)
                if !dispatcher.keptWriteIsTheJobsState { throw CancelVerdict.notYetWritten(id) }
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
        guard case .claiming(let claiming) = dispatcher else { return nil }
        // Each turn follows a change of state (the job ended, or was rescued and claimed again), so a few do.
        for _ in 0..<4 {
            guard job.state == .running, running[job.id] == nil else { return nil }
            let id = job.id
            switch await claiming.requestControl(control, of: id) {
            case .success(true): return try await awaitEnd(of: id, asked: control, waits: claiming.controlWaits)
            case .success(false): job = try await fetchJob(id)
            case .failure(let error):
                throw JobError(code: "store_error", message: "cannot ask the daemon running job \(id) to \(control.rawValue) it: \(error)")
            }
        }
        return nil
    }

    /// `controlElsewhere`'s wait for the end of job `id`, asked of the daemon running it through the shared store,
    /// in `controlWaits` (`ClaimingDispatch.controlWaits`, which the store's notices of controlled ends wake).
    /// - Returns: the job once it is no longer running, or `nil` if this daemon runs it now.
    func awaitEnd(
        of id: String, asked control: JobControl, waits controlWaits: ControlWaits
    ) async throws(JobError) -> JobRecord? {
        let wait = controlWaits.add(for: id)
        defer {
            wait.close()
            controlWaits.remove(wait, for: id)
        }
        let deadline = Timestamp.monotonic() + options.shutdownGraceSeconds + 30
        while Timestamp.monotonic() < deadline {
            let heard = wait.notices
            let stored = try? await read(.idPrefix(id, limit: 1), counting: false).jobs.first { $0.id == id }
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
    func controlRequested(_ id: String, _ control: JobControl) {
        guard let active = running[id], active.context.stopReason == nil else { return }
        switch control {
        case .cancel: stop(active, .userStop, detail: "cancelled by user (through another daemon)")
        case .pause:
            stop(active, .resourceReclaim, detail: "paused by user (through another daemon)", thenPause: true)
        }
    }

    /// What follows a job's end once it is written: a job cancelled while waiting removes its partial output
    /// (`onCancel(user_stop)`), the first clean-up try runs if the kind has one, and the kind drops its state.
    func endWritten(_ job: JobRecord, cancelledWhileWaiting: Bool, cleansUp: Bool) async {
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
                stop(active, .resourceReclaim, detail: "paused by user", thenPause: true)
                await waitUntilStopped(active)
                return try await fetchJob(id)
            }
            var paused = job
            try transition(&paused, .pauseWhileWaiting, verb: "pause")
            paused.retryAt = nil
            retries[id] = nil
            if commit(paused) == .fencedOff {
                job = try await changedElsewhere(id)
                continue
            }
            retries.arm()
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
}
