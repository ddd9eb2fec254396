import Foundation
import Testing

@testable import TrailbookEngine
import TestSupport
import TrailbookLoop
@testable import UploadJob

// MARK: - Harness: the daemon's loop on a thread, and a job host that keeps the checkpoint in memory.

/// The main loop on its thread, shared with every other test target in the process.
enum TestEventLoop {
    static var started: Void { MainLoopThread.started }
}

/// Runs `body` on the loop actor, starting the loop first.
func onLoop<T: Sendable>(_ body: @escaping @LoopActor @Sendable () async throws -> T) async throws -> T {
    _ = TestEventLoop.started
    return try await runOnLoopActor(body)
}

@LoopActor
private func runOnLoopActor<T: Sendable>(_ body: @LoopActor @Sendable () async throws -> T) async throws -> T {
    EventLoop.main.assertInLoopThread()
    return try await body()
}

/// A `JobHost` standing in for the scheduler: keeps the checkpoint and log, and may stop the job when its progress
/// passes a mark (deterministic stops without timers).
@LoopActor
final class RecordingHost: JobHost, JobEntryHost {
    var checkpoint: JSONValue?
    /// Entry lists (a folder upload's files), in a store of its own holding the job `test-job`.
    var entryStore: (any JobEntryStoring)? {
        if let made = madeEntryStore { return made }
        let store = Self.entryStore()
        madeEntryStore = .some(store)
        return store
    }
    private var madeEntryStore: JobStore??

    nonisolated init() {}
    var checkpointSaves = 0
    var logs: [(LogLevel, String)] = []
    var progressReports: [JobProgress] = []
    var stopAt: (completed: Int64, reason: CancellationReason)?

    func context(attempt: Int = 1) -> JobContext {
        let context = JobContext(
            id: "test-job", kind: UploadJob.name, attempt: attempt, maxAttempts: 5, traits: UploadJob.traits,
            progress: JobProgress(unit: .bytes))
        context.host = self
        return context
    }

    func jobDidReportProgress(_ job: JobContext) {
        progressReports.append(job.progress)
        if let stopAt, job.progress.completed >= stopAt.completed { job.stop(stopAt.reason) }
    }
    func jobSaveCheckpoint(_ job: JobContext, _ checkpoint: JSONValue) throws {
        self.checkpoint = checkpoint
        checkpointSaves += 1
        largestCheckpointBytes = max(largestCheckpointBytes, JSONCoding.encode(checkpoint).count)
    }
    /// The size of the largest checkpoint saved, in bytes of JSON.
    var largestCheckpointBytes = 0
    func jobLoadCheckpoint(_ job: JobContext) throws -> JSONValue? { checkpoint }
    func jobLog(_ job: JobContext, level: LogLevel, message: String) { logs.append((level, message)) }

    /// A SQLite store in a new temporary file with the job `test-job` in it (entry lists need their job).
    nonisolated static func entryStore() -> JobStore? {
        let path = NSTemporaryDirectory() + "/recording-host-\(UUID().uuidString).sqlite3"
        guard let store = try? JobStore(path: path) else { return nil }
        var job = JobRecord(
            id: "test-job", kind: "upload", state: .running,
            options: JobOptions(priority: 0, timeoutSeconds: 60, stallTimeoutSeconds: 10, maxAttempts: 5),
            attempt: 1, progress: JobProgress(unit: .bytes), cancellation: nil, error: nil, createdAt: "",
            updatedAt: "", params: ["files": []], result: .null, retryAt: nil, sequence: 0)
        try? store.insert(&job)
        return store
    }
}

/// A fresh temporary directory with `src/` and `dst/` in it, removed by `remove()`.
struct Scratch {
    let root: String
    var src: String { root + "/src" }
    var dst: String { root + "/dst" }

    init() throws {
        root = NSTemporaryDirectory() + "upload-test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root + "/src", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/dst", withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }

