import Foundation
import Testing

@testable import TrailbookEngine
import TrailbookLoop
@testable import TrailbookCLI
@testable import TrailbookClient
@testable import UploadJob

/// A photo library in memory behind the upload job's seam: photos by ID with paths, and the uploads it was told
/// to remember, in order.
@LoopActor
final class MemoryPhotoLibrary: UploadPhotoLibrary {
    /// Photos: stable ID → path, and the IDs a tag selects.
    var photos: [String: String] = [:]
    /// Photos whose paths are given as bytes (not UTF-8).
    var photosByBytes: [String: BytePath] = [:]
    var tagged: [String: [String]] = [:]
    var remembered: [RememberedUpload] = []
    var resolveCalls = 0

    nonisolated init() {}

    func check(_ selection: UploadPhotoSelection) throws(JobError) {
        for tag in selection.tags ?? [] where tag.contains("\u{1}") {
            throw JobError(code: "invalid_params", message: "bad tag")
        }
    }

    func resolve(_ selection: UploadPhotoSelection, in job: JobContext) async throws -> [ResolvedUploadPhoto] {
        resolveCalls += 1
        let ids = selection.ids ?? selection.tags.map { tags in tags.flatMap { tagged[$0] ?? [] } } ?? []
        return ids.map { id in
            (photosByBytes[id] ?? photos[id].map { BytePath($0) }).map { .found(id: id, path: $0) } ?? .notInLibrary(id: id)
        }
    }

    func uploads(of photoIDs: [String], to destination: String) throws(JobError) -> [String: RememberedUpload] {
        var found: [String: RememberedUpload] = [:]
        for upload in remembered where upload.destination == destination && photoIDs.contains(upload.photoID) {
            found[upload.photoID] = upload
        }
        return found
    }

    /// The library's root: none is set in memory unless a test gives one.
    var libraryRoot: BytePath?

    func root() throws(JobError) -> BytePath? { libraryRoot }

    func remember(_ uploads: [RememberedUpload]) throws(JobError) {
        // Latest wins, as in the store.
        for upload in uploads {
            remembered.removeAll { $0.photoID == upload.photoID && $0.destination == upload.destination }
            remembered.append(upload)
        }
    }
}

struct PhotoUploadTests {
    static let a = "0f6b2c1e-0000-5000-8000-00000000000a"
    static let b = "0f6b2c1e-0000-5000-8000-00000000000b"
    static let c = "0f6b2c1e-0000-5000-8000-00000000000c"
    static let d = "0f6b2c1e-0000-5000-8000-00000000000d"
    static let unknown = "0f6b2c1e-0000-5000-8000-0000000000ff"

    @Test(arguments: [
        ("/srv/photos", "file:///srv/photos"),
        ("file:///srv/photos/", "file:///srv/photos"),
        ("file://localhost/srv/photos", "file:///srv/photos"),
        ("file:///srv/ph%6Ftos//", "file:///srv/photos"),
        ("s3://bucket/prefix/", "s3://bucket/prefix"),
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("s3://bucket/a/b/", "s3://bucket/a/b"),
        ("s3://bucket/", "s3://bucket"),
        ("s3://bucket", "s3://bucket"),
        ("https://tus.example.com/files/", "https://tus.example.com/files"),
        ("HTTPS://Tus.Example.COM/files", "https://tus.example.com/files"),
        ("https://user:secret@tus.example.com:8443/files/?token=abc", "https://tus.example.com:8443/files"),
    ])
    func destinationIdentityIsOneSpellingAndNoSecret(url: String, identity: String) throws {
        let given = url.hasPrefix("/") ? "file://" + url : url
        #expect(try UploadJob.destinationIdentity(of: given) == identity)
    }

