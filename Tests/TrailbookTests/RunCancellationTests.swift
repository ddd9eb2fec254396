import Foundation
import Synchronization
import Testing

@testable import TrailbookEngine
import TestSupport
import TrailbookLoop
import TrailbookSQLite

/// What the probe kind saw, written on the loop thread (the cancellation handler's flag is atomic: it runs on the
/// thread that cancels).
private final class RunCancellationLog: @unchecked Sendable {
    var started = false
    /// `job.stopReason` when `Task.sleep` threw `CancellationError` in `run`; `nil` if it never did.
    var stopReasonWhenRunSawCancellation: CancellationReason?
    let handlerRan = Atomic<Bool>(false)
    var onCancelReason: CancellationReason?
    /// `Task.isCancelled` in `onCancel`.
    var onCancelTaskCancelled: Bool?
    /// Whether an `await` of a cancellable call (`Task.sleep`) in `onCancel` completed instead of throwing.
    var onCancelCouldWait: Bool?
}

/// A kind whose `run` notices a stop only through its task's cancellation: it never asks its context. If the stop
/// does not cancel its task, it gives up waiting after about ten seconds and succeeds.
private struct TaskCancellationProbe: JobKind {
    struct Params: Codable, Sendable {}
    static let name = "task-cancellation-probe"
    static let traits = JobKindTraits(unit: .items, isLongRunning: true, executionTargets: [.daemonLoop])
    let log: RunCancellationLog

    func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        log.started = true
        let log = log
        do {
            try await withTaskCancellationHandler {
                for _ in 0..<500 { try await Task.sleep(for: .milliseconds(20)) }
            } onCancel: {
                log.handlerRan.store(true, ordering: .releasing)
            }
        } catch is CancellationError {
            log.stopReasonWhenRunSawCancellation = job.stopReason
            throw CancellationError()
        }
        return .null
    }

    func onCancel(_ reason: CancellationReason, params: Params, in job: JobContext) async {
        log.onCancelReason = reason
        log.onCancelTaskCancelled = Task.isCancelled
        do {
            try await Task.sleep(for: .milliseconds(1))
            log.onCancelCouldWait = true
        } catch {
            log.onCancelCouldWait = false
        }
    }
}

/// A stop reaches a kind's `run` as its task's cancellation (issue 38's typed kind API), whichever task the
/// scheduler runs it in; `onCancel` runs afterwards in a task that is not cancelled, so it can still do I/O.
@Suite("Run cancellation")
struct RunCancellationTests {
    private static func temporaryStore() throws -> String {
        var template = Array("/tmp/trailbook-run-cancellation-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        return directory + "/jobs.db"
    }

    @Test(
        "a stop cancels the task running run, then onCancel runs in a task that is not cancelled",
        arguments: [CancellationReason.userStop, .resourceReclaim])
    func aStopCancelsTheRunsTask(reason: CancellationReason) async throws {
        let path = try Self.temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let log = RunCancellationLog()
        let ended = try await onLoop { () -> JobRecord in
            let store = try JobStore(path: path)
            let scheduler = Scheduler(store: store, feed: ProgressFeed(firstSeq: 1), options: SchedulerOptions())
            scheduler.register(TaskCancellationProbe(log: log))
            try scheduler.start()
            let job = try await scheduler.submit(
                kind: TaskCancellationProbe.name, params: [:], options: SubmitOptions()
            ).job
            for _ in 0..<500 where !log.started { try await Task.sleep(for: .milliseconds(10)) }
            #expect(log.started)
            // `cancel` and `pause` return once the run has ended and its end is written.
            let ended =
                reason == .userStop ? try await scheduler.cancel(job.id) : try await scheduler.pause(job.id)
            await scheduler.shutdown()
            return ended
        }
        #expect(ended.state == (reason == .userStop ? .cancelled : .paused))
        #expect(log.stopReasonWhenRunSawCancellation == reason, "run's Task.sleep threw CancellationError")
        let handlerRan = log.handlerRan.load(ordering: .acquiring)
        #expect(handlerRan, "run's cancellation handler ran")
        #expect(log.onCancelReason == reason)
        #expect(log.onCancelTaskCancelled == false)
        #expect(log.onCancelCouldWait == true)
    }
}