    /// Writes `count` pseudo-random bytes (seeded) to `src/name` and returns its path and bytes.
    @discardableResult
    func source(_ name: String, count: Int, seed: UInt64 = 1) throws -> (path: String, bytes: [UInt8]) {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        let bytes = (0..<count).map { _ -> UInt8 in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        let path = src + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    /// Writes `count` files `src/s0.bin`, `src/s1.bin`, … of `size` pseudo-random bytes each (seeds 1, 2, …).
    func sources(_ count: Int, size: Int) throws -> [(path: String, bytes: [UInt8])] {
        try (0..<count).map { index in try source("s\(index).bin", count: size, seed: UInt64(index + 1)) }
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
    func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }
}

/// The `JobError` code `body` throws, or a description of what else happened.
func errorCode(_ body: () async throws -> Void) async -> String {
    do {
        try await body()
        return "no error"
    } catch let error as JobError {
        return error.code
    } catch {
        return "other: \(error)"
    }
}

// MARK: - Pure helpers

struct UploadDestinationTests {
    @Test(arguments: [
        ("file:///tmp/out", "/tmp/out"),
        ("file:///tmp/out/", "/tmp/out"),
        ("file:///tmp/out//", "/tmp/out"),
        ("file://localhost/srv/photos", "/srv/photos"),
        ("FILE:///a%20b/c%2Fd", "/a b/c/d"),
        ("file:///", "/"),
    ])
    func parsesDirectories(url: String, path: String) throws {
        #expect(try UploadDestination(parsing: url) == .directory(path: BytePath(path)))
    }

    /// A directory's `file://` URL (what the CLI sends for `--to DIR`) reads back as exactly that directory,
    /// whatever its bytes: `%20` in a name is not a space, `?` and `#` are no query or fragment, a Latin-1 byte
    /// is kept. The CLI used to send the path as it was, and `--to /srv/a%20b` uploaded into `/srv/a b`.
    @Test(arguments: [
        BytePath("/srv/a%20b"), BytePath("/srv/100%"), BytePath("/srv/q?x=1"), BytePath("/srv/#tag"), BytePath("/srv/a b"),
        BytePath("/srv/café/日本"), BytePath(bytes: Array("/srv/caf".utf8) + [0xE9]), BytePath(bytes: Array("/srv/t".utf8) + [0x09, 0x0A, 0x7F]),
        BytePath(bytes: Array("/srv/".utf8) + [0xC3]), BytePath("/"),
    ])
    func aDirectorysFileURLReadsBackAsExactlyThatDirectory(path: BytePath) throws {
        let url = UploadDestination.fileURL(of: path)
        #expect(try UploadDestination(parsing: url) == .directory(path: path), "\(url)")
        #expect(url.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7F }, "\(url)")
    }

    @Test func aFileURLEscapesOnlyWhatAURLWouldReadAsSomethingElse() {
        #expect(UploadDestination.fileURL(of: "/srv/a%20b?#") == "file:///srv/a%2520b%3F%23")
        #expect(UploadDestination.fileURL(of: "/srv/café photos") == "file:///srv/café%20photos")
        #expect(UploadDestination.fileURL(of: BytePath(bytes: Array("/srv/caf".utf8) + [0xE9])) == "file:///srv/caf%E9")
    }

    @Test func parsesTusEndpoints() async throws {
        #expect(try UploadDestination(parsing: "https://tus.example.com/files/") == .tus(endpoint: "https://tus.example.com/files/"))
        #expect(try UploadDestination(parsing: "http://127.0.0.1:1080/files") == .tus(endpoint: "http://127.0.0.1:1080/files"))
        #expect(try UploadDestination(parsing: "http://[::1]:1080/files/") == .tus(endpoint: "http://[::1]:1080/files/"))
        #expect(try UploadDestination(parsing: "https://u:p@h.example:65535/f") == .tus(endpoint: "https://u:p@h.example:65535/f"))
        for bad in ["http://", "https:///files", "http://a b/files", "http://host/files#x"] {
            #expect(throws: JobError.self, "\(bad)") { try UploadDestination(parsing: bad) }
        }
    }

    /// Issue 11 §9: URLs curl can never connect to are refused at submit, not retried until `timeout`.
    @Test(arguments: [
        ("http://[::1", "closing ']'"), ("http://[::1/files/", "closing ']'"), ("http://[::1]x/files", "after its IPv6"),
        ("http://[]/files", "IPv6"), ("http://[zz[/files", "IPv6"), ("http://host:65536/files/", "65535"),
        ("http://host:99999999999/files", "65535"), ("http://host:0/files", "65535"), ("http://host:/files", "65535"),
        ("http://host:8o/files", "65535"), ("http://[::1]:70000/", "65535"), ("http://:80/files", "no host"),
        ("http://u@/files", "no host"),
    ])
    func refusesMalformedAuthorities(url: String, says: String) {
        do {
            _ = try UploadDestination(parsing: url)
            Issue.record("\(url) was accepted")
        } catch {
            #expect(error.code == "bad_destination")
            #expect(error.message.contains(says), "\(error.message)")
        }
    }

    @Test func headerValuesAreRedactedInTheJobJSON() {
        let params: JSONValue = ["files": ["/a"], "headers": ["Authorization: Bearer s3cret", "X-Trace: 1"]]
        let shown = JobRecord.redacted(params)
        #expect(shown["headers"]?.arrayValue?.compactMap(\.stringValue) == ["Authorization: <redacted>", "X-Trace: <redacted>"])
        #expect(shown["files"] == params["files"])
    }

    @Test(arguments: [
        "", "/tmp/out", "tmp/out", "file:/tmp/out", "file://tmp/out", "file://host/tmp", "file://", "ftp://x/y",
        "file:///tmp?x=1", "file:///tmp#frag", "file:///a%zz", "file:///a%00b", "http://", "s3://bucket/key",
    ])
    func refusesBadURLs(url: String) {
        #expect(throws: JobError.self) { try UploadDestination(parsing: url) }
        do {
            _ = try UploadDestination(parsing: url)
        } catch {
            #expect(error.code == "bad_destination")
            #expect(error.message.contains("file:///"))
        }
    }
}

/// `duplicate_upload`: every spelling of one file and one place gives the same keys (the CLI passes `file://` URLs
/// and scripts pass any path as given, so the daemon resolves them itself).
struct UploadDuplicateKeysTests {
    @Test func spellingsOfOneFileAndOnePlaceShareAKey() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.src + "/a.jpg"
        try Data([1]).write(to: URL(fileURLWithPath: source))
        try FileManager.default.createSymbolicLink(atPath: scratch.root + "/srclink", withDestinationPath: scratch.src)
        try FileManager.default.createSymbolicLink(atPath: scratch.root + "/dstlink", withDestinationPath: scratch.dst)
        try FileManager.default.createSymbolicLink(atPath: scratch.src + "/b.jpg", withDestinationPath: source)
        let job = UploadJob()
        let reference = Set(job.duplicateKeys(UploadJob.Params(files: [source], to: "file://" + scratch.dst)))
        #expect(reference.count == 2)
        let spellings: [(String, String)] = [
            (scratch.root + "/srclink/a.jpg", "file://" + scratch.dst),
            (scratch.src + "/./a.jpg", "file://" + scratch.root + "/src/../dst/"),
            (scratch.root + "//src/../src/a.jpg", "file://localhost" + scratch.root + "/dstlink"),
            (source, "file://" + scratch.root + "/dst//."),
            (source, "file://" + scratch.root + "%2Fd%73t"),
        ]
        for (file, to) in spellings {
            #expect(Set(job.duplicateKeys(UploadJob.Params(files: [file], to: to))) == reference, "\(file) to \(to)")
        }
        // A link to the file is the same source, under another name.
        let viaLink = job.duplicateKeys(UploadJob.Params(files: [scratch.src + "/b.jpg"], to: "file://" + scratch.dst))
        #expect(viaLink.contains { reference.contains($0) && $0.contains("a.jpg") })
        // Another file of the same name to the same place would replace the copy: they share the name key.
        let other = scratch.root + "/other/a.jpg"
        try FileManager.default.createDirectory(atPath: scratch.root + "/other", withIntermediateDirectories: true)
        try Data([2]).write(to: URL(fileURLWithPath: other))
        let sameName = Set(job.duplicateKeys(UploadJob.Params(files: [other], to: "file://" + scratch.dst)))
        #expect(sameName.intersection(reference) == ["upload of a file named a.jpg to file://\(scratch.dst)"])
        // Elsewhere is another place.
        #expect(Set(job.duplicateKeys(UploadJob.Params(files: [source], to: "file://" + scratch.src))).isDisjoint(with: reference))
    }

    @Test func tusEndpointsDifferingOnlyInCaseOrDefaultPortAreOnePlace() throws {
        let job = UploadJob()
        let reference = job.duplicateKeys(UploadJob.Params(files: ["/a.jpg"], to: "http://tus.example/files/"))
        #expect(reference.count == 1, "files of one name do not collide on tus")
        for to in ["HTTP://TUS.example:80/files/", "http://Tus.Example/files/"] {
            #expect(job.duplicateKeys(UploadJob.Params(files: ["/a.jpg"], to: to)) == reference, "\(to)")
        }
        for to in ["http://tus.example:8080/files/", "https://tus.example/files/", "http://tus.example/Files/"] {
            #expect(job.duplicateKeys(UploadJob.Params(files: ["/a.jpg"], to: to)) != reference, "\(to)")
        }
        #expect(try UploadJob.destinationIdentity(of: "https://u:P@[::1]:443/f/?x") == "https://[::1]/f")
        #expect(try UploadJob.destinationIdentity(of: "https://H:4430/f") == "https://h:4430/f")
    }
}

/// Tests spell source paths as text.
extension UploadJob.Params {
    init(
        files: [String], to: String, chunkSize: Int64 = UploadJob.Params.defaultChunkSize, maxRate: Int64? = nil,
        headers: [String] = [], caBundle: String? = nil
    ) {
        self.init(
            files: files.map { BytePath($0) }, to: to, chunkSize: chunkSize, maxRate: maxRate, headers: headers,
            caBundle: caBundle)
    }
}

struct UploadNamesTests {
    @Test func namesAreTheLastComponent() throws {
        #expect(try UploadNames.name(ofSource: "/photos/lisbon/IMG_0001.jpg") == "IMG_0001.jpg")
        #expect(try UploadNames.name(ofSource: "/x") == "x")
        #expect(try UploadNames.name(ofSource: "/a/..b") == "..b")
        #expect(try UploadNames.names(ofSources: ["/a/1.jpg", "/b/2.jpg"]) == ["1.jpg", "2.jpg"])
        #expect(BytePath.join("/", "x") == "/x")
        #expect(BytePath.join("/d", "x") == "/d/x")
    }

