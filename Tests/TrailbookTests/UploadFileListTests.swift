import Foundation
import Testing
import TrailbookLoop

@testable import TrailbookEngine
@testable import UploadJob

/// A folder upload's files read from the job's file list a page at a time (`UploadFileList`, issue 35): every file
/// comes back as listed across page boundaries, in any order asked, with a few pages held; a list that does not
/// hold what the checkpoint counts is `bad_checkpoint`; a version-2 checkpoint resumes mid-page with files landed
/// ahead on a later page.
@Suite(.serialized)
struct UploadFileListTests {
    /// File `index` as the tests list it.
    static func file(_ index: Int) -> UploadFileList.File {
        let name = BytePath(String(format: "d%02d/f%05d.jpg", index / 100, index))
        return UploadFileList.File(
            path: BytePath.join("/trip", name), name: name,
            identity: SourceIdentity(
                size: Int64(100 + index), modifiedNanoseconds: 1_780_000_000_000_000_000 + Int64(index),
                inode: 5_000 + UInt64(index), device: 2049, changedNanoseconds: 1_780_000_000_000_000_001))
    }

    /// Writes `count` files to `job`'s list, as `UploadTreeEntries.write` does, then `failed` as failed alone.
    @LoopActor static func write(_ count: Int, failed: [Int] = [], in job: JobContext) throws {
        try job.entries.restart()
        let entries = (0..<count).map { index in
            let file = Self.file(index)
            return JobEntry(
                position: index, size: file.identity.size,
                item: UploadTreeEntries.item(path: file.path, name: file.name, identity: file.identity))
        }
        for start in stride(from: 0, to: count, by: 700) {
            try job.entries.append(Array(entries[start..<min(count, start + 700)]))
        }
        try job.entries.seal(count: count)
        try job.entries.record(failed.map { ($0, .failed(code: "source_missing", message: "removed")) })
    }

