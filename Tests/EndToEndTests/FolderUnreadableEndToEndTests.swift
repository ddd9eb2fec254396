import Foundation
import Testing
import TrailbookEngine

/// A folder with a file and a folder the daemon may not read (issue 35), to a directory, tuspyserver and moto: the
/// file fails alone with `source_unreadable`, the folder is passed over as `unreadable_directory`, every other file
/// arrives with its bytes, nothing of the unreadable file is left at the destination, and the job ends `failed`
/// with `some_files_failed`, saying so in JSON and in plain `show`.
///
/// The tests run as root, whom file modes do not stop: the daemon is started through `setpriv` without
/// `CAP_DAC_OVERRIDE` and `CAP_DAC_READ_SEARCH`, so it meets modes as any other user does.
@Suite(.serialized)
struct FolderUnreadableEndToEndTests {
    /// `setpriv` taking the capabilities that ignore file modes away from the daemon (root only; another user meets
    /// the modes anyway).
    static var withoutOverride: [String] {
        getuid() == 0 ? ["/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] : []
    }

    /// `trip/a.jpg`, `trip/locked.jpg` (mode 000), `trip/closed/` (mode 000, holding `inside.jpg`) and
    /// `trip/open/b.jpg`; returns the folder and the SHA-256 of the two files that must arrive.
    static func trip(_ work: TemporaryDirectory) throws -> (root: String, expected: [String: String]) {
        let fm = FileManager.default
        try fm.createDirectory(atPath: work.file("trip/open"), withIntermediateDirectories: true)
        try fm.createDirectory(atPath: work.file("trip/closed"), withIntermediateDirectories: true)
        let a = try UploadEndToEndTests.randomFile(work.file("trip/a.jpg"), bytes: 10_000)
        let b = try UploadEndToEndTests.randomFile(work.file("trip/open/b.jpg"), bytes: 3_000)
        _ = try UploadEndToEndTests.randomFile(work.file("trip/locked.jpg"), bytes: 2_000)
        _ = try UploadEndToEndTests.randomFile(work.file("trip/closed/inside.jpg"), bytes: 1_000)
        #expect(chmod(work.file("trip/locked.jpg"), 0) == 0)
        #expect(chmod(work.file("trip/closed"), 0) == 0)
        return (work.file("trip"), ["a.jpg": a, "open/b.jpg": b])
    }

    /// What every destination's ending says: the job's error with the counts and the file named, and its file
    /// list (`files`, `show --files`) with the file failed by its code and the folder passed over with its reason.
    static func checkEnding(_ daemon: DaemonHarness, _ id: String, _ root: String) throws -> JSONValue {
        let done = try daemon.waitForState(id, "failed", timeout: 120)
        #expect(done["error"]?["code"]?.stringValue == "some_files_failed", "\(done["error"] ?? .null)")
        let message = done["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("1 of 3 files failed (1 source_unreadable)"), "\(message)")
        #expect(message.contains(root + "/locked.jpg"), "\(message)")
        let list = try daemon.request(["op": "files", "job": .string(id)])
        #expect(list["counts"] == ["done": 2, "failed": 1, "passed_over": 1], "\(list["counts"] ?? .null)")
        let entries = (list["files"]?.arrayValue ?? []).map {
            [$0["state"]?.stringValue ?? "", $0["item"]?["path"]?.stringValue ?? "", $0["code"]?.stringValue ?? ""]
        }
        #expect(entries.contains(["failed", root + "/locked.jpg", "source_unreadable"]), "\(entries)")
        #expect(entries.contains(["passed_over", root + "/closed", "unreadable_directory"]), "\(entries)")
        let shown = try daemon.cli(["show", id, "--files"])
        #expect(shown.stdout.contains("failed") && shown.stdout.contains("locked.jpg\tsource_unreadable: "), "\(shown.stdout)")
        #expect(shown.stdout.contains(root + "/closed\tunreadable_directory: "), "\(shown.stdout)")
        return try daemon.waitForFolder(id, "failed")
    }

    @Test func toADirectoryTheUnreadableFileFailsAloneAndLeavesNothing() throws {
        let work = TemporaryDirectory("tbj-unreadable")
        let (root, expected) = try Self.trip(work)
        let daemon = try DaemonHarness(launcher: Self.withoutOverride)
        let destination = TemporaryDirectory("tbj-dest")
        let id = try daemon.submitUpload([root, "--to", "file://" + destination.path])
        _ = try Self.checkEnding(daemon, id, root)
        for (name, sha) in expected {
            #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(destination.file(name))) == sha, "\(name)")
        }
        // The failed ending's clean-up leaves what landed and nothing else (no copy or .part of locked.jpg).
        try daemon.waitFor(id, timeout: 30, "only the landed files at the destination") { _ in
            (try? FileManager.default.subpathsOfDirectory(atPath: destination.path).sorted())
                == ["a.jpg", "open", "open/b.jpg"]
        }
    }

    @Test func toTusTheUnreadableFileFailsAloneAndNoUploadIsCreatedForIt() throws {
        let work = TemporaryDirectory("tbj-unreadable")
        let (root, expected) = try Self.trip(work)
        let tus = try TusServers()
        let daemon = try DaemonHarness(launcher: Self.withoutOverride)
        let id = try daemon.submitUpload([root, "--to", tus.endpoint])
        let done = try Self.checkEnding(daemon, id, root)
        for file in done["result"]?["files"]?.arrayValue ?? [] {
            let name = file["name"]?.stringValue ?? ""
            let url = try #require(file["url"]?.stringValue)
            #expect(try FolderUploadEndToEndTests.sha256(of: BytePath(tus.storedPath(url))) == expected[name], "\(name)")
        }
        let creations = try tus.requests().filter { $0["method"]?.stringValue == "POST" }.count
        #expect(creations == 2, "one upload created a file that was read, none for the unreadable one")
    }

    @Test func toS3TheUnreadableFileFailsAloneAndNoObjectIsMadeForIt() throws {
        let work = TemporaryDirectory("tbj-unreadable")
        let (root, expected) = try Self.trip(work)
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment(), launcher: Self.withoutOverride)
        let id = try daemon.submitUpload([root, "--to", "s3://photos/trip/"])
        _ = try Self.checkEnding(daemon, id, root)
        for (name, sha) in expected {
            #expect(try server.object("trip/" + name)?.sha256 == sha, "\(name)")
        }
        #expect(try server.object("trip/locked.jpg") == nil)
        #expect(try server.uploads() == 0)
    }
}