    @Test func anS3EndpointIsPartOfTheIdentity() throws {
        #expect(try UploadJob.destinationIdentity(of: "s3://b/p/", s3Endpoint: "HTTP://127.0.0.1:5055/")
            == "s3://b/p at http://127.0.0.1:5055")
        #expect(try UploadJob.destinationIdentity(of: "s3://b/p", s3Endpoint: "http://127.0.0.1:5055")
            == UploadJob.destinationIdentity(of: "s3://b/p/", s3Endpoint: "http://127.0.0.1:5055/"))
        #expect(throws: JobError.self) { try UploadJob.destinationIdentity(of: "ftp://x/") }
    }

    /// Without `--endpoint`, the endpoint the daemon takes from `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` names
    /// the server: a daemon pointed at another server is another place for the duplicate check and the library.
    @Test func theDaemonsEnvironmentEndpointIsPartOfAnS3DestinationsIdentity() {
        let plain = UploadJob.Params(files: ["/a.jpg"], to: "s3://photos/p/")
        let given = UploadJob.Params(files: ["/a.jpg"], to: "s3://photos/p/", s3: S3Options(endpoint: "http://given:1"))
        let both = ["AWS_ENDPOINT_URL_S3": "http://s3only:2", "AWS_ENDPOINT_URL": "http://any:3"]
        #expect(S3Options.identityEndpoint(plain.s3, environment: [:]) == nil)
        #expect(S3Options.identityEndpoint(plain.s3, environment: both) == "http://s3only:2")
        #expect(S3Options.identityEndpoint(plain.s3, environment: ["AWS_ENDPOINT_URL_S3": "", "AWS_ENDPOINT_URL": "http://any:3"])
            == "http://any:3", "empty is unset")
        #expect(S3Options.identityEndpoint(given.s3, environment: both) == "http://given:1")
        let atAny = UploadJob.duplicateKeys(plain, environment: ["AWS_ENDPOINT_URL": "http://any:3"])
        let atOther = UploadJob.duplicateKeys(plain, environment: ["AWS_ENDPOINT_URL": "http://other:4"])
        #expect(atAny.contains("upload of /a.jpg to s3://photos/p at http://any:3"), "\(atAny)")
        #expect(!atAny.isEmpty && Set(atAny).isDisjoint(with: atOther), "another server is another place: \(atAny) \(atOther)")
        #expect(UploadJob.duplicateKeys(plain, environment: [:]).contains("upload of /a.jpg to s3://photos/p"))
    }

    @Test func photoParamsNeedNoFilesAndRefuseMixing() throws {
        let decoded = try JSONCoding.decode(
            UploadJob.Params.self, from: Array(#"{"to": "file:///tmp/x", "photos": {"tags": ["pick"]}, "again": true}"#.utf8))
        #expect(decoded.files.isEmpty && decoded.photos == UploadPhotoSelection(tags: ["pick"]) && decoded.again)
        try decoded.checkLimits()
        let encoded = try JSONCoding.decode(JSONValue.self, from: JSONCoding.encode(decoded))
        #expect(encoded["photos"] == ["tags": ["pick"]] && encoded["again"] == true)
        // A file upload looks as before: no photos, no again.
        let files = try JSONCoding.decode(JSONValue.self, from: JSONCoding.encode(UploadJob.Params(files: ["/a"], to: "/x")))
        #expect(files["photos"] == nil && files["again"] == nil)
        #expect(throws: DecodingError.self, "an upload of files must name them") {
            try JSONCoding.decode(UploadJob.Params.self, from: Array(#"{"to": "file:///tmp/x"}"#.utf8))
        }
        func code(_ params: UploadJob.Params) -> String? {
            do throws(JobError) { try params.checkLimits(); return nil } catch { return error.code + ": " + error.message }
        }
        #expect(code(UploadJob.Params(files: ["/a"], to: "/x", photos: UploadPhotoSelection(ids: [Self.a])))?.contains("not both") == true)
        // `again` with files is checked in `validate`, which knows whether a source is a folder (issue 35).
        #expect(code(UploadJob.Params(files: ["/a"], to: "/x", again: true)) == nil)
        #expect(code(UploadJob.Params(files: [], to: "/x", photos: UploadPhotoSelection(ids: [Self.a], tags: ["x"])))?.contains("exactly one") == true)
        #expect(code(UploadJob.Params(files: [], to: "/x", photos: UploadPhotoSelection(tags: [])))?.contains("tags is empty") == true)
        #expect(code(UploadJob.Params(files: [], to: "/x", photos: UploadPhotoSelection(idsFile: "ids.txt")))?.contains("absolute") == true)
    }

    @Test func aDaemonWithoutALibraryRefusesPhotoUploads() async throws {
        let params = UploadJob.Params(files: [], to: "file:///tmp", photos: UploadPhotoSelection(ids: [Self.a]))
        let code = await errorCode { try await onLoop { @LoopActor in try await UploadJob().validate(params) } }
        #expect(code == "invalid_params")
    }

    /// Resolution when the job runs: what is uploaded, what is skipped and why, what is remembered.
    @Test func resolvesWhenItRunsSkipsWithReasonsAndRemembersWhatLanded() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("IMG_0001.jpg", count: 70_000, seed: 1)
        let b = try scratch.source("IMG_0002.jpg", count: 10, seed: 2)
        let c = try scratch.source("IMG_0003.jpg", count: 20, seed: 3)
        try FileManager.default.createDirectory(atPath: scratch.src + "/other", withIntermediateDirectories: true)
        let d = try scratch.source("other/IMG_0001.jpg", count: 30, seed: 4)  // same name as a
        let library = await MemoryPhotoLibrary()
        await onLoopSet(library) { library in
            library.photos = [Self.a: a.path, Self.b: b.path, Self.c: c.path, Self.d: d.path]
            // c went to this destination (spelled with a trailing slash) before.
            library.remembered = [
                RememberedUpload(
                    photoID: Self.c, destination: "file://" + scratch.dst, job: "earlier-job", uploadedAtMilliseconds: 1_764_000_000_000,
                    location: BytePath(scratch.dst + "/IMG_0003.jpg"), bytes: 20, sha256: "x")
            ]
        }
        try FileManager.default.removeItem(atPath: b.path)  // deleted after it was imported
        let params = UploadJob.Params(
            files: [], to: "file://" + scratch.dst + "/", chunkSize: 16_384,
            photos: UploadPhotoSelection(ids: [Self.a, Self.b, Self.c, Self.unknown, Self.d, Self.a]))
        let (result, remembered) = try await onLoop { @LoopActor () -> (JSONValue, [RememberedUpload]) in
            let job = UploadJob(photos: library)
            try await job.validate(params)
            let result = try await job.run(params, in: RecordingHost().context())
            return (result, library.remembered)
        }
        let files = try #require(result["files"]?.arrayValue)
        #expect(files.map { $0["photo_id"] } == [.string(Self.a)])
        #expect(files.first?["path"] == .string(scratch.dst + "/IMG_0001.jpg"))
        #expect(files.first?["sha256"] == .string(SHA256.hexDigest(of: a.bytes)))
        #expect(try scratch.bytes(scratch.dst + "/IMG_0001.jpg") == a.bytes)
        #expect(result["photos"] == [
            "selected": 5, "uploaded": 1, "skipped": 4,
            "skipped_by_reason": ["file_missing": 1, "already_uploaded": 1, "not_in_library": 1, "duplicate_name": 1],
        ])
        let skipped = try #require(result["skipped"]?.arrayValue)
        #expect(skipped.map { $0["photo_id"] } == [Self.unknown, Self.b, Self.c, Self.d].map { .string($0) })
        #expect(skipped.map { $0["reason"] } == ["not_in_library", "file_missing", "already_uploaded", "duplicate_name"])
        #expect(skipped[1]["path"] == .string(b.path))
        #expect(skipped[2]["job"] == "earlier-job" && skipped[2]["uploaded_at"] == "2025-11-24T16:00:00Z")
        #expect(skipped[2]["location"] == .string(scratch.dst + "/IMG_0003.jpg"))
        #expect(skipped[2]["message"]?.stringValue?.contains("--again") == true)
        #expect(skipped[3]["message"]?.stringValue?.contains(Self.a) == true)
        // Remembered: c from before, and a now, under the normalised destination, with what landed.
        #expect(remembered.map(\.photoID) == [Self.c, Self.a])
        let now = try #require(remembered.last)
        #expect(now.destination == "file://" + scratch.dst && now.job == "test-job" && now.bytes == 70_000)
        #expect(now.sha256 == SHA256.hexDigest(of: a.bytes) && now.location == BytePath(scratch.dst + "/IMG_0001.jpg"))
    }

    /// A photo whose file name is not UTF-8 (the library keeps its exact bytes) goes to a directory as it is; S3
    /// keys are UTF-8, so there it is skipped with `bad_name`, before any request.
    @Test func aNameThatIsNotUTF8GoesToADirectoryAndIsSkippedForS3() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let latin1 = BytePath(bytes: Array((scratch.src + "/caf").utf8) + [0xE9] + Array(".jpg".utf8))
        let fd = latin1.withCString { open($0, O_WRONLY | O_CREAT, 0o644) }
        #expect(fd >= 0)
        _ = write(fd, "abc", 3)
        close(fd)
        let library = await MemoryPhotoLibrary()
        await onLoopSet(library) { $0.photosByBytes = [Self.a: latin1] }
        let selection = UploadPhotoSelection(ids: [Self.a])
        let (toS3, toDirectory) = try await onLoop { @LoopActor () -> (JSONValue, JSONValue) in
            let job = UploadJob(photos: library)
            let s3 = try await job.run(UploadJob.Params(files: [], to: "s3://photos/", photos: selection), in: RecordingHost().context())
            let directory = try await job.run(
                UploadJob.Params(files: [], to: "file://" + scratch.dst, photos: selection), in: RecordingHost().context())
            return (s3, directory)
        }
        #expect(toS3["files"] == [] && toS3["skipped"]?.arrayValue?.first?["reason"] == "bad_name", "\(toS3)")
        #expect(toDirectory["files"]?.arrayValue?.first?["photo_id"] == .string(Self.a))
        let landed = BytePath(bytes: Array((scratch.dst + "/caf").utf8) + [0xE9] + Array(".jpg".utf8))
        #expect(landed.withCString { access($0, F_OK) } == 0)
    }

    @Test func againUploadsWhatWasUploadedBefore() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let c = try scratch.source("IMG_0003.jpg", count: 20, seed: 3)
        let library = await MemoryPhotoLibrary()
        await onLoopSet(library) { library in
            library.photos = [Self.c: c.path]
            library.tagged = ["pick": [Self.c]]
            library.remembered = [
                RememberedUpload(
                    photoID: Self.c, destination: "file://" + scratch.dst, job: "earlier-job", uploadedAtMilliseconds: 0,
                    location: BytePath(scratch.dst + "/IMG_0003.jpg"), bytes: 20, sha256: "x")
            ]
        }
        let skipping = UploadJob.Params(files: [], to: "file://" + scratch.dst, photos: UploadPhotoSelection(tags: ["pick"]))
        var again = skipping
        again.again = true
        let target = scratch.dst + "/IMG_0003.jpg"
        let (first, writtenBySkip, second, remembered) = try await onLoop {
            @LoopActor () -> (JSONValue, Bool, JSONValue, [RememberedUpload]) in
            let job = UploadJob(photos: library)
            let first = try await job.run(skipping, in: RecordingHost().context())
            let written = access(target, F_OK) == 0
            let second = try await job.run(again, in: RecordingHost().context())
            return (first, written, second, library.remembered)
        }
        #expect(first["files"] == [] && first["photos"]?["skipped_by_reason"] == ["already_uploaded": 1])
        #expect(!writtenBySkip, "skipped: nothing written")
        #expect(second["files"]?.arrayValue?.map { $0["photo_id"] } == [.string(Self.c)])
        #expect(second["skipped"] == [])
        #expect(try scratch.bytes(scratch.dst + "/IMG_0003.jpg") == c.bytes)
        #expect(remembered.map(\.job) == ["test-job"], "the new upload replaced the old memory")
    }

    /// A stop after the first file landed: the memory holds exactly that file; the next attempt uploads the files
    /// its first run resolved (not what the library says now) and remembers the rest.
    @Test func aStopMidJobRemembersExactlyWhatLandedAndTheResumeKeepsThePlan() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.jpg", count: 100_000, seed: 1)
        let b = try scratch.source("b.jpg", count: 300_000, seed: 2)
        let c = try scratch.source("c.jpg", count: 50, seed: 3)
        let library = await MemoryPhotoLibrary()
        await onLoopSet(library) { library in
            library.photos = [Self.a: a.path, Self.b: b.path, Self.c: c.path]
            library.tagged = ["pick": [Self.a, Self.b]]
        }
        let params = UploadJob.Params(
            files: [], to: "file://" + scratch.dst, chunkSize: 65_536, photos: UploadPhotoSelection(tags: ["pick"]))
        let host = await RecordingHost()
        let code = await errorCode {
            try await onLoop { @LoopActor in
                host.stopAt = (200_000, .resourceReclaim)  // inside b
                _ = try await UploadJob(photos: library).run(params, in: host.context())
            }
        }
        #expect(code.hasPrefix("other: "), "stopped (JobStopped), not failed: \(code)")
        let afterStop = await onLoopGet(library) { $0.remembered.map(\.photoID) }
        #expect(afterStop == [Self.a], "a landed, b did not")
        #expect(scratch.exists(scratch.dst + "/a.jpg") && !scratch.exists(scratch.dst + "/b.jpg"))
        // Meanwhile c gets the tag: the running job's selection does not change.
        await onLoopSet(library) { $0.tagged["pick"] = [Self.a, Self.b, Self.c] }
        let result = try await onLoop { @LoopActor () -> JSONValue in
            host.stopAt = nil
            return try await UploadJob(photos: library).run(params, in: host.context(attempt: 2))
        }
        #expect(result["files"]?.arrayValue?.map { $0["photo_id"] } == [Self.a, Self.b].map { .string($0) })
        #expect(await onLoopGet(library) { $0.resolveCalls } == 1, "resolved once, on the first run")
        let remembered = await onLoopGet(library) { $0.remembered }
        #expect(Set(remembered.map(\.photoID)) == [Self.a, Self.b] && remembered.count == 2)
        #expect(remembered.first { $0.photoID == Self.b }?.sha256 == SHA256.hexDigest(of: b.bytes))
        #expect(!scratch.exists(scratch.dst + "/c.jpg"))
    }
}

