import Foundation
import Testing
import TrailbookLoop

@testable import TrailbookEngine
@testable import UploadJob

/// A folder upload's file list in the job store (`UploadTreeEntries`, issue 35): every file listed with what became
/// of it, and a walk cut short before its list was sealed taken again from scratch.
struct UploadTreeEntriesTests {
    @Test func everyFileIsListedWithItsOutcomeAndAWalkCutShortIsTakenAgain() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let tree = scratch.root + "/trip"
        let fm = FileManager.default
        try fm.createDirectory(atPath: tree + "/day 1", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: scratch.dst + "/day 1", withIntermediateDirectories: true)
        for (file, size) in [("day 1/a.jpg", 3), ("day 1/b.jpg", 5), ("c.txt", 7)] {
            #expect(fm.createFile(atPath: tree + "/" + file, contents: Data(repeating: UInt8(size), count: size)))
        }
        // Already at the destination with the same bytes: left out as already there.
        #expect(fm.createFile(atPath: scratch.dst + "/c.txt", contents: Data(repeating: 7, count: 7)))
        try fm.createSymbolicLink(atPath: tree + "/link.jpg", withDestinationPath: tree + "/c.txt")
        let params = UploadJob.Params(files: [BytePath(tree)], to: "file://" + scratch.dst)

        let entries = try await onLoop { @LoopActor in
            let host = RecordingHost()
            let job = host.context()
            // A walk a crash cut short: two entries written, never sealed, no checkpoint.
            try job.entries.append([
                JobEntry(position: 0, size: 1, item: ["path": "/gone"]),
                JobEntry(position: 1, size: 1, item: ["path": "/gone/too"]),
            ])
            _ = try await UploadJob().run(params, in: job)
            let counts = try job.entries.counts()
            #expect(counts.sealed && counts.total == 4)
            #expect(counts.entries == [.done: 2, .alreadyThere: 1, .passedOver: 1])
            #expect(counts.sizes[.done] == 8 && counts.sizes[.alreadyThere] == 7)
            return try job.entries.page(after: -1, limit: 100)
        }
        #expect(entries.map(\.position) == [0, 1, 2, 3])
        // The files to upload in upload order, then what is not uploaded in the order met (the walk, then the
        // destination check).
        #expect(entries.map { $0.item["name"]?.stringValue } == ["day 1/a.jpg", "day 1/b.jpg", nil, "c.txt"])
        #expect(
            entries[0].outcome
                == .done(
                    detail: SHA256.hexDigest(of: [UInt8](repeating: 3, count: 3)), location: scratch.dst + "/day 1/a.jpg"))
        #expect(
            entries[1].outcome
                == .done(
                    detail: SHA256.hexDigest(of: [UInt8](repeating: 5, count: 5)), location: scratch.dst + "/day 1/b.jpg"))
        #expect(entries[3].outcome == .alreadyThere)
        #expect(entries[2].item["path"]?.stringValue == tree + "/link.jpg")
        guard case .passedOver(let reason, _) = entries[2].outcome else {
            Issue.record("the link is \(entries[2].outcome)")
            return
        }
        #expect(reason == "symlink")
    }
}
