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

// Group commit: the submits and transitions of one loop turn written in one transaction (`GroupCommit` holds
// what waits for it and where it is; this writes it and settles what follows).
extension Scheduler {
    /// Queues `job`'s transition from `from` for the turn's group commit; `written` runs after it, with whether
    /// the store took it. After shutdown (no more turns) it is written at once.
    func commitAtTurnEnd(
        _ job: JobRecord, from: JobState, addingCleanUp: Bool, written: @escaping @LoopActor (Bool) -> Void
    ) {
        let end = GroupCommit.PendingEnd(job: job, from: from, cleansUp: addingCleanUp, written: written)
        switch groupCommit.queue(end) {
        case .queued: armGroupCommit()
        case .writeAlone: written(commitAlone(job, from: from, addingCleanUp: addingCleanUp))
        }
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

    /// Commits the turn's group at its end (`GroupCommit.armCheck`).
    func armGroupCommit() {
        groupCommit.armCheck { [weak self] in self?.commitGroup() }
    }

    /// Writes the turn's submits and transitions in one transaction (one fsync when any is a submit or an end),
    /// then answers the submits, announces the transitions and runs what waits for them, and starts what can run.
    /// When the store refuses the group, each write is tried alone, so each meets the refusal it would have met
    /// without grouping and is handled as before (a submit waits out a lock or is refused; a transition is kept in
    /// `pendingWrites`).
    ///
    /// The group goes through `JobStoring.sendGroup`, one path for both stores: the SQLite store writes it and
    /// answers before the call returns; a shared store sends it without waiting, the loop goes on for the round
    /// trip, and what arrives meanwhile goes in the next group, sent when this one is answered. At shutdown
    /// (`waiting`) it is written with `commitGroup`, waiting, on either store.
    func commitGroup(waiting: Bool = false) {
        // A shared store's group is capped (`GroupCommit.maxGroupJobs`); its answer arms the next. SQLite's takes
        // them all. One group in flight at a time: `take` answers nothing meanwhile.
        guard let group = groupCommit.take(capped: dispatcher.capsGroups && !waiting) else { return }
        // The starts with their latest progress (a checkpoint written since the start saved it; the start must not
        // undo that).
        let starts = group.starts.map { running[$0.id].map(live) ?? $0 }
        var inserted = group.submits.flatMap(\.jobs)
        let digests = group.submits.flatMap(\.digests)
        let duplicateKeys = group.submits.flatMap(\.duplicateKeys)
        let updating = starts.map { ($0, false) } + group.ends.map { ($0.job, $0.cleansUp) }
        let durable = !group.submits.isEmpty || group.ends.contains { $0.job.state.isTerminal }
        if !waiting {
            let answered = groupCommit.send()
            store.sendGroup(
                inserting: inserted, digests: digests, duplicateKeys: duplicateKeys, updating: updating,
                durable: durable
            ) { [weak self] outcome in
                guard let self else { return }
                self.settleGroup(group, starts, outcome)
                answered.resumeAll()
                if self.groupCommit.hasQueuedWrites { self.armGroupCommit() }
            }
            return
        }
        let outcome = Result<GroupWritten, any Error> {
            try store.commitGroup(
                inserting: &inserted, digests: digests, duplicateKeys: duplicateKeys, updating: updating, durable: durable)
            return GroupWritten(inserted: inserted, lost: store.takeLostWrites())
        }
        settleGroup(group, starts, outcome)
    }

    /// What follows a group's commit, sent waiting or not: its ends leave `GroupCommit.endRecords`; then the group's
    /// writes are settled as written (`groupWritten`) or, refused, tried one by one (`groupRefused`); then what
    /// waits for the store is retried and what can run starts.
    private func settleGroup(
        _ group: GroupCommit.Group, _ starts: [JobRecord], _ outcome: Result<GroupWritten, any Error>
    ) {
        groupCommit.finish(group)
        switch outcome {
        case .success(let written):
            groupWritten(group.submits, starts, group.ends, inserted: written.inserted, lost: written.lost)
        case .failure: groupRefused(group.submits, starts, group.ends)
        }
        retries.arm()
        // A shared store's claim costs a round trip: made after a group only when a run's end freed a slot or a
        // claim waited for the group. Submits alone wake the daemons that may claim their jobs,
        // this one too, through their notice (`WorkNotice`).
        if dispatcher.looksForWork(afterGroupEndingRuns: !group.ends.isEmpty) { schedule() }
    }

    /// Waits until no group is in flight (`commitGroup`'s sent group is answered).
    func groupAnswered() async {
        await groupCommit.answered()
    }

    /// After the store took a group: answers its submits (`inserted`, with their sequence numbers, in order) and
    /// announces its transitions except those fenced off (`lost`).
    private func groupWritten(
        _ submits: [GroupCommit.PendingSubmit], _ starts: [JobRecord], _ ends: [GroupCommit.PendingEnd], inserted: [JobRecord],
        lost: Set<String>
    ) {
        // A start or end written supersedes an older refused write of the same job still waiting for the retry.
        for id in starts.map(\.id) + ends.map(\.job.id) {
            pendingWrites.removeState(id)
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
    private func groupRefused(
        _ submits: [GroupCommit.PendingSubmit], _ starts: [JobRecord], _ ends: [GroupCommit.PendingEnd]
    ) {
        for start in starts {
            if case .refused = write("the start of job \(start.id.prefix(8))", { try store.update(start, addingCleanUp: false) }) {
                pendingWrites.keep(start, addingCleanUp: false, unannouncedFrom: nil)
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