/// Runs `body` on the loop with the library (its state lives there).
func onLoopSet(_ library: MemoryPhotoLibrary, _ body: @escaping @LoopActor @Sendable (MemoryPhotoLibrary) -> Void) async {
    _ = try? await onLoop { @LoopActor in body(library) }
}

/// Reads the library's state on the loop.
func onLoopGet<T: Sendable>(_ library: MemoryPhotoLibrary, _ body: @escaping @LoopActor @Sendable (MemoryPhotoLibrary) -> T) async -> T {
    try! await onLoop { @LoopActor in body(library) }
}

/// The words `--wait` prints for an upload of library photos.
struct PhotoUploadSummaryTests {
    @Test func summarySaysHowManyPhotosWentAndWhyOthersDidNot() {
        let result: JSONValue = [
            "bytes": 0, "bytes_resent": 0, "files": [],
            "photos": ["selected": 4, "uploaded": 1, "skipped": 3, "skipped_by_reason": ["file_missing": 1, "already_uploaded": 2]],
        ]
        #expect(JobText.outcome(result) == "0 B, 1 photo uploaded, 3 skipped: 2 already_uploaded, 1 file_missing")
        // An upload of files says nothing of photos.
        #expect(JobText.outcome(["bytes": 2048, "bytes_resent": 0, "files": []]) == "2.0 KiB")
    }
}
