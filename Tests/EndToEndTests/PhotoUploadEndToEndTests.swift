import Foundation
import PhotoLibrary
import Testing
import TrailbookEngine
import TrailbookSQLite

/// Uploads of library photos (`submit upload --ids/--ids-file/--tag`), through the real daemon and CLI, to a
/// `file://` directory and to a real S3 API server (moto): resolution when the job runs, the photo's ID in the
/// result, the library's memory of where each photo went, skips with reasons, `--again`, and `kill -9`.
@Suite(.serialized)
struct PhotoUploadEndToEndTests {
    /// Where the photos go in a test.
    enum Place: String, CustomStringConvertible, CaseIterable {
        case directory, s3
        var description: String { rawValue }
    }

    /// A destination of `place`: a directory (made) or the `photos` bucket of a moto server, with what was stored.
    final class Destination {
        let place: Place
        let dir: TemporaryDirectory
        let server: S3Server?

        init(_ place: Place) throws {
            self.place = place
            dir = TemporaryDirectory("tbj-dest")
            server = place == .s3 ? try S3Server() : nil
        }

        var url: String { place == .s3 ? "s3://photos/picks/" : "file://" + dir.path }
        /// The identity the library remembers it by (`UploadJob.destinationIdentity`): for s3, with the endpoint
        /// the daemon takes from its `AWS_ENDPOINT_URL`.
        var identity: String {
            guard let server else { return "file://" + dir.path }
            return "s3://photos/picks at " + server.endpoint.lowercased()
        }
        var environment: [String: String] { server?.environment() ?? [:] }

        /// The SHA-256 of what is stored under `name`, or `nil` when nothing is (a `.part` is not stored).
        func stored(_ name: String) throws -> String? {
            if let server { return try server.object("picks/" + name)?.sha256 }
            let path = dir.file(name)
            guard FileManager.default.fileExists(atPath: path) else { return nil }
            return try UploadEndToEndTests.sha256(ofFile: path)
        }

        /// Something that changes when `name` is stored again: the file's inode, or the count of S3 writes.
        func generation(_ name: String) throws -> String {
            if let server {
                return String(try server.requests().filter { $0.action == "PutObject" || $0.action == "CompleteMultipartUpload" }.count)
            }
            var info = stat()
            return stat(dir.file(name), &info) == 0 ? String(info.st_ino) : "none"
        }
    }

    /// A library of `count` distinct JPEG photos, each padded to about `bytes` bytes, imported by `daemon`.
    struct Library {
        let folder: TemporaryDirectory
        /// File names in order (`p0.jpg`, …) and their stable IDs.
        let names: [String]
        let ids: [String: String]
        let sha256: [String: String]

        init(_ daemon: DaemonHarness, count: Int, bytes: Int = 64 << 10) throws {
            folder = TemporaryDirectory("tbj-library")
            let jpeg = try Fixtures.scene(64, 48).jpegData()
            var names: [String] = []
            var sha: [String: String] = [:]
            for n in 0..<count {
                let name = "p\(n).jpg"
                let padding = try UploadEndToEndTests.randomBytes(max(0, bytes - jpeg.count))
                PhotoTestSupport.write(jpeg + [UInt8](padding), folder.file(name))
                sha[name] = try UploadEndToEndTests.sha256(ofFile: folder.file(name))
                names.append(name)
            }
            let imported = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
            guard imported["state"]?.stringValue == "succeeded", imported["result"]?["inserted"]?.intValue == Int64(count) else {
                throw HarnessError("import failed: \(imported)")
            }
            var ids: [String: String] = [:]
            for photo in try daemon.cliJSON(["photos", "list", "--json"]).arrayValue ?? [] {
                if let path = photo["path"]?.stringValue, let id = photo["id"]?.stringValue {
                    ids[(path as NSString).lastPathComponent] = id
                }
            }
            self.names = names
            self.ids = ids
            sha256 = sha
        }

        func id(_ n: Int) -> String { ids[names[n]]! }
        func name(of id: String) -> String? { ids.first { $0.value == id }?.key }
    }

    /// The library's memory of uploads to `destination`: photo ID → job, read from the store's file.
    static func remembered(_ daemon: DaemonHarness, to destination: String) throws -> [String: String] {
        let database = try Database(path: daemon.statePath + "/photos.sqlite3")
        var rows: [String: String] = [:]
        for row in try database.query(
            "SELECT stable_id, job FROM photo_uploads WHERE destination = ?", [.text(destination)])
        {
            if let id = row.text(0), let job = row.text(1) {
                #expect(rows[id] == nil, "one row per photo and destination")
                rows[id] = job
            }
        }
        return rows
    }

