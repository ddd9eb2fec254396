import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// A catalogue of bad input: each gets a clear error, and the daemon is still answering after all of them.
@Suite(.serialized)
struct BadInputTests {
    /// CLI arguments: exit code 2 (usage) with a message naming the problem.
    static let badArguments: [(arguments: [String], message: String)] = [
        (["lst"], "did you mean 'list'?"),
        (["submit", "upload", "a.jpg", "--to", "/tmp", "--chunksize", "1MiB"], "did you mean --chunk-size?"),
        (["submit", "upload", "--to", "file:///tmp"], "FILE"),
        (["submit", "upload", "a.jpg"], "--to"),
        (["submit", "upload", "a.jpg", "--to", "/tmp", "--chunk-size", "8XB"], "--chunk-size"),
        (["submit", "upload", "a.jpg", "--to", "/tmp", "--max-rate", "-5"], "--max-rate"),
        (["submit", "upload", "a.jpg", "--to", "/tmp", "--timeout", "soon"], "--timeout"),
        (["submit", "upload", "a.jpg", "--to", "/tmp", "--max-attempts", "0"], "--max-attempts"),
        (["show"], "ID"),
        (["list", "--state", "sleeping"], "unknown state"),
        (["list", "--json=yes"], "does not take a value"),
        (["daemon", "--concurrency", "0"], "--concurrency"),
        (["list", "--socket", ""], "--socket is empty"),
        (["daemon", "--socket", ""], "--socket is empty"),
    ]

    /// Protocol lines: an error reply with a stable code.
    static let badLines: [(line: String, code: String)] = [
        ("this is not json", "bad_request"),
        ("[1,2,3]", "bad_request"),
        ("{\"no_op\":1}", "bad_request"),
        ("{\"op\":42}", "bad_request"),
        ("{\"op\":\"explode\"}", "unknown_op"),
        ("{\"op\":\"submit\"}", "bad_request"),
        ("{\"op\":\"submit\",\"kind\":\"teleport\",\"params\":{}}", "unknown_kind"),
        ("{\"op\":\"submit\",\"kind\":\"sleep\",\"params\":{\"units\":\"many\"}}", "invalid_params"),
        ("{\"op\":\"submit\",\"kind\":\"sleep\",\"params\":{\"units\":1},\"options\":{\"max_attempts\":0}}", "invalid_options"),
        ("{\"op\":\"submit\",\"kind\":\"sleep\",\"params\":{\"units\":1},\"options\":{\"priority\":\"high\"}}", "invalid_options"),
        ("{\"op\":\"submit\",\"kind\":\"sleep\",\"params\":{\"units\":1},\"options\":{\"priority\":1.5}}", "invalid_options"),
        ("{\"op\":\"submit\",\"kind\":\"sleep\",\"params\":{\"units\":1e300}}", "invalid_params"),
        ("{\"op\":\"show\",\"job\":\"00000000-0000-4000-8000-000000000000\"}", "no_such_job"),
        ("{\"op\":\"show\",\"job\":\"../../etc/passwd\"}", "no_such_job"),
        ("{\"op\":\"show\"}", "bad_request"),
        ("{\"op\":\"list\",\"states\":[\"sleeping\"]}", "bad_request"),
        ("{\"op\":\"resume\",\"job\":\"ffffffff\"}", "no_such_job"),
    ]

    @Test func badArgumentsExitWithUsageAndSayWhy() throws {
        let daemon = try DaemonHarness()
        for (arguments, message) in Self.badArguments {
            let result = try daemon.cli(arguments)
            #expect(result.status == 2, "\(arguments): exit \(result.status), stderr: \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): stderr was: \(result.stderr)")
        }
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }

