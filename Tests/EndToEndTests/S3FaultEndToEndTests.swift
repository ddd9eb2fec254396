import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// What S3 refuses, and the crash between `CreateMultipartUpload` and the checkpoint, through the real daemon
/// against moto (Tests/Support/s3-server/server.py, whose fault layer answers as S3 does: it checks the request
/// time, expires session tokens, limits body sizes, withholds answers). Each case asserts the job's end, its error
/// code and message, and how many requests it took (no retry storm).
@Suite(.serialized)
struct S3FaultEndToEndTests {
    typealias E2E = S3UploadEndToEndTests

    /// The requests after the first `skip`.
    static func since(_ skip: Int, _ server: S3Server) throws -> [JSONValue] { Array(try server.requests().dropFirst(skip)) }

    /// The `log` events of `id` the daemon still keeps (replayed with `since: 0`), up to its `succeeded` event.
    static func logMessages(_ daemon: DaemonHarness, _ id: String) throws -> [String] {
        let socket = daemon.socketPath
        return try Thread.detachedResult { () -> [String] in
            guard let client = try? DaemonClient(socketPath: socket),
                (try? client.request(["op": "watch", "since": 0, "jobs": [.string(id)]])) != nil
            else { return [] }
            var messages: [String] = []
            while let event = try? client.readLine() {
                if event["type"]?.stringValue == "log", let text = event["message"]?.stringValue { messages.append(text) }
                if event["type"]?.stringValue == "state", event["to"]?.stringValue == "succeeded" { break }
            }
            return messages
        }.value()
    }

    static func message(_ job: JSONValue) -> String { job["error"]?["message"]?.stringValue ?? "" }