    @Test(arguments: Place.allCases)
    func tagThenUploadByTagThenTheSameUploadSkipsEverythingAndAgainUploadsAgain(_ place: Place) throws {
        let destination = try Destination(place)
        let daemon = try DaemonHarness(environment: destination.environment)
        let library = try Library(daemon, count: 4)
        let picked = [library.id(0), library.id(1), library.id(2)]
        let tagged = try daemon.cliJSON(["submit", "tag", "--tag", "pick", "--ids", picked.joined(separator: ","), "--wait", "--json"])
        #expect(tagged["state"]?.stringValue == "succeeded")

        let first = try daemon.cliJSON(["submit", "upload", "--tag", "pick", "--to", destination.url, "--wait", "--json"])
        #expect(first["state"]?.stringValue == "succeeded", "\(first)")
        let firstID = try #require(first["id"]?.stringValue)
        let files = first["result"]?["files"]?.arrayValue ?? []
        #expect(Set(files.compactMap { $0["photo_id"]?.stringValue }) == Set(picked))
        for file in files {
            let name = try #require(library.name(of: file["photo_id"]?.stringValue ?? ""))
            #expect(file["sha256"]?.stringValue == library.sha256[name], "each file carries its own photo's ID")
            #expect(try destination.stored(name) == library.sha256[name])
        }
        #expect(try destination.stored("p3.jpg") == nil, "p3 has no pick tag")
        #expect(first["result"]?["photos"] == ["selected": 3, "uploaded": 3, "skipped": 0, "skipped_by_reason": [:]])
        #expect(try Self.remembered(daemon, to: destination.identity) == Dictionary(uniqueKeysWithValues: picked.map { ($0, firstID) }))
        let generation = try destination.generation("p0.jpg")

        // The same upload again: nothing is sent, every photo is reported skipped with its reason.
        let second = try daemon.cliJSON(["submit", "upload", "--tag", "pick", "--to", destination.url, "--wait", "--json"])
        #expect(second["state"]?.stringValue == "succeeded", "\(second)")
        #expect(second["result"]?["files"] == [])
        #expect(second["result"]?["bytes"] == 0)
        #expect(second["result"]?["photos"]?["skipped_by_reason"] == ["already_uploaded": 3])
        let skipped = second["result"]?["skipped"]?.arrayValue ?? []
        #expect(Set(skipped.compactMap { $0["photo_id"]?.stringValue }) == Set(picked))
        #expect(skipped.allSatisfy { $0["reason"] == "already_uploaded" && $0["job"] == .string(firstID) })
        #expect(try destination.generation("p0.jpg") == generation, "nothing was written again")
        let summary = try daemon.cli(["show", second["id"]?.stringValue ?? ""])
        #expect(summary.status == 0)

        // `--wait` in words says so too.
        let words = try daemon.cli(["submit", "upload", "--tag", "pick", "--to", destination.url, "--wait"])
        #expect(words.status == 0 && words.stdout.contains("0 photos uploaded, 3 skipped: 3 already_uploaded"), "\(words.stdout)")

        if place == .directory {
            // Spelled another way (a plain path with a trailing slash), it is the same destination.
            let respelled = try daemon.cliJSON(["submit", "upload", "--tag", "pick", "--to", destination.dir.path + "/", "--wait", "--json"])
            #expect(respelled["result"]?["photos"]?["skipped_by_reason"] == ["already_uploaded": 3], "\(respelled)")
        }

        // --again uploads them again, and the memory names the new job.
        let again = try daemon.cliJSON(["submit", "upload", "--tag", "pick", "--to", destination.url, "--again", "--wait", "--json"])
        #expect(again["state"]?.stringValue == "succeeded", "\(again)")
        let againID = try #require(again["id"]?.stringValue)
        #expect(Set((again["result"]?["files"]?.arrayValue ?? []).compactMap { $0["photo_id"]?.stringValue }) == Set(picked))
        #expect(try destination.generation("p0.jpg") != generation, "written again")
        #expect(try Self.remembered(daemon, to: destination.identity) == Dictionary(uniqueKeysWithValues: picked.map { ($0, againID) }))
        // `photos show` says where a photo went (one entry per destination, the latest job), p3 nowhere.
        let shown = try daemon.cliJSON(["photos", "show", picked[0], "--json"])
        let uploads = shown["uploads"]?.arrayValue ?? []
        #expect(uploads.count == 1, "\(shown)")
        #expect(uploads.first?["destination"]?.stringValue == destination.identity)
        #expect(uploads.first?["job"]?.stringValue == againID)
        #expect(uploads.first?["sha256"]?.stringValue == library.name(of: picked[0]).flatMap { library.sha256[$0] })
        #expect(uploads.first?["bytes"]?.intValue == shown["bytes"]?.intValue)
        #expect(uploads.first?["uploaded_at"]?.stringValue?.hasSuffix("Z") == true)
        #expect(try daemon.cliJSON(["photos", "show", library.id(3), "--json"])["uploads"] == [])
        let told = try daemon.cli(["photos", "show", picked[0]])
        #expect(told.stdout.contains("uploaded  ") && told.stdout.contains("(job \(againID.prefix(8)))"), "\(told.stdout)")

        // The memory holds no secret (the S3 key and secret are the daemon's, never stored).
        let dump = try Database(path: daemon.statePath + "/photos.sqlite3").query(
            "SELECT destination || job || CAST(location AS TEXT) FROM photo_uploads"
        ).compactMap { $0.text(0) }.joined()
        #expect(!dump.contains("test-secret") && !dump.contains("AKIDTEST"))
    }