    @Test func badProtocolLinesGetErrorRepliesAndTheDaemonCarriesOn() throws {
        let daemon = try DaemonHarness()
        for (line, code) in Self.badLines {
            let reply = try daemon.rawRequest(Array((line + "\n").utf8))
            #expect(reply?["ok"]?.boolValue == false, "\(line)")
            #expect(reply?["error"]?["code"]?.stringValue == code, "\(line): \(String(describing: reply))")
            #expect(reply?["error"]?["message"]?.stringValue?.isEmpty == false)
        }
        // Binary garbage with a newline, and a line over 1 MiB.
        let garbage = try daemon.rawRequest((0..<512).map { UInt8(truncatingIfNeeded: $0 &* 37) } + [0x0A])
        #expect(garbage?["error"]?["code"]?.stringValue == "bad_request")
        let huge = try daemon.rawRequest([UInt8](repeating: 0x7B, count: 2 << 20) + [0x0A])
        #expect(huge?["error"]?["code"]?.stringValue == "request_too_large")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }

    /// A path holding a NUL byte (only `{"base64": …}` or a `\u0000` escape can carry one) is refused naming the
    /// member, by every kind: no file name holds one, and the C calls would read the path up to it, another file.
    /// An upload source said "is not an absolute path"; an `import` dir and an `ids_file` were not checked alike.
    @Test func aPathHoldingANULByteIsRefusedNamingItsMember() throws {
        let daemon = try DaemonHarness()
        let nul = "{\"base64\": \"L3RtcC9hAGI=\"}"  // "/tmp/a\0b"
        let lines = [
            ("{\"op\":\"submit\",\"kind\":\"upload\",\"params\":{\"files\":[\(nul)],\"to\":\"file:///tmp\"}}",
             "invalid_params", "files.[0]: a path cannot hold a NUL byte"),
            ("{\"op\":\"submit\",\"kind\":\"import\",\"params\":{\"dir\":\(nul)}}", "invalid_params", "dir: a path cannot hold a NUL byte"),
            ("{\"op\":\"submit\",\"kind\":\"tag\",\"params\":{\"tag\":\"t\",\"ids_file\":\(nul)}}",
             "invalid_params", "ids_file: a path cannot hold a NUL byte"),
            // The JSON reader refuses the escape in any string first.
            ("{\"op\":\"submit\",\"kind\":\"upload\",\"params\":{\"files\":[\"/tmp/a\\u0000b\"],\"to\":\"file:///tmp\"}}",
             "bad_request", "a string contains U+0000"),
        ]
        for (line, code, shown) in lines {
            let reply = try daemon.rawRequest(Array((line + "\n").utf8))
            #expect(reply?["error"]?["code"]?.stringValue == code, "\(line): \(String(describing: reply))")
            let message = reply?["error"]?["message"]?.stringValue ?? ""
            #expect(message.contains(shown), "\(line): \(message)")
        }
        #expect(try daemon.request(["op": "list"])["jobs"]?.arrayValue?.isEmpty == true)
    }

    @Test func controlRequestsOnJobsInTheWrongStateAreRefused() throws {
        let daemon = try DaemonHarness()
        let id = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        try daemon.waitForState(id, "succeeded")
        for op in ["cancel", "pause", "resume"] {
            let reply = try daemon.request(["op": .string(op), "job": .string(id)])
            #expect(reply["error"]?["code"]?.stringValue == "invalid_state", "\(op)")
        }
        let shown = try daemon.cli(["show", "00000000"])
        #expect(shown.status == 4, "no such job exits 4: \(shown.stderr)")
        let cancelled = try daemon.cli(["cancel", id])
        #expect(cancelled.status == 1, "\(cancelled.stderr)")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }

    @Test func aClientThatHangsUpMidRequestOrWatchDoesNotHurtTheDaemon() throws {
        let daemon = try DaemonHarness()
        for _ in 0..<20 {
            let client = try DaemonClient(socketPath: daemon.socketPath)
            try client.send(["op": "watch"])
        }
        #expect(try daemon.rawRequest(Array("{\"op\":\"pi".utf8), replyTimeout: 1) == nil, "no reply to half a line")
        let id = try daemon.submitSleep(units: 20, unitMilliseconds: 5)
        try daemon.waitForState(id, "succeeded")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }

    @Test func aHalfClosedClientStillGetsItsReplies() throws {
        let daemon = try DaemonHarness()
        let fd = try daemon.rawConnection()
        defer { close(fd) }
        let request = Array("{\"op\":\"ping\"}\n{\"op\":\"ping\"}\n".utf8)
        _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        shutdown(fd, Int32(SHUT_WR))
        #expect(DaemonHarness.readLines(fd, timeout: 5).count == 2, "both pings answered before the close")
    }

    /// A daemon that refuses a connection (here: all 512 taken) answers with an error line and closes; the CLI
    /// reports that error and its exit code instead of dying of SIGPIPE or saying only that the connection broke.
    @Test func theCLIReportsARefusalInsteadOfABrokenPipe() throws {
        let daemon = try DaemonHarness()
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<512 { held.append(try daemon.rawConnection()) }
        // The daemon accepts them as its loop turns; until it has, the CLI may still get a slot.
        var result = try daemon.cli(["list"])
        let deadline = Date().addingTimeInterval(10)
        while result.status == 0, Date() < deadline {
            usleep(50_000)
            result = try daemon.cli(["list"])
        }
        #expect(result.status != 0 && result.stderr.contains("too_many_connections"), "exit \(result.status): \(result.stderr)")
        for fd in held { close(fd) }
        held.removeAll()
        usleep(200_000)
        #expect(try daemon.cli(["list"]).status == 0, "served again once the connections closed")
    }

    /// Replies come in request order, an oversized line's error included: pipelined `ping`, a 2 MiB line,
    /// `ping` (in one write, and with the long line split across the read) get ok, request_too_large, ok.
    @Test func anOversizedLineIsAnsweredInItsTurn() throws {
        let daemon = try DaemonHarness()
        let ping = Array("{\"op\":\"ping\"}\n".utf8)
        for tail in [[UInt8](repeating: 0x20, count: 2 << 20) + [0x0A], [UInt8](repeating: 0x20, count: 2 << 20)] {
            let bytes = ping + ping + tail + (tail.last == 0x0A ? ping : [0x0A] + ping)
            let replies = try daemon.rawReplies(bytes, count: 4)
            #expect(
                replies.map { $0["ok"]?.boolValue == true ? "ok" : $0["error"]?["code"]?.stringValue ?? "?" }
                    == ["ok", "ok", "request_too_large", "ok"], "\(replies)")
        }
    }

    /// A client that pipelines thousands of requests and hangs up neither starves other clients nor keeps the
    /// daemon busy answering nobody.
    @Test func aPipelinedFloodDoesNotStarveOtherClients() throws {
        let daemon = try DaemonHarness()
        for _ in 0..<20 { _ = try daemon.submitSleep(units: 1, unitMilliseconds: 1) }
        let flood = Array(String(repeating: "{\"op\":\"list\",\"limit\":100000}\n", count: 20_000).utf8)
        let fd = try daemon.rawConnection()
        _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        _ = flood.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let started = Date()
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
        #expect(Date().timeIntervalSince(started) < 1, "ping waited \(Date().timeIntervalSince(started)) s")
        usleep(500_000)
        let before = try daemon.cpuSeconds()
        usleep(1_000_000)
        #expect(try daemon.cpuSeconds() - before < 0.2, "the daemon kept working for a client that is gone")
    }

    @Test func aSecondDaemonOnAnotherSocketButTheSameStoreIsRefused() throws {
        let daemon = try DaemonHarness()
        let other = TemporaryDirectory()
        let second = try DaemonHarness.run(
            Binary.path, ["daemon", "--socket", other.file("other.sock")], environment: daemon.environment)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another daemon"), "\(second.stderr)")
    }

    @Test func absurdTimeoutsAreRefusedNotFatal() throws {
        let daemon = try DaemonHarness()
        let reply = try daemon.request([
            "op": "submit", "kind": "sleep", "params": ["units": 1], "options": ["timeout_s": 1e17, "stall_timeout_s": 1e17],
        ])
        #expect(reply["error"]?["code"]?.stringValue == "invalid_options")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }

    @Test func cliWithoutADaemonExits3AndSaysHowToStartIt() throws {
        let home = TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["TRAILBOOK_JOBS_HOME"] = home.path
        let result = try DaemonHarness.run(Binary.path, ["list"], environment: environment)
        #expect(result.status == 3)
        #expect(result.stderr.contains("trailbook-jobs daemon"))
    }

    @Test func aSecondDaemonOnTheSameSocketRefusesToStart() throws {
        let daemon = try DaemonHarness()
        var environment = daemon.environment
        environment["TRAILBOOK_JOBS_HOME"] = daemon.home.path
        let second = try DaemonHarness.run(Binary.path, ["daemon"], environment: environment)
        #expect(second.status == 1)
        #expect(second.stderr.contains("already"))
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }

    /// A `list` limit of 0 or less is refused (it was quietly read as 1); a successful `prune` has no `error`
    /// member (it had `"error": null`).
    @Test func listLimitBelowOneIsRefusedAndAPruneReplyHasNoError() throws {
        let daemon = try DaemonHarness()
        for limit in [0, -5] {
            let reply = try daemon.request(["op": "list", "limit": .number(Double(limit))])
            #expect(reply["ok"]?.boolValue == false)
            #expect(reply["error"]?["code"]?.stringValue == "bad_request", "\(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains("\"limit\" must be 1 or more") == true, "\(reply)")
        }
        #expect(try daemon.request(["op": "list", "limit": 1])["ok"]?.boolValue == true)
        let pruned = try daemon.request(["op": "prune", "older_than_s": 0])
        #expect(pruned["ok"]?.boolValue == true, "\(pruned)")
        guard case .object(let members) = pruned else { Issue.record("not an object: \(pruned)"); return }
        #expect(members["error"] == nil, "\(pruned)")
    }

    // MARK: Secrets in URLs (issue 42)

    static let urlSecrets = ["Pw0rdSecret", "T0kenSecret", "S1gSecret", "alice"]

    /// A password in a tus URL's user info and credential-looking query parameters are secrets like header values:
    /// not in `show` (JSON and text), `list` (JSON and text), the feed, the daemon's log or an error message. The
    /// transfer still uses the URL as given (here it fails to connect, so the error path is covered too).
    @Test func aURLsSecretsNeverReachShowListTheFeedOrTheLog() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let events = try FeedRecorder(daemon)
        let work = TemporaryDirectory()
        let file = work.file("a.bin")
        _ = try UploadEndToEndTests.randomFile(file, bytes: 4096)
        // Port 9 (discard) on loopback: nothing listens, every attempt fails at once.
        let url = "http://alice:Pw0rdSecret@127.0.0.1:9/files/?token=T0kenSecret&X-Amz-Signature=S1gSecret&x=1"
        // Gives up on the unreachable server after 1 s of waiting it out: the job fails, its error shown too.
        let id = try daemon.submitUpload([file, "--to", url, "--max-attempts", "1", "--give-up-after", "1s"])
        let failed = try daemon.waitForState(id, "failed", timeout: 60)
        #expect(!(failed["error"] ?? .null).isNull)
        let shown = try daemon.show(id)
        #expect(
            shown["params"]?["to"]?.stringValue
                == "http://<redacted>@127.0.0.1:9/files/?token=<redacted>&X-Amz-Signature=<redacted>&x=1",
            "\(shown["params"] ?? .null)")
        var texts = [String(decoding: JSONCoding.encode(shown), as: UTF8.self)]
        for arguments in [["show", id], ["show", id, "--json"], ["list"], ["list", "--json"]] {
            let result = try daemon.cli(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            texts.append(result.stdout + result.stderr)
        }
        texts += events.all().map { String(decoding: JSONCoding.encode($0), as: UTF8.self) }
        texts.append(daemon.log())
        // Refused at submit (port 0): the error names the problem, not the password.
        let refused = try daemon.cli(["submit", "upload", file, "--to", "http://alice:Pw0rdSecret@127.0.0.1:0/files/?token=T0kenSecret"])
        #expect(refused.status != 0)
        texts.append(refused.stderr)
        let reply = try daemon.request([
            "op": "submit", "kind": "upload",
            "params": ["files": [.string(file)], "to": "http://alice:Pw0rdSecret@%zz/?token=T0kenSecret"],
        ])
        #expect(reply["error"]?["code"]?.stringValue == "bad_destination", "\(reply)")
        texts.append(String(decoding: JSONCoding.encode(reply), as: UTF8.self))
        for text in texts {
            for secret in Self.urlSecrets {
                #expect(!text.contains(secret), "\(secret) shown in: \(text.prefix(2000))")
            }
        }
        #expect(texts.contains { $0.contains("<redacted>") })
    }

    /// `daemon --store` with a string libpq refuses (a bad %-escape, and every other parse error) never echoes the
    /// password: not in the error, not in the log.
    @Test func aBadStoreStringNeverShowsItsPassword() throws {
        let home = TemporaryDirectory()
        var base = ProcessInfo.processInfo.environment
        base["TRAILBOOK_JOBS_HOME"] = home.path
        let refused = [
            "postgres://alice:St0reSecret%zz@127.0.0.1/jobs", "postgres://alice:%zzSt0reSecret@127.0.0.1/jobs",
            "postgres://alice:St0reSecret@[::1/jobs", "postgres://alice:St0re Secret@127.0.0.1/jobs",
            "postgresql://alice@127.0.0.1/jobs?password=St0reSecret%zz", "host=127.0.0.1 password=St0reSecret nosuchoption=1",
            "host=127.0.0.1 password='St0reSecret", "postgres://alice:St0reSecret@127.0.0.1/jobs?nosuch=1",
        ]
        for store in refused {
            let result = try DaemonHarness.run(Binary.path, ["daemon", "--store", store], environment: base)
            // 2: refused as it is; 1: libpq took it (a space in a password) and nothing listens at 127.0.0.1:5432.
            #expect([1, 2].contains(result.status), "\(store): exit \(result.status), \(result.stderr)")
            #expect(!result.stderr.contains("St0re") && !result.stdout.contains("St0re"), "\(store): \(result.stderr)")
            #expect(result.stderr.contains(result.status == 2 ? "--store" : "job store"), "\(store): \(result.stderr)")
            var environment = base
            environment["TRAILBOOK_JOBS_STORE"] = store
            let fromEnvironment = try DaemonHarness.run(Binary.path, ["daemon"], environment: environment)
            #expect(fromEnvironment.status == result.status && !fromEnvironment.stderr.contains("St0re"), "\(fromEnvironment.stderr)")
        }
    }

    // MARK: Submit-time checks (issue 42)

    /// Destinations, S3 endpoints and buckets and prefixes, and headers that can never work are refused at submit
    /// with a code and a message saying what to do, instead of holding a slot for attempts that all fail (or
    /// writing another key than the one recorded).
    @Test func whatCannotWorkIsRefusedAtSubmit() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let file = work.file("a.bin")
        _ = try UploadEndToEndTests.randomFile(file, bytes: 1024)
        let out = work.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let files: JSONValue = [.string(file)]
        let cases: [(params: JSONValue, code: String)] = [
            (["files": files, "to": "http://%zz/"], "bad_destination"),
            (["files": files, "to": "http://host/fi%zzles/"], "bad_destination"),
            (["files": files, "to": "http://[::1/files/"], "bad_destination"),
            (["files": files, "to": "http://127.0.0.1:0/files/"], "bad_destination"),
            (["files": files, "to": "http://127.0.0.1:99999/files/"], "bad_destination"),
            (["files": files, "to": "s3://bucket/p/", "s3": ["endpoint": "http://[::1"]], "bad_destination"),
            (["files": files, "to": "s3://bucket/p/", "s3": ["endpoint": "http://127.0.0.1:0"]], "bad_destination"),
            (["files": files, "to": "s3://bucket/p/", "s3": ["endpoint": "http://127.0.0.1:99999"]], "bad_destination"),
            (["files": files, "to": "s3://bucket/p/", "s3": ["endpoint": "http://%zz"]], "bad_destination"),
            (["files": files, "to": "s3://192.168.1.1/p/"], "bad_destination"),
            (["files": files, "to": "s3://xn--abc/p/"], "bad_destination"),
            (["files": files, "to": "s3://bucket/a/../b/"], "bad_destination"),
            (["files": files, "to": "s3://bucket/e/./f/"], "bad_destination"),
            (["files": files, "to": "s3://bucket/./"], "bad_destination"),
            (["files": files, "to": "s3://bucket/../"], "bad_destination"),
            (["files": files, "to": "http://127.0.0.1:1/files/", "headers": ["X-Test: a\u{01}b"]], "invalid_params"),
            (["files": files, "to": "http://127.0.0.1:1/files/", "headers": ["X-Test: a\u{7F}"]], "invalid_params"),
            (["files": files, "to": .string("file://" + out), "headers": ["X-Test: a\r\nInjected: b"]], "invalid_params"),
            (["files": files, "to": .string("file://" + out), "headers": ["X-Test: fine"]], "invalid_params"),
        ]
        for (params, code) in cases {
            let reply = try daemon.request(["op": "submit", "kind": "upload", "params": params])
            #expect(reply["error"]?["code"]?.stringValue == code, "\(params): \(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.isEmpty == false)
        }
        let listed = try daemon.request(["op": "list"])
        #expect(listed["jobs"]?.arrayValue?.isEmpty == true, "nothing was queued: \(listed)")
        // And through the CLI: a usage or refusal exit, never a queued job.
        for to in ["http://%zz/", "s3://xn--abc/p/", "s3://bucket/a/../b/"] {
            let result = try daemon.cli(["submit", "upload", file, "--to", to])
            #expect(result.status != 0 && result.stderr.contains("bad_destination") || result.status == 2, "\(to): \(result.stderr)")
        }
    }

