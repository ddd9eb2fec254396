import Testing
import TrailbookLoop

@testable import TrailbookEngine

/// `GroupCommit`'s transitions, without a store: what a group takes, what waits while one is in flight, and what
/// closing it changes. (`GroupCommitTests` checks the commits themselves against a real store.)
@Suite("Group commit state")
struct GroupCommitStateTests {
    private static func job(_ id: String, _ state: JobState = .running) -> JobRecord {
        JobRecord(
            id: id, kind: "upload", state: state,
            options: JobOptions(priority: 0, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 3),
            attempt: 1, progress: JobProgress(total: 100, unit: .bytes), cancellation: nil, error: nil,
            createdAt: "", updatedAt: "", params: [:], result: .null, retryAt: nil, sequence: 0)
    }

    @LoopActor
    private static func end(_ id: String, _ state: JobState = .succeeded) -> GroupCommit.PendingEnd {
        GroupCommit.PendingEnd(job: job(id, state), from: .running, cleansUp: false, written: { _ in })
    }

    @LoopActor
    private static func submit(jobs count: Int, _ prefix: String) -> GroupCommit.PendingSubmit {
        let jobs = (0..<count).map { job("\(prefix)-\($0)", .queued) }
        return GroupCommit.PendingSubmit(
            jobs: jobs, digests: jobs.map { _ in nil }, duplicateKeys: jobs.map { _ in [] }, reply: SubmitTicket())
    }

    @Test func aGroupTakesWhatTheTurnQueuedAndLeavesNothingBehind() async throws {
        try await onLoop {
            let commit = GroupCommit()
            #expect(commit.take(capped: false) == nil, "nothing queued, no group")
            commit.queue(Self.submit(jobs: 2, "s"))
            #expect(commit.queue(Self.end("a")) == .queued)
            commit.queueStart(Self.job("b"))
            #expect(commit.hasQueuedWrites)
            #expect(commit.endRecords["a"]?.state == .succeeded, "a queued end is seen by the duplicate check")
            #expect(commit.starts["b"] != nil, "a queued start is overlaid on reads")
            let group = try #require(commit.take(capped: false))
            #expect(group.submits.map(\.jobs.count) == [2])
            #expect(group.ends.map(\.job.id) == ["a"])
            #expect(group.starts.map(\.id) == ["b"])
            #expect(!commit.hasQueuedWrites)
            #expect(commit.starts.isEmpty)
            #expect(commit.endRecords["a"] != nil, "until the group is settled")
            commit.finish(group)
            #expect(commit.endRecords.isEmpty)
            #expect(commit.take(capped: false) == nil)
        }
    }

    /// A no-op job's start and end cost one write: the end's row holds all of the start.
    @Test func aStartWhoseRunEndedInTheSameGroupIsNotWritten() async throws {
        try await onLoop {
            let commit = GroupCommit()
            commit.queueStart(Self.job("a"))
            commit.queueStart(Self.job("b"))
            _ = commit.queue(Self.end("a"))
            let group = try #require(commit.take(capped: false))
            #expect(group.starts.map(\.id) == ["b"])
            #expect(group.ends.map(\.job.id) == ["a"])
        }
    }

    /// One group in flight at a time: what comes meanwhile waits for the next, which its answer arms.
    @Test func whileAGroupIsInFlightTheNextWaitsForItsAnswer() async throws {
        try await onLoop {
            let commit = GroupCommit()
            _ = commit.queue(Self.end("a"))
            let first = try #require(commit.take(capped: true))
            let answered = commit.send()
            #expect(commit.isInFlight)
            _ = commit.queue(Self.end("b"))
            #expect(commit.take(capped: true) == nil, "the answer of the group in flight arms the next")
            #expect(commit.hasQueuedWrites)
            commit.finish(first)
            answered.resumeAll()
            #expect(!commit.isInFlight)
            await commit.answered()  // no group in flight: returns at once
            let second = try #require(commit.take(capped: true))
            #expect(second.ends.map(\.job.id) == ["b"])
        }
    }

    /// A shared store's group takes up to `maxGroupJobs` new jobs (at least one submit, however big); the rest
    /// waits for the next group. Uncapped (SQLite, or at shutdown) it takes all.
    @Test func aCappedGroupTakesUpToMaxGroupJobsNewJobs() async throws {
        try await onLoop {
            let commit = GroupCommit()
            let big = GroupCommit.maxGroupJobs + 1
            commit.queue(Self.submit(jobs: big, "big"))
            commit.queue(Self.submit(jobs: 1, "one"))
            commit.queue(Self.submit(jobs: GroupCommit.maxGroupJobs, "full"))
            let first = try #require(commit.take(capped: true))
            #expect(first.submits.map(\.jobs.count) == [big], "a first submit alone over the cap goes alone")
            let second = try #require(commit.take(capped: true))
            #expect(second.submits.map(\.jobs.count) == [1], "one more would pass the cap")
            commit.queue(Self.submit(jobs: 5, "five"))
            let rest = try #require(commit.take(capped: false))
            #expect(rest.submits.map(\.jobs.count) == [GroupCommit.maxGroupJobs, 5])
            #expect(commit.submits.isEmpty)
        }
    }

    /// After shutdown's last group, a transition is written alone, at once, and nothing is queued.
    @Test func aClosedGroupCommitQueuesNothing() async throws {
        try await onLoop {
            let commit = GroupCommit()
            commit.close()
            #expect(commit.isClosed)
            #expect(commit.queue(Self.end("a")) == .writeAlone)
            #expect(commit.endRecords.isEmpty)
            #expect(commit.take(capped: false) == nil)
        }
    }

    /// Shutdown may close it while a group is in flight: that group's answer does not open it again.
    @Test func anAnswerAfterCloseLeavesItClosed() async throws {
        try await onLoop {
            let commit = GroupCommit()
            _ = commit.queue(Self.end("a"))
            let group = try #require(commit.take(capped: true))
            _ = commit.send()
            commit.close()
            commit.finish(group)
            #expect(commit.isClosed)
        }
    }
}
