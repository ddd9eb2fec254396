import Foundation
import Testing
import TrailbookEngine

/// A folder upload whose files change while it runs (issue 35): a file removed before its turn is listed as
/// `source_missing`, a file changed during its upload fails with `source_changed`; neither stops the tree: every
/// other file is uploaded, and the job ends `failed` with `some_files_failed` and the counts.
@Suite(.serialized)
struct FolderUploadChangesEndToEndTests {
    @Test func aFileRemovedOrChangedFailsAloneAndTheRestIsUploaded() throws {
        let work = TemporaryDirectory("tbj-changes")
        try FileManager.default.createDirectory(atPath: work.file("trip/sub"), withIntermediateDirectories: true)
        // Upload order is by name: the slow file first, then the one removed before its turn, then the rest.
        _ = try UploadEndToEndTests.randomFile(work.file("trip/1-edited.bin"), bytes: 1 << 20)
        _ = try UploadEndToEndTests.randomFile(work.file("trip/2-removed.bin"), bytes: 1000)
        let kept = try UploadEndToEndTests.randomFile(work.file("trip/3-kept.bin"), bytes: 3000)
        let nested = try UploadEndToEndTests.randomFile(work.file("trip/sub/4-nested.bin"), bytes: 10)
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        // 64 KiB/s: the first file takes 16 s, so it is still being copied when it is edited.
        let id = try daemon.submitUpload([
            work.file("trip"), "--to", "file://" + destination.path, "--max-rate", "64KiB", "--chunk-size", "64KiB",
        ])
        try daemon.waitFor(id, timeout: 30, "the first file under way") {
            $0["progress"]?["current"]?.stringValue == "1-edited.bin"
                && ($0["progress"]?["completed"]?.intValue ?? 0) > 0
        }
        try FileManager.default.removeItem(atPath: work.file("trip/2-removed.bin"))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("trip/1-edited.bin")))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("edited".utf8))
        try handle.close()

        let done = try daemon.waitForState(id, "failed", timeout: 60)
        #expect(done["error"]?["code"]?.stringValue == "some_files_failed")
        let message = done["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("2 of 4 files failed (1 source_changed, 1 source_missing)"), "\(message)")
        #expect(message.contains("the other 2 were uploaded"), "\(message)")
        #expect(message.contains(work.file("trip/1-edited.bin")) && message.contains(work.file("trip/2-removed.bin")))
        // The others arrived whole; the edited file left neither a copy nor a .part behind.
        #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(destination.file("3-kept.bin"))) == kept)
        #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(destination.file("sub/4-nested.bin"))) == nested)
        let listed = try FileManager.default.subpathsOfDirectory(atPath: destination.path).sorted()
        #expect(listed == ["3-kept.bin", "sub", "sub/4-nested.bin"])
        // Progress in two units: bytes and files, in JSON and in plain `show`.
        #expect(done["progress"]?["files_completed"]?.intValue == 2)
        #expect(done["progress"]?["files_total"]?.intValue == 4)
        let shown = try daemon.cli(["show", id])
        #expect(shown.stdout.contains(", 2 / 4 files"), "\(shown.stdout)")
    }

    /// The file in progress when the daemon was killed is gone when it comes back: the resumed job fails that file
    /// alone (`source_missing`), uploads the rest, and removes the file's `.part`.
    @Test func aFileRemovedWhileTheDaemonWasDownFailsAlone() throws {
        let work = TemporaryDirectory("tbj-gone")
        try FileManager.default.createDirectory(atPath: work.file("trip"), withIntermediateDirectories: true)
        _ = try UploadEndToEndTests.randomFile(work.file("trip/1-gone.bin"), bytes: 1 << 20)
        let kept = try UploadEndToEndTests.randomFile(work.file("trip/2-kept.bin"), bytes: 3000)
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        let id = try daemon.submitUpload([
            work.file("trip"), "--to", "file://" + destination.path, "--max-rate", "64KiB", "--chunk-size", "64KiB",
        ])
        try daemon.waitFor(id, timeout: 30, "a chunk of the first file checkpointed") {
            ($0["progress"]?["completed"]?.intValue ?? 0) > 128 << 10
        }
        try daemon.crash()
        try FileManager.default.removeItem(atPath: work.file("trip/1-gone.bin"))
        try daemon.start()
        let done = try daemon.waitForState(id, "failed", timeout: 60)
        #expect(done["error"]?["code"]?.stringValue == "some_files_failed")
        let message = done["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("1 of 2 files failed (1 source_missing)"), "\(message)")
        #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(destination.file("2-kept.bin"))) == kept)
        // The clean-up after the failed ending removed the gone file's .part.
        try daemon.waitFor(id, timeout: 30, "the clean-up") { _ in
            (try? FileManager.default.contentsOfDirectory(atPath: destination.path)) == ["2-kept.bin"]
        }
    }
}
