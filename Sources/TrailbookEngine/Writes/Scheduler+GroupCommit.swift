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

// Group commit: the submits and transitions of one loop turn written in one transaction.
extension Scheduler {
    // Group commit (issue 14): submits and the ends of runs that arrive within one loop turn are written in one
    // transaction with one fsync at the end of the turn (a check handle, after the loop's I/O callbacks), and
    // only then acknowledged: a submit's reply and a kind's `jobEnded` wait for it.
    /// A run's end (or other transition out of `running`) waiting for the turn's commit.
    struct PendingEnd {
        var job: JobRecord
        var from: JobState
        var cleansUp: Bool
        /// What follows the write: `true` when it is written, `false` when the store refused it (then it is in
        /// `unsavedRecords`, as a refused write always is).
        var written: @LoopActor (Bool) -> Void
    }

    struct PendingSubmit {
        var jobs: [JobRecord]
        var digests: [String?]
        var duplicateKeys: [[String]]
        var reply: SubmitTicket
    }

    /// Queues `job`'s transition from `from` for the turn's group commit; `written` runs after it, with whether
    /// the store took it. After shutdown (no more turns) it is written at once.
    func commitAtTurnEnd(
        _ job: JobRecord, from: JobState, addingCleanUp: Bool, written: @escaping @LoopActor (Bool) -> Void
    ) {
        guard !groupPhase.isClosed else { return written(commitAlone(job, from: from, addingCleanUp: addingCleanUp)) }
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

    func armGroupCommit() {
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
    func commitGroup(waiting: Bool = false) {
        groupCommitHandle?.stop()
        // One group in flight at a time: its answer arms the next (`groupAnswered`).
        guard !groupPhase.isInFlight else { return }
        // A shared store's group is capped (`maxGroupJobs`); its answer arms the next. SQLite's takes them all.
        let submits = leasing != nil && !waiting ? takeGroupSubmits() : pendingSubmits
        if leasing == nil || waiting { pendingSubmits.removeAll() }
        let ends = pendingEnds
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
            let answered = WaitList()
            groupPhase = .inFlight(answered: answered)
            leasing.sendGroup(inserting: inserted, digests: digests, duplicateKeys: duplicateKeys, updating: updating) {
                [weak self] outcome in
                guard let self else { return }
                if self.groupPhase.isInFlight { self.groupPhase = .open }
                self.settleGroup(submits, starts, ends, outcome)
                answered.resumeAll()
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

    /// The most new jobs one group commit on a shared store takes (unless its first submit alone has more):
    /// pipelined submits wait for their commit together (`ControlServer`), and one group of all of them (hundreds
    /// of batches) could outlast the store's request timeout, after which each submit would be tried alone.
    static let maxGroupJobs = 2_000

    /// The pending submits of the next group, oldest first, up to `maxGroupJobs` new jobs (at least one submit);
    /// the others wait for the group after it.
    private func takeGroupSubmits() -> [PendingSubmit] {
        var count = 0
        var jobs = 0
        for submit in pendingSubmits {
            if count > 0, jobs + submit.jobs.count > Self.maxGroupJobs { break }
            jobs += submit.jobs.count
            count += 1
        }
        let taken = Array(pendingSubmits.prefix(count))
        pendingSubmits.removeFirst(count)
        return taken
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
        retries.arm()
        // A shared store's claim costs a round trip: made after a group only when a run's end freed a slot or a
        // claim waited for the group. Submits alone wake the daemons that may claim their jobs,
        // this one too, through their notice (`WorkNotice`).
        if leasing == nil || !ends.isEmpty { return schedule() }
        if case .putOff = claimState { schedule() }
    }

    /// Waits until no group is in flight (`commitGroup`'s sent group is answered).
    func groupAnswered() async {
        guard case .inFlight(let answered) = groupPhase else { return }
        await answered.wait()
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
            if case .refused = write("the start of job \(start.id.prefix(8))", { try store.update(start, addingCleanUp: false) }) {
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
}