    @Test(arguments: ["/", "/a/", "/a/.", "/a/..", "/..", "/a/b\0c"])
    func refusesNamesThatEscape(source: String) {
        do {
            _ = try UploadNames.name(ofSource: BytePath(source))
            Issue.record("expected bad_name")
        } catch {
            #expect(error.code == "bad_name")
        }
    }

    @Test func checkRefusesSlashes() {
        #expect(throws: JobError.self) { try UploadNames.check("a/b") }
        #expect(throws: JobError.self) { try UploadNames.check("..") }
    }

    @Test func refusesDuplicates() {
        do {
            _ = try UploadNames.names(ofSources: ["/a/x.jpg", "/b/x.jpg"])
            Issue.record("expected duplicate_name")
        } catch {
            #expect(error.code == "duplicate_name")
        }
    }

    /// A name whose temporary file's name (`NAME.<8 hex>.part`) would pass 255 bytes is refused at submit.
    @Test func namesLeaveRoomForThePartSuffix() throws {
        #expect(try UploadNames.names(ofSources: ["/a/" + String(repeating: "n", count: 241)]).first?.bytes.count == 241)
        do {
            _ = try UploadNames.names(ofSources: ["/a/" + String(repeating: "n", count: 242)])
            Issue.record("expected bad_name")
        } catch {
            #expect(error.code == "bad_name" && error.message.contains("242 bytes"), "\(error)")
        }
    }

    /// Temporary files are per job (`x.<job>.part`), so `x` and `x.part` can be uploaded together.
    @Test func aPartSuffixIsJustAName() throws {
        #expect(try UploadNames.names(ofSources: ["/a/x", "/b/x.part"]) == ["x", "x.part"])
    }
}

struct UploadParamsTests {
    /// Issue 11 §4: `resume --header` replaces the headers of the same name (any case) and keeps the others.
    @Test func amendReplacesHeadersByName() throws {
        let params = UploadJob.Params(
            files: ["/a"], to: "https://tus.example/files/", headers: ["Authorization: Bearer old", "X-Trace: 1"])
        let amended = try UploadJob().amend(params, with: ["headers": ["authorization: Bearer new", "X-New: 2"]])
        #expect(amended.headers == ["X-Trace: 1", "authorization: Bearer new", "X-New: 2"])
        #expect(amended.files == params.files && amended.to == params.to)
        for bad: JSONValue in [["headers": ["no colon"]], ["headers": ["A: b\r\nEvil: 1"]], ["chunk_size": 1]] {
            #expect(throws: JobError.self, "\(bad)") { try UploadJob().amend(params, with: bad) }
        }
        let local = UploadJob.Params(files: ["/a"], to: "file:///d")
        #expect(throws: JobError.self) { try UploadJob().amend(local, with: ["headers": ["A: b"]]) }
    }

