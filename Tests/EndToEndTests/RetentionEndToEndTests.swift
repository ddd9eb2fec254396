import Foundation
import Testing
import TrailbookEngine

/// Retention on the real daemon: `prune` through the CLI, the sweep timer with short `--keep-*` periods, and the
/// store's files shrinking after many jobs are pruned.
@Suite(.serialized)
struct RetentionEndToEndTests {
    /// Submits `count` zero-length sleep jobs, pipelined on one connection, and returns their ids.
    func submitMany(_ daemon: DaemonHarness, _ count: Int, params: JSONValue = ["units": 0]) throws -> [String] {
        let line = JSONCoding.encode(["op": "submit", "kind": "sleep", "params": params] as JSONValue) + [0x0A]
        var ids: [String] = []
        for start in stride(from: 0, to: count, by: 50) {
            let batch = min(50, count - start)
            let replies = try daemon.rawReplies(Array((0..<batch).map { _ in line }.joined()), count: batch, replyTimeout: 30)
            ids += replies.compactMap { $0["job"]?["id"]?.stringValue }
        }
        #expect(ids.count == count)
        return ids
    }

    /// A sleep job that fails on its only attempt, once it has.
    func submitFailed(_ daemon: DaemonHarness) throws -> String {
        let failed = try daemon.job([
            "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1, "fail_code": "boom"],
            "options": ["max_attempts": 1],
        ])["id"]?.stringValue ?? ""
        try daemon.waitForState(failed, "failed")
        return failed
    }

