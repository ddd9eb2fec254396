import Foundation
import Testing
import TrailbookEngine

/// `kill -9` amid a folder of small files uploaded to tus (tuspyserver): a file of one `PATCH` is recorded in the
/// checkpoint only now and then (`LandedFilesCadence`), so before the upload memory a resumed job sent the files
/// that had landed since the last save again, as new uploads, and left the first ones on the server, and an upload
/// created for the file under way stayed there unfinished. Now every file arrives once: the server holds exactly
/// the uploads the result names, except at most one empty upload per file in flight (4) per kill (created by a `POST`
/// whose answer the kill cut off: tus gives no way to find it).
@Suite(.serialized)
struct FolderTusCrashEndToEndTests {
    @Test func killsAmidSmallFilesLeaveNoFileSentTwice() throws {
        let work = TemporaryDirectory("tbj-tus-crash")
        let root = work.file("tree")
        var expected: [String: String] = [:]
        for index in 0..<400 {
            let name = "d\(index % 7)/f \(index).bin"
            try FileManager.default.createDirectory(
                atPath: root + "/d\(index % 7)", withIntermediateDirectories: true)
            expected[name] = try UploadEndToEndTests.randomFile(root + "/" + name, bytes: 512 + index)
        }
        let tus = try TusServers()
        let daemon = try DaemonHarness()
        let id = try daemon.submitUpload([root, "--to", tus.endpoint, "--chunk-size", "1MiB"])
        let kills = [120, 220, 320]
        for landed in kills {
            try daemon.waitFor(id, timeout: 180, "\(landed) files landed") {
                ($0["progress"]?["files_completed"]?.intValue ?? 0) >= Int64(landed)
            }
            try daemon.crash()
            try daemon.start()
        }
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 180)
        let named = try FolderTusSeveralFilesEndToEndTests.checkStored(done, expected, at: tus)
        let stored = try FileManager.default.contentsOfDirectory(atPath: tus.files.path)
            .filter { $0.hasSuffix(".info") }.map { String($0.dropLast(5)) }
        let orphans = stored.filter { !named.contains($0) }
        for orphan in orphans {
            let text = try Data(contentsOf: URL(fileURLWithPath: tus.storedPath(orphan) + ".info"))
            let info = try JSONCoding.decode(JSONValue.self, from: Array(text))
            #expect(info["offset"]?.intValue == 0, "orphan \(orphan) holds bytes: a file was sent twice")
        }
        // Up to 4 files are in flight at once (TusUploadRun.filesInFlight): a kill can cut off that many POSTs.
        #expect(orphans.count <= kills.count * 4)
        let created = try tus.stats()["requests"]?["POST"]?.intValue ?? 0
        #expect(created <= Int64(expected.count + kills.count * 4))
    }
}