    @Test func decodesSnakeCaseWithDefaults() throws {
        let json: JSONValue = ["files": ["/a"], "to": "file:///d"]
        let params = try JSONCoding.convert(json, to: UploadJob.Params.self)
        #expect(params.chunkSize == 8 << 20 && !params.chunkSizeGiven && params.maxRate == nil)
        #expect(JSONCoding.value(of: params)["chunk_size"] == nil, "absent stays absent (file:// syncs by bytes and time)")
        let full: JSONValue = ["files": ["/a", "/b"], "to": "file:///d", "chunk_size": 65536, "max_rate": 1_048_576]
        let decoded = try JSONCoding.convert(full, to: UploadJob.Params.self)
        #expect(decoded.chunkSize == 65536 && decoded.chunkSizeGiven && decoded.maxRate == 1_048_576)
        #expect(JSONCoding.value(of: decoded)["chunk_size"] == 65536)
    }

    @Test(arguments: [
        UploadJob.Params(files: [String](), to: "file:///d"),
        UploadJob.Params(files: ["relative/a"], to: "file:///d"),
        UploadJob.Params(files: ["/a"], to: "file:///d", chunkSize: 4095),
        UploadJob.Params(files: ["/a"], to: "file:///d", chunkSize: (1 << 30) + 1),
        UploadJob.Params(files: ["/a"], to: "file:///d", maxRate: 1023),
        UploadJob.Params(files: ["/a"], to: "file:///d", maxRate: 0),
    ])
    func refusesOutOfRange(params: UploadJob.Params) {
        do {
            try params.checkLimits()
            Issue.record("expected invalid_params")
        } catch {
            #expect(error.code == "invalid_params")
        }
    }

    @Test func acceptsLimits() throws {
        try UploadJob.Params(files: ["/a"], to: "file:///d", chunkSize: 4096, maxRate: 1024).checkLimits()
        try UploadJob.Params(files: ["/a"], to: "file:///d", chunkSize: 1 << 30).checkLimits()
    }
}

struct UploadCheckpointTests {
    @Test func roundTripsThroughJobJSONWithoutLosingPrecision() throws {
        let identity = SourceIdentity(
            size: 209_715_200, modifiedNanoseconds: 1_732_888_620_123_456_789, inode: 18_446_744_073_709_551_557,
            device: 9_007_199_254_740_993)
        let checkpoint = UploadCheckpoint(
            fileIndex: 1, offset: 8_388_608, sources: [identity, identity],
            finished: [UploadedFile(name: "a.jpg", path: "/d/a.jpg", bytes: 10, sha256: "ab", bytesResent: 3)],
            bytesResent: 5, fileBytesResent: 2)
        let json = JSONCoding.value(of: checkpoint)
        #expect(json["file_index"] == 1)
        #expect(json["offset"] == 8_388_608)
        #expect(json["bytes_resent"] == 5)
        #expect(json["sources"]?.arrayValue?.first?["mtime_ns"] == "1732888620123456789")
        #expect(json["sources"]?.arrayValue?.first?["inode"] == "18446744073709551557")
        #expect(json["finished"]?.arrayValue?.first?["bytes_resent"] == 3)
        #expect(try JSONCoding.convert(json, to: UploadCheckpoint.self) == checkpoint)
    }

    @Test func refusesCheckpointsOfOtherJobs() throws {
        let identity = SourceIdentity(size: 10, modifiedNanoseconds: 1, inode: 2, device: 3)
        #expect(throws: JobError.self) { try UploadCheckpoint(sources: [identity]).check(fileCount: 2) }
        #expect(throws: JobError.self) { try UploadCheckpoint(offset: 11, sources: [identity]).check(fileCount: 1) }
        try UploadCheckpoint(offset: 10, sources: [identity]).check(fileCount: 1)
    }

    @Test func resultShape() {
        let one = UploadedFile(name: "a", path: "/d/a", bytes: 3, sha256: "aa", bytesResent: 1)
        let result = UploadJob.result(files: [one], bytesResent: 1, destination: "file:///d")
        #expect(result["bytes"] == 3 && result["sha256"] == "aa" && result["destination"] == "file:///d")
        let two = UploadJob.result(files: [one, one], bytesResent: 2, destination: "file:///d")
        #expect(two["sha256"] == .null && two["bytes"] == 6 && two["files"]?.arrayValue?.count == 2)
    }
}

struct RatePacerTests {
    @Test func pacesToTheRateWithoutSavingUpBursts() {
        var pacer = RatePacer(unitsPerSecond: 1000)
        #expect(pacer.delay(before: 100, now: 10) == 0)
        #expect(abs(pacer.delay(before: 100, now: 10) - 0.1) < 1e-9)
        #expect(abs(pacer.delay(before: 100, now: 10.1) - 0.1) < 1e-9)
        // Far behind: no catch-up burst.
        #expect(pacer.delay(before: 100, now: 50) == 0)
        #expect(abs(pacer.delay(before: 100, now: 50) - 0.1) < 1e-9)
    }

