import Foundation
import Testing
import TrailbookLoop

@testable import TrailbookEngine

/// The engine enforces each job kind's declared execution targets: a kind that did not declare the thread pool or
/// worker processes is refused there, before any work is queued.
struct ExecutionTargetTests {
    @LoopActor static func context(_ targets: Set<ExecutionTarget>) -> JobContext {
        JobContext(
            id: "target-test", kind: "test.targets", attempt: 1, maxAttempts: 1,
            traits: JobKindTraits(unit: .items, isLongRunning: false, executionTargets: targets),
            progress: JobProgress(unit: .items))
    }

    @Test func everyKindMayRunOnTheLoop() {
        #expect(JobKindTraits(unit: .items, isLongRunning: false, executionTargets: []).executionTargets == [.daemonLoop])
    }

    @Test func undeclaredTargetsAreRefused() async throws {
        let codes = try await onLoop { @LoopActor () -> [String?] in
            let loopOnly = Self.context([.daemonLoop])
            var codes: [String?] = []
            let marker = "/tmp/tbj-target-test-\(getpid())"
            do { _ = try await loopOnly.runOnPool { close(open(marker, O_CREAT | O_WRONLY, 0o600)) } } catch {
                codes.append((error as? JobError)?.code)
            }
            do { _ = try await loopOnly.runInWorker(task: "echo", 1) } catch { codes.append((error as? JobError)?.code) }
            #expect(access(marker, F_OK) != 0, "the refused work was never run")
            // Declared: the pool runs the work; worker processes are still refused.
            let poolOnly = Self.context([.threadPool])
            let answer = try await poolOnly.runOnPool { 42 }
            #expect(answer == 42)
            do { _ = try await poolOnly.runInWorkers(task: "echo", [1]) } catch {
                codes.append((error as? JobError)?.code)
            }
            return codes
        }
        #expect(codes == ["execution_target_not_allowed", "execution_target_not_allowed", "execution_target_not_allowed"])
    }
}
