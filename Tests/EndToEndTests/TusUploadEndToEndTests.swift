import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// The upload job to a real tus server (tuspyserver, through the fault-injecting proxy), driven through the real
/// daemon and CLI. Needs `Tests/Support/tus-server/setup.sh` to have run once; fails with that advice otherwise.
@Suite(.serialized)
struct TusUploadEndToEndTests {
    func patches(_ servers: TusServers) throws -> [JSONValue] {
        try servers.requests().filter { $0["method"]?.stringValue == "PATCH" }
    }

    @Test func a256MiBFileArrivesWithTheSameSHA256InChunksOfTheGivenSize() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let size = 256 << 20
        let chunk = 16 << 20
        let expected = try UploadEndToEndTests.randomFile(work.file("big.bin"), bytes: size)
        let result = try daemon.cli([
            "submit", "upload", work.file("big.bin"), "--to", servers.endpoint, "--chunk-size", "16MiB", "--wait",
            "--json",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(job["state"]?.stringValue == "succeeded")
        let url = try #require(job["result"]?["url"]?.stringValue)
        #expect(url.hasPrefix(servers.endpoint))
        #expect(job["result"]?["files"]?.arrayValue?.first?["url"]?.stringValue == url)
        #expect(job["result"]?["bytes"]?.intValue == Int64(size))
        #expect(job["result"]?["sha256"]?.stringValue == expected)
        #expect(job["result"]?["bytes_resent"]?.intValue == 0)
        #expect(job["progress"]?["completed"]?.intValue == Int64(size))
        #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == expected, "the server's copy")
        let sizes = try patches(servers).compactMap { $0["headers"]?["content-length"]?.stringValue.flatMap(Int.init) }
        #expect(sizes == Array(repeating: chunk, count: size / chunk), "one PATCH of --chunk-size per chunk")
        #expect(try servers.methods().filter { $0 == "POST" }.count == 1)
    }

    /// Two sources with the same file name go to two upload URLs (tus does not care about names; they are only
    /// `Upload-Metadata`), each with its own bytes.
    @Test func sourcesWithTheSameNameGetAnUploadEach() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work.file("a"), withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: work.file("b"), withIntermediateDirectories: false)
        let first = try UploadEndToEndTests.randomFile(work.file("a/IMG_1.jpg"), bytes: 300_000)
        let second = try UploadEndToEndTests.randomFile(work.file("b/IMG_1.jpg"), bytes: 200_000)
        let result = try daemon.cli([
            "submit", "upload", work.file("a/IMG_1.jpg"), work.file("b/IMG_1.jpg"), "--to", servers.endpoint,
            "--wait", "--json",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        let urls = (job["result"]?["files"]?.arrayValue ?? []).compactMap { $0["url"]?.stringValue }
        #expect(urls.count == 2 && Set(urls).count == 2, "\(urls)")
        #expect(try urls.map { try UploadEndToEndTests.sha256(ofFile: servers.storedPath($0)) } == [first, second])
    }

    /// A source whose name is not UTF-8 (Latin-1 `caf\xe9.jpg`) uploads: its `filename` metadata is the base64 of
    /// its exact bytes (tus metadata values are bytes), and the result names it as `{"base64", "text"}`.
    @Test func aNameThatIsNotUTF8UploadsWithItsBytesAsTheFilename() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let name = TemporaryDirectory.latin1Name
        let content = [UInt8](repeating: 0x5A, count: 100_000)
        try work.create(name, contents: content)
        let result = try DaemonHarness.run(
            "/bin/sh",
            ["-c", "exec \"$0\" submit upload \"$1/$(printf 'caf\\351.jpg')\" --to \"$2\" --wait --json", Binary.path, work.file(""), servers.endpoint],
            environment: daemon.environment)
        #expect(result.status == 0, "\(result.stderr)")
        let job = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(job["state"]?.stringValue == "succeeded", "\(job)")
        let file = job["result"]?["files"]?.arrayValue?.first
        #expect(file?["name"] == ["base64": "Y2Fm6S5qcGc=", "text": "caf\\xe9.jpg"])
        let url = try #require(file?["url"]?.stringValue)
        #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == SHA256.hexDigest(of: Data(content)))
    }