    @Test func pieceSizes() {
        #expect(RatePacer.pieceSize(maxRate: nil) == 1 << 20)
        #expect(RatePacer.pieceSize(maxRate: 20 << 20) == 1 << 20)
        #expect(RatePacer.pieceSize(maxRate: 1 << 20) == (1 << 20) / 10)
        #expect(RatePacer.pieceSize(maxRate: 1024) == 16 << 10)
    }
}

// MARK: - validate and run, on the real loop with an in-memory host

@Suite(.serialized)
struct UploadJobRunTests {
    @Test func validateCatchesBadSourcesAndDestinations() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (good, _) = try scratch.source("a.jpg", count: 100)
        try "x".write(toFile: scratch.root + "/plainfile", atomically: false, encoding: .utf8)
        #expect(mkfifo(scratch.root + "/pipe", 0o644) == 0)
        try FileManager.default.createSymbolicLink(atPath: scratch.dst + "/b.jpg", withDestinationPath: "/etc/passwd")
        try scratch.source("b.jpg", count: 10)
        let dst = "file://" + scratch.dst
        let cases: [(UploadJob.Params, String)] = [
            (.init(files: [good], to: dst), "no error"),
            (.init(files: [scratch.src + "/missing.jpg"], to: dst), "source_missing"),
            // A folder is uploaded as a tree (issue 35); a FIFO is still no file.
            (.init(files: [scratch.src], to: dst), "no error"),
            (.init(files: [scratch.root + "/pipe"], to: dst), "source_not_regular"),
            (.init(files: [good], to: "file://" + scratch.root + "/nope"), "destination_missing"),
            (.init(files: [good], to: "file://" + scratch.root + "/plainfile"), "destination_not_directory"),
            (.init(files: [good], to: "https://tus.example.com/files", headers: ["no colon"]), "invalid_params"),
            (.init(files: [good], to: "https://tus.example.com/files", headers: ["X-A: b\r\nEvil: 1"]), "invalid_params"),
            (.init(files: [good], to: "file:relative"), "bad_destination"),
            (.init(files: [scratch.src + "/b.jpg"], to: dst), "bad_name"),
            (.init(files: [good, scratch.root + "/a.jpg"], to: dst), "duplicate_name"),
            (.init(files: [good], to: dst, chunkSize: 1), "invalid_params"),
        ]
        for (params, expected) in cases {
            let code = await errorCode { try await onLoop { @LoopActor in try await UploadJob().validate(params) } }
            #expect(code == expected, "\(params)")
        }
    }

