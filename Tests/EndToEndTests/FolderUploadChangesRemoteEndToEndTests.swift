import Foundation
import Testing
import TrailbookEngine

/// A folder upload to tus (tuspyserver) or S3 (moto) whose files change while it runs, as
/// `FolderUploadChangesEndToEndTests` checks for a directory: a file removed before its turn is listed as
/// `source_missing`, a file changed during its upload fails with `source_changed` and its unfinished upload (tus
/// upload, multipart upload) is removed from the server; every other file is uploaded, and the job ends `failed`
/// with `some_files_failed` and the counts.
@Suite(.serialized)
struct FolderUploadChangesRemoteEndToEndTests {
    /// The trip: upload order is by name, the slow file first, then the one removed before its turn, then the rest.
    struct Trip {
        let work = TemporaryDirectory("tbj-changes")
        let kept: String
        let nested: String

        init() throws {
            try FileManager.default.createDirectory(atPath: work.file("trip/sub"), withIntermediateDirectories: true)
            _ = try UploadEndToEndTests.randomFile(work.file("trip/1-edited.bin"), bytes: 1 << 20)
            _ = try UploadEndToEndTests.randomFile(work.file("trip/2-removed.bin"), bytes: 1000)
            kept = try UploadEndToEndTests.randomFile(work.file("trip/3-kept.bin"), bytes: 3000)
            nested = try UploadEndToEndTests.randomFile(work.file("trip/sub/4-nested.bin"), bytes: 10)
        }

        /// Once the first file is under way, removes the second and appends to the first; waits for the ending.
        func change(while id: String, on daemon: DaemonHarness) throws -> JSONValue {
            try daemon.waitFor(id, timeout: 30, "the first file under way") {
                ($0["progress"]?["completed"]?.intValue ?? 0) > 64 << 10
            }
            try FileManager.default.removeItem(atPath: work.file("trip/2-removed.bin"))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("trip/1-edited.bin")))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("edited".utf8))
            try handle.close()
            let done = try daemon.waitForState(id, "failed", timeout: 90)
            #expect(done["error"]?["code"]?.stringValue == "some_files_failed")
            let message = done["error"]?["message"]?.stringValue ?? ""
            #expect(message.contains("2 of 4 files failed (1 source_changed, 1 source_missing)"), "\(message)")
            #expect(message.contains("the other 2 were uploaded"), "\(message)")
            #expect(message.contains(work.file("trip/1-edited.bin")) && message.contains(work.file("trip/2-removed.bin")))
            #expect(done["progress"]?["files_completed"]?.intValue == 2)
            return done
        }
    }

    @Test func toTusAChangedFileFailsAloneAndItsUploadIsDeleted() throws {
        let trip = try Trip()
        let tus = try TusServers()
        let daemon = try DaemonHarness()
        let id = try daemon.submitUpload([
            trip.work.file("trip"), "--to", tus.endpoint, "--max-rate", "64KiB", "--chunk-size", "64KiB",
        ])
        _ = try trip.change(while: id, on: daemon)
        // What the server holds, by each upload's `filename` metadata: the two files that went, whole; the edited
        // file's upload was created, then deleted when it failed.
        var stored: [String: String] = [:]
        for info in try FileManager.default.contentsOfDirectory(atPath: tus.files.path) where info.hasSuffix(".info") {
            let text = try String(contentsOfFile: tus.files.file(info), encoding: .utf8)
            let value = try JSONCoding.decode(JSONValue.self, from: Array(text.utf8))
            stored[value["metadata"]?["filename"]?.stringValue ?? ""] = tus.files.file(String(info.dropLast(5)))
        }
        #expect(Set(stored.keys) == ["3-kept.bin", "sub/4-nested.bin"])
        #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(stored["3-kept.bin"] ?? "")) == trip.kept)
        #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(stored["sub/4-nested.bin"] ?? "")) == trip.nested)
        let methods = try tus.methods()
        #expect(methods.filter { $0 == "POST" }.count == 3)
        #expect(methods.filter { $0 == "DELETE" }.count == 1)
    }

    @Test func toS3AChangedFileFailsAloneAndItsMultipartUploadIsAborted() throws {
        let trip = try Trip()
        let server = try S3Server(minPartSize: 4096)
        let daemon = try DaemonHarness(environment: server.environment())
        // 1 MiB in 64 KiB parts: a multipart upload, still under way when the file is edited.
        let id = try daemon.submitUpload([
            trip.work.file("trip"), "--to", "s3://photos/trip/", "--max-rate", "64KiB", "--chunk-size", "64KiB",
            "--min-part-size", "64KiB",
        ])
        _ = try trip.change(while: id, on: daemon)
        #expect(try server.object("trip/3-kept.bin")?.sha256 == trip.kept)
        #expect(try server.object("trip/sub/4-nested.bin")?.sha256 == trip.nested)
        #expect(try server.object("trip/1-edited.bin") == nil)
        #expect(try server.object("trip/2-removed.bin") == nil)
        // No multipart upload is left behind.
        #expect(try server.uploads() == 0)
        #expect(try server.requests().contains { $0.action == "AbortMultipartUpload" })
    }
}