    /// tus too: each photo gets its own upload on the server; the same upload again sends nothing.
    @Test func photosToATusServerAreRememberedByEndpoint() throws {
        let tus = try TusServers()
        let daemon = try DaemonHarness()
        let library = try Library(daemon, count: 2)
        _ = try daemon.cliJSON(["submit", "tag", "--tag", "trip:Lisbon", "--ids", library.id(0) + "," + library.id(1), "--wait", "--json"])
        let first = try daemon.cliJSON(["submit", "upload", "--tag", "trip:Lisbon", "--to", tus.endpoint, "--wait", "--json"])
        #expect(first["state"]?.stringValue == "succeeded", "\(first)")
        let files = first["result"]?["files"]?.arrayValue ?? []
        #expect(Set(files.compactMap { $0["photo_id"]?.stringValue }) == [library.id(0), library.id(1)])
        for file in files {
            let name = try #require(library.name(of: file["photo_id"]?.stringValue ?? ""))
            #expect(file["sha256"]?.stringValue == library.sha256[name])
            #expect(file["url"]?.stringValue?.hasPrefix(tus.endpoint) == true)
        }
        let stored = try FileManager.default.contentsOfDirectory(atPath: tus.files.path).count
        // The endpoint spelled with upper-case host letters and no trailing slash is the same destination.
        let respelled = tus.endpoint.replacingOccurrences(of: "http://127.0.0.1", with: "HTTP://127.0.0.1").dropLast()
        let second = try daemon.cliJSON(["submit", "upload", "--tag", "trip:Lisbon", "--to", String(respelled), "--wait", "--json"])
        #expect(second["result"]?["photos"]?["skipped_by_reason"] == ["already_uploaded": 2], "\(second)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tus.files.path).count == stored, "no new upload")
        let identity = "http://127.0.0.1:\(tus.proxy.port)/files"
        #expect(try Set(Self.remembered(daemon, to: identity).keys) == [library.id(0), library.id(1)])
    }

