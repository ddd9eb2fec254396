import Foundation
import Testing
import TrailbookEngine
import TrailbookJobsTesting
import UploadJob

/// The upload kind to a folder, run by `TrailbookJobsTesting`'s harness as a user's kind would be: only the public
/// API (no `@testable`), no daemon, no store. A stop for each reason at a chosen checkpoint, then what the kind did
/// about it: kept its partial copy for the next attempt, resumed from its checkpoint, or removed it.
@Suite struct UploadJobHarnessTests {
    private let root: URL
    private let source: URL
    private let destination: URL
    /// 1 MiB of bytes that differ chunk to chunk, in 16 chunks of 64 KiB (a checkpoint after each).
    private let bytes: Data

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("upload-harness-\(UUID().uuidString)")
        destination = root.appendingPathComponent("to")
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
        source = root.appendingPathComponent("trip.mov")
        var generator = SystemRandomNumberGenerator()
        bytes = Data((0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try bytes.write(to: source)
    }

    private var params: UploadJob.Params {
        UploadJob.Params(files: [BytePath(source.path)], to: "file://" + destination.path, chunkSize: 64 << 10)
    }

    private func landed() -> Data? { FileManager.default.contents(atPath: destination.appendingPathComponent("trip.mov").path) }

    private func leftovers() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: destination.path).filter { $0 != "trip.mov" }
    }

    @Test func aTimeoutKeepsThePartialCopyAndTheNextAttemptResumesFromItsCheckpoint() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = JobKindHarness(UploadJob(), params: params)
        let first = await harness.runAttempt(stoppingAt: .checkpointSave(4), reason: .timeout)
        #expect(first.error == nil)
        #expect(first.stopReason == .timeout)
        #expect(first.onCancelReason == .timeout)
        #expect(first.state == .needsRetry)
        #expect(landed() == nil, "the file is in place only once whole")
        #expect(try !leftovers().isEmpty, "the partial copy is kept for the next attempt")
        #expect(await harness.checkpoint != nil, "four chunks were checkpointed")

        let second = await harness.runAttempt()
        #expect(second.number == 2)
        #expect(second.state == .succeeded)
        #expect(landed() == bytes)
        #expect(try leftovers().isEmpty)
        // Resumed: the four checkpointed chunks are not copied again (at most the one after them is); a restart
        // from the start would have resent at least those 256 KiB.
        let resent = second.output?["bytes_resent"]?.doubleValue ?? -1
        #expect(resent >= 0 && resent <= Double(64 << 10), "bytes_resent \(resent)")
        #expect(await harness.jobEndedCalled)
    }

    @Test func aUserStopCancelsAndTheCleanUpRemovesThePartialCopy() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = JobKindHarness(UploadJob(), params: params)
        let attempt = await harness.runAttempt(stoppingAt: .progress(atLeast: 5 * (64 << 10)), reason: .userStop)
        #expect(attempt.state == .cancelled)
        #expect(attempt.onCancelReason == .userStop)
        #expect(attempt.cleanUps == [.done])
        #expect(landed() == nil)
        let left = try leftovers()
        #expect(left.isEmpty, "left behind: \(left)")
        #expect(await harness.jobEndedCalled)
    }

    @Test func aResourceReclaimKeepsTheAttemptAndResumes() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = JobKindHarness(UploadJob(), params: params)
        let cut = await harness.runAttempt(stoppingAt: .checkpointSave(2), reason: .resourceReclaim)
        #expect(cut.error == nil)
        #expect(cut.state == .queued)
        let resumed = await harness.runAttempt()
        #expect(resumed.number == 1, "a reclaimed run does not use up its attempt")
        #expect(resumed.state == .succeeded)
        #expect(landed() == bytes)
    }
}