    @Test func kill9HalfWayThenRestartResumesFromTheServersOffset() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let size = 64 << 20
        let chunk = 4 << 20
        let expected = try UploadEndToEndTests.randomFile(work.file("photo.bin"), bytes: size)
        let id = try daemon.submitUpload([
            work.file("photo.bin"), "--to", servers.endpoint, "--max-rate", "16MiB", "--chunk-size", "4MiB",
        ])
        try daemon.waitFor(id, timeout: 20, "half way") { ($0["progress"]?["completed"]?.intValue ?? 0) >= Int64(size / 2) }
        try daemon.crash()
        let before = try servers.methods().count
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        let resent = try #require(done["result"]?["bytes_resent"]?.intValue)
        #expect(resent <= Int64(chunk), "re-sent \(resent) bytes, more than one chunk")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let url = try #require(done["result"]?["url"]?.stringValue)
        #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == expected)
        let after = Array(try servers.methods().dropFirst(before))
        #expect(after.prefix(2) == ["OPTIONS", "HEAD"], "resumed by asking the server's offset: \(after)")
        #expect(!after.contains("POST"), "the same upload was continued")
    }

    /// Many files of one `PATCH` each are recorded as they land on `LandedFilesCadence`'s terms (not three saves
    /// per file): a `kill -9` amid them resumes with every file once in the result, in order, each stored with
    /// the source's bytes, and sends again at most the upload under way and 1/64 of the files that had landed.
    @Test func kill9AmidManySmallFilesResendsAtMostASixtyFourthOfTheLandedOnes() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        // 200 files, killed after 100 were created: the bound below (100 / 64 + 1 = 2 files) still tells a cadence
        // that saves rarely from one that saves on its terms, at half the time of 400 (this test was the suite's
        // slowest, 43 s).
        let count = 200
        var expected: [String] = []
        for i in 0..<count {
            expected.append(try UploadEndToEndTests.randomFile(work.file(String(format: "p%03d.jpg", i)), bytes: 2000))
        }
        let id = try daemon.submitUpload(
            (0..<count).map { work.file(String(format: "p%03d.jpg", $0)) } + ["--to", servers.endpoint])
        func posts() throws -> Int { Int(try servers.stats()["requests"]?["POST"]?.intValue ?? 0) }
        let deadline = Date().addingTimeInterval(60)
        while try posts() < count / 2 {
            guard Date() < deadline else { throw HarnessError("\(count / 2) uploads not created within 60 s") }
            usleep(5_000)
        }
        try daemon.crash()
        let created = try posts()
        #expect(created >= count / 2 && created < count, "killed amid the files, after \(created) uploads were created")
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 120)
        let files = try #require(done["result"]?["files"]?.arrayValue)
        #expect(files.map { $0["sha256"]?.stringValue } == expected, "every file once, in order")
        let urls = files.compactMap { $0["url"]?.stringValue }
        #expect(urls.count == count && Set(urls).count == count)
        for (url, sha256) in zip(urls, expected) {
            #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == sha256, "\(url)")
        }
        // Files sent again: the resumed job creates an upload for every file past its checkpoint.
        let again = try posts() - count
        #expect(again >= 0 && again <= created / 64 + 1, "\(again) of the \(created) files created before the kill sent again")
    }

    @Test func cancelMidPatchDeletesTheUploadOnTheServerAtOnce() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("a.bin"), bytes: 64 << 20)
        let id = try daemon.submitUpload([
            work.file("a.bin"), "--to", servers.endpoint, "--max-rate", "4MiB", "--chunk-size", "32MiB",
        ])
        // Mid-PATCH: in-flight bytes show in the progress (`in_flight`) long before the 32 MiB chunk ends.
        try daemon.waitFor(id, "bytes in flight") { ($0["progress"]?["in_flight"]?.intValue ?? 0) > 2 << 20 }
        #expect(try daemon.show(id)["progress"]?["completed"]?.intValue == 0, "nothing acknowledged yet")
        let url = try #require(try servers.requests().first { $0["method"]?.stringValue == "PATCH" }?["path"]?.stringValue)
        let fullURL = "http://127.0.0.1:\(servers.proxy.port)\(url)"
        let started = Date()
        let job = try daemon.job(["op": "cancel", "job": .string(id)])
        let elapsed = Date().timeIntervalSince(started)
        #expect(job["state"]?.stringValue == "cancelled")
        #expect(job["cancellation"]?["reason"]?.stringValue == "user_stop")
        // 100 ms plus one round trip (the DELETE) on a loopback server: 150 ms is generous.
        #expect(elapsed < 0.15, "cancel took \(elapsed) s")
        #expect([404, 410].contains(try servers.headStatus(fullURL)), "the server no longer has the upload")
        let methods = try servers.methods()
        #expect(methods.last == "DELETE", "\(methods)")
        #expect(!FileManager.default.fileExists(atPath: servers.storedPath(fullURL)))
    }

    @Test func sigtermRequeuesAndTheUploadResumesAfterRestart() throws {
        let servers = try TusServers()
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("t.bin"), bytes: 32 << 20)
        let id = try daemon.submitUpload([
            work.file("t.bin"), "--to", servers.endpoint, "--max-rate", "16MiB", "--chunk-size", "2MiB",
        ])
        try daemon.waitFor(id, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) > 8 << 20 }
        let (status, seconds) = try daemon.stop(signal: SIGTERM)
        #expect(status == 0)
        #expect(seconds < 2)
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        #expect(done["cancellation"]?.isNull == true, "a succeeded job is not a stopped one")
        #expect(done["last_stop"]?["reason"]?.stringValue == "resource_reclaim")
        #expect((done["result"]?["bytes_resent"]?.intValue ?? .max) <= 2 << 20)
        let url = try #require(done["result"]?["url"]?.stringValue)
        #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == expected)
        #expect(try servers.methods().filter { $0 == "POST" }.count == 1, "kept on the server and resumed")
    }

    // MARK: error kinds, each provoked through the proxy

    /// Uploads a 6 MiB file in 1 MiB chunks with the proxy armed with `faults`; returns the job once in `state`,
    /// with the source's directory and the daemon (both kept alive by the caller while it needs them).
    func upload(
        _ servers: TusServers, faults: [String], arguments: [String] = [], until state: String = "succeeded",
        timeout: Double = 30
    ) throws -> (job: JSONValue, work: TemporaryDirectory, daemon: DaemonHarness) {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("e.bin"), bytes: 6 << 20)
        for fault in faults { try servers.arm(fault) }
        let id = try daemon.submitUpload([work.file("e.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB"] + arguments)
        let job = try daemon.waitForState(id, state, timeout: timeout)
        if state == "succeeded", let url = job["result"]?["url"]?.stringValue {
            #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == expected)
            #expect(job["result"]?["sha256"]?.stringValue == expected)
        }
        return (job, work, daemon)
    }

    @Test func a409IsFollowedByHeadAndTheUploadContinues() throws {
        let servers = try TusServers()
        _ = try upload(servers, faults: ["status?code=409&count=1&method=PATCH"])
        let methods = try servers.methods()
        let conflict = try #require(methods.firstIndex(of: "PATCH"))
        #expect(methods[conflict + 1] == "HEAD", "\(methods)")
    }

    @Test func aLostUploadIsCreatedAgainOnceThenFailsWithGone() throws {
        let servers = try TusServers()
        let (job, _, _) = try upload(servers, faults: ["status?code=404&count=1&method=PATCH"])
        #expect(try servers.methods().filter { $0 == "POST" }.count == 2, "created again after 404")
        #expect((job["result"]?["bytes_resent"]?.intValue ?? 0) > 0, "the chunk the lost upload refused went again")

        let again = try TusServers()
        let (failed, _, _) = try upload(again, faults: ["status?code=410&count=2&method=PATCH"], until: "failed")
        #expect(failed["error"]?["code"]?.stringValue == "gone")
        #expect(try again.methods().filter { $0 == "POST" }.count == 2, "one new upload, not a loop")
    }

    @Test func aChecksumMismatchResendsTheChunk() throws {
        let servers = try TusServers()
        let (job, _, _) = try upload(servers, faults: ["checksum?on=1", "corrupt?count=1"])
        #expect(job["result"]?["bytes_resent"]?.intValue == 1 << 20, "the corrupted chunk was sent again")
        let patches = try patches(servers)
        #expect(patches.allSatisfy { ($0["headers"]?["upload-checksum"]?.stringValue ?? "").hasPrefix("sha256 ") })
    }

    @Test func tooLargeFailsBeforeSendingAnything() throws {
        let servers = try TusServers(maxSize: 1 << 20)
        let (job, _, _) = try upload(servers, faults: [], until: "failed")
        #expect(job["error"]?["code"]?.stringValue == "too_large")
        #expect(try servers.methods() == ["OPTIONS"], "nothing but OPTIONS was sent")

        let again = try TusServers()
        let (refused, _, _) = try upload(again, faults: ["status?code=413&count=1&method=POST"], until: "failed")
        #expect(refused["error"]?["code"]?.stringValue == "too_large")
        #expect(!(try again.methods().contains("PATCH")))
    }

    @Test func unauthorizedPausesAtOnceAndHeaderValuesAreNeverShown() throws {
        let servers = try TusServers(token: "s3cret-token")
        let (job, _, daemon) = try upload(
            servers, faults: [], arguments: ["--header", "Authorization: Bearer wrong-token"], until: "paused")
        #expect(job["error"]?["code"]?.stringValue == "unauthorized")
        #expect(job["attempt"]?.intValue == 1)
        #expect(try servers.methods() == ["OPTIONS"], "no retry storm")

        let (ok, _, okDaemon) = try upload(servers, faults: [], arguments: ["--header", "Authorization: Bearer s3cret-token"])
        #expect(ok["params"]?["headers"]?.arrayValue?.first?.stringValue == "Authorization: <redacted>")
        let id = try #require(ok["id"]?.stringValue)
        let shown = try okDaemon.cli(["show", id, "--json"])
        #expect(!shown.stdout.contains("s3cret-token"))
        #expect(!okDaemon.log().contains("s3cret-token") && !daemon.log().contains("wrong-token"))
    }

    /// Issue 11 §4: the server's token is rotated half way (tus server `--token-file`). The job stops `paused`
    /// with `unauthorized`, its upload kept; `resume --header` with the new token continues the same upload from
    /// the server's offset. No token appears in `show`, the daemon's log or the feed.
    @Test func aRotatedTokenPausesTheJobAndResumeWithANewHeaderContinuesTheUpload() throws {
        let servers = try TusServers(tokenFile: true)
        try "old-token-1111\n".write(toFile: servers.tokenFile, atomically: true, encoding: .utf8)
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let size = 8 << 20
        let expected = try UploadEndToEndTests.randomFile(work.file("r.bin"), bytes: size)
        let id = try daemon.submitUpload([
            work.file("r.bin"), "--to", servers.endpoint, "--chunk-size", "1MiB", "--max-rate", "4MiB",
            "--header", "Authorization: Bearer old-token-1111", "--header", "X-Trace: t-42",
        ])
        try daemon.waitFor(id, "two chunks") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 2 << 20 }
        try "new-token-2222\n".write(toFile: servers.tokenFile, atomically: true, encoding: .utf8)
        let paused = try daemon.waitForState(id, "paused", timeout: 10)
        #expect(paused["error"]?["code"]?.stringValue == "unauthorized")
        #expect(paused["error"]?["message"]?.stringValue?.contains("resume") == true)
        #expect(paused["attempt"]?.intValue == 1)
        let confirmed = try #require(paused["progress"]?["completed"]?.intValue)
        #expect(confirmed >= 2 << 20 && confirmed < Int64(size))
        let before = try servers.methods().count

        // A resume with a header that is still wrong pauses it again at once.
        #expect(try daemon.cli(["resume", id, "--header", "authorization: Bearer still-wrong-3333"]).status == 0)
        func triedWrong() -> Bool {
            ((try? servers.requests()) ?? []).contains { $0["headers"]?["authorization"]?.stringValue == "Bearer still-wrong-3333" }
        }
        let again = try daemon.waitFor(id, "paused again") { $0["state"]?.stringValue == "paused" && triedWrong() }
        #expect(again["error"]?["code"]?.stringValue == "unauthorized")

        let resumed = try daemon.cli(["resume", id, "--header", "Authorization: Bearer new-token-2222", "--json"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(!resumed.stdout.contains("new-token-2222"))
        let done = try daemon.waitForState(id, "succeeded", timeout: 30)
        let headers = done["params"]?["headers"]?.arrayValue?.compactMap(\.stringValue)
        #expect(headers == ["X-Trace: <redacted>", "Authorization: <redacted>"], "replaced by name, kept the other")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let url = try #require(done["result"]?["url"]?.stringValue)
        #expect(try UploadEndToEndTests.sha256(ofFile: servers.storedPath(url)) == expected)
        #expect(try servers.methods().filter { $0 == "POST" }.count == 1, "the same upload was continued")
        let after = Array(try servers.requests().dropFirst(before))
        let lastRun = after.suffix(from: try #require(after.lastIndex { $0["method"]?.stringValue == "OPTIONS" }))
        #expect(lastRun.prefix(2).compactMap { $0["method"]?.stringValue } == ["OPTIONS", "HEAD"], "asked the server's offset")
        #expect(lastRun.allSatisfy { $0["headers"]?["authorization"]?.stringValue == "Bearer new-token-2222" })
        #expect(lastRun.allSatisfy { $0["headers"]?["x-trace"]?.stringValue == "t-42" })
        #expect((done["result"]?["bytes_resent"]?.intValue ?? .max) <= 1 << 20)

        let shown = try daemon.cli(["show", id, "--json"]).stdout + daemon.cli(["show", id]).stdout
        // The whole feed so far, replayed (`since` 0) until it goes quiet for a second.
        let replay = try daemon.rawReplies(Array("{\"op\": \"watch\", \"since\": 0}\n".utf8), count: 100_000, replyTimeout: 1)
        let events = replay.map { String(decoding: JSONCoding.encode($0), as: UTF8.self) }.joined(separator: "\n")
        #expect(replay.count > 10, "the feed was read: \(replay.count) lines")
        for secret in ["old-token-1111", "new-token-2222", "still-wrong-3333", "t-42"] {
            #expect(!shown.contains(secret), "show has \(secret)")
            #expect(!daemon.log().contains(secret), "the log has \(secret)")
            #expect(!events.contains(secret), "the feed has \(secret)")
        }
        #expect(events.contains("unauthorized"), "the feed saw the pause")
    }

    @Test func aDroppedConnectionResumesFromTheServersOffset() throws {
        let servers = try TusServers()
        let (job, _, _) = try upload(servers, faults: ["drop?after=300000&count=1"])
        let resent = try #require(job["result"]?["bytes_resent"]?.intValue)
        #expect(resent > 0 && resent <= 1 << 20, "\(resent)")
        let methods = try servers.methods()
        let drop = try #require(methods.firstIndex(of: "PATCH"))
        #expect(methods[drop + 1] == "HEAD", "\(methods)")
    }

    /// Issue 11 §3: transient failures are given up by elapsed time (`--give-up-after`), within one attempt.
    @Test func serverErrorsAreWaitedOutUntilGiveUpAfterThenFailWithUnavailable() throws {
        let servers = try TusServers()
        let started = Date()
        let (job, _, _) = try upload(
            servers, faults: ["status?code=503&count=1000&method=PATCH"], arguments: ["--give-up-after", "4s"],
            until: "failed", timeout: 40)
        let elapsed = Date().timeIntervalSince(started)
        #expect(job["error"]?["code"]?.stringValue == "unavailable")
        #expect(job["error"]?["message"]?.stringValue?.contains("HTTP 503") == true, "\(job["error"] ?? .null)")
        #expect(job["attempt"]?.intValue == 1, "one attempt, not --max-attempts of them")
        #expect(job["give_up_after_s"]?.doubleValue == 4)
        #expect(elapsed >= 4 && elapsed < 20, "gave up after \(elapsed) s")
        let patches = try servers.methods().filter { $0 == "PATCH" }.count
        #expect(patches >= 2 && patches <= 16, "backed off: \(patches) PATCHes in 4 s")
    }
}