    /// `submit --from` reads at most 4 MiB: an endless stream (`/dev/zero`) is refused once that much came, a
    /// large file before a byte is read; both with a clear error, quickly, and no crash.
    @Test func submitFromAnEndlessOrHugeFileIsRefusedEarly() throws {
        let daemon = try DaemonHarness()
        let work = TemporaryDirectory()
        let huge = work.file("huge.ndjson")
        #expect(FileManager.default.createFile(atPath: huge, contents: nil))
        #expect(truncate(huge, 100 << 20) == 0)
        for source in ["/dev/zero", huge] {
            let started = Date()
            let result = try daemon.cli(["submit", "--from", source])
            let seconds = Date().timeIntervalSince(started)
            #expect(result.status == 2, "\(source): exit \(result.status), \(result.stderr)")
            #expect(result.stderr.contains("over the 4 MiB a batch file may hold"), "\(source): \(result.stderr)")
            #expect(seconds < 5, "\(source): took \(seconds) s")
        }
        let zeroes = try DaemonHarness.run("/bin/sh", ["-c", "head -c 50000000 /dev/zero | \"$0\" submit --from -", Binary.path], environment: daemon.environment)
        #expect(zeroes.status == 2 && zeroes.stderr.contains("standard input is larger"), "\(zeroes.stderr)")
        #expect(try daemon.request(["op": "ping"])["ok"]?.boolValue == true)
    }
}
