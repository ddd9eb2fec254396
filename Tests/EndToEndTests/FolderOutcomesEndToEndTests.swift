import Foundation
import Testing
import TrailbookEngine

/// A folder upload to `file://` writes its files' outcomes to the store while it runs, at least every 1 000 landed
/// files (`UploadTreeEntries.notedLimit`), not only once a chunk's bytes (8 MiB) landed: each outcome waiting to
/// be written is held in memory, and a tree of small files would otherwise hold thousands.
@Suite(.serialized)
struct FolderOutcomesEndToEndTests {
    @Test func outcomesOfSmallFilesAreWrittenWhileTheFolderIsUploaded() throws {
        let work = TemporaryDirectory("tbj-outcomes")
        try FileManager.default.createDirectory(atPath: work.file("trip"), withIntermediateDirectories: true)
        // 2 500 files of 2 KiB: 5 MiB in all, less than one 8 MiB chunk.
        for number in 0..<2_500 {
            #expect(
                FileManager.default.createFile(
                    atPath: work.file(String(format: "trip/%04d.bin", number)),
                    contents: Data(repeating: UInt8(number % 251), count: 2 << 10)))
        }
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        // 512 KiB/s: about 10 s in all.
        let id = try daemon.submitUpload([work.file("trip"), "--to", "file://" + destination.path, "--max-rate", "512KiB"])
        try daemon.waitFor(id, timeout: 60, "1 500 files landed") {
            ($0["progress"]?["files_completed"]?.intValue ?? 0) >= 1_500
        }
        let listed = try FolderFileListEndToEndTests.files(daemon, [id, "--limit", "1"])
        let state = try daemon.show(id)["state"]?.stringValue
        #expect(state == "running", "the job ended before the check: it shows nothing")
        #expect((listed["counts"]?["done"]?.intValue ?? 0) >= 1_000, "\(listed["counts"] ?? .null)")
        try daemon.waitForState(id, "succeeded", timeout: 120)
        #expect(try FolderFileListEndToEndTests.files(daemon, [id, "--limit", "1"])["counts"] == ["done": 2_500])
    }
}
