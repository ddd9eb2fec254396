import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Issue 11 §1, 2, 5, 6, 7: changing sources, nothing left behind, bounded conflicts, numbers a person can trust,
/// servers that ignore checksums. Against the real tus server behind the fault-injecting proxy, and `file://`.
@Suite(.serialized)
struct TusIntegrityEndToEndTests {
    /// Overwrites 8 bytes at `offset` of `path` in place and puts its mtime back (what an editor that preserves
    /// times does): only the ctime shows the change.
    static func rewriteInPlaceKeepingTheMtime(_ path: String, at offset: UInt64) throws {
        var before = stat()
        #expect(stat(path, &before) == 0)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 8))
        try handle.close()
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    }

    static func patchBytes(_ servers: TusServers) throws -> [Int] {
        try servers.requests().filter { $0["method"]?.stringValue == "PATCH" }
            .compactMap { $0["headers"]?["content-length"]?.stringValue.flatMap(Int.init) }
    }

    static func uploadURL(_ servers: TusServers) throws -> String {
        let path = try #require(
            try servers.requests().first { $0["method"]?.stringValue == "PATCH" }?["path"]?.stringValue)
        return "http://127.0.0.1:\(servers.proxy.port)\(path)"
    }

    // MARK: §1 a source that changes during the upload

    /// 8 bytes rewritten in place at 6 MiB of an 8 MiB file (mtime put back) while chunk 3 is sent: the job fails
    /// `source_changed` before the last chunk goes out, names the ctime with both values, and the partial upload
    /// is deleted on the server (it used to send all chunks, leaving a complete mixed object).
    @Test func aSourceRewrittenInPlaceDuringATusUploadStopsBeforeTheLastByteAndIsDeleted() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let size = 8 << 20
        _ = try UploadEndToEndTests.randomFile(work.file("m.bin"), bytes: size)
        let id = try daemon.submitUpload([
            work.file("m.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "4MiB",
        ])
        try daemon.waitFor(id, "2 MiB acknowledged") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 2 << 20 }
        try Self.rewriteInPlaceKeepingTheMtime(work.file("m.bin"), at: 6 << 20)
        let failed = try daemon.waitForState(id, "failed", timeout: 20)
        #expect(failed["error"]?["code"]?.stringValue == "source_changed")
        let message = failed["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("ctime was "), "\(message)")
        let sent = try Self.patchBytes(servers).reduce(0, +)
        #expect(sent < size, "the last byte never went out: \(sent) of \(size) bytes sent")
        let url = try Self.uploadURL(servers)
        try daemon.waitFor(id, timeout: 10, "the DELETE") { _ in (try? servers.methods().contains("DELETE")) == true }
        #expect([404, 410].contains(try servers.headStatus(url)), "the partial upload is gone from the server")
    }

    /// The same for `file://`: caught at the next chunk end, never renamed into place, no `.part` left.
    @Test func aSourceRewrittenInPlaceDuringAFileUploadStopsWithinAChunkAndLeavesNothing() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = try UploadEndToEndTests.randomFile(work.file("f.bin"), bytes: 16 << 20)
        let id = try daemon.submitUpload([
            work.file("f.bin"), "--to", work.file("out"), "--chunk-size", "1MiB", "--max-rate", "4MiB",
        ])
        try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 2 << 20 }
        try Self.rewriteInPlaceKeepingTheMtime(work.file("f.bin"), at: 12 << 20)
        let failed = try daemon.waitForState(id, "failed", timeout: 20)
        #expect(failed["error"]?["code"]?.stringValue == "source_changed")
        #expect(failed["error"]?["message"]?.stringValue?.contains("ctime was ") == true)
        let completed = failed["progress"]?["completed"]?.intValue ?? .max
        #expect(completed < 12 << 20, "stopped within a chunk of the change, at \(completed)")
        try daemon.waitFor(id, timeout: 10, "the .part removed") { _ in
            (try? FileManager.default.contentsOfDirectory(atPath: work.file("out")).isEmpty) == true
        }
    }

    /// A truncated source is caught before the next chunk, and the message says where it ended.
    @Test func aTruncatedSourceIsCaughtBeforeTheNextChunk() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("t.bin"), bytes: 8 << 20)
        let id = try daemon.submitUpload([
            work.file("t.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "4MiB",
        ])
        try daemon.waitFor(id, "1 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        #expect(truncate(work.file("t.bin"), 5 << 20) == 0)
        let failed = try daemon.waitForState(id, "failed", timeout: 20)
        let message = failed["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("size was 8388608 bytes, now 5242880"), "\(message)")
        #expect(try Self.patchBytes(servers).reduce(0, +) <= 5 << 20, "nothing past the new end was sent")
    }

    // MARK: §2 nothing left behind

    /// A job that fails while the server answers every DELETE with 503: the termination is retried with backoff,
    /// survives a `kill -9` of the daemon, and is done once the server answers.
    @Test func aFailedUploadsTerminationIsRetriedAcrossARestartUntilTheServerAnswers() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("d.bin"), bytes: 8 << 20)
        try servers.arm("status?code=503&count=1000&method=DELETE")
        let id = try daemon.submitUpload([
            work.file("d.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "4MiB",
        ])
        try daemon.waitFor(id, "1 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("d.bin")))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([1]))
        try handle.close()
        let failed = try daemon.waitForState(id, "failed", timeout: 20)
        #expect(failed["error"]?["code"]?.stringValue == "source_changed")
        let url = try Self.uploadURL(servers)
        // Tries at once, then about 1 s and 2 s later.
        try daemon.waitFor(id, timeout: 15, "three DELETEs refused") { _ in
            ((try? servers.methods().filter { $0 == "DELETE" }.count) ?? 0) >= 3
        }
        #expect(daemon.log().contains("clean-up try 2 failed"), "retries are logged")
        #expect(daemon.log().contains(url), "with the URL")
        #expect(try servers.headStatus(url) == 200, "still there while the server refuses")
        try daemon.crash()
        try servers.arm("reset")
        try daemon.start()
        let deleted = try? daemon.waitFor(id, timeout: 20, "the upload deleted after the restart") { _ in
            [404, 410].contains((try? servers.headStatus(url)) ?? 0)
        }
        #expect(deleted != nil, "not deleted after the restart; daemon log:\n\(daemon.log().suffix(3000))")
        #expect(try daemon.show(id)["state"]?.stringValue == "failed")
    }

    /// Issue 10 §3 for clean-ups: the wait between two tries of a termination runs on the monotonic clock, so a
    /// wall clock stepped back an hour during it does not put the next `DELETE` off by that hour.
    @Test func aWallClockStepBackDuringACleanUpWaitDoesNotDelayTheNextTry() throws {
        let servers = try TusServers()
        let clock = try FakeClock()
        let daemon = try DaemonHarness(environment: clock.environment)
        defer { _ = try? daemon.stop() }
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("w.bin"), bytes: 4 << 20)
        try servers.arm("status?code=503&count=1&method=DELETE")
        let id = try daemon.submitUpload([
            work.file("w.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "2MiB",
        ])
        try daemon.waitFor(id, "1 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("w.bin")))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([1]))
        try handle.close()
        try daemon.waitForState(id, "failed", timeout: 20)
        // The first DELETE is refused; the next try is due 0.5-1 s later. Step the clock back before it.
        try daemon.waitFor(id, timeout: 10, "the first try refused") { _ in daemon.log().contains("clean-up try 1 failed") }
        try clock.set("-1h")
        let steppedAt = Date()
        let url = try Self.uploadURL(servers)
        let deleted = try? daemon.waitFor(id, timeout: 10, "the upload deleted") { _ in
            [404, 410].contains((try? servers.headStatus(url)) ?? 0)
        }
        #expect(deleted != nil, "not deleted; daemon log:\n\(daemon.log().suffix(2000))")
        #expect(Date().timeIntervalSince(steppedAt) < 3, "the second try came \(Date().timeIntervalSince(steppedAt)) s after the step")
    }

    /// With a short `--cleanup-budget`, a server that never accepts the DELETE is given up on, and the log says
    /// so with the URL left behind; the pending clean-up is gone (no more DELETEs).
    @Test func aTerminationThatNeverSucceedsIsGivenUpAfterTheBudgetAndLoggedWithTheURL() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness(arguments: ["--cleanup-budget", "2s"])
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("g.bin"), bytes: 4 << 20)
        try servers.arm("status?code=503&count=1000&method=DELETE")
        let id = try daemon.submitUpload([
            work.file("g.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "2MiB",
        ])
        try daemon.waitFor(id, "1 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        #expect(try daemon.cli(["cancel", id]).status == 0)
        let url = try Self.uploadURL(servers)
        try daemon.waitFor(id, timeout: 20, "the give-up") { _ in daemon.log().contains("clean-up given up") }
        let line = try #require(daemon.log().split(separator: "\n").first { $0.contains("clean-up given up") })
        #expect(line.contains(url), "\(line)")
        let deletes = try servers.methods().filter { $0 == "DELETE" }.count
        #expect(deletes >= 2)
        usleep(3_000_000)
        #expect(try servers.methods().filter { $0 == "DELETE" }.count == deletes, "no more tries after giving up")
        #expect(try servers.headStatus(url) == 200, "what was left behind")
    }

    // MARK: §5 conflicts and rejected checksums

    /// Every PATCH answered 409 while HEAD reports the same offset: 4 PATCHes in all, with waits between them, then
    /// `failed` with `offset_mismatch` (it used to be 20 full PATCHes 5–21 ms apart).
    @Test func aPersistentConflictCostsFourPatchesThenFails() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("c.bin"), bytes: 4 << 20)
        try servers.arm("status?code=409&count=1000&method=PATCH")
        let started = Date()
        let id = try daemon.submitUpload([work.file("c.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB"])
        let failed = try daemon.waitForState(id, "failed", timeout: 30)
        let elapsed = Date().timeIntervalSince(started)
        #expect(failed["error"]?["code"]?.stringValue == "offset_mismatch")
        #expect(failed["attempt"]?.intValue == 1, "not retried as another attempt")
        let methods = try servers.methods()
        #expect(methods.filter { $0 == "PATCH" }.count == 4, "\(methods)")
        #expect(methods.filter { $0 == "HEAD" }.count == 3, "\(methods)")
        #expect(elapsed >= 0.85, "waits of at least 250 + 250 + 500 ms between the PATCHes: \(elapsed) s")
    }

    /// A path that corrupts every chunk: the server (which verifies) refuses each with 460; 4 PATCHes of the
    /// chunk, then `failed` with `checksum_mismatch`.
    @Test func aPersistentChecksumMismatchCostsFourPatchesThenFails() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("k.bin"), bytes: 4 << 20)
        try servers.arm("checksum?on=1")
        try servers.arm("corrupt?count=1000")
        let id = try daemon.submitUpload([work.file("k.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB"])
        let failed = try daemon.waitForState(id, "failed", timeout: 30)
        #expect(failed["error"]?["code"]?.stringValue == "checksum_mismatch")
        #expect(failed["attempt"]?.intValue == 1)
        let sizes = try Self.patchBytes(servers)
        #expect(sizes == [0, 1 << 20, 1 << 20, 1 << 20, 1 << 20], "the probe, then 4 PATCHes of the chunk: \(sizes)")
    }

    /// A connection reset in the middle of a PATCH is reported as a reset while sending, with the bytes sent.
    @Test func aResetMidPatchIsReportedAsAResetWhileSending() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("r.bin"), bytes: 4 << 20)
        try servers.arm("drop?after=300000&count=1")
        let id = try daemon.submitUpload([work.file("r.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB"])
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let log = daemon.log()
        #expect(log.contains("the connection was reset while sending the PATCH at offset 0"), "\(log.suffix(2000))")
        #expect(!log.contains("could not reach"))
    }

    // MARK: §6 numbers a person can trust

    /// A PATCH answered 503 after 256 KiB of its 1 MiB body (the rest drained by the proxy until the client
    /// closes): `bytes_resent` equals exactly the body bytes the proxy read beyond the file's size, `completed`
    /// never decreases, and bytes in flight show as `in_flight`.
    @Test func bytesResentIsExactlyWhatWentOutTwiceAndCompletedNeverFalls() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let size = 4 << 20
        let expected = try UploadEndToEndTests.randomFile(work.file("n.bin"), bytes: size)
        try servers.arm("status?code=503&count=1&method=PATCH&after=262144")
        let id = try daemon.submitUpload([
            work.file("n.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "2MiB",
        ])
        var seen: [Int64] = []
        var sawInFlight = false
        let done = try daemon.waitFor(id, timeout: 30, "succeeded") { job in
            if let completed = job["progress"]?["completed"]?.intValue { seen.append(completed) }
            if (job["progress"]?["in_flight"]?.intValue ?? 0) > 0 { sawInFlight = true }
            return job["state"]?.stringValue == "succeeded"
        }
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 <= $1 }, "completed fell: \(seen)")
        #expect(seen.allSatisfy { $0 % (1 << 20) == 0 || $0 == Int64(size) }, "only acknowledged chunk ends")
        #expect(sawInFlight, "in-flight bytes are shown apart")
        let proxied = try #require(try servers.stats()["patch_body_bytes"]?.intValue)
        let resent = try #require(done["result"]?["bytes_resent"]?.intValue)
        #expect(resent == proxied - Int64(size), "bytes_resent \(resent), proxy read \(proxied) for \(size)")
        #expect(resent > 0 && resent < 1 << 20, "part of one chunk went twice: \(resent)")
    }

    /// A server that lost acknowledged bytes (its offset set back while the job was paused): `completed` falls to
    /// the server's offset once, with an explicit `server_offset_regressed` event naming both offsets.
    @Test func aServerThatLostBytesIsAnnouncedWithBothOffsets() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("l.bin"), bytes: 6 << 20)
        let id = try daemon.submitUpload([
            work.file("l.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "2MiB",
        ])
        try daemon.waitFor(id, "3 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 3 << 20 }
        #expect(try daemon.cli(["pause", id]).status == 0)
        let paused = try daemon.show(id)
        let acknowledged = try #require(paused["progress"]?["completed"]?.intValue)
        let url = try Self.uploadURL(servers)
        // tuspyserver keeps the offset in DIR/<id>.info: set it back to 1 MiB and cut the data to match. Under the
        // server's own lock of the upload (flock of DIR/.locks/<id>.lock): the PATCH the pause cut short may still
        // be saving its offset, which would otherwise overwrite the edit (a lost-bytes server that does not say so).
        let stored = servers.storedPath(url)
        let lockDirectory = (stored as NSString).deletingLastPathComponent + "/.locks"
        mkdir(lockDirectory, 0o755)
        let lock = open(lockDirectory + "/" + (stored as NSString).lastPathComponent + ".lock", O_RDWR | O_CREAT, 0o644)
        #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
        let infoPath = stored + ".info"
        var info = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: infoPath))) as? [String: Any])
        info["offset"] = 1 << 20
        try JSONSerialization.data(withJSONObject: info).write(to: URL(fileURLWithPath: infoPath))
        #expect(truncate(stored, 1 << 20) == 0)
        flock(lock, LOCK_UN)
        close(lock)
        #expect(try daemon.cli(["resume", id]).status == 0)
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        #expect(try UploadEndToEndTests.sha256(ofFile: stored) == expected)
        let log = daemon.log()
        #expect(
            log.contains("server_offset_regressed: l.bin: the server now reports 1048576 bytes, less than the \(acknowledged)"),
            "\(log.suffix(3000))")
    }

    /// A finished 0-byte upload has fraction 1.0 (tus and file://).
    @Test func anEmptyUploadFinishesAtFractionOne() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: work.file("empty.bin"), contents: Data())
        for destination in [servers.endpoint, work.file("out")] {
            let result = try daemon.cli(["submit", "upload", work.file("empty.bin"), "--to", destination, "--wait", "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
            #expect(job["progress"]?["fraction"]?.doubleValue == 1.0, "\(destination)")
            #expect(job["progress"]?["total"]?.intValue == 0)
        }
    }

    /// A job stopped once (SIGTERM) and then succeeded: `cancellation` is null (it is not a stopped job) and
    /// `last_stop` keeps the stop.
    @Test func aJobStoppedThenSucceededHasNoCancellationButALastStop() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("s.bin"), bytes: 4 << 20)
        let id = try daemon.submitUpload([
            work.file("s.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "2MiB",
        ])
        try daemon.waitFor(id, "1 MiB") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        let (status, _) = try daemon.stop(signal: SIGTERM)
        #expect(status == 0)
        try daemon.start()
        let queued = try daemon.show(id)
        if queued["state"]?.stringValue == "queued" {
            #expect(queued["cancellation"]?["reason"]?.stringValue == "resource_reclaim")
        }
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        #expect(done["cancellation"]?.isNull == true)
        #expect(done["last_stop"]?["reason"]?.stringValue == "resource_reclaim")
    }

    // MARK: §7 a server that ignores checksums

    @Test func aServerThatVerifiesChecksumsIsReportedVerified() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("v.bin"), bytes: 3 << 20)
        try servers.arm("checksum?on=1")
        let result = try daemon.cli([
            "submit", "upload", work.file("v.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--wait", "--json",
        ])
        let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(job["result"]?["checksum_verified"]?.boolValue == true)
        #expect(job["result"]?["files"]?.arrayValue?.first?["checksum_verified"]?.boolValue == true)
        #expect(job["result"]?["sha256"]?.stringValue == expected)
        #expect(try Self.patchBytes(servers) == [0, 1 << 20, 1 << 20, 1 << 20], "one 0-byte probe, then the chunks")
        #expect(job["result"]?["bytes_resent"]?.intValue == 0)
    }

    /// A server that advertises the checksum extension but does not verify, behind a path that corrupts a byte:
    /// the job cannot know the stored bytes are wrong, and says so with `checksum_verified: false`.
    @Test func aServerThatIgnoresChecksumsIsNoticed() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("i.bin"), bytes: 3 << 20)
        try servers.arm("checksum?on=1&verify=0")
        try servers.arm("corrupt?count=2")
        let result = try daemon.cli([
            "submit", "upload", work.file("i.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--wait", "--json",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(job["result"]?["checksum_verified"]?.boolValue == false)
        #expect(job["result"]?["files"]?.arrayValue?.first?["checksum_verified"]?.boolValue == false)
        let url = try #require(job["result"]?["url"]?.stringValue)
        #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) != expected, "the server kept a corrupt byte")
        #expect(daemon.log().contains("accepted a wrong Upload-Checksum"))

        let plain = try TusServers()
        let other = try daemon.cli([
            "submit", "upload", work.file("i.bin"), "--to", plain.endpoint, "--chunk-size", "1MiB", "--wait", "--json",
        ])
        let unchecked = try JSONCoding.decode(JSONValue.self, from: Array(other.stdout.utf8))
        #expect(unchecked["result"]?["checksum_verified"]?.boolValue == false, "no checksum extension: not verified")
    }
}