    @Test(arguments: Place.allCases)
    func aPhotoDeletedBetweenSubmitAndRunIsReportedNotFatal(_ place: Place) throws {
        let destination = try Destination(place)
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"], environment: destination.environment)
        let library = try Library(daemon, count: 3)
        let unknown = "0f6b2c1e-0000-5000-8000-0000000000ff"
        // One slot, held by a sleep job: the upload waits in the queue while a photo's file is deleted.
        let blocker = try daemon.submitSleep(units: 3_000, unitMilliseconds: 10)
        try daemon.waitForState(blocker, "running")
        let ids = [library.id(0), library.id(1), unknown, library.id(2)]
        // By --ids to the directory, by --ids-file (one ID a line, a comment) to S3.
        let idsFile = library.folder.file("picks.txt")
        try Data(("# picks\n" + ids.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: idsFile))
        let selection = place == .s3 ? ["--ids-file", idsFile] : ["--ids", ids.joined(separator: ",")]
        let upload = try daemon.submitUpload(selection + ["--to", destination.url])
        #expect(try daemon.show(upload)["state"]?.stringValue == "queued")
        try FileManager.default.removeItem(atPath: library.folder.file("p1.jpg"))
        _ = try daemon.cli(["cancel", blocker])
        let done = try daemon.waitForState(upload, "succeeded", timeout: 60)
        let result = done["result"] ?? .null
        #expect(result["files"]?.arrayValue?.compactMap { $0["photo_id"]?.stringValue } == [library.id(0), library.id(2)])
        #expect(try destination.stored("p0.jpg") == library.sha256["p0.jpg"])
        #expect(try destination.stored("p2.jpg") == library.sha256["p2.jpg"])
        #expect(try destination.stored("p1.jpg") == nil)
        #expect(result["photos"] == [
            "selected": 4, "uploaded": 2, "skipped": 2, "skipped_by_reason": ["file_missing": 1, "not_in_library": 1],
        ])
        let skipped = result["skipped"]?.arrayValue ?? []
        let missing = skipped.first { $0["reason"] == "file_missing" }
        #expect(missing?["photo_id"] == .string(library.id(1)))
        #expect(missing?["path"] == .string(library.folder.file("p1.jpg")))
        #expect(skipped.first { $0["reason"] == "not_in_library" }?["photo_id"] == .string(unknown))
        #expect(Set(try Self.remembered(daemon, to: destination.identity).keys) == [library.id(0), library.id(2)])
        // The job's log says what it skipped.
        let log = try daemon.cli(["show", upload]).stdout
        #expect(log.contains("succeeded"))
    }

    /// `kill -9` while the third of four photos is being sent: the memory names exactly the two files that landed;
    /// after the restart the job finishes and the memory names all four, once each.
    @Test(arguments: Place.allCases)
    func kill9MidJobRemembersExactlyTheFilesThatLanded(_ place: Place) throws {
        let destination = try Destination(place)
        let daemon = try DaemonHarness(environment: destination.environment)
        let size = 1 << 20
        let library = try Library(daemon, count: 4, bytes: size)
        let ids = (0..<4).map { library.id($0) }
        // One file at a time to S3 too (small files go several at once by default), so "the third file" is one.
        let upload = try daemon.submitUpload([
            "--ids", ids.joined(separator: ","), "--to", destination.url, "--max-rate", "2MiB", "--chunk-size", "128KiB",
        ] + (place == .s3 ? ["--parts-in-flight", "1"] : []))
        // Mid third file: the first two landed long ago, and the third is half way (written to its `.part`; for
        // S3 half sent in its one PUT, `in_flight`, which the server stores only once it is whole).
        let progress = try daemon.waitFor(upload, timeout: 30, "the third file half sent") {
            let progress = $0["progress"] ?? .null
            return (progress["completed"]?.intValue ?? 0) + (progress["in_flight"]?.intValue ?? 0) >= Int64(2 * size + size / 2)
        }["progress"]
        #expect((progress?["completed"]?.intValue ?? 0) < Int64(3 * size), "the third file is not done")
        try daemon.crash()
        let landed = try library.names.filter { try destination.stored($0) != nil }
        #expect(landed == ["p0.jpg", "p1.jpg"], "killed with two files landed")
        let remembered = try Self.remembered(daemon, to: destination.identity)
        #expect(Set(remembered.keys) == Set(landed.compactMap { library.ids[$0] }), "the memory is exactly what landed")
        #expect(remembered.values.allSatisfy { $0 == upload })

        try daemon.start()
        let done = try daemon.waitForState(upload, "succeeded", timeout: 60)
        #expect(done["result"]?["files"]?.arrayValue?.compactMap { $0["photo_id"]?.stringValue } == ids)
        for name in library.names { #expect(try destination.stored(name) == library.sha256[name]) }
        let after = try Self.remembered(daemon, to: destination.identity)
        #expect(after == Dictionary(uniqueKeysWithValues: ids.map { ($0, upload) }))
    }

    @Test func badSelectionsAreRefusedAtSubmit() throws {
        let daemon = try DaemonHarness()
        let dest = TemporaryDirectory("tbj-dest")
        let work = TemporaryDirectory()
        try Data("x".utf8).write(to: URL(fileURLWithPath: work.file("a.jpg")))
        func refused(_ arguments: [String]) throws -> (Int32, String) {
            let result = try daemon.cli(["submit", "upload"] + arguments + ["--to", dest.path])
            return (result.status, result.stderr)
        }
        var (status, message) = try refused([work.file("a.jpg"), "--tag", "pick"])
        #expect(status == 2 && message.contains("not both"), "\(message)")
        (status, message) = try refused(["--tag", "pick", "--ids", "0f6b2c1e-0000-5000-8000-0000000000ff"])
        #expect(status == 2 && message.contains("one of --ids, --ids-file, --tag"), "\(message)")
        (status, message) = try refused([])
        #expect(status == 2 && message.contains("(FILE…), or photos of the library"), "\(message)")
        (status, message) = try refused([work.file("a.jpg"), "--again"])
        #expect(status == 2 && message.contains("--again applies to photos"), "\(message)")
        (status, message) = try refused(["--tag", "pick", "--each"])
        #expect(status == 2 && message.contains("--each makes one job per FILE"), "\(message)")
        (status, message) = try refused(["--tag", "bad\u{1}tag"])
        #expect(status == 2 && message.contains("bad tag"), "\(message)")
        (status, message) = try refused(["--ids-file", work.file("missing.txt")])
        #expect(status == 2 && message.contains("[source_missing]"), "\(message)")
        (status, message) = try refused(["--ids", "0f6b"])
        #expect(status == 4 && message.contains("no_such_photo") || message.contains("no photo"), "\(message)")
        // Nothing was queued.
        #expect(try daemon.cliJSON(["list", "--json"]).arrayValue?.isEmpty == true)
    }
}