    /// `x` and `x.part` in one job: the job's temporary file for `x` is `x.<job>.part`, so neither overwrites the
    /// other, and a stale `x.part` that is not a regular file (here a directory) does not block the upload.
    @Test func uploadsAFileNamedLikeAnotherOnesPartFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let x = try scratch.source("x", count: 100_000, seed: 4)
        let other = scratch.root + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let xPart = (path: other + "/x.part", bytes: [UInt8](repeating: 7, count: 5_000))
        try Data(xPart.bytes).write(to: URL(fileURLWithPath: xPart.path))
        try FileManager.default.createDirectory(atPath: scratch.dst + "/y.part", withIntermediateDirectories: true)
        let y = try scratch.source("y", count: 10, seed: 5)
        let params = UploadJob.Params(files: [x.path, xPart.path, y.path], to: "file://" + scratch.dst)
        _ = try await onLoop { @LoopActor () -> JSONValue in
            try await UploadJob().validate(params)
            let host = RecordingHost()
            return try await UploadJob().run(params, in: host.context())
        }
        #expect(try scratch.bytes(scratch.dst + "/x") == x.bytes)
        #expect(try scratch.bytes(scratch.dst + "/x.part") == xPart.bytes)
        #expect(try scratch.bytes(scratch.dst + "/y") == y.bytes)
    }

    @Test func uploadsSeveralFilesWithHashesAndProgress() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.bin", count: 300_000, seed: 1)
        let b = try scratch.source("b.bin", count: 0, seed: 2)
        let c = try scratch.source("c.bin", count: 70_000, seed: 3)
        try Data("old".utf8).write(to: URL(fileURLWithPath: scratch.dst + "/c.bin"))  // replaced
        let params = UploadJob.Params(files: [a.path, b.path, c.path], to: "file://" + scratch.dst, chunkSize: 65536)
        let (result, host) = try await onLoop { @LoopActor () -> (JSONValue, RecordingHost) in
            let host = RecordingHost()
            let result = try await UploadJob().run(params, in: host.context())
            return (result, host)
        }
        #expect(try scratch.bytes(scratch.dst + "/a.bin") == a.bytes)
        #expect(try scratch.bytes(scratch.dst + "/b.bin") == [])
        #expect(try scratch.bytes(scratch.dst + "/c.bin") == c.bytes)
        #expect(!scratch.exists(scratch.dst + "/a.bin.test-job.part"))
        #expect(result["bytes"] == 370_000)
        #expect(result["bytes_resent"] == 0)
        #expect(result["sha256"] == .null)
        #expect(result["destination"] == .string("file://" + scratch.dst))
        let files = try #require(result["files"]?.arrayValue)
        #expect(files.map { $0["sha256"] } == [a, b, c].map { .string(SHA256.hexDigest(of: $0.bytes)) })
        #expect(files.map { $0["path"] } == ["a.bin", "b.bin", "c.bin"].map { .string(scratch.dst + "/" + $0) })
        let reports = await host.progressReports
        #expect(reports.last?.completed == 370_000 && reports.last?.total == 370_000)
        #expect(reports.last?.items.map(\.completed) == [300_000, 0, 70_000])
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.completed <= $1.completed })
        #expect(reports.contains { $0.current == "a.bin" })
        // One checkpoint at the start; one per chunk end inside a file (4 in a.bin, 1 in c.bin; a file's last
        // chunk is recorded with the file); one per finished file once a chunk's worth of files finished since the
        // last save (a.bin), and after the last file (c.bin) — none after the empty b.bin.
        #expect(await host.checkpointSaves == 1 + 5 + 2)
    }

    @Test func resumesAfterAStopResendingAtMostOneChunk() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("photo.jpg", count: 1_000_000, seed: 7)
        let params = UploadJob.Params(files: [a.path], to: "file://" + scratch.dst, chunkSize: 65536)
        let partPath = scratch.dst + "/photo.jpg.test-job.part"
        let host = RecordingHost()
        let code = await errorCode {
            try await onLoop { @LoopActor in
                host.stopAt = (300_000, .resourceReclaim)
                let job = host.context()
                do {
                    _ = try await UploadJob().run(params, in: job)
                } catch {
                    await UploadJob().onCancel(.resourceReclaim, params: params, in: job)
                    throw error
                }
            }
        }
        #expect(code.hasPrefix("other: JobStopped"))
        #expect(scratch.exists(partPath))
        let checkpoint = try await onLoop { @LoopActor in try JSONCoding.convert(#require(host.checkpoint), to: UploadCheckpoint.self) }
        // Stopped during the piece that ends chunk 5: that chunk still completes and is checkpointed.
        #expect(checkpoint.offset == 327_680)
        // Simulate bytes written after the checkpoint before a kill -9.
        let handle = try #require(FileHandle(forWritingAtPath: partPath))
        handle.seekToEndOfFile()
        handle.write(Data(repeating: 0xEE, count: 1000))
        try handle.close()
        let leftover = try FileManager.default.attributesOfItem(atPath: partPath)[.size] as! Int
        #expect(leftover > checkpoint.offset)

        let result = try await onLoop { @LoopActor in
            host.stopAt = nil
            return try await UploadJob().run(params, in: host.context(attempt: 2))
        }
        #expect(try scratch.bytes(scratch.dst + "/photo.jpg") == a.bytes)
        #expect(result["sha256"] == .string(SHA256.hexDigest(of: a.bytes)))
        #expect(result["bytes_resent"] == .number(Double(Int64(leftover) - checkpoint.offset)))
        #expect(result["bytes_resent"]!.intValue! <= 65536 + 1000)
        #expect(result["files"]?.arrayValue?.first?["bytes_resent"] == result["bytes_resent"])
    }

    @Test func missingPartRestartsTheFileWithAWarning() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("v.mov", count: 200_000, seed: 9)
        let params = UploadJob.Params(files: [a.path], to: "file://" + scratch.dst, chunkSize: 16384)
        let host = RecordingHost()
        _ = await errorCode {
            try await onLoop { @LoopActor in
                host.stopAt = (100_000, .timeout)
                _ = try await UploadJob().run(params, in: host.context())
            }
        }
        try FileManager.default.removeItem(atPath: scratch.dst + "/v.mov.test-job.part")
        let result = try await onLoop { @LoopActor in
            host.stopAt = nil
            return try await UploadJob().run(params, in: host.context(attempt: 2))
        }
        #expect(try scratch.bytes(scratch.dst + "/v.mov") == a.bytes)
        #expect(result["sha256"] == .string(SHA256.hexDigest(of: a.bytes)))
        #expect(result["bytes_resent"]!.intValue! >= 98_304)
        #expect(await host.logs.contains { $0.0 == .warning && $0.1.contains("from the start") })
    }

    @Test func changedSourceFailsWithSourceChanged() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.raw", count: 400_000, seed: 4)
        let params = UploadJob.Params(files: [a.path], to: "file://" + scratch.dst, chunkSize: 65536)
        let host = RecordingHost()
        _ = await errorCode {
            try await onLoop { @LoopActor in
                host.stopAt = (200_000, .resourceReclaim)
                _ = try await UploadJob().run(params, in: host.context())
            }
        }
        try scratch.source("a.raw", count: 400_001, seed: 5)
        let code = await errorCode {
            try await onLoop { @LoopActor in
                host.stopAt = nil
                _ = try await UploadJob().run(params, in: host.context(attempt: 2))
            }
        }
        #expect(code == "source_changed")
        #expect(!scratch.exists(scratch.dst + "/a.raw"))
    }

    /// A cancelled job's clean-up (which the engine runs once the end is recorded) removes the `.part`.
    @Test func theCleanUpAfterUserStopRemovesThePartButKeepsFinishedFiles() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("1.jpg", count: 50_000, seed: 1)
        let b = try scratch.source("2.jpg", count: 500_000, seed: 2)
        let params = UploadJob.Params(
            files: [a.path, b.path], to: "file://" + scratch.dst, chunkSize: 65536, maxRate: 50 << 20)
        let host = RecordingHost()
        let code = await errorCode {
            try await onLoop { @LoopActor in
                host.stopAt = (200_000, .userStop)
                let job = host.context()
                do {
                    _ = try await UploadJob().run(params, in: job)
                } catch {
                    #expect(job.stopReason == .userStop)
                    await UploadJob().onCancel(.userStop, params: params, in: job)
                    #expect(await UploadJob().cleanUp(after: .cancelled, params: params, in: job) == .done)
                    throw error
                }
            }
        }
        #expect(code.hasPrefix("other: JobStopped"))
        #expect(try scratch.bytes(scratch.dst + "/1.jpg") == a.bytes)
        #expect(!scratch.exists(scratch.dst + "/2.jpg.test-job.part"))
        #expect(!scratch.exists(scratch.dst + "/2.jpg"))
    }

    @Test func rateLimitIsHonoured() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("slow.bin", count: 300_000, seed: 3)
        let params = UploadJob.Params(files: [a.path], to: "file://" + scratch.dst, chunkSize: 65536, maxRate: 1 << 20)
        let started = Date()
        let result = try await onLoop { @LoopActor in
            let host = RecordingHost()
            return try await UploadJob().run(params, in: host.context())
        }
        let elapsed = Date().timeIntervalSince(started)
        // 300 000 bytes at 1 MiB/s: about 0.29 s (the first piece goes at once).
        #expect(elapsed > 0.2)
        #expect(elapsed < 3)
        #expect(result["sha256"] == .string(SHA256.hexDigest(of: a.bytes)))
    }

    /// `source_changed` names each changed field with both values; times in ISO 8601 UTC to the nanosecond.
    @Test func sourceChangesNameEachFieldWithReadableTimes() {
        var was = SourceIdentity(size: 10, modifiedNanoseconds: 1_764_550_350_123_456_789, inode: 2, device: 3)
        was.changedNanoseconds = 1_764_550_350_123_456_789
        var now = was
        #expect(was.changes(to: now) == "")
        now.size = 11
        now.changedNanoseconds = 1_764_550_351_000_000_001
        #expect(was.changes(to: now) == "size was 10 bytes, now 11; ctime was 2025-12-01T00:52:30.123456789Z, now 2025-12-01T00:52:31.000000001Z")
        now = was
        now.modifiedNanoseconds = -1
        #expect(was.changes(to: now) == "mtime was 2025-12-01T00:52:30.123456789Z, now 1969-12-31T23:59:59.999999999Z")
    }
}

