import Foundation
import TestSupport
import Testing
import TrailbookCLI
import TrailbookEngine
import TrailbookSQLite

/// Batch submit (`submit_batch`, `submit upload … --each`, `submit --from`) and exactly-once submit with
/// idempotency keys (issue 14), against the real daemon binary.
@Suite(.serialized)
struct SubmitBatchEndToEndTests {
    static func sleepEntry(_ units: Int, key: String? = nil) -> JSONValue {
        var entry: [String: JSONValue] = ["kind": "sleep", "params": ["units": .number(Double(units)), "unit_ms": 1]]
        if let key { entry["key"] = .string(key) }
        return .object(entry)
    }

    static func jobCount(_ daemon: DaemonHarness) throws -> Int {
        try daemon.request(["op": "list", "limit": 100_000])["jobs"]?.arrayValue?.count ?? -1
    }

    @Test func aBatchIsQueuedInOrderAndAnsweredWithItsIDs() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let reply = try daemon.request([
            "op": "submit_batch", "jobs": .array((1...5).map { Self.sleepEntry($0) }),
        ])
        #expect(reply["ok"]?.boolValue == true, "\(reply)")
        let ids = try #require(reply["ids"]?.arrayValue?.compactMap { $0.stringValue })
        #expect(ids.count == 5)
        #expect(Set(ids).count == 5)
        #expect(reply["existing"]?.arrayValue == Array(repeating: .bool(false), count: 5))
        // Stored in the batch's order (submission order, so they also run in it) with each entry's own params.
        let jobs = try #require(daemon.request(["op": "list"])["jobs"]?.arrayValue)
        #expect(jobs.compactMap { $0["id"]?.stringValue } == ids)
        #expect(jobs.compactMap { $0["params"]?["units"]?.intValue } == [1, 2, 3, 4, 5])
        for id in ids { try daemon.waitForState(id, "succeeded") }
    }

    @Test func oneBadEntryRefusesTheWholeBatchNamingItsIndex() throws {
        let daemon = try DaemonHarness()
        let cases: [(jobs: [JSONValue], index: Int, code: String)] = [
            ([Self.sleepEntry(1), Self.sleepEntry(1), ["kind": "sleep", "params": ["units": -1]]], 2, "invalid_params"),
            ([Self.sleepEntry(1), ["kind": "nope"]], 1, "unknown_kind"),
            ([Self.sleepEntry(1), ["kind": "sleep", "params": [1]]], 1, "bad_request"),
            ([["kind": "sleep", "params": ["units": 1], "options": ["max_attempts": 0]], Self.sleepEntry(1)], 0, "invalid_options"),
            ([Self.sleepEntry(1, key: "same"), Self.sleepEntry(2, key: "same")], 1, "key_reused"),
            ([Self.sleepEntry(1), Self.sleepEntry(1, key: "has space")], 1, "bad_key"),
            ([Self.sleepEntry(1), 7], 1, "bad_request"),
        ]
        for (jobs, index, code) in cases {
            let reply = try daemon.request(["op": "submit_batch", "jobs": .array(jobs)])
            #expect(reply["ok"]?.boolValue == false)
            #expect(reply["error"]?["code"]?.stringValue == code, "\(reply)")
            #expect(reply["error"]?["index"]?.intValue == Int64(index), "\(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains("job \(index) of the batch") == true)
        }
        #expect(try daemon.request(["op": "submit_batch", "jobs": []])["error"]?["code"]?.stringValue == "bad_request")
        #expect(try Self.jobCount(daemon) == 0, "nothing queued by a refused batch")
    }

    /// Issue 11's duplicate refusal holds within a batch too: two entries uploading the same file to the same
    /// place refuse the batch (index of the second), and one duplicating an unfinished job refuses it as well.
    @Test func duplicateUploadsAreRefusedWithinABatchAndAgainstQueuedJobs() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let source = daemon.home.file("a.jpg")
        let other = daemon.home.file("b.jpg")
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: source))
        try Data(repeating: 8, count: 4096).write(to: URL(fileURLWithPath: other))
        let dest = daemon.home.file("dest")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        func upload(_ path: String, to: String = "file://" + dest) -> JSONValue {
            ["kind": "upload", "params": ["files": [.string(path)], "to": .string(to), "max_rate": 1024]]
        }
        var reply = try daemon.request(["op": "submit_batch", "jobs": [upload(source), upload(other), upload(source)]])
        #expect(reply["error"]?["code"]?.stringValue == "duplicate_upload", "\(reply)")
        #expect(reply["error"]?["index"]?.intValue == 2)
        #expect(reply["error"]?["message"]?.stringValue?.contains("job 0 of the batch already does the same") == true)
        // The same directory written another way is the same place.
        reply = try daemon.request(["op": "submit_batch", "jobs": [upload(source), upload(source, to: "file://" + dest + "/")]])
        #expect(reply["error"]?["code"]?.stringValue == "duplicate_upload", "\(reply)")
        #expect(try Self.jobCount(daemon) == 0)
        // allow_duplicate on the second lets both in.
        var second = upload(source)
        if case .object(var members) = second {
            members["options"] = ["allow_duplicate": true]
            second = .object(members)
        }
        reply = try daemon.request(["op": "submit_batch", "jobs": [upload(source), second]])
        #expect(reply["ok"]?.boolValue == true, "\(reply)")
        let queued = try #require(reply["ids"]?.arrayValue?.first?.stringValue)
        // Against the unfinished job now queued: refused at its index, nothing more queued.
        reply = try daemon.request(["op": "submit_batch", "jobs": [upload(other), upload(source)]])
        #expect(reply["error"]?["code"]?.stringValue == "duplicate_upload")
        #expect(reply["error"]?["index"]?.intValue == 1)
        #expect(reply["error"]?["message"]?.stringValue?.contains(queued) == true)
        #expect(try Self.jobCount(daemon) == 2)
        for id in try daemon.request(["op": "list"])["jobs"]?.arrayValue?.compactMap({ $0["id"]?.stringValue }) ?? [] {
            _ = try daemon.request(["op": "cancel", "job": .string(id)])
        }
    }

    @Test func aKnownKeyReturnsTheSameJobAndADifferentRequestWithItIsRefused() throws {
        let daemon = try DaemonHarness()
        let first = try daemon.request(["op": "submit", "kind": "sleep", "params": ["units": 2, "unit_ms": 1], "key": "k-1"])
        let id = try #require(first["job"]?["id"]?.stringValue)
        #expect(first["existing"]?.boolValue == false)
        #expect(first["job"]?["key"]?.stringValue == "k-1")
        try daemon.waitForState(id, "succeeded")
        // Again, after it ended: the same job, marked existing, nothing new.
        let again = try daemon.request(["op": "submit", "kind": "sleep", "params": ["units": 2, "unit_ms": 1], "key": "k-1"])
        #expect(again["job"]?["id"]?.stringValue == id)
        #expect(again["job"]?["state"]?.stringValue == "succeeded")
        #expect(again["existing"]?.boolValue == true)
        // The same key with other params or options: refused, with a stable code.
        for request: JSONValue in [
            ["op": "submit", "kind": "sleep", "params": ["units": 3], "key": "k-1"],
            ["op": "submit", "kind": "sleep", "params": ["units": 2], "options": ["priority": 1], "key": "k-1"],
        ] {
            let reply = try daemon.request(request)
            #expect(reply["error"]?["code"]?.stringValue == "key_reused", "\(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains(id) == true)
        }
        // In a batch: known keys give their jobs (existing), new ones are queued, in order.
        let batch = try daemon.request([
            "op": "submit_batch", "jobs": [Self.sleepEntry(5, key: "k-2"), Self.sleepEntry(2, key: "k-1")],
        ])
        let ids = try #require(batch["ids"]?.arrayValue?.compactMap { $0.stringValue })
        #expect(ids.count == 2)
        #expect(ids[1] == id)
        #expect(batch["existing"]?.arrayValue == [false, true])
        let repeated = try daemon.request([
            "op": "submit_batch", "jobs": [Self.sleepEntry(5, key: "k-2"), Self.sleepEntry(2, key: "k-1")],
        ])
        #expect(repeated["ids"]?.arrayValue?.compactMap(\.stringValue) == ids)
        #expect(repeated["existing"]?.arrayValue == [true, true])
        #expect(try Self.jobCount(daemon) == 2)
        // Keys are stored with the job (a unique index): they survive a restart.
        try daemon.crash()
        try daemon.start()
        let after = try daemon.request(["op": "submit", "kind": "sleep", "params": ["units": 5, "unit_ms": 1], "key": "k-2"])
        #expect(after["job"]?["id"]?.stringValue == ids[0])
        #expect(after["existing"]?.boolValue == true)
        #expect(try Self.jobCount(daemon) == 2)
    }

    /// Concurrent submits of one key (a retry racing the first try, a script run twice): one job.
    @Test func concurrentSubmitsOfOneKeyMakeOneJob() throws {
        let daemon = try DaemonHarness()
        let line = Array(#"{"op":"submit","kind":"sleep","params":{"units":1},"key":"race"}"#.utf8) + [0x0A]
        let descriptors = try (0..<8).map { _ in try daemon.rawConnection() }
        for fd in descriptors { DaemonHarness.send(fd, line) }
        var ids: Set<String> = []
        var existing = 0
        for fd in descriptors {
            shutdown(fd, Int32(SHUT_WR))
            let lines = DaemonHarness.readLines(fd)
            close(fd)
            let reply = try JSONCoding.decode(JSONValue.self, from: try #require(lines.first))
            ids.insert(reply["job"]?["id"]?.stringValue ?? "none")
            if reply["existing"]?.boolValue == true { existing += 1 }
        }
        #expect(ids.count == 1)
        #expect(existing == 7)
        #expect(try Self.jobCount(daemon) == 1)
    }

    @Test func eachMakesOneJobPerFileAndFromReadsNDJSON() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let dest = daemon.home.file("dest")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        let names = ["a.jpg", "b.jpg", "c.jpg"]
        for (n, name) in names.enumerated() {
            try Data(repeating: UInt8(n), count: 1000 + n).write(to: URL(fileURLWithPath: daemon.home.file(name)))
        }
        let sources = names.map { daemon.home.file($0) }
        var result = try daemon.cli(["submit", "upload"] + sources + ["--to", dest, "--each", "--key", "trip"])
        #expect(result.status == 0, "\(result.stderr)")
        let ids = result.stdout.split(separator: "\n").map(String.init)
        #expect(ids.count == 3)
        for (id, source) in zip(ids, sources) {
            let job = try daemon.waitForState(id, "succeeded")
            #expect(job["params"]?["files"]?.arrayValue?.compactMap(\.stringValue) == [source])
            #expect(job["key"]?.stringValue == "trip/\(ids.firstIndex(of: id)!)")
        }
        // Run again with the same key: the same IDs, exit 0, and said so.
        result = try daemon.cli(["submit", "upload"] + sources + ["--to", dest, "--each", "--key", "trip", "--json"])
        #expect(result.status == 0)
        let reply = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(reply["ids"]?.arrayValue?.compactMap(\.stringValue) == ids)
        #expect(reply["existing"]?.arrayValue == [true, true, true])
        #expect(result.stderr.contains("3 of the 3 jobs had been submitted before"))
        // A missing file refuses the batch, naming the file; nothing queued.
        result = try daemon.cli(["submit", "upload", sources[0], daemon.home.file("missing.jpg"), "--to", dest, "--each"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("missing.jpg: job 1 of the batch"), "\(result.stderr)")
        #expect(result.stderr.contains("[source_missing]"))
        #expect(try Self.jobCount(daemon) == 3)

        // --from: a file of submit objects; a line's own key is kept, the others get KEY/INDEX.
        let file = daemon.home.file("jobs.ndjson")
        try """
            {"kind": "sleep", "params": {"units": 1}, "key": "mine"}

            {"op": "submit", "kind": "sleep", "params": {"units": 2}, "options": {"priority": 3}}
            """.write(toFile: file, atomically: true, encoding: .utf8)
        result = try daemon.cli(["submit", "--from", file, "--key", "run", "--priority", "1"])
        #expect(result.status == 0, "\(result.stderr)")
        let fromIDs = result.stdout.split(separator: "\n").map(String.init)
        #expect(fromIDs.count == 2)
        let first = try daemon.show(fromIDs[0])
        let second = try daemon.show(fromIDs[1])
        #expect(first["key"]?.stringValue == "mine")
        #expect(second["key"]?.stringValue == "run/1")
        #expect(first["priority"]?.intValue == 1, "the command line's option fills in")
        #expect(second["priority"]?.intValue == 3, "the line's own option wins")
        // A bad line is named by its line number; nothing queued.
        try """
            {"kind": "sleep", "params": {"units": 1}}
            {"kind": "sleep", "params": {"units": -5}}
            """.write(toFile: file, atomically: true, encoding: .utf8)
        result = try daemon.cli(["submit", "--from", file])
        #expect(result.status == 2)
        #expect(result.stderr.contains("jobs.ndjson line 2: job 1 of the batch"), "\(result.stderr)")
        #expect(result.stderr.contains("[invalid_params]"))
        try "{\"kind\": \"sleep\", \"params\": {\"units\": 1},}\n".write(toFile: file, atomically: true, encoding: .utf8)
        result = try daemon.cli(["submit", "--from", file])
        #expect(result.status == 2)
        #expect(result.stderr.contains("jobs.ndjson line 1 is not JSON"), "\(result.stderr)")
        #expect(try Self.jobCount(daemon) == 5)
    }

    /// What a user's NDJSON file and command line may hold: a byte order mark before the first line (Notepad
    /// writes one) is skipped, not "found byte 0xEF"; a line's `"options"` that is not an object is refused naming
    /// it even when the command line gives options (they used to replace it, and the job was queued without what
    /// the line asked); and a `--key` that leaves no room for `/INDEX` is refused before anything is sent, about
    /// `--key`, not as a `bad_key` of job 0 for a key typed within the 200 characters.
    @Test func ndjsonByteOrderMarkBadOptionsAndALongBatchKey() throws {
        let daemon = try DaemonHarness()
        let file = daemon.home.file("jobs.ndjson")
        try Data([0xEF, 0xBB, 0xBF] + Array("{\"kind\": \"sleep\", \"params\": {\"units\": 1}}\r\n".utf8))
            .write(to: URL(fileURLWithPath: file))
        var result = try daemon.cli(["submit", "--from", file])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.jobCount(daemon) == 1)

        try "{\"kind\": \"sleep\", \"params\": {\"units\": 1}, \"options\": \"junk\"}\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        result = try daemon.cli(["submit", "--from", file, "--priority", "3"])
        #expect(result.status == 2, "\(result.stdout)")
        #expect(result.stderr.contains("jobs.ndjson line 1"), "\(result.stderr)")
        #expect(result.stderr.contains("\"options\" must be an object"), "\(result.stderr)")
        #expect(try Self.jobCount(daemon) == 1)

        let dest = daemon.home.file("dest")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        let sources = (0..<11).map { daemon.home.file("f\($0).jpg") }
        for source in sources { try Data(repeating: 1, count: 10).write(to: URL(fileURLWithPath: source)) }
        // 200 characters is a valid key, but KEY/10 is 203.
        result = try daemon.cli(["submit", "upload"] + sources + ["--to", dest, "--each", "--key", String(repeating: "k", count: 200)])
        #expect(result.status == 2)
        #expect(result.stderr.contains("give a --key of at most 197 characters"), "\(result.stderr)")
        #expect(!result.stderr.contains("bad_key"), "\(result.stderr)")
        result = try daemon.cli(["submit", "upload"] + sources + ["--to", dest, "--each", "--key", String(repeating: "k", count: 197)])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.jobCount(daemon) == 12)

        // The FILE of --from is opened by its bytes (a Latin-1 name), not refused nor repaired to U+FFFD.
        let latin1 = BytePath.join(BytePath(daemon.home.path), BytePath(bytes: Array("caf".utf8) + [0xE9] + Array(".ndjson".utf8)))
        try daemon.home.create(latin1.lastComponent, contents: Array("{\"kind\": \"sleep\", \"params\": {\"units\": 1}}\n".utf8))
        let output = daemon.home.file("from-latin1.out")
        let pid = try ChildProcess.spawn(
            Binary.path, rawArguments: [Array("submit".utf8), Array("--from".utf8), latin1.bytes], environment: daemon.environment, output: output)
        let status = ChildProcess.exitStatus(of: pid)
        let printed = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
        #expect(status == 0, "\(printed)")
        #expect(try Self.jobCount(daemon) == 13)
        // A missing one is named with its bad byte shown as \xHH.
        let missing = daemon.home.file("missing-from.out")
        let missingPid = try ChildProcess.spawn(
            Binary.path, rawArguments: [Array("submit".utf8), Array("--from".utf8), latin1.bytes + Array(".gone".utf8)],
            environment: daemon.environment, output: missing)
        let missingStatus = ChildProcess.exitStatus(of: missingPid)
        let refused = String(decoding: FileManager.default.contents(atPath: missing) ?? Data(), as: UTF8.self)
        #expect(missingStatus == 2, "\(refused)")
        #expect(refused.contains("cannot open \(daemon.home.path)/caf\\xe9.ndjson.gone: No such file"), "\(refused)")
    }

    /// A batch over the daemon's line limit is refused before it is sent, with a part size that fits: it used to
    /// say half of what fits (the helper sent 11 800 of the same lines where it said "at most 5952").
    @Test func aBatchOverTheLineLimitNamesAPartSizeThatFits() throws {
        let daemon = try DaemonHarness()
        let line = "{\"kind\": \"sleep\", \"params\": {\"units\": 0}}\n"
        let file = daemon.home.file("many.ndjson")
        try String(repeating: line, count: 25_000).write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try daemon.cli(["submit", "--from", file])
        #expect(refused.status == 2)
        let words = refused.stderr.split(separator: " ")
        let part = try #require(words.firstIndex(of: "most").flatMap { Int(words[$0 + 1]) }, "\(refused.stderr)")
        #expect(part > 25_000 / 3, "\(refused.stderr)")
        try String(repeating: line, count: part).write(toFile: file, atomically: true, encoding: .utf8)
        let accepted = try daemon.cli(["submit", "--from", file])
        #expect(accepted.status == 0, "parts of \(part): \(accepted.stderr)")
        #expect(accepted.stdout.split(separator: "\n").count == part)
    }

    /// A path typed with `..` (`sub/../a.jpg`, `--to sub/../dest`) is the same file and place as without it: the CLI
    /// resolves the `..` (by the file system), so the daemon's `duplicate_upload` check sees one path. It used to
    /// send `$HOME/sub/../dest`, and a second job uploaded the same file to the same place beside the first.
    @Test func parentReferencesInPathsAreTheSamePlaceForTheDuplicateCheck() throws {
        let daemon = try DaemonHarness()
        let source = daemon.home.file("a.jpg")
        // 1 MiB at 1 KiB/s: unfinished while the test runs (a burst of a few KiB may go at once).
        try Data(repeating: 7, count: 1 << 20).write(to: URL(fileURLWithPath: source))
        for dir in ["dest", "sub"] {
            try FileManager.default.createDirectory(atPath: daemon.home.file(dir), withIntermediateDirectories: true)
        }
        let dest = daemon.home.file("dest")
        let first = try daemon.cli(["submit", "upload", source, "--to", dest, "--max-rate", "1KiB"])
        #expect(first.status == 0, "\(first.stderr)")
        let id = first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try daemon.request(["op": "pause", "job": .string(id)])
        for (file, to) in [(daemon.home.file("sub/../a.jpg"), dest), (source, daemon.home.file("sub/../dest/"))] {
            let again = try daemon.cli(["submit", "upload", file, "--to", to])
            #expect(again.status == 2, "\(file) to \(to): \(again.stdout)")
            #expect(again.stderr.contains("[duplicate_upload]"), "\(again.stderr)")
        }
        #expect(try Self.jobCount(daemon) == 1)
        // What is stored has no `..`; a path whose `..` does not resolve is left for the daemon to name.
        let other = try daemon.cli(["submit", "upload", daemon.home.file("sub/../a.jpg"), "--to", daemon.home.file("sub/../dest"), "--allow-duplicate", "--json"])
        let job = try JSONCoding.decode(JSONValue.self, from: Array(other.stdout.utf8))
        #expect(job["params"]?["files"]?.arrayValue?.compactMap(\.stringValue) == [source])
        #expect(job["params"]?["to"]?.stringValue == "file://" + dest)
        let missing = try daemon.cli(["submit", "upload", daemon.home.file("nope/../a.jpg"), "--to", dest])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("nope/../a.jpg"), "\(missing.stderr)")
    }

    /// The daemon tells spellings apart itself, since scripts speak the protocol without the CLI's path clean-up:
    /// a `file://` URL with `..`, a source named through a linked folder, a link to the destination, and another
    /// file of the same name to the same directory (which would replace the first job's copy) are each refused
    /// as `duplicate_upload` while the first job has not ended; elsewhere is accepted. Each of these was queued
    /// before the keys were resolved by the file system.
    @Test func everySpellingOfTheSameUploadIsADuplicateInTheDaemon() throws {
        let daemon = try DaemonHarness()
        let home = daemon.home
        for dir in ["src", "dest", "other", "elsewhere"] {
            try FileManager.default.createDirectory(atPath: home.file(dir), withIntermediateDirectories: true)
        }
        try FileManager.default.createSymbolicLink(atPath: home.file("srclink"), withDestinationPath: home.file("src"))
        try FileManager.default.createSymbolicLink(atPath: home.file("destlink"), withDestinationPath: "dest")
        try Data(repeating: 7, count: 1 << 20).write(to: URL(fileURLWithPath: home.file("src/a.jpg")))
        try Data(repeating: 8, count: 10).write(to: URL(fileURLWithPath: home.file("other/a.jpg")))
        func submitOne(_ file: String, to: String) throws -> JSONValue {
            try daemon.request([
                "op": "submit", "kind": "upload", "params": ["files": [.string(file)], "to": .string(to), "max_rate": 1024],
            ])
        }
        let first = try submitOne(home.file("src/a.jpg"), to: "file://" + home.file("dest"))
        let id = try #require(first["job"]?["id"]?.stringValue, "\(first)")
        _ = try daemon.request(["op": "pause", "job": .string(id)])
        for (file, to) in [
            (home.file("src/a.jpg"), "file://" + home.file("src/../dest")),
            (home.file("srclink/a.jpg"), "file://" + home.file("dest")),
            (home.file("src/a.jpg"), "file://" + home.file("destlink") + "/"),
            (home.file("other/a.jpg"), "file://" + home.file("dest")),
        ] {
            let reply = try submitOne(file, to: to)
            #expect(reply["error"]?["code"]?.stringValue == "duplicate_upload", "\(file) to \(to): \(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains(id) == true, "\(reply)")
        }
        #expect(try Self.jobCount(daemon) == 1)
        let elsewhere = try submitOne(home.file("srclink/a.jpg"), to: "file://" + home.file("elsewhere"))
        #expect(elsewhere["job"]?["id"]?.stringValue != nil, "\(elsewhere)")
        #expect(try Self.jobCount(daemon) == 2)
    }

    /// `--each` of two files named alike (`a/x.jpg`, `b/x.jpg`) into one directory: as one job it is
    /// `duplicate_name`; as a batch it was queued, both jobs succeeded and the second copy silently replaced the
    /// first. It is refused the same way now, and nothing is queued or written.
    @Test func eachRefusesFilesOfOneNameIntoOneDirectory() throws {
        let daemon = try DaemonHarness()
        let dest = daemon.home.file("dest")
        for dir in ["dest", "a", "b"] {
            try FileManager.default.createDirectory(atPath: daemon.home.file(dir), withIntermediateDirectories: true)
        }
        let sources = [daemon.home.file("a/x.jpg"), daemon.home.file("b/x.jpg")]
        for (n, source) in sources.enumerated() {
            try Data(repeating: UInt8(n + 1), count: 1000).write(to: URL(fileURLWithPath: source))
        }
        let result = try daemon.cli(["submit", "upload"] + sources + ["--to", dest, "--each"])
        #expect(result.status == 2, "\(result.stdout)")
        #expect(result.stderr.contains("would both be written as 'x.jpg'"), "\(result.stderr)")
        #expect(result.stderr.contains("[duplicate_name]"), "\(result.stderr)")
        #expect(try Self.jobCount(daemon) == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dest).isEmpty)
        // Different names are still one job each.
        let ok = try daemon.cli(["submit", "upload", sources[0], "--to", dest, "--each"])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(try Self.jobCount(daemon) == 1)
    }

    /// The lost reply (issue 14): the daemon commits a submit and dies before answering (a test hook makes it exit
    /// right after the commit). The CLI, which made its own key, reconnects to the restarted daemon with the same
    /// key and gets the job: exit 0, marked existing, and exactly one job exists. Then the same for a batch.
    @Test func aSubmitWhoseReplyIsLostIsRetriedWithItsKeyAndMakesOneJob() throws {
        let home = TemporaryDirectory()
        var hooked: DaemonHarness? = try DaemonHarness(
            home: home, environment: ["TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT": "86"])
        let source = home.file("photo.jpg")
        try Data(repeating: 1, count: 5000).write(to: URL(fileURLWithPath: source))
        let dest = home.file("dest")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        let environment = try #require(hooked?.environment)

        let second = home.file("photo2.jpg")
        try Data(repeating: 2, count: 10).write(to: URL(fileURLWithPath: second))
        try FileManager.default.createDirectory(atPath: dest + "/sub", withIntermediateDirectories: true)
        for (round, arguments) in [[source, "--to", dest], [source, second, "--to", dest + "/sub", "--each"]].enumerated() {
            if round == 1 {
                hooked = try DaemonHarness(home: home, environment: ["TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT": "86"])
            }
            let before = try Self.jobCount(try #require(hooked))
            let output = home.file("cli-\(round).out")
            let cli = try ChildProcess.spawn(Binary.path, ["submit", "upload"] + arguments, environment: environment, output: output)
            // The daemon exits by the hook, after its commit and before its reply.
            let process = try #require(hooked?.process)
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning && Date() < deadline { usleep(5_000) }
            #expect(!process.isRunning)
            #expect(process.terminationStatus == 86, "the hook's exit status")
            var status: Int32 = 0
            #expect(try String(contentsOfFile: home.file("daemon.log"), encoding: .utf8).contains("test hook: exiting"))
            // Restarted without the hook (as systemd would): the CLI's retry finds the job.
            let daemon = try DaemonHarness(home: home)
            #expect(waitpid(cli, &status, 0) == cli)
            let printed = try String(contentsOfFile: output, encoding: .utf8)
            #expect((status >> 8) & 0xFF == 0, "the CLI exits 0: \(printed)")
            #expect(printed.contains("asking again with the same key"), "\(printed)")
            let ids = printed.split(separator: "\n").map(String.init).filter { $0.count == 36 && !$0.contains(" ") }
            let expected = round == 0 ? 1 : 2
            #expect(ids.count == expected, "\(printed)")
            #expect(printed.contains(round == 0 ? "had been submitted before with key" : "2 of the 2 jobs had been submitted before"), "\(printed)")
            let jobs = try #require(daemon.request(["op": "list", "limit": 1000])["jobs"]?.arrayValue)
            #expect(jobs.count == before + expected, "exactly one job per entry: \(jobs.count)")
            #expect(Set(jobs.suffix(expected).compactMap { $0["id"]?.stringValue }) == Set(ids))
            for id in ids { try daemon.waitForState(id, "succeeded") }
            hooked = nil
            _ = try daemon.stop()
        }
    }

    /// A misspelt member (`optoins`) is refused, naming it and the members the op takes, instead of being
    /// ignored (the job would have been queued without its options): in a submit, in a batch's job (with its
    /// index; through `submit --from`, with the file's line), in `options`, and in the other ops. Nothing queued.
    @Test func unknownMembersAreRefusedNamingThem() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let cases: [(request: JSONValue, code: String, message: String)] = [
            (["op": "submit", "kind": "sleep", "params": ["units": 1], "optoins": ["priority": 5]], "bad_request",
             #"unknown member "optoins" in submit; known: op, kind, params, options, key"#),
            (["op": "submit", "kind": "sleep", "params": ["units": 1], "options": ["priorty": 5]], "invalid_options",
             #"unknown member "priorty" in options; known: priority, timeout_s"#),
            (["op": "submit_batch", "jobs": [Self.sleepEntry(1), ["kind": "sleep", "params": ["units": 1], "Key": "k"]]],
             "bad_request", #"job 1 of the batch (from 0): unknown member "Key" in a submit_batch job; known: kind, params, options, key"#),
            (["op": "submit_batch", "jobs": [Self.sleepEntry(1)], "options": ["priority": 1]], "bad_request",
             #"unknown member "options" in submit_batch; known: op, jobs"#),
            (["op": "list", "limt": 5], "bad_request", #"unknown member "limt" in list; known: op, states, kind, limit"#),
            (["op": "show", "id": "x"], "bad_request", #"unknown member "id" in show; known: op, job"#),
            (["op": "ping", "x": 1], "bad_request", #"unknown member "x" in ping; known: op"#),
        ]
        for (request, code, message) in cases {
            let reply = try daemon.request(request)
            #expect(reply["error"]?["code"]?.stringValue == code, "\(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains(message) == true, "\(reply)")
        }
        let file = daemon.home.file("typo.ndjson")
        try """
            {"kind": "sleep", "params": {"units": 1}}
            {"kind": "sleep", "params": {"units": 1}, "optoins": {"priority": 5}}
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try daemon.cli(["submit", "--from", file])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains(#"typo.ndjson line 2: job 1 of the batch (from 0): unknown member "optoins""#), "\(result.stderr)")
        #expect(try Self.jobCount(daemon) == 0, "nothing queued")
        // The members that are known still work, all of them.
        let reply = try daemon.request([
            "op": "submit", "kind": "sleep", "params": ["units": 1], "key": "k1",
            "options": ["priority": 5, "timeout_s": 60, "stall_timeout_s": 60, "max_attempts": 2, "give_up_after_s": 60,
                        "allow_duplicate": true],
        ])
        #expect(reply["ok"]?.boolValue == true, "\(reply)")
        #expect(reply["job"]?["priority"]?.intValue == 5)
    }

    /// A member an upload's params do not have (`max_rat`, `s3.parts_in_flite`) was dropped by decoding and the
    /// job queued without it; a secret put in the params by mistake (`s3.secret_access_key`) was stored and shown
    /// by `show`. Each is `invalid_params` now, naming the member and the ones there are, in a `submit` and in a
    /// batch line; nothing is queued.
    @Test func unknownParamsMembersOfAnUploadAreRefusedNamingThem() throws {
        let daemon = try DaemonHarness()
        let source = daemon.home.file("a.jpg")
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: source))
        let cases: [(JSONValue, String)] = [
            (["files": [.string(source)], "to": "file:///tmp", "max_rat": 1024], "unknown member \"max_rat\" in params; known: files, to, headers, s3, photos, again, chunk_size, max_rate, ca_bundle"),
            (["files": [.string(source)], "to": "s3://bucket/p/", "s3": ["parts_in_flite": 8]], "unknown member \"parts_in_flite\" in params.s3"),
            (["files": [.string(source)], "to": "s3://bucket/p/", "s3": ["secret_access_key": "AKIASECRET"]], "unknown member \"secret_access_key\" in params.s3"),
            (["photos": ["tag": ["trip"]], "to": "file:///tmp"], "unknown member \"tag\" in params.photos"),
        ]
        for (params, message) in cases {
            let reply = try daemon.request(["op": "submit", "kind": "upload", "params": params])
            #expect(reply["error"]?["code"]?.stringValue == "invalid_params", "\(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains(message) == true, "\(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains("AKIASECRET") == false)
            let batch = try daemon.request(["op": "submit_batch", "jobs": [["kind": "upload", "params": params]]])
            #expect(batch["error"]?["code"]?.stringValue == "invalid_params", "\(batch)")
            #expect(batch["error"]?["index"]?.intValue == 0)
        }
        #expect(try Self.jobCount(daemon) == 0)
    }

    /// The photo kinds refuse unknown params members too (only upload did): `tagg` or `id` would otherwise be
    /// dropped and the job run without them, on no photos or all of them.
    @Test func unknownParamsMembersOfThePhotoKindsAreRefusedNamingThem() throws {
        let daemon = try DaemonHarness()
        let cases: [(String, JSONValue, String)] = [
            ("tag", ["tag": "trip", "all": true, "remov": true], "unknown member \"remov\" in params"),
            ("tag", ["tag": "trip", "id": ["x"], "all": true], "unknown member \"id\" in params"),
            ("autotag", ["all": true, "place": "/tmp/p.csv"], "unknown member \"place\" in params"),
            ("import", ["dir": "/tmp", "recursive": true], "unknown member \"recursive\" in params; known: dir"),
        ]
        for (kind, params, message) in cases {
            let reply = try daemon.request(["op": "submit", "kind": .string(kind), "params": params])
            #expect(reply["error"]?["code"]?.stringValue == "invalid_params", "\(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.contains(message) == true, "\(reply)")
        }
        #expect(try Self.jobCount(daemon) == 0)
        // Every member the CLI sends is known: these are queued.
        #expect(try daemon.request(["op": "submit", "kind": "tag", "params": ["tag": "trip", "all": true, "remove": true, "xmp": false]])["ok"]?.boolValue == true)
        #expect(try daemon.request(["op": "submit", "kind": "autotag", "params": ["all": true, "xmp_naming": "lightroom"]])["ok"]?.boolValue == true)
    }

    /// Issue 14: a big batch is checked in slices of at most 20 ms with loop turns between them, so the loop
    /// answers others while it is under way (3 600 entries held it for 3.7 s). Deterministic: the batch's first
    /// job stops the daemon (SIGSTOP) while the daemon checks it; a `ping` is sent on a second connection
    /// meanwhile; jobs 1-10 each take 30 ms to check (so each ends a slice); job 550 holds the loop until the test
    /// has the ping's answer. Checked in one go, the ping waits behind the held job, and the test gives up on it
    /// after 20 s.
    @Test func aBigBatchLetsTheLoopAnswerOthersBetweenItsSlices() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let release = daemon.home.file("release")
        var jobs = (0..<600).map { _ in Self.sleepEntry(0) }
        jobs[0] = ["kind": "sleep", "params": ["units": 0, "stop_in_validation": true]]
        for index in 1...10 { jobs[index] = ["kind": "sleep", "params": ["units": 0, "validation_ms": 30]] }
        jobs[550] = ["kind": "sleep", "params": ["units": 0, "hold_validation_until": .string(release)]]
        let batch = try daemon.rawConnection()
        defer { close(batch) }
        let line = JSONCoding.encode(["op": "submit_batch", "jobs": .array(jobs)] as JSONValue) + [0x0A]
        #expect(line.count < 64 << 10, "the batch fits in the socket's buffer while the daemon is stopped")
        #expect(DaemonHarness.send(batch, line))
        try Self.waitUntilStopped(daemon.pid)
        let ping = try daemon.rawConnection()
        defer { close(ping) }
        #expect(DaemonHarness.send(ping, Array(#"{"op":"ping"}"#.utf8) + [0x0A]))
        kill(daemon.pid, SIGCONT)
        let pong = Self.readLine(ping, timeout: 20)
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        #expect(pong.flatMap { try? JSONParser.parse($0) }?["ok"]?.boolValue == true, "the ping waited behind the batch")
        let reply = try #require(Self.readLine(batch, timeout: 60).flatMap { try? JSONParser.parse($0) })
        #expect(reply["ids"]?.arrayValue?.count == 600, "\(reply)")
        #expect(try Self.jobCount(daemon) == 600)
    }

    /// What a batch's checked entry does is claimed until the batch is answered: a submit checked while the batch
    /// lets the loop run between its slices, doing the same as an entry already checked, is refused as its
    /// duplicate, and the batch goes on (it used to be the other way round: the later submit was queued, and the
    /// batch, nearly done, was refused when it checked again). Made deterministic as
    /// `aBigBatchLetsTheLoopAnswerOthersBetweenItsSlices` is: the daemon is stopped while it checks entry 1 (the
    /// upload, entry 0, checked), the other submit is sent meanwhile, entries 2-10 end a slice each, and entry 11
    /// holds the loop until the test has the other submit's answer.
    @Test func aSubmitDoingWhatACheckedEntryOfABatchUnderWayDoesIsItsDuplicate() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let source = daemon.home.file("a.jpg")
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: source))
        let dest = daemon.home.file("dest")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        let upload: JSONValue = [
            "kind": "upload", "params": ["files": [.string(source)], "to": .string("file://" + dest), "max_rate": 1024],
            "options": ["queue": "default"],
        ]
        let release = daemon.home.file("release")
        var jobs: [JSONValue] = [upload, ["kind": "sleep", "params": ["units": 0, "stop_in_validation": true]]]
        jobs += (2...10).map { _ in ["kind": "sleep", "params": ["units": 0, "validation_ms": 30]] }
        jobs.append(["kind": "sleep", "params": ["units": 0, "hold_validation_until": .string(release)]])
        let batch = try daemon.rawConnection()
        defer { close(batch) }
        #expect(DaemonHarness.send(batch, JSONCoding.encode(["op": "submit_batch", "jobs": .array(jobs)] as JSONValue) + [0x0A]))
        try Self.waitUntilStopped(daemon.pid)
        let single = try daemon.rawConnection()
        defer { close(single) }
        var request = upload
        if case .object(var members) = request {
            members["op"] = "submit"
            request = .object(members)
        }
        #expect(DaemonHarness.send(single, JSONCoding.encode(request) + [0x0A]))
        kill(daemon.pid, SIGCONT)
        let refused = Self.readLine(single, timeout: 20).flatMap { try? JSONParser.parse($0) }
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        #expect(refused?["error"]?["code"]?.stringValue == "duplicate_upload", "\(String(describing: refused))")
        #expect(refused?["error"]?["message"]?.stringValue?.contains("is already doing the same") == true)
        let reply = try #require(Self.readLine(batch, timeout: 60).flatMap { try? JSONParser.parse($0) })
        let ids = try #require(reply["ids"]?.arrayValue, "\(reply)")
        #expect(ids.count == 12)
        #expect(refused?["error"]?["message"]?.stringValue?.contains(ids[0].stringValue ?? "-") == true, "names the batch's job")
        let uploads = try daemon.request(["op": "list", "kind": "upload"])["jobs"]?.arrayValue ?? []
        #expect(uploads.count == 1, "\(uploads)")
    }

    /// Waits (up to 10 s) until process `pid` is stopped by a signal (`T` in /proc/PID/stat).
    static func waitUntilStopped(_ pid: Int32) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            if let close = stat.lastIndex(of: ")"), stat[close...].dropFirst(2).first == "T" { return }
            usleep(1_000)
        }
        throw HarnessError("process \(pid) did not stop")
    }

    /// One reply line from `fd` (without its newline), or `nil` when none comes within `timeout` seconds.
    static func readLine(_ fd: Int32, timeout: Int) -> [UInt8]? {
        var time = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == 0x0A { return received }
            received.append(byte)
        }
        return nil
    }
}
