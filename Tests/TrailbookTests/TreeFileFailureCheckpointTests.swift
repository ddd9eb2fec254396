import Testing

@testable import TrailbookEngine
@testable import UploadJob

/// The checkpoint of a folder upload whose files fail alone (`UploadCheckpoint.failFile`): it stays one a resume
/// accepts, and `fileIndex` passes files that failed or landed out of order.
struct TreeFileFailureCheckpointTests {
    static func checkpoint(files: Int) -> UploadCheckpoint {
        let sources = (0..<files).map {
            SourceIdentity(size: 10, modifiedNanoseconds: 1, inode: UInt64($0), device: 3)
        }
        var checkpoint = UploadCheckpoint(sources: sources)
        var tree = UploadTreePlan()
        tree.files = (0..<files).map { BytePath("/trip/f\($0)") }
        tree.names = (0..<files).map { BytePath("f\($0)") }
        checkpoint.tree = tree
        return checkpoint
    }

    static func landed(_ index: Int) -> UploadedFile {
        UploadedFile(name: BytePath("f\(index)"), path: BytePath("s3://b/f\(index)"), bytes: 10, sha256: "x", bytesResent: 0)
    }

    @Test func aCheckpointWithAFileFailedAloneIsAcceptedOnResume() throws {
        var checkpoint = Self.checkpoint(files: 3)
        checkpoint.land(0, Self.landed(0))
        checkpoint.failFile(1, path: BytePath("/trip/f1"), error: JobError(code: "source_missing", message: "gone"))
        #expect(checkpoint.fileIndex == 2)
        #expect(checkpoint.tree?.failedWhileUploading == 1)
        try checkpoint.check(fileCount: 3)
    }

    @Test func filesFailedOrLandedAheadArePassedInOrder() throws {
        var checkpoint = Self.checkpoint(files: 4)
        // Files 2 and 1 end before file 0 (single PUTs sent together): 2 landed, 1 failed.
        checkpoint.land(2, Self.landed(2))
        checkpoint.failFile(1, path: BytePath("/trip/f1"), error: JobError(code: "source_changed", message: "edited"))
        #expect(checkpoint.fileIndex == 0)
        #expect(checkpoint.failedAhead == [1])
        try checkpoint.check(fileCount: 4)
        checkpoint.land(0, Self.landed(0))
        #expect(checkpoint.fileIndex == 3)
        #expect(checkpoint.failedAhead == nil && checkpoint.finishedAhead == nil)
        #expect(checkpoint.finished.map(\.name) == [BytePath("f0"), BytePath("f2")])
        try checkpoint.check(fileCount: 4)
    }
}