// MARK: - The directory upload's copy

/// `KernelCopy` (copy_file_range(2)) and `PartFile`'s use of it, with its `pread`/`pwrite` fallback.
struct KernelCopyTests {
    /// A descriptor of `path` opened with `flags` (and mode 0644 when created).
    private func open(_ path: String, _ flags: Int32) throws -> Int32 {
        let fd = Glibc.open(path, flags | O_CLOEXEC, 0o644)
        try #require(fd >= 0, "open \(path): \(errno)")
        return fd
    }

    @Test func copiesARangeAtTheGivenOffsetsAndSaysWhenTheSourceEnded() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.bin", count: 100_000, seed: 7)
        let source = try open(a.path, O_RDONLY)
        defer { close(source) }
        let destination = try open(scratch.dst + "/b.bin", O_CREAT | O_RDWR)
        defer { close(destination) }
        #expect(try KernelCopy.copy(from: source, at: 1_000, to: destination, at: 0, count: 50_000).get() == 50_000)
        // Past the source's end: what is left, then 0.
        #expect(try KernelCopy.copy(from: source, at: 90_000, to: destination, at: 50_000, count: 50_000).get() == 10_000)
        #expect(try KernelCopy.copy(from: source, at: 100_000, to: destination, at: 60_000, count: 10).get() == 0)
        #expect(try scratch.bytes(scratch.dst + "/b.bin") == Array(a.bytes[1_000..<51_000] + a.bytes[90_000...]))
    }

    @Test func aPipeIsNotAFileTheKernelCopiesTo() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.bin", count: 10, seed: 7)
        let source = try open(a.path, O_RDONLY)
        defer { close(source) }
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        switch KernelCopy.copy(from: source, at: 0, to: ends[1], at: 0, count: 10) {
        case .success(let copied): Issue.record("copied \(copied) bytes into a pipe")
        case .failure(let error): #expect(error.isUnsupported, "errno \(error.code)")
        }
    }

    /// Copies all of `path` through a `PartFile` into `dst/copy.part` as the directory upload does (8 MiB pieces)
    /// and returns the file, after `commit`, with the bytes it wrote.
    private func copyWithPartFile(_ path: String, scratch: Scratch) throws -> (PartFile, [UInt8]) {
        var info = stat()
        try #require(stat(path, &info) == 0)
        let partPath = BytePath(scratch.dst + "/copy.part")
        let (file, length) = try PartFile.open(
            sourcePath: BytePath(path), partPath: partPath, expected: DirectoryIO.identity(info))
        #expect(length == 0)
        let copied = try file.copy(at: 0, count: Int64(info.st_size), stop: CopyStop(), timeLimit: 60)
        #expect(copied.bytes == Int64(info.st_size) && !copied.sourceEnded)
        try file.commit(to: BytePath(scratch.dst + "/copy.bin"), length: Int64(info.st_size))
        return (file, try scratch.bytes(scratch.dst + "/copy.bin"))
    }

    @Test func aPartFileCopiesInTheKernelAndHashesWhatTheDestinationHolds() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.bin", count: 9 << 20 | 12_345, seed: 3)  // two pieces and a bit
        let (file, written) = try copyWithPartFile(a.path, scratch: scratch)
        #expect(written == a.bytes)
        #expect(file.hash.hexDigest == SHA256.hexDigest(of: a.bytes))
        #expect(file.kernelCopiedBytes == Int64(a.bytes.count) && file.bufferCopiedBytes == 0)
    }

    /// tmpfs to the temporary directory's file system: copy_file_range(2) says EXDEV (Linux allows cross-file-system
    /// copies only between two of the same type), and the copy goes through user space, bytes and hash the same.
    @Test(.enabled(if: KernelCopyTests.sharedMemoryIsAnotherFileSystem, "/dev/shm is not a tmpfs beside the temporary directory"))
    func aCopyTheKernelRefusesGoesThroughABufferWithTheSameBytesAndHash() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.bin", count: 3 << 20 | 77, seed: 5)
        let onTmpfs = "/dev/shm/trailbook-jobs-test-\(UUID().uuidString).bin"
        try Data(a.bytes).write(to: URL(fileURLWithPath: onTmpfs))
        defer { unlink(onTmpfs) }
        let (file, written) = try copyWithPartFile(onTmpfs, scratch: scratch)
        #expect(written == a.bytes)
        #expect(file.hash.hexDigest == SHA256.hexDigest(of: a.bytes))
        #expect(file.kernelCopyUnsupported)
        #expect(file.kernelCopiedBytes == 0 && file.bufferCopiedBytes == Int64(a.bytes.count))
    }

    /// A stopped job lets go of its `PartFile` while pieces still wait to be hashed: the last hashing block then
    /// releases it on the hashing queue, and its deinit must not wait for that queue (it did, and the daemon
    /// crashed: dispatch_sync on the queue it was draining, found by a cancel mid-upload).
    @Test func aPartFileReleasedWhilePiecesWaitToBeHashedGoesQuietly() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let a = try scratch.source("a.bin", count: 16 << 20, seed: 9)
        var info = stat()
        try #require(stat(a.path, &info) == 0)
        for round in 0..<8 {
            var (file, _): (PartFile?, Int64) = try PartFile.open(
                sourcePath: BytePath(a.path), partPath: BytePath(scratch.dst + "/\(round).part"),
                expected: DirectoryIO.identity(info))
            #expect(try file?.copy(at: 0, count: 16 << 20, stop: CopyStop(), timeLimit: 60).bytes == 16 << 20)
            file = nil  // the hashing queue still has both pieces
        }
    }

    /// Whether `/dev/shm` and the temporary directory are on different devices (so a copy between them crosses
    /// file systems).
    static var sharedMemoryIsAnotherFileSystem: Bool {
        var shm = stat()
        var temporary = stat()
        return stat("/dev/shm", &shm) == 0 && stat(NSTemporaryDirectory(), &temporary) == 0 && shm.st_dev != temporary.st_dev
    }
}

