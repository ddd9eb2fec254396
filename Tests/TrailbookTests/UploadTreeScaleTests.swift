import Foundation
import Testing
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

@testable import TrailbookEngine
@testable import UploadJob

/// Folders at scale (issue 35): a folder upload's checkpoint (version 2) holds a cursor and counts, its files live
/// in the job's file list, and nothing the job writes grows with the number of files; a version-1 checkpoint (the
/// whole plan inside, as written before) still resumes.
struct UploadTreeScaleTests {
    /// A tree of `count` files as `UploadTreePlan.list` would give it, with made-up identities (the files are
    /// never opened: they stand under the temporary directory, in a folder that is not made).
    static func tree(files count: Int) -> (UploadTreePlan, [SourceIdentity]) {
        let root = NSTemporaryDirectory() + "tbj-scale-2026-05 Lisbon/"
        var tree = UploadTreePlan()
        var identities: [SourceIdentity] = []
        for index in 0..<count {
            let name = String(format: "d%04d/f%06d.bin", index / 1000, index)
            tree.files.append(BytePath(root + name))
            tree.names.append(BytePath(name))
            identities.append(
                SourceIdentity(
                    size: 1024, modifiedNanoseconds: 1_780_000_000_123_456_789 + Int64(index),
                    inode: 9_000_000 + UInt64(index), device: 2049, changedNanoseconds: 1_780_000_000_123_456_789))
        }
        return (tree, identities)
    }

    /// Bytes of the checkpoint's JSON.
    static func size(_ checkpoint: UploadCheckpoint) -> Int { JSONCoding.encode(checkpoint).count }

    @Test func aHundredThousandFileCheckpointStaysAFewHundredBytes() throws {
        let (big, _) = Self.tree(files: 100_000)
        let (small, smallIdentities) = Self.tree(files: 10)
        var large = UploadCheckpoint.listing(big)
        var tiny = UploadCheckpoint.listing(small)
        #expect(Self.size(large) < 1024, "\(Self.size(large)) bytes")
        // Half the files landed, a few out of order, one failed alone: still a cursor and counts.
        func landed(_ name: BytePath) -> UploadedFile {
            UploadedFile(name: name, path: "/dst", bytes: 1024, sha256: String(repeating: "a", count: 64), bytesResent: 0)
        }
        for index in 0..<50_000 { large.land(index, landed(big.names[index])) }
        large.land(50_003, landed(big.names[50_003]))
        large.failFile(50_001, path: big.files[50_001], error: JobError(code: "source_missing", message: "removed"))
        for index in 0..<5 { tiny.land(index, landed(small.names[index])) }
        let largeSize = Self.size(large)
        #expect(largeSize < 2048, "\(largeSize) bytes")
        // Against 10 files, only the numbers' digits and the window of files ahead differ.
        #expect(largeSize - Self.size(tiny) < 600, "\(largeSize) against \(Self.size(tiny))")
        try large.check(fileCount: 100_000)
        #expect(large.fileIndex == 50_000 && large.finishedCount == 50_000 && large.finished.isEmpty)

        // What is saved names no file: a load reads them back from the file list.
        let saved = try JSONCoding.decode(UploadCheckpoint.self, from: JSONCoding.encode(large))
        #expect(saved.version == 2 && saved.fileCount == 100_000 && saved.sources.isEmpty)
        #expect(saved.tree?.files.isEmpty == true && saved.tree?.names.isEmpty == true)
        #expect(saved.finishedAhead?.map(\.index) == [50_003] && saved.failedAhead == [50_001])
        #expect(saved.finishedBytes ?? -1 == Int64(50_000 * 1024), "\(String(describing: saved.finishedBytes))")

        // Version 1 (files given one by one, and folder uploads begun before) keeps writing everything.
        var old = UploadCheckpoint(sources: smallIdentities)
        old.tree = small
        let oldJSON = JSONCoding.value(of: old)
        #expect(oldJSON["sources"]?.arrayValue?.count == 10 && oldJSON["tree"]?["files"]?.arrayValue?.count == 10)
    }

    /// Runs an upload of a folder of `count` files of 1 KiB to a directory on a recording host.
    /// - Returns: the largest checkpoint, the largest progress report and the result, in bytes of JSON, and the host.
    static func upload(files count: Int, in scratch: Scratch) async throws -> (checkpoint: Int, progress: Int, result: Int) {
        let tree = scratch.root + "/trip\(count)"
        for index in 0..<count {
            let folder = tree + "/d\(index / 100)"
            if index % 100 == 0 { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
            #expect(FileManager.default.createFile(atPath: folder + "/f\(index).bin", contents: Data(repeating: UInt8(index % 251), count: 1024)))
        }
        let params = UploadJob.Params(files: [BytePath(tree)], to: "file://" + scratch.dst + "/\(count)", chunkSize: 16 << 10)
        return try await onLoop { @LoopActor in
            let host = RecordingHost()
            let result = try await UploadJob().run(params, in: host.context())
            let counts = try host.context().entries.counts()
            #expect(counts.entries[.done] == count)
            let progress = host.progressReports.map { JSONCoding.encode($0.json).count }.max() ?? 0
            return (host.largestCheckpointBytes, progress, JSONCoding.encode(result).count)
        }
    }

    @Test func nothingAFolderJobWritesGrowsWithItsFiles() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let few = try await Self.upload(files: 100, in: scratch)
        let many = try await Self.upload(files: 1_000, in: scratch)
        #expect(many.checkpoint < 2048, "largest checkpoint \(many.checkpoint) bytes")
        #expect(many.checkpoint - few.checkpoint < 64, "\(many.checkpoint) against \(few.checkpoint)")
        #expect(many.result - few.result < 64, "result \(many.result) against \(few.result)")
        // Progress carries a window of at most 64 files, whatever their number.
        #expect(many.progress - few.progress < 256, "progress \(many.progress) against \(few.progress)")
    }