    func waitUntilNoneUnfinished(_ daemon: DaemonHarness, timeout: Double = 120) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let reply = try daemon.request(["op": "list", "states": ["queued", "running"], "limit": 1])
            if reply["jobs"]?.arrayValue?.isEmpty == true { return }
            usleep(50_000)
        }
        throw HarnessError("jobs still unfinished after \(timeout) s")
    }

    func storeBytes(_ daemon: DaemonHarness) -> Int64 {
        ["", "-wal"].reduce(0) { total, suffix in
            var info = stat()
            return total + (stat(daemon.statePath + "/jobs.sqlite3" + suffix, &info) == 0 ? Int64(info.st_size) : 0)
        }
    }

    @Test func pruneDeletesEndedJobsKeepsTheRestAndTheDaemonCarriesOn() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "1"])
        let succeeded = try submitMany(daemon, 5)
        _ = try submitFailed(daemon)
        // One runs for a long time and holds the only slot; the next waits queued, the third is paused and the
        // fourth is cancelled while it waits.
        let running = try daemon.submitSleep(units: 10_000, unitMilliseconds: 10)
        try daemon.waitForState(running, "running")
        let queued = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        let paused = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try daemon.job(["op": "pause", "job": .string(paused)])
        let cancelled = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try daemon.job(["op": "cancel", "job": .string(cancelled)])
        for id in succeeded { try daemon.waitForState(id, "succeeded") }

        // Nothing is old enough for the defaults (7 d, 30 d, 7 d).
        let none = try daemon.cli(["prune", "--json"])
        #expect(none.status == 0, "\(none.stderr)")
        let noneReply = try JSONCoding.decode(JSONValue.self, from: Array(none.stdout.utf8))
        #expect(noneReply["total"]?.intValue == 0)

        let result = try daemon.cli(["prune", "--older-than", "0s", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let reply = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(reply["total"]?.intValue == 7)
        #expect(reply["pruned"]?["succeeded"]?.intValue == 5)
        #expect(reply["pruned"]?["failed"]?.intValue == 1)
        #expect(reply["pruned"]?["cancelled"]?.intValue == 1)
        #expect(reply["kept_for_cleanup"]?.intValue == 0)

        let left = try daemon.request(["op": "list"])["jobs"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(Set(left) == Set([running, queued, paused]))
        let show = try daemon.cli(["show", succeeded[0]])
        #expect(show.status == 4, "a pruned job is no such job: \(show.stderr)")

        // The daemon carries on: the queue moves, and a new job is followed to its end through the feed.
        _ = try daemon.job(["op": "cancel", "job": .string(running)])
        try daemon.waitForState(queued, "succeeded")
        let text = try daemon.cli(["prune", "--older-than", "0s"])
        #expect(text.stdout.contains("pruned 2 jobs (1 succeeded, 0 failed, 1 cancelled)"), "\(text.stdout)")
        // `watch ID` follows the new job through the feed until it ends.
        let id = try daemon.submitSleep(units: 3, unitMilliseconds: 5)
        let watch = try daemon.cli(["watch", id, "--json"])
        #expect(watch.status == 0, "\(watch.stderr)")
        #expect(watch.stdout.contains("succeeded"), "\(watch.stdout)")
        #expect(try daemon.request(["op": "list"])["jobs"]?.arrayValue?.count == 2, "the paused job and the new one")
    }

    @Test func theSweepPrunesByStateOnItsOwnAndLogsIt() throws {
        let daemon = try DaemonHarness(arguments: ["--keep-succeeded", "1s", "--keep-failed", "forever", "--keep-cancelled", "1h"])
        let done = try daemon.submitSleep(units: 1, unitMilliseconds: 1)
        let failed = try submitFailed(daemon)
        let cancelled = try daemon.submitSleep(units: 10_000, unitMilliseconds: 10)
        _ = try daemon.job(["op": "cancel", "job": .string(cancelled)])
        // Kept 1 s after its end, swept at least every 1 s (half the shortest retention, at least 1 s).
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try daemon.request(["op": "show", "job": .string(done)])["ok"]?.boolValue == true {
            usleep(100_000)
        }
        #expect(try daemon.request(["op": "show", "job": .string(done)])["error"]?["code"]?.stringValue == "no_such_job")
        #expect(try daemon.show(failed)["state"]?.stringValue == "failed", "--keep-failed forever")
        #expect(try daemon.show(cancelled)["state"]?.stringValue == "cancelled", "kept 1 h")
        #expect(daemon.log().contains("retention: pruned 1 ended jobs (1 succeeded, 0 failed, 0 cancelled)"), "\(daemon.log())")
    }

    /// `submit --wait` on a daemon that prunes ended jobs at once: the job may be gone before the CLI's closing
    /// `show`; the CLI still reports the end it saw and exits 0, never "no such job" (exit 4). Deterministic: the
    /// CLI is stopped (SIGSTOP) while the job runs and continued only once the job has ended and been pruned, so
    /// its end event waits in the socket and its `show` finds nothing.
    @Test func submitWaitReportsTheEndOfAJobPrunedBeforeItsShow() throws {
        let daemon = try DaemonHarness(arguments: ["--keep-succeeded", "0"])
        let source = daemon.home.path + "/photo.jpg"
        let destination = daemon.home.path + "/out"
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: source, contents: Data(repeating: 7, count: 768 * 1024)))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binary.path)
        process.arguments = ["submit", "upload", source, "--to", destination, "--wait", "--max-rate", "1MiB"]
        process.environment = daemon.environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        // Stop the CLI while the job runs, then let the job end and the sweep delete it.
        var id: String?
        let deadline = Date().addingTimeInterval(20)
        while id == nil, Date() < deadline {
            let jobs = try daemon.request(["op": "list", "states": ["running"]])["jobs"]?.arrayValue ?? []
            id = jobs.first?["id"]?.stringValue
            if id == nil { usleep(10_000) }
        }
        let job = try #require(id, "the upload never ran")
        #expect(kill(process.processIdentifier, SIGSTOP) == 0)
        while Date() < deadline, try daemon.request(["op": "show", "job": .string(job)])["ok"]?.boolValue == true {
            usleep(50_000)
        }
        #expect(try daemon.request(["op": "show", "job": .string(job)])["error"]?["code"]?.stringValue == "no_such_job")
        #expect(kill(process.processIdentifier, SIGCONT) == 0)
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(output)")
        #expect(output.contains("succeeded"), "\(output)")
        #expect(FileManager.default.fileExists(atPath: destination + "/photo.jpg"))
    }

    /// 3 000 jobs: the store's files (database and WAL) shrink to a quarter or less once they are pruned.
    @Test func theStoreShrinksAfterPruningManyJobs() throws {
        let daemon = try DaemonHarness(arguments: ["--concurrency", "8"])
        _ = try submitMany(daemon, 3_000)
        try waitUntilNoneUnfinished(daemon)
        let before = storeBytes(daemon)
        let result = try daemon.cli(["prune", "--older-than", "0s", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let reply = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8))
        #expect(reply["pruned"]?["succeeded"]?.intValue == 3_000)
        let after = storeBytes(daemon)
        #expect(after * 4 < before, "store files \(before) -> \(after) bytes")
        #expect((reply["store_bytes_after"]?.intValue ?? .max) * 4 < (reply["store_bytes_before"]?.intValue ?? 0))
        // Still whole and working: list, a new job, its feed.
        #expect(try daemon.request(["op": "list"])["jobs"]?.arrayValue?.isEmpty == true)
        let id = try daemon.submitSleep(units: 2, unitMilliseconds: 1)
        try daemon.waitForState(id, "succeeded")
    }
}