    @Test func everyFileComesBackAcrossPageBoundariesWithAFewPagesHeld() async throws {
        try await onLoop { @LoopActor in
            UploadFileList.pageSize = 100
            defer { UploadFileList.pageSize = 1_000 }
            let host = RecordingHost()
            let job = host.context()
            try Self.write(350, failed: [5, 100, 299, 300], in: job)
            let files = UploadFileList(entries: job.entries, count: 350)
            // Both sides of each boundary, the last file, and back to the first: as listed.
            for index in [0, 99, 100, 199, 200, 349, 0, 250, 101, 99] {
                #expect(try files.file(index) == Self.file(index))
            }
            #expect(files.pagesHeld <= UploadFileList.keptPages)
            for index in files.indices { #expect(try files.name(index) == Self.file(index).name) }
            #expect(files.pagesHeld <= UploadFileList.keptPages)
            #expect(try files.sizes() == (0..<350).map { Int64(100 + $0) })
            // Failed alone before a cursor mid-page, across pages.
            #expect(try files.failed(before: 300) == [5, 100, 299])
            #expect(try files.failed(before: 101) == [5, 100])
            var pages: [[BytePath]] = []
            try files.forEachNamePage { pages.append($0) }
            #expect(pages.map(\.count) == [100, 100, 100, 50])
            #expect(throws: JobError.self) { try files.file(350) }
        }
    }

    @Test func aListShorterThanTheCheckpointCountsIsABadCheckpoint() async throws {
        try await onLoop { @LoopActor in
            UploadFileList.pageSize = 100
            defer { UploadFileList.pageSize = 1_000 }
            let host = RecordingHost()
            let job = host.context()
            try Self.write(150, in: job)
            let files = UploadFileList(entries: job.entries, count: 160)
            #expect(try files.file(99) == Self.file(99))
            let error = #expect(throws: JobError.self) { try files.file(120) }
            #expect(error?.code == "bad_checkpoint" && error?.retryable == false)
        }
    }

    /// A version-2 checkpoint stopped mid-page, with a file landed ahead on the next page and one failed alone on
    /// the page before: it checks against the list, and its landed files (for progress) skip the failed one.
    @Test func aCheckpointResumesMidPageWithFilesLandedAheadOnALaterPage() async throws {
        try await onLoop { @LoopActor in
            UploadFileList.pageSize = 100
            defer { UploadFileList.pageSize = 1_000 }
            let host = RecordingHost()
            let job = host.context()
            try Self.write(250, failed: [42], in: job)
            var tree = UploadTreePlan()
            tree.files = (0..<250).map { Self.file($0).path }
            tree.names = (0..<250).map { Self.file($0).name }
            var checkpoint = UploadCheckpoint.listing(tree)
            for index in 0..<150 where index != 42 {
                let file = Self.file(index)
                checkpoint.land(
                    index,
                    UploadedFile(name: file.name, path: "/dst", bytes: file.identity.size, sha256: "", bytesResent: 0))
                if index == 41 {
                    checkpoint.failFile(42, path: Self.file(42).path, name: Self.file(42).name, error: JobError(code: "source_missing", message: "removed"))
                }
            }
            let ahead = Self.file(230)
            checkpoint.land(
                230, UploadedFile(name: ahead.name, path: "/dst", bytes: ahead.identity.size, sha256: "", bytesResent: 0))
            checkpoint.offset = Self.file(150).identity.size - 1
            // Saved and loaded as the store keeps it: the files stay out of it.
            let saved = try JSONCoding.decode(UploadCheckpoint.self, from: JSONCoding.encode(checkpoint))
            #expect(saved.sources.isEmpty && saved.tree?.files.isEmpty == true && saved.fileIndex == 150)
            let files = try #require(saved.files(in: job))
            try saved.check(files: files)
            #expect(saved.finishedAhead?.map(\.index) == [230])
            #expect(try files.identity(230) == ahead.identity)
            let landed = try saved.landedBefore(sizes: try files.sizes(), files: files)
            #expect(landed.count == 149 && !landed.contains { $0.index == 42 })
            #expect(landed.first { $0.index == 149 }?.bytes == 249)
            // An offset past the file in progress (read from its page) does not fit.
            var wrong = saved
            wrong.offset = Self.file(150).identity.size + 1
            #expect(throws: JobError.self) { try wrong.check(files: files) }
        }
    }

    /// A version-2 checkpoint as the code before `UploadFileList` saved it (its tree's lists cut, every file in
    /// the job's file list) decodes and resumes with the same cursor and counts.
    @Test func aVersionTwoCheckpointSavedBeforeStillLoads() async throws {
        let json = """
            {"version":2,"file_index":3,"offset":7,"sources":[],"finished":[],"bytes_resent":0,"file_bytes_resent":0,\
            "tree":{"files":[],"names":[],"skipped_count":1,"skipped_by_reason":{"symlink":1},\
            "skipped":[{"path":"/trip/l","reason":"symlink","message":"a symbolic link"}],"failed_count":1,\
            "failed_by_code":{"source_missing":1},"failed":[{"path":"/trip/d00/f00001.jpg","name":"d00/f00001.jpg",\
            "reason":"source_missing","message":"removed"}],"failed_while_uploading":1,"already_there":0,\
            "already_there_bytes":0},"failed_ahead":[],"finished_ahead":[{"index":5,"file":{"name":"d00/f00005.jpg",\
            "path":"/dst/d00/f00005.jpg","bytes":105,"sha256":"x","bytes_resent":0}}],"file_count":6,\
            "finished_count":2,"finished_bytes":202}
            """
        let saved = try JSONCoding.decode(UploadCheckpoint.self, from: Array(json.utf8))
        #expect(saved.fileCount == 6 && saved.finishedCount == 2 && saved.tree?.failedWhileUploading == 1)
        try await onLoop { @LoopActor in
            let host = RecordingHost()
            let job = host.context()
            try Self.write(6, failed: [1], in: job)
            let files = try #require(saved.files(in: job))
            try saved.check(files: files)
            #expect(try saved.landedBefore(sizes: try files.sizes(), files: files).map(\.index) == [0, 2])
        }
        // Written again, it is the same.
        #expect(try JSONCoding.decode(UploadCheckpoint.self, from: JSONCoding.encode(saved)) == saved)
    }
}
