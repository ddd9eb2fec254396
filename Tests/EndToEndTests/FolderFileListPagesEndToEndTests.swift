import Foundation
import Testing
import TrailbookEngine

/// A folder upload whose file list is read a page at a time (`UploadFileList`, issue 35), through the real daemon:
/// with pages of 64 entries (`TRAILBOOK_JOBS_TEST_FILE_LIST_PAGE`), a `kill -9` after the first pages and the
/// resume that reads the list again from the store end with every file landed once, with its bytes, its SHA-256
/// recorded, and none copied twice.
@Suite(.serialized)
struct FolderFileListPagesEndToEndTests {
    @Test func aKillAfterSomePagesResumesAcrossPageBoundaries() throws {
        let work = TemporaryDirectory("tbj-pages")
        var sums: [String: String] = [:]
        for number in 0..<300 {
            let folder = String(format: "trip/d%d", number / 50)
            if number % 50 == 0 {
                try FileManager.default.createDirectory(atPath: work.file(folder), withIntermediateDirectories: true)
            }
            let name = String(format: "d%d/%03d.bin", number / 50, number)
            sums[name] = try UploadEndToEndTests.randomFile(work.file("trip/" + name), bytes: 4 << 10)
        }
        let daemon = try DaemonHarness(environment: ["TRAILBOOK_JOBS_TEST_FILE_LIST_PAGE": "64"])
        let destination = TemporaryDirectory("tbj-dest")
        // 256 KiB/s: 300 × 4 KiB take about 5 s, so the kill comes past the first pages with pages to go.
        let id = try daemon.submitUpload([
            work.file("trip"), "--to", "file://" + destination.path, "--max-rate", "256KiB", "--chunk-size", "4KiB",
        ])
        try daemon.waitFor(id, timeout: 60, "two pages of files done") {
            ($0["progress"]?["files_completed"]?.intValue ?? 0) >= 140
        }
        try daemon.crash()
        let inodes = Dictionary(
            uniqueKeysWithValues: sums.keys.compactMap { name in
                (try? FileManager.default.attributesOfItem(atPath: destination.file(name)))?[.systemFileNumber]
                    .map { (name, $0 as? Int ?? -1) }
            })
        #expect(inodes.count >= 100, "\(inodes.count) files landed before the kill")
        try daemon.start()
        try daemon.waitForState(id, "succeeded", timeout: 120)
        let listed = try FolderFileListEndToEndTests.files(daemon, [id, "--limit", "1000"])
        #expect(listed["counts"] == ["done": 300])
        #expect(listed["files"]?.arrayValue?.map { $0["position"]?.intValue ?? -1 } == (0..<300).map { Int64($0) })
        for file in listed["files"]?.arrayValue ?? [] {
            let name = file["item"]?["name"]?.stringValue ?? ""
            #expect(file["code"]?.stringValue == sums[name], "\(name)")
            #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(destination.file(name))) == sums[name], "\(name)")
        }
        // A file that landed before the kill and that its checkpoint recorded is not copied again (a rename into
        // place would give it a new inode); at most the files after the last save are.
        let kept = inodes.filter { name, inode in
            ((try? FileManager.default.attributesOfItem(atPath: destination.file(name)))?[.systemFileNumber] as? Int) == inode
        }
        #expect(kept.count >= 64, "\(kept.count) of \(inodes.count) files kept their inode")
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: destination.path).filter { $0.hasSuffix(".part") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}