/// Something else changes the `.part` file while the upload writes it (found by a helper trying to break the kernel
/// copy: a `truncate -s 0` of the `.part` mid-copy ended `succeeded` with a hash of neither file). Every way the
/// file can be changed under the copy that its metadata shows is refused, retryably, before a checkpoint or the
/// rename claims it.
struct PartFileTamperingTests {
    private func started(_ scratch: Scratch, bytes: Int) throws -> (PartFile, path: String) {
        let a = try scratch.source("a.bin", count: bytes, seed: 11)
        var info = stat()
        try #require(stat(a.path, &info) == 0)
        let path = scratch.dst + "/a.part"
        let (file, _) = try PartFile.open(
            sourcePath: BytePath(a.path), partPath: BytePath(path), expected: DirectoryIO.identity(info))
        return (file, path)
    }

    private func refusal(_ body: () throws(JobError) -> Void) -> JobError? {
        do throws(JobError) {
            try body()
            return nil
        } catch { return error }
    }

    @Test func anUntouchedPartPasses() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (file, _) = try started(scratch, bytes: 6 << 20)
        _ = try file.copy(at: 0, count: 4 << 20, stop: CopyStop(), timeLimit: 60)
        try file.checkPart(length: 4 << 20)
    }

    @Test func aPartCutShortAndWrittenAgainPastTheCutHasAHole() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (file, path) = try started(scratch, bytes: 12 << 20)
        _ = try file.copy(at: 0, count: 4 << 20, stop: CopyStop(), timeLimit: 60)
        try file.finishHashing()
        #expect(truncate(path, 0) == 0)
        _ = try file.copy(at: 4 << 20, count: 8 << 20, stop: CopyStop(), timeLimit: 60)
        let error = try #require(refusal { () throws(JobError) in try file.checkPart(length: 12 << 20) })
        #expect(error.code == "write_failed" && error.retryable)
        #expect(error.message.contains("has a hole at byte 0"), "\(error.message)")
    }

    @Test func aPartCutShortOrWrittenPastTheCopyHasTheWrongLength() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (file, path) = try started(scratch, bytes: 6 << 20)
        _ = try file.copy(at: 0, count: 4 << 20, stop: CopyStop(), timeLimit: 60)
        #expect(truncate(path, 1 << 20) == 0)
        let short = try #require(refusal { () throws(JobError) in try file.checkPart(length: 4 << 20) })
        #expect(short.message.contains("became 1048576 bytes long, but 4194304 were copied"), "\(short.message)")
        #expect(truncate(path, 5 << 20) == 0)
        let long = try #require(refusal { () throws(JobError) in try file.checkPart(length: 4 << 20) })
        #expect(long.message.contains("became 5242880 bytes long"), "\(long.message)")
        #expect(short.retryable && long.retryable)
    }

    @Test func aPartRemovedOrReplacedIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (file, path) = try started(scratch, bytes: 2 << 20)
        _ = try file.copy(at: 0, count: 2 << 20, stop: CopyStop(), timeLimit: 60)
        // Moved aside (still linked) and another file put at its name.
        #expect(rename(path, scratch.dst + "/aside") == 0)
        try Data(count: 2 << 20).write(to: URL(fileURLWithPath: path))
        let replaced = try #require(refusal { () throws(JobError) in try file.checkPart(length: 2 << 20) })
        #expect(replaced.message.contains("was replaced by another file"), "\(replaced.message)")
        // The rename would have put the other file in place: refused before it.
        let final = scratch.dst + "/a.bin"
        let atCommit = refusal { () throws(JobError) in
            try file.commit(to: BytePath(final), length: 2 << 20)
        }
        #expect(atCommit != nil && !scratch.exists(final))
        #expect(unlink(path) == 0)
        let (removedFile, removedPath) = try started(scratch, bytes: 2 << 20)
        _ = try removedFile.copy(at: 0, count: 2 << 20, stop: CopyStop(), timeLimit: 60)
        #expect(unlink(removedPath) == 0)
        let removed = try #require(refusal { () throws(JobError) in try removedFile.checkPart(length: 2 << 20) })
        #expect(removed.message.contains("was removed"), "\(removed.message)")
    }

    /// A source that holds more than its `stat` size: refused at submit (`/proc` files say 0 bytes), and at the
    /// end of a copy when it grew.
    @Test func aSourceLongerThanItsSizeIsRefused() throws {
        let proc = "/proc/self/status"
        let atSubmit = refusal { () throws(JobError) in
            _ = try DirectoryIO.sourceIdentities(files: [BytePath(proc)], indices: 0..<1)
        }
        #expect(atSubmit?.code == "source_not_regular", "\(String(describing: atSubmit))")
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (file, _) = try started(scratch, bytes: 1 << 20)
        try file.checkSourceEnds(at: 1 << 20)
        let grown = refusal { () throws(JobError) in try file.checkSourceEnds(at: 1 << 20 - 1) }
        #expect(grown?.code == "source_changed", "\(String(describing: grown))")
    }
}
