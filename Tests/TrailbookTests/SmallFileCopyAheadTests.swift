import Foundation
import Testing
import TrailbookJobsTesting

@testable import TrailbookEngine
@testable import UploadJob

/// Small files of a `file://` upload are copied ahead on the thread pool (`SmallFileCopyAhead`) while the loop waits
/// for the current one: what a stop does with the copies ahead.
@Suite struct SmallFileCopyAheadTests {
    /// 48 files of 4 KiB with `--chunk-size 64 KiB` (batches of 16). A timeout right after the 30th file's copy
    /// was reported finds the next `depth` files copied ahead: they land with the batch (so the stop keeps 30 +
    /// depth files, each with its bytes, and the saved checkpoint names them all), and the next attempt copies
    /// only the rest, resending nothing.
    @Test func aStopLandsTheFilesCopiedAheadWithTheBatch() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let size = 4096
        let sources = try scratch.sources(48, size: size)
        let params = UploadJob.Params(
            files: sources.map { BytePath($0.path) }, to: "file://" + scratch.dst, chunkSize: 64 << 10)
        let names = { try FileManager.default.contentsOfDirectory(atPath: scratch.dst) }

        let harness = JobKindHarness(UploadJob(), params: params)
        let first = await harness.runAttempt(stoppingAt: .progress(atLeast: Int64(30 * size)), reason: .timeout)
        #expect(first.state == .needsRetry)
        let landed = try names().filter { !$0.hasSuffix(".part") }
        #expect(landed.count == 30 + SmallFileCopyAhead.depth, "landed after the stop: \(landed.sorted())")
        #expect(try names().allSatisfy { !$0.hasSuffix(".part") }, "every file copied ahead landed: no .part left")
        let checkpoint = try #require(try await harness.checkpoint(as: UploadCheckpoint.self))
        #expect(checkpoint.fileIndex == landed.count, "the saved checkpoint names exactly the files landed")
        for index in 0..<checkpoint.fileIndex {
            #expect(try scratch.bytes(scratch.dst + "/s\(index).bin") == sources[index].bytes)
        }

        let second = await harness.runAttempt()
        #expect(second.state == .succeeded)
        for (index, source) in sources.enumerated() {
            #expect(try scratch.bytes(scratch.dst + "/s\(index).bin") == source.bytes)
        }
        #expect(try names().count == 48, "no .part left")
        #expect(second.output?["bytes_resent"]?.doubleValue == 0, "nothing copied twice")
    }

    /// A user stop in the middle of the same files: the copies ahead end before the run does, so the clean-up
    /// finds and removes every `.part` (theirs too) and no copy writes one after it; the files that had landed stay.
    @Test func aUserStopLeavesNoPartFileOfACopyAhead() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let size = 4096
        let sources = try scratch.sources(48, size: size)
        let params = UploadJob.Params(
            files: sources.map { BytePath($0.path) }, to: "file://" + scratch.dst, chunkSize: 64 << 10)

        let harness = JobKindHarness(UploadJob(), params: params)
        let first = await harness.runAttempt(stoppingAt: .progress(atLeast: Int64(30 * size)), reason: .userStop)
        #expect(first.state == .cancelled)
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.dst)
        #expect(names.allSatisfy { !$0.hasSuffix(".part") }, "left behind: \(names.sorted())")
        #expect(names.count == 16, "the first batch (16 files) had landed; the rest never did: \(names.sorted())")
        for name in names {
            let index = try #require(Int(name.dropFirst().dropLast(4)))
            #expect(try scratch.bytes(scratch.dst + "/" + name) == sources[index].bytes)
        }
    }
}