    @Test func anUnknownKeyAWrongSecretAndAKeyWithoutPermissionFailAtOnceWithTheirCodes() throws {
        let server = try S3Server(auth: true)
        let credentials = try JSONCoding.decode(
            JSONValue.self, from: Array(try TusServers.curl([server.endpoint + "/__credentials"]).utf8))
        let (key, secret) = try server.credentials()
        let deniedKey = try #require(credentials["denied_access_key_id"]?.stringValue)
        let deniedSecret = try #require(credentials["denied_secret_access_key"]?.stringValue)
        let work = TemporaryDirectory()
        // Multipart (12 MiB in 5 MiB parts): the first request is CreateMultipartUpload.
        _ = try UploadEndToEndTests.randomFile(work.file("k.bin"), bytes: 12 << 20)
        let cases: [(key: String, secret: String, code: String, advice: String)] = [
            ("AKIAUNKNOWNKEY000000", secret, "invalid_access_key_id", "the access key ID is unknown to this endpoint"),
            (key, secret + "x", "signature_does_not_match", "the secret access key is wrong"),
            (deniedKey, deniedSecret, "access_denied", "these credentials may not write to bucket 'photos'"),
        ]
        for (index, test) in cases.enumerated() {
            let before = try server.requests().count
            let daemon = try DaemonHarness(environment: server.environment(accessKey: test.key, secret: test.secret))
            let id = try daemon.submitUpload([work.file("k.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"])
            let failed = try daemon.waitForState(id, "failed")
            #expect(failed["error"]?["code"]?.stringValue == test.code, "case \(index)")
            #expect(Self.message(failed).contains(test.advice), "case \(index): \(Self.message(failed))")
            #expect(Self.message(failed).contains("CreateMultipartUpload k.bin"), "names the request")
            // Nothing was created, so the clean-up has nothing to ask: one request in all.
            usleep(300_000)
            let requests = try Self.since(before, server)
            #expect(requests.map(\.action) == ["CreateMultipartUpload"], "case \(index): \(requests.map(\.action))")
            #expect(requests.first?.status == 403)
            let shown = try daemon.cli(["show", id]).stdout
            #expect(!daemon.log().contains(test.secret) && !shown.contains(test.secret))
            _ = try daemon.stop()
        }
        #expect(try server.uploads() == 0)
    }

    @Test func aMissingBucketFailsAtOnceNamingIt() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("b.jpg"), bytes: 1000)
        let id = try daemon.submitUpload([work.file("b.jpg"), "--to", "s3://no-such-bucket/"])
        let failed = try daemon.waitForState(id, "failed")
        #expect(failed["error"]?["code"]?.stringValue == "no_such_bucket")
        #expect(Self.message(failed).contains("bucket 'no-such-bucket' does not exist at this endpoint; create it or fix --to"))
        usleep(300_000)
        let requests = try server.requests()
        #expect(requests.map(\.action) == ["PutObject"] && requests.first?.status == 404)
    }

    /// moto does not check request times; server.py does, as S3 does (15 minutes), against the daemon's clock
    /// set an hour back with libfaketime.
    @Test func aDaemonClockAnHourBehindFailsAtOnceNamingTheSkew() throws {
        let server = try S3Server()
        let clock = try FakeClock()
        try clock.set("-1h")
        let daemon = try DaemonHarness(environment: server.environment().merging(clock.environment) { $1 })
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("t.bin"), bytes: 12 << 20)
        let id = try daemon.submitUpload([work.file("t.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"])
        let failed = try daemon.waitForState(id, "failed")
        #expect(failed["error"]?["code"]?.stringValue == "request_time_too_skewed")
        let message = Self.message(failed)
        let skew = message.firstRange(of: "the daemon's clock is ").flatMap { range in
            Int(message[range.upperBound...].prefix { $0.isNumber || $0 == "-" })
        }
        #expect(skew.map { (3590...3610).contains($0) } == true, "names an hour's skew: \(message)")
        #expect(message.contains("set the clock (NTP) and resume the job"))
        usleep(300_000)
        let requests = try server.requests()
        #expect(requests.map(\.action) == ["CreateMultipartUpload"] && requests.first?.status == 403)
        // Set right, the next submission goes through.
        try clock.set("+0")
        let again = try daemon.submitUpload([work.file("t.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"])
        _ = try daemon.waitForState(again, "succeeded", timeout: 60)
        #expect(try server.uploads() == 0)
    }

    /// Like the tus `401`: the job waits in `needs_retry` with `expired_token`; the next attempt reads the
    /// credentials file again and resumes the same multipart upload.
    @Test func anExpiredTokenWaitsForNewCredentialsThenResumesTheSameUpload() throws {
        let server = try S3Server()
        let files = TemporaryDirectory("aws")
        let credentials = files.file("credentials")
        func write(token: String) throws {
            try "[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = test-secret\naws_session_token = \(token)\n"
                .write(toFile: credentials, atomically: true, encoding: .utf8)
        }
        try write(token: "token-one")
        var environment = server.environment(accessKey: "", secret: "")
        environment["AWS_SHARED_CREDENTIALS_FILE"] = credentials
        let daemon = try DaemonHarness(arguments: ["--retry-base", "2s"], environment: environment)
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("e.bin"), bytes: 25 << 20)
        let id = try daemon.submitUpload([
            work.file("e.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--max-rate", "8MiB",
            "--parts-in-flight", "2",
        ])
        try daemon.waitFor(id, "a part stored") { _ in (try? E2E.storedParts(server.requests()).count) ?? 0 >= 1 }
        try TusServers.curl(["-X", "POST", "-f", server.endpoint + "/__fault/expire?token=token-one"])
        let waiting = try daemon.waitForState(id, "needs_retry")
        try write(token: "token-two")
        #expect(waiting["error"]?["code"]?.stringValue == "expired_token")
        #expect(Self.message(waiting).contains("refresh the credentials the daemon reads, the job resumes on its next attempt"))
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["attempt"]?.intValue == 2)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let requests = try server.requests()
        let refused = requests.filter { $0.status == 400 }
        #expect(refused.allSatisfy { $0["token"]?.stringValue == "token-one" })
        #expect((1...2).contains(refused.count), "at most the parts in flight were refused, no retry storm: \(refused.count)")
        #expect(requests.allSatisfy { $0["token"]?.stringValue == "token-one" || $0["token"]?.stringValue == "token-two" })
        #expect(E2E.count(requests, "CreateMultipartUpload") == 1, "the same upload resumed")
        #expect(requests.last { $0.action == "ListParts" }?["token"]?.stringValue == "token-two")
        #expect(try server.object("e.bin")?.sha256 == expected)
        #expect(try server.uploads() == 0)
        #expect(!daemon.log().contains("test-secret"))
    }

    /// `429` and `503 SlowDown` are retried within the attempt: after `Retry-After` when given, else after the
    /// backoff (0.5 s doubling, × 0.5…1).
    @Test func tooManyRequestsAndSlowDownAreWaitedOutAsTheServerAsks() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("r.bin"), bytes: 11 << 20)
        try server.arm("code=429&count=1&action=UploadPart&s3_code=TooManyRequests&retry_after=2")
        try server.arm("code=503&count=2&action=UploadPart&s3_code=SlowDown")
        let id = try daemon.submitUpload([
            work.file("r.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--parts-in-flight", "1",
        ])
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["attempt"]?.intValue == 1, "retried within the attempt")
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let parts = try server.requests().filter { $0.action == "UploadPart" }
        // Part 1: 429 (Retry-After: 2), 503, 503, then stored; parts 2 and 3 at once: 3 retries, no more.
        #expect(parts.map(\.status) == [429, 503, 503, 200, 200, 200])
        #expect(parts.prefix(4).allSatisfy { $0.partNumber == 1 })
        let t = parts.map { $0["t"]?.doubleValue ?? 0 }
        #expect(t[1] - t[0] >= 2.0, "waited Retry-After: \(t[1] - t[0]) s")
        #expect(t[1] - t[0] < 4.0)
        // The third try of the request: 0.5 s × 2 × (0.5…1); the fourth: doubled.
        #expect(t[2] - t[1] >= 0.5, "backoff after the first SlowDown: \(t[2] - t[1]) s")
        #expect(t[3] - t[2] >= 1.0, "doubled after the second: \(t[3] - t[2]) s")
    }

    @Test func partsBelowTheServersMinimumFailAtCompleteAndTheUploadIsAborted() throws {
        let server = try S3Server()  // S3's 5 MiB minimum part
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("s.bin"), bytes: 3 << 20)
        let id = try daemon.submitUpload([
            work.file("s.bin"), "--to", "s3://photos/", "--chunk-size", "1MiB", "--min-part-size", "1MiB",
        ])
        let failed = try daemon.waitForState(id, "failed")
        #expect(failed["error"]?["code"]?.stringValue == "entity_too_small")
        #expect(Self.message(failed).contains("submit again with a larger --chunk-size and --min-part-size"))
        try E2E.waitUntil("the multipart upload is aborted") { try server.uploads() == 0 }
        let requests = try server.requests()
        #expect(E2E.count(requests, "UploadPart") == 3)
        #expect(E2E.count(requests, "CompleteMultipartUpload") == 1, "not retried")
        #expect(E2E.count(requests, "AbortMultipartUpload") == 1)
        #expect(try server.object("s.bin") == nil)
    }

    @Test func aPartOrObjectAboveTheServersLimitFailsAtOnce() throws {
        let server = try S3Server()
        try TusServers.curl(["-X", "POST", "-f", server.endpoint + "/__fault/limit?max=\(4 << 20)"])
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("big.bin"), bytes: 12 << 20)
        _ = try UploadEndToEndTests.randomFile(work.file("one.bin"), bytes: 4 << 20 + 1)
        let multipart = try daemon.submitUpload([
            work.file("big.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB", "--parts-in-flight", "1",
        ])
        let failed = try daemon.waitForState(multipart, "failed")
        #expect(failed["error"]?["code"]?.stringValue == "entity_too_large")
        #expect(Self.message(failed).contains("above the server's maximum size (4194304 bytes); submit again with a smaller --chunk-size"))
        try E2E.waitUntil("the multipart upload is aborted") { try server.uploads() == 0 }
        var requests = try server.requests()
        #expect(requests.filter { $0.action == "UploadPart" }.map(\.status) == [400], "one part, not retried")

        let single = try daemon.submitUpload([work.file("one.bin"), "--to", "s3://photos/"])
        let refused = try daemon.waitForState(single, "failed")
        #expect(refused["error"]?["code"]?.stringValue == "entity_too_large")
        usleep(300_000)
        requests = try server.requests()
        #expect(requests.filter { $0.action == "PutObject" }.map(\.status) == [400])
        #expect(try server.object("one.bin") == nil && server.object("big.bin") == nil)
    }

    // MARK: - CreateMultipartUpload without its answer

    /// The server makes the upload, the answer is withheld, the daemon is killed: the restarted daemon finds
    /// that upload (ListMultipartUploads) and completes it; no second upload is created, none is left over.
    @Test func aKillBeforeTheUploadIdIsSavedLeavesNoOrphanUpload() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("o.bin"), bytes: 12 << 20)
        try TusServers.curl(["-X", "POST", "-f", server.endpoint + "/__fault/hold?action=CreateMultipartUpload&count=1"])
        let id = try daemon.submitUpload([work.file("o.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"])
        try E2E.waitUntil("the server made the upload and holds the answer") {
            try server.requests().contains { $0.action == "CreateMultipartUpload" && $0["held"]?.boolValue == true }
        }
        #expect(try server.uploads() == 1)
        try daemon.crash()
        try server.clearFaults()
        try daemon.start()
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let logged = try Self.logMessages(daemon, id)
        #expect(logged.contains { $0.contains("reusing multipart upload") }, "announced in the job's log: \(logged)")
        let requests = try server.requests()
        #expect(E2E.count(requests, "CreateMultipartUpload") == 1, "the held upload was reused, not made again")
        #expect(E2E.count(requests, "ListMultipartUploads") == 1)
        #expect(try server.object("o.bin")?.sha256 == expected)
        #expect(try server.uploads() == 0, "no multipart upload left")
    }

    /// The server makes the upload but answers 500: the retry finds it instead of creating a second one.
    @Test func aCreateAnsweredWithAnErrorAfterTheServerMadeItIsReusedNotDuplicated() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        let expected = try UploadEndToEndTests.randomFile(work.file("d.bin"), bytes: 12 << 20)
        try server.arm("code=500&count=1&action=CreateMultipartUpload&s3_code=InternalError&after=1")
        let id = try daemon.submitUpload([work.file("d.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"])
        let done = try daemon.waitForState(id, "succeeded", timeout: 60)
        #expect(done["attempt"]?.intValue == 1)
        #expect(done["result"]?["sha256"]?.stringValue == expected)
        let requests = try server.requests()
        #expect(requests.filter { $0.action == "CreateMultipartUpload" }.map(\.status) == [500])
        #expect(requests.first { $0.action == "CreateMultipartUpload" }?["served"]?.boolValue == true)
        #expect(try server.uploads() == 0, "no multipart upload left")
        #expect(try server.object("d.bin")?.sha256 == expected)
    }

    /// Cancelled while the Create's answer is withheld: the clean-up finds the upload and aborts it.
    @Test func aCancelBeforeTheUploadIdIsKnownStillAbortsTheUpload() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let work = TemporaryDirectory()
        _ = try UploadEndToEndTests.randomFile(work.file("c.bin"), bytes: 12 << 20)
        try TusServers.curl(["-X", "POST", "-f", server.endpoint + "/__fault/hold?action=CreateMultipartUpload&count=1"])
        let id = try daemon.submitUpload([work.file("c.bin"), "--to", "s3://photos/", "--chunk-size", "5MiB"])
        try E2E.waitUntil("the server made the upload and holds the answer") {
            try server.requests().contains { $0.action == "CreateMultipartUpload" && $0["held"]?.boolValue == true }
        }
        #expect(try daemon.job(["op": "cancel", "job": .string(id)])["state"]?.stringValue == "cancelled")
        try E2E.waitUntil("the orphan is aborted") { try server.uploads() == 0 }
        let requests = try server.requests()
        #expect(E2E.count(requests, "CreateMultipartUpload") == 1)
        #expect(E2E.count(requests, "AbortMultipartUpload") == 1)
        try server.clearFaults()
    }
}
