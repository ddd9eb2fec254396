import Foundation
import Testing

@testable import TrailbookEngine
import TestSupport
import TrailbookLoop
import TrailbookSQLite

/// What a test saw, written on the loop thread only.
private final class GroupCommitLog: @unchecked Sendable {
    var commits: [(submits: Int, transitions: Int)] = []
    var repliesAtCommit: [Int] = []
    var replies = 0
    /// For each reply or `jobEnded`: whether a second connection to the store saw the row as answered.
    var durableWhenSeen: [Bool] = []
}

/// A kind whose runs end at once and whose `jobEnded` checks, through its own connection to the store, that the
/// end it is told about is committed.
private struct EndProbe: JobKind {
    struct Params: Codable, Sendable {}
    static let name = "end-probe"
    static let traits = JobKindTraits(unit: .items, isLongRunning: false, executionTargets: [.daemonLoop])
    let path: String
    let log: GroupCommitLog

    func run(_ params: Params, in job: JobContext) async throws -> JSONValue { .null }

    func jobEnded(id: String, state: JobState) {
        let stored = try? Database(path: path, readOnly: true).query("SELECT state FROM jobs WHERE id = ?", [.text(id)])
        log.durableWhenSeen.append(stored?.first?.text(0) == state.rawValue)
    }
}

/// A kind whose runs go on until they are stopped.
private struct Hold: JobKind {
    struct Params: Codable, Sendable {}
    static let name = "hold"
    static let traits = JobKindTraits(unit: .items, isLongRunning: true, executionTargets: [.daemonLoop])

    func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        while true { try await job.sleep(seconds: 0.05) }
    }
}

@Suite("Group commit")
struct GroupCommitTests {
    private static func temporaryStore() throws -> String {
        var template = Array("/tmp/trailbook-group-commit-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        return directory + "/jobs.db"
    }

    @Test("submits made in one loop turn share one commit, and none is answered before it")
    func submitRepliesWaitForTheCommit() async throws {
        let path = try Self.temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let log = GroupCommitLog()
        try await onLoop {
            let store = try JobStore(path: path)
            let scheduler = Scheduler(store: store, feed: ProgressFeed(firstSeq: 1), options: SchedulerOptions())
            scheduler.register(EndProbe(path: path, log: log))
            try scheduler.start()
            scheduler.groupCommitted = { submits, transitions in
                log.commits.append((submits, transitions))
                log.repliesAtCommit.append(log.replies)
            }
            let reader = try Database(path: path, readOnly: true)
            // Ten submits started together: they run in one drain of the loop's queue, one loop turn.
            let submits = (0..<10).map { _ in
                Task { @LoopActor in
                    let job = try await scheduler.submit(kind: EndProbe.name, params: [:], options: SubmitOptions()).job
                    log.replies += 1
                    let row = try reader.query("SELECT count(*) FROM jobs WHERE id = ?", [.text(job.id)])
                    log.durableWhenSeen.append(row.first?.int(0) == 1)
                    return job
                }
            }
            var sequences: [Int64] = []
            for submit in submits { sequences.append(try await submit.value.sequence) }
            #expect(sequences == sequences.sorted() && Set(sequences).count == 10)
            await scheduler.shutdown()
        }
        #expect(log.commits.first?.submits == 10)
        #expect(log.repliesAtCommit.first == 0)
        #expect(log.replies == 10)
        // 10 replies, then each job's `jobEnded` (the runs ended at once; shutdown wrote what was left).
        #expect(log.durableWhenSeen.prefix(10).allSatisfy { $0 })
    }

    @Test("a job's end is committed before its kind's jobEnded, and ends of one turn share one commit")
    func endsAreDurableBeforeJobEnded() async throws {
        let path = try Self.temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let log = GroupCommitLog()
        try await onLoop {
            let store = try JobStore(path: path)
            var options = SchedulerOptions()
            options.concurrency = 8
            let scheduler = Scheduler(store: store, feed: ProgressFeed(firstSeq: 1), options: options)
            scheduler.register(EndProbe(path: path, log: log))
            try scheduler.start()
            scheduler.groupCommitted = { submits, transitions in log.commits.append((submits, transitions)) }
            let submits = (0..<8).map { _ in
                Task { @LoopActor in try await scheduler.submit(kind: EndProbe.name, params: [:], options: SubmitOptions()) }
            }
            for submit in submits { _ = try await submit.value }
            // The 8 runs start together and end in the same turn: their ends are one commit.
            for _ in 0..<200 where log.durableWhenSeen.count < 8 { try await Task.sleep(for: .milliseconds(10)) }
            await scheduler.shutdown()
        }
        #expect(log.durableWhenSeen.count == 8)
        #expect(log.durableWhenSeen.allSatisfy { $0 })
        #expect(log.commits.map(\.submits) == [8, 0])
        #expect(log.commits.map(\.transitions) == [0, 8])
    }

    @Test("starts waiting for the turn's commit are read as running, and do not use up list's limit of queued jobs")
    func pendingStartsAreReadInTheirNewState() async throws {
        // Whether the reply's task runs before the next turn's commit (starts still pending) is up to the loop's
        // executor; the reads must be right either way, and some try sees the pending case (7 in 8 do alone; under
        // a parallel run's load fewer, so up to 20 tries, stopping at the first that does).
        var sawPending = 0
        for _ in 0..<20 where sawPending == 0 {
            let path = try Self.temporaryStore()
            defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
            sawPending += try await onLoop { () -> Int in
                let store = try JobStore(path: path)
                var options = SchedulerOptions()
                options.concurrency = 2
                let scheduler = Scheduler(store: store, feed: ProgressFeed(firstSeq: 1), options: options)
                scheduler.register(Hold())
                try scheduler.start()
                // One batch, one reply, from the commit of the submits; that commit then starts two, whose starts
                // wait for the next turn's commit. The two newest outrank the rest, so they are the ones started and
                // are among the newest queued rows `list --state queued` reads.
                var urgent = SubmitOptions()
                urgent.priority = 10
                let submitted = try await scheduler.submit(
                    (0..<5).map { SubmitRequest(kind: Hold.name, params: [:], options: $0 < 3 ? SubmitOptions() : urgent) })
                let pending = try store.jobs(states: [.queued], kind: nil, limit: 10).count == 5
                #expect(try scheduler.list(states: [.running], kind: nil, limit: 10).count == 2)
                #expect(try scheduler.list(states: [.queued], kind: nil, limit: 3).count == 3, "not 1: the two started take no room")
                #expect(try scheduler.list(states: nil, kind: nil, limit: 10).filter { $0.state == .running }.count == 2)
                // A page's cursor holds for them too: before the newest, only the other started one.
                let olderRunning = try scheduler.list(
                    states: [.running], kind: nil, before: submitted[4].job.sequence, limit: 10)
                #expect(olderRunning.map(\.id) == [submitted[3].job.id])
                for _ in 0..<100 where try store.jobs(states: [.running], kind: nil, limit: 10).count < 2 {
                    try await Task.sleep(for: .milliseconds(10))
                }
                #expect(try store.jobs(states: [.running], kind: nil, limit: 10).count == 2, "written with the next commit")
                await scheduler.shutdown()
                return pending ? 1 : 0
            }
        }
        #expect(sawPending > 0, "no try saw the starts pending")
    }
}

