import Foundation
import Testing
import TrailbookEngine

/// A folder upload's file list through the real daemon (issue 35): `show ID --files` pages through every file with
/// what became of it (JSON and text, by position and by state), and after a `kill -9` mid-upload the resumed job
/// ends with every file recorded done.
@Suite(.serialized)
struct FolderFileListEndToEndTests {
    static func files(_ daemon: DaemonHarness, _ arguments: [String]) throws -> JSONValue {
        let result = try daemon.cli(["show"] + arguments + ["--files", "--json"])
        guard result.status == 0 else { throw HarnessError("show --files failed (\(result.status)): \(result.stderr)") }
        return try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
    }

    @Test func showFilesPagesThroughEveryFileByPositionAndState() throws {
        let work = TemporaryDirectory("tbj-list")
        try FileManager.default.createDirectory(atPath: work.file("trip/day 1"), withIntermediateDirectories: true)
        for number in 0..<250 {
            #expect(FileManager.default.createFile(atPath: work.file(String(format: "trip/day 1/%03d.jpg", number)), contents: Data([UInt8(number % 256)])))
        }
        try FileManager.default.createSymbolicLink(atPath: work.file("trip/link.jpg"), withDestinationPath: work.file("trip/day 1/000.jpg"))
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        let id = try daemon.submitUpload([work.file("trip"), "--to", "file://" + destination.path])
        try daemon.waitForState(id, "succeeded", timeout: 60)

        let first = try Self.files(daemon, [id, "--limit", "100"])
        #expect(first["files"]?.arrayValue?.count == 100)
        #expect(first["next_after"]?.intValue == 99)
        #expect(first["counts"]?["done"]?.intValue == 250 && first["counts"]?["passed_over"]?.intValue == 1)
        #expect(first["sealed"]?.boolValue == true)
        #expect(first["files"]?.arrayValue?.first?["item"]?["name"]?.stringValue == "day 1/000.jpg")
        #expect(first["files"]?.arrayValue?.first?["code"]?.stringValue?.count == 64, "the SHA-256 of what was written")
        let last = try Self.files(daemon, [id, "--limit", "100", "--after", "199"])
        #expect(last["files"]?.arrayValue?.map { $0["position"]?.intValue ?? -1 } == (200...250).map { Int64($0) })
        #expect(last["next_after"] == .null)
        let skipped = try Self.files(daemon, [id, "--state", "passed_over"])
        #expect(skipped["files"]?.arrayValue?.count == 1)
        #expect(skipped["files"]?.arrayValue?.first?["code"]?.stringValue == "symlink")
        #expect(skipped["files"]?.arrayValue?.first?["item"]?["path"]?.stringValue == work.file("trip/link.jpg"))

        // Text: the counts, one line a file, and how to get the next page.
        let text = try daemon.cli(["show", id, "--files", "--limit", "2"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("251 files, 250 B: 250 done, 1 passed_over"), "\(text.stdout)")
        #expect(text.stdout.contains("0\tdone\t1 B\tday 1/000.jpg"), "\(text.stdout)")
        #expect(text.stdout.contains("more: trailbook-jobs show \(id) --files --after 1"), "\(text.stdout)")
        // Paging options without --files, and a bad state, are clear errors.
        let bare = try daemon.cli(["show", id, "--limit", "2"])
        #expect(bare.status != 0 && bare.stderr.contains("--files"), "\(bare.stderr)")
        let wrong = try daemon.cli(["show", id, "--files", "--state", "gone"])
        #expect(wrong.status != 0 && wrong.stderr.contains("pending, done, already_there, failed, passed_over"), "\(wrong.stderr)")
    }

    @Test func aKillMidUploadResumesAndEveryFileEndsRecordedDone() throws {
        let work = TemporaryDirectory("tbj-list-crash")
        try FileManager.default.createDirectory(atPath: work.file("trip"), withIntermediateDirectories: true)
        var sums: [String: String] = [:]
        for number in 0..<40 {
            let name = String(format: "%02d.bin", number)
            sums[name] = try UploadEndToEndTests.randomFile(work.file("trip/" + name), bytes: 8 << 10)
        }
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        // 64 KiB/s: 40 × 8 KiB take 5 s, so the kill comes with files done and files to go.
        let id = try daemon.submitUpload([
            work.file("trip"), "--to", "file://" + destination.path, "--max-rate", "64KiB", "--chunk-size", "8KiB",
        ])
        try daemon.waitFor(id, timeout: 30, "some files done") { ($0["progress"]?["files_completed"]?.intValue ?? 0) >= 5 }
        let before = try Self.files(daemon, [id, "--state", "done", "--limit", "1000"])
        #expect((before["files"]?.arrayValue?.count ?? 0) >= 5)
        try daemon.crash()
        try daemon.start()
        try daemon.waitForState(id, "succeeded", timeout: 60)
        let after = try Self.files(daemon, [id, "--limit", "1000"])
        #expect(after["counts"] == ["done": 40])
        for file in after["files"]?.arrayValue ?? [] {
            let name = file["item"]?["name"]?.stringValue ?? ""
            #expect(file["code"]?.stringValue == sums[name], "\(name)")
            #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(destination.file(name))) == sums[name])
        }
    }
}
