import Foundation
import Testing
import TrailbookJobsTesting

@testable import TrailbookEngine
@testable import UploadJob

#if canImport(Glibc)
    import Glibc
#endif

/// Small files of a `file://` upload land in batches (`DirectoryLandingBatch`, `DirectoryIO.land`): their bytes
/// flushed, then renamed into place, then the renames flushed, and only then counted as landed.
@Suite struct DirectoryLandingTests {
    /// Copies `src/name` whole into `dst/name.part` through a `PartFile`, checks it as a batched file is checked,
    /// and returns it as a batch member with the bytes it holds.
    private func copied(_ name: String, index: Int, scratch: Scratch) throws
        -> (DirectoryLandingBatch.Member, [UInt8])
    {
        let (path, bytes) = try scratch.source(name, count: 3000 + index * 1000, seed: UInt64(index + 1))
        var info = stat()
        try #require(stat(path, &info) == 0)
        let expected = DirectoryIO.identity(info)
        let partPath = BytePath(scratch.dst + "/" + name + ".part")
        let (file, _) = try PartFile.open(sourcePath: BytePath(path), partPath: partPath, expected: expected)
        let result = try file.copy(at: 0, count: expected.size, stop: CopyStop(), timeLimit: 60)
        #expect(result.bytes == expected.size)
        try file.checkCopied(source: expected, length: expected.size)
        let finalPath = BytePath(scratch.dst + "/" + name)
        let record = UploadedFile(
            name: BytePath(name), path: finalPath, bytes: expected.size, sha256: file.hash.hexDigest, bytesResent: 0)
        return (.init(index: index, partPath: partPath, node: file.node, finalPath: finalPath, record: record), bytes)
    }

    @Test func aBatchLandsEveryFileWithTheBytesItHashed() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let files = try (0..<3).map { try copied("f\($0).bin", index: $0, scratch: scratch) }
        let landing = DirectoryIO.land(files.map(\.0))
        #expect(landing.landed == 3)
        #expect(landing.failure == nil)
        for (member, bytes) in files {
            #expect(try scratch.bytes("\(member.finalPath)") == bytes)
            #expect(!scratch.exists("\(member.partPath)"), "the .part was renamed")
            let hash = SHA256()
            hash.update(bytes)
            #expect(member.record.sha256 == hash.hexDigest)
        }
    }

    @Test func aPartFileReplacedBeforeItsLandingStopsTheBatchThereAndIsNotRenamed() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let files = try (0..<3).map { try copied("f\($0).bin", index: $0, scratch: scratch) }
        // Another file of the same size put in the second one's place (a new inode: the old file is kept, moved
        // aside, so its inode number cannot be reused for the new one).
        let second = "\(files[1].0.partPath)"
        try #require(rename(second, second + ".aside") == 0)
        try Data(repeating: 7, count: files[1].1.count).write(to: URL(fileURLWithPath: second))

        let landing = DirectoryIO.land(files.map(\.0))
        #expect(landing.landed == 1)
        #expect(landing.failure?.code == "write_failed")
        #expect(landing.failure?.retryable == true)
        #expect(try scratch.bytes("\(files[0].0.finalPath)") == files[0].1)
        #expect(!scratch.exists("\(files[1].0.finalPath)"), "a .part that is not the file checked is never renamed")
        #expect(!scratch.exists("\(files[2].0.finalPath)"), "the batch stops at the first file that cannot land")
    }

    /// 48 files of 4 KiB with `--chunk-size 64 KiB`: each is copied whole and lands with up to 15 others. A
    /// timeout once 30 files were copied lands the files copied whole and checked (29: the stop cuts the 30th before
    /// its check) and saves the checkpoint that names them; the next attempt copies only the rest.
    @Test func aStopLandsTheFilesCopiedWholeAndTheNextAttemptCopiesOnlyTheRest() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let size = 4096
        let sources = try scratch.sources(48, size: size)
        let params = UploadJob.Params(
            files: sources.map { BytePath($0.path) }, to: "file://" + scratch.dst, chunkSize: 64 << 10)
        let landedNames = {
            try FileManager.default.contentsOfDirectory(atPath: scratch.dst).filter { !$0.hasSuffix(".part") }
        }

        let harness = JobKindHarness(UploadJob(), params: params)
        let first = await harness.runAttempt(stoppingAt: .progress(atLeast: Int64(30 * size)), reason: .timeout)
        #expect(first.state == .needsRetry)
        let landedFirst = try landedNames()
        #expect(landedFirst.count >= 29 && landedFirst.count < 48, "landed after the stop: \(landedFirst.count)")
        let checkpoint = try #require(try await harness.checkpoint(as: UploadCheckpoint.self))
        #expect(checkpoint.fileIndex == landedFirst.count, "the saved checkpoint names exactly the files landed")
        for index in 0..<checkpoint.fileIndex {
            #expect(try scratch.bytes(scratch.dst + "/s\(index).bin") == sources[index].bytes)
        }

        let second = await harness.runAttempt()
        #expect(second.state == .succeeded)
        for (index, source) in sources.enumerated() {
            #expect(try scratch.bytes(scratch.dst + "/s\(index).bin") == source.bytes)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.dst).count == 48, "no .part left")
        let resent = second.output?["bytes_resent"]?.doubleValue ?? -1
        #expect(resent >= 0 && resent <= Double(size), "bytes_resent \(resent): at most the file cut by the stop")
    }
}