    /// A stop mid-tree and a resume on the version-2 checkpoint: the files come back from the file list, every
    /// file lands once with its bytes, and those that landed before the stop are not copied again.
    @Test func aStoppedFolderUploadResumesFromItsFileList() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let tree = scratch.root + "/trip"
        for index in 0..<200 {
            let folder = tree + "/d\(index / 50)"
            if index % 50 == 0 { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
            #expect(FileManager.default.createFile(atPath: folder + "/f\(index).bin", contents: Data(repeating: UInt8(index % 251), count: 1024)))
        }
        let params = UploadJob.Params(files: [BytePath(tree)], to: "file://" + scratch.dst, chunkSize: 4 << 10)
        let (first, second) = try await onLoop { @LoopActor in
            let host = RecordingHost()
            host.stopAt = (100 << 10, .timeout)
            await #expect(throws: JobStopped.self) { _ = try await UploadJob().run(params, in: host.context()) }
            let stopped = try #require(host.checkpoint)
            host.stopAt = nil
            _ = try await UploadJob().run(params, in: host.context(attempt: 2))
            return (stopped, try host.context().entries.page(after: -1, limit: 1000))
        }
        #expect(first["version"]?.intValue == 2 && first["sources"]?.arrayValue?.isEmpty == true)
        let cursor = Int(first["file_index"]?.intValue ?? 0)
        #expect(cursor >= 90 && cursor < 200, "stopped at file \(cursor)")
        #expect(second.count == 200 && second.allSatisfy { $0.outcome.state == .done })
        for entry in second {
            let name = try #require(entry.item["name"]?.stringValue)
            let stored = try Data(contentsOf: URL(fileURLWithPath: scratch.dst + "/" + name))
            #expect(stored == (try Data(contentsOf: URL(fileURLWithPath: tree + "/" + name))))
            guard case .done(let sha256, let location) = entry.outcome else { continue }
            #expect(sha256 == SHA256.hexDigest(of: [UInt8](stored)) && location == scratch.dst + "/" + name)
        }
    }

    /// A folder upload's checkpoint as written before version 2 (the whole plan inside, `"version": 1`) resumes:
    /// the files it lists are the job's, those it names finished are not copied again.
    @Test func aVersionOneCheckpointStillResumes() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let tree = scratch.root + "/trip"
        try FileManager.default.createDirectory(atPath: tree + "/day 1", withIntermediateDirectories: true)
        let names = (0..<6).map { "day 1/IMG \($0).jpg" }
        var identities: [JSONValue] = []
        var shas: [String] = []
        for (index, name) in names.enumerated() {
            let bytes = Data(repeating: UInt8(index + 1), count: 100 + index)
            #expect(FileManager.default.createFile(atPath: tree + "/" + name, contents: bytes))
            shas.append(SHA256.hexDigest(of: [UInt8](bytes)))
            var info = stat()
            #expect(stat(tree + "/" + name, &info) == 0)
            identities.append(
                JSONCoding.value(
                    of: SourceIdentity(
                        size: Int64(info.st_size),
                        modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                        inode: UInt64(info.st_ino), device: UInt64(info.st_dev),
                        changedNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))))
        }
        // The first three were copied before the checkpoint was saved.
        try FileManager.default.createDirectory(atPath: scratch.dst + "/day 1", withIntermediateDirectories: true)
        for name in names.prefix(3) {
            try FileManager.default.copyItem(atPath: tree + "/" + name, toPath: scratch.dst + "/" + name)
        }
        let finished: [JSONValue] = (0..<3).map { index in
            [
                "name": .string(names[index]), "path": .string(scratch.dst + "/" + names[index]),
                "bytes": .number(Double(100 + index)), "sha256": .string(shas[index]), "bytes_resent": 0,
            ]
        }
        let versionOne: JSONValue = [
            "version": 1, "file_index": 3, "offset": 0, "sources": .array(identities), "finished": .array(finished),
            "bytes_resent": 0, "file_bytes_resent": 0,
            "tree": [
                "files": .array(names.map { .string(tree + "/" + $0) }), "names": .array(names.map { .string($0) }),
                "skipped_count": 0, "skipped_by_reason": [:], "skipped": [], "failed_count": 0, "failed_by_code": [:],
                "failed": [], "failed_while_uploading": 0, "already_there": 0, "already_there_bytes": 0,
            ],
        ]
        let inode = { (name: String) in
            (try? FileManager.default.attributesOfItem(atPath: scratch.dst + "/" + name))?[.systemFileNumber] as? Int
        }
        let before = names.prefix(3).map(inode)
        let params = UploadJob.Params(files: [BytePath(tree)], to: "file://" + scratch.dst)
        let result = try await onLoop { @LoopActor in
            let host = RecordingHost()
            host.checkpoint = versionOne
            return try await UploadJob().run(params, in: host.context(attempt: 2))
        }
        // Version 1 goes on as version 1: its result lists every file, the first three as they were.
        #expect(result["files"]?.arrayValue?.compactMap { $0["sha256"]?.stringValue } == shas)
        #expect(result["tree"]?["uploaded"]?.intValue == 6)
        #expect(names.prefix(3).map(inode) == before, "a file named finished was copied again")
        for (index, name) in names.enumerated() {
            let stored = try Data(contentsOf: URL(fileURLWithPath: scratch.dst + "/" + name))
            #expect(SHA256.hexDigest(of: [UInt8](stored)) == shas[index])
        }
    }
}
