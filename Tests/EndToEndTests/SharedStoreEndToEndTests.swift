import Foundation
import Synchronization
import Testing
import TrailbookCLI
import TrailbookEngine

/// Several daemons, each with its own `TRAILBOOK_JOBS_HOME`, sharing one PostgreSQL database (`daemon --store`,
/// issue 15), against a real PostgreSQL 15 started by the test (`PostgresServer`).
@Suite(.serialized)
struct SharedStoreEndToEndTests {
    /// Sleep jobs of `units` × `unitMilliseconds`, submitted round-robin through `daemons`; their ids.
    private func submit(_ count: Int, units: Int, unitMilliseconds: Int, through daemons: [DaemonHarness]) throws -> [String] {
        try (0..<count).map { try daemons[$0 % daemons.count].submitSleep(units: units, unitMilliseconds: unitMilliseconds) }
    }

    /// Every job as `daemon` lists it, by id.
    private func listed(by daemon: DaemonHarness) throws -> [String: JSONValue] {
        let reply = try daemon.request(["op": "list", "limit": 100_000])
        var jobs: [String: JSONValue] = [:]
        for job in reply["jobs"]?.arrayValue ?? [] {
            if let id = job["id"]?.stringValue { jobs[id] = job }
        }
        return jobs
    }

    /// Waits until `daemon` lists every one of `ids` in a state in `states`, at most `timeout` seconds.
    private func waitUntilAll(_ ids: [String], in states: Set<String>, by daemon: DaemonHarness, timeout: Double = 120)
        throws
    {
        let deadline = Date().addingTimeInterval(timeout)
        var pending = ids.count
        while Date() < deadline {
            let jobs = try listed(by: daemon)
            pending = ids.filter { !states.contains(jobs[$0]?["state"]?.stringValue ?? "") }.count
            if pending == 0 { return }
            usleep(50_000)
        }
        throw HarnessError("\(pending) of \(ids.count) jobs not in \(states.sorted()) after \(timeout) s")
    }

    /// How many times each daemon's log says a job ended `succeeded`. The line is written once the end's group
    /// commit is answered, a moment after the row says so: up to 5 s are given for the first line.
    private func successLines(_ id: String, in daemons: [DaemonHarness]) -> Int {
        let needle = "job \(id.prefix(8)) sleep running -> succeeded"
        func count() -> Int { daemons.map { $0.log().components(separatedBy: needle).count - 1 }.reduce(0, +) }
        let deadline = Date().addingTimeInterval(5)
        while count() == 0 && Date() < deadline { usleep(10_000) }
        return count()
    }

    /// The jobs `daemon`'s log shows it started and never ended (running there when it died or stopped).
    private func unfinishedRuns(in daemon: DaemonHarness, of ids: [String]) -> [String] {
        let log = daemon.log()
        return ids.filter {
            log.contains("job \($0.prefix(8)) sleep queued -> running") && !log.contains("job \($0.prefix(8)) sleep running -> ")
        }
    }

    @Test func threeDaemonsShareTheQueueAndAKilledDaemonsJobsAreRescuedAndEndOnce() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // One daemon through TCP with the password in the URI: it must never reach the log or `show`.
        let stores = [server.socketConnectionString, server.tcpURI, server.socketConnectionString]
        let daemons = try stores.map {
            try DaemonHarness(arguments: ["--store", $0, "--lease", "2s", "--concurrency", "4"])
        }
        let (a, b, c) = (daemons[0], daemons[1], daemons[2])
        let watcher = try FeedRecorder(a)
        // 60 jobs of 20 × 50 ms (1 s each) through all three: 12 at a time, about 5 s of work.
        let ids = try submit(60, units: 20, unitMilliseconds: 50, through: daemons)
        // Every daemon sees every job, whichever took the submit.
        #expect(Set(try listed(by: a).keys).isSuperset(of: ids))
        #expect(Set(try listed(by: b).keys).isSuperset(of: ids))
        #expect(try c.show(ids[1])["id"]?.stringValue == ids[1])

        // kill -9 of daemon C while it runs jobs (its log says so; the lines are written after each claim), once
        // one of them has checkpointed 2 units (a checkpoint is written before the progress that shows it).
        var checkpointed: [String: Double] = [:]
        let deadline = Date().addingTimeInterval(30)
        while checkpointed.values.allSatisfy({ $0 < 2 }) && Date() < deadline {
            for id in unfinishedRuns(in: c, of: ids) {
                checkpointed[id] = try c.show(id)["progress"]?["completed"]?.doubleValue ?? 0
            }
            usleep(10_000)
        }
        try c.crash()
        let orphaned = unfinishedRuns(in: c, of: ids)
        #expect(!orphaned.isEmpty, "daemon C ran nothing before it was killed")
        #expect(checkpointed.values.contains { $0 >= 2 })

        // A and B finish everything, C's orphans after their 2 s leases expire.
        try waitUntilAll(ids, in: ["succeeded"], by: a)
        let jobs = try listed(by: b)
        for id in ids {
            #expect(jobs[id]?["state"]?.stringValue == "succeeded")
            #expect(successLines(id, in: daemons) == 1, "job \(id) ended \(successLines(id, in: daemons)) times")
        }
        // C's jobs were rescued (same attempt: a crash is not the job's failure) and resumed from their checkpoint.
        let rescueLog = a.log() + b.log()
        #expect(rescueLog.contains("rescued"))
        for id in orphaned {
            let result = jobs[id]?["result"]
            #expect(result?["attempt"]?.doubleValue == 1, "job \(id): \(String(describing: result))")
            // Resumed from its checkpoint: at least where C's `show` last saw it.
            #expect((result?["resumed_at"]?.doubleValue ?? -1) >= checkpointed[id] ?? 0, "job \(id): \(String(describing: result))")
            // A's watcher saw it go back to the queue when it was rescued, and why, before it ran again.
            let deadline = Date().addingTimeInterval(10)
            while !watcher.states(of: id).contains("succeeded") && Date() < deadline { usleep(10_000) }
            #expect(watcher.states(of: id) == ["running", "queued", "running", "succeeded"], "job \(id)")
            let why = watcher.events(of: id).first { $0["type"]?.stringValue == "log" }?["message"]?.stringValue ?? ""
            #expect(why.contains("stopped renewing its lease"), "job \(id): \(why)")
        }
        for daemon in daemons {
            #expect(!daemon.log().contains(server.password))
        }
        #expect(!String(decoding: JSONCoding.encode(try b.show(ids[0])), as: UTF8.self).contains(server.password))
        _ = try a.stop()
        _ = try b.stop()
    }

    @Test func aDaemonCutOffPastItsLeaseStopsItsJobsWithoutWritingTheirEnds() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--lease", "1s", "--concurrency", "2"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--lease", "1s", "--concurrency", "2"])
        // Only A runs at first: B is stopped (SIGSTOP) before anything is submitted.
        kill(b.pid, SIGSTOP)
        var stoppedB = true
        defer { if stoppedB { kill(b.pid, SIGCONT) } }
        let ids = try submit(2, units: 40, unitMilliseconds: 50, through: [a])
        let deadline = Date().addingTimeInterval(30)
        while unfinishedRuns(in: a, of: ids).count < 2 && Date() < deadline { usleep(10_000) }
        #expect(unfinishedRuns(in: a, of: ids).count == 2)
        // A is cut off (SIGSTOP) for 3 leases while B runs: B rescues both jobs and runs them to their end.
        kill(a.pid, SIGSTOP)
        kill(b.pid, SIGCONT)
        stoppedB = false
        for id in ids { try b.waitForState(id, "succeeded", timeout: 60) }
        // A wakes up: its renewals and checkpoints are fenced off, so it stops both runs and writes no end. A run
        // that reaches its end before its first renewal's answer (progress is sent without waiting) has that end
        // fenced off instead.
        kill(a.pid, SIGCONT)
        func stoppedWithoutEnd(_ id: String) -> Bool {
            let log = a.log()
            return log.contains("job \(id.prefix(8)) sleep: run stopped after its lease was lost; its end is not written")
                || log.contains("job \(id.prefix(8)) sleep: its lease was lost before its end (succeeded) was written; not written")
        }
        let quiet = Date().addingTimeInterval(30)
        while !ids.allSatisfy(stoppedWithoutEnd) && Date() < quiet { usleep(20_000) }
        for id in ids {
            #expect(stoppedWithoutEnd(id), "\(a.log())")
            #expect(successLines(id, in: [a, b]) == 1)
            #expect(try a.show(id)["state"]?.stringValue == "succeeded")
        }
        #expect(!a.log().contains("sleep running -> "))
        _ = try a.stop()
        _ = try b.stop()
    }

    /// `cancel` and `pause` through daemon A of jobs running on daemon B: B stops them, and its end, written with
    /// the request pending, is announced to A (`NOTIFY trailbook_control 'ended <job>'`, only for such ends).
    @Test func cancelAndPauseThroughOneDaemonReachTheDaemonRunningTheJob() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString])
        // Both jobs run on B: A is stopped (SIGSTOP) until B has claimed them.
        kill(a.pid, SIGSTOP)
        let ids = try submit(2, units: 2_000, unitMilliseconds: 20, through: [b])
        let deadline = Date().addingTimeInterval(30)
        while unfinishedRuns(in: b, of: ids).count < 2 && Date() < deadline { usleep(10_000) }
        kill(a.pid, SIGCONT)
        #expect(unfinishedRuns(in: b, of: ids).count == 2)

        // Another session listens on the control channel meanwhile (printing what it heard after each short
        // statement, for 6 s): the end of a run cancelled through another daemon is announced there, the end of
        // a run nobody asked about is not.
        let work = try TemporaryDirectory()
        let listener = try ChildProcess.spawn(
            server.psqlPath,
            [server.socketConnectionString + " application_name=tb-listener", "-At", "-c", "LISTEN trailbook_control"]
                + Array(repeating: ["-c", "SELECT pg_sleep(0.1)"], count: 60).flatMap { $0 },
            environment: ProcessInfo.processInfo.environment, output: work.file("listener.out"))
        let listening = Date().addingTimeInterval(10)
        while Date() < listening,
            try psql(server, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tb-listener' AND query LIKE '%pg_sleep%'") != "1"
        {
            usleep(10_000)
        }
        let unasked = try b.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try b.waitForState(unasked, "succeeded")

        // Cancel through A: B stops the run (user_stop) and writes the end; A answers with it.
        let cancelled = try a.job(["op": "cancel", "job": .string(ids[0])])
        #expect(cancelled["state"]?.stringValue == "cancelled")
        #expect(cancelled["cancellation"]?["reason"]?.stringValue == "user_stop")
        #expect(b.logShows("job \(ids[0].prefix(8)) sleep running -> cancelled"), "\(b.log())")
        #expect(!a.log().contains("job \(ids[0].prefix(8)) sleep running -> "))
        #expect(ChildProcess.exitStatus(of: listener, within: 30) == 0)
        let heard = (try? String(contentsOfFile: work.file("listener.out"), encoding: .utf8)) ?? ""
        #expect(heard.contains("\"ended \(ids[0])\""), "\(heard)")
        #expect(!heard.contains(unasked), "\(heard)")

        // Pause through A: B checkpoints and stops it; resumed through A, it runs on from its checkpoint. First
        // B must have counted an item: on a loaded machine the pause could otherwise come before the first one.
        _ = try b.waitFor(ids[1], timeout: 30, "an item counted") { ($0["progress"]?["completed"]?.doubleValue ?? 0) > 0 }
        let paused = try a.job(["op": "pause", "job": .string(ids[1])])
        #expect(paused["state"]?.stringValue == "paused")
        let done = paused["progress"]?["completed"]?.doubleValue ?? 0
        #expect(done > 0)
        #expect(b.logShows("job \(ids[1].prefix(8)) sleep running -> paused"), "\(b.log())")
        let resumed = try a.job(["op": "resume", "job": .string(ids[1])])
        #expect(resumed["state"]?.stringValue != "paused")
        try a.waitFor(ids[1], timeout: 30, "running again past its checkpoint") {
            $0["state"]?.stringValue == "running" && ($0["progress"]?["completed"]?.doubleValue ?? 0) > done
        }
        let again = try a.job(["op": "cancel", "job": .string(ids[1])])
        #expect(again["state"]?.stringValue == "cancelled")
        // No write was refused on the way (a refused write is kept and retried, and would hide a broken statement).
        #expect(!(a.log() + b.log()).contains("refused a write"))
        _ = try a.stop()
        _ = try b.stop()
    }

    /// Retention on the shared store: `prune` through one daemon deletes every daemon's ended jobs (and only
    /// those), one daemon prunes at a time (another session holding the advisory lock makes `prune` say so and
    /// delete nothing), and a daemon's `--keep-succeeded` sweep deletes jobs another daemon ran.
    @Test func pruneAndRetentionWorkOnTheSharedStoreOneDaemonAtATime() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let ended = try submit(6, units: 1, unitMilliseconds: 1, through: [a, b])
        let long = try b.submitSleep(units: 100_000, unitMilliseconds: 20)
        try waitUntilAll(ended, in: ["succeeded"], by: a)
        _ = try a.waitFor(long, "running") { $0["state"]?.stringValue == "running" }

        // Another session holds the pruning lock: prune through A refuses and deletes nothing.
        let holding = server.socketConnectionString + " application_name=tb-lock-holder"
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: server.psqlPath)
        holder.arguments = [holding, "-c", "SELECT pg_advisory_lock(\(0x74_6270_7275_6e65))", "-c", "SELECT pg_sleep(120)"]
        holder.standardOutput = FileHandle.nullDevice
        try holder.run()
        defer { if holder.isRunning { holder.terminate() } }
        // Held once the session has gone on to its sleep.
        let held = Date().addingTimeInterval(30)
        while Date() < held,
            try psql(server, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tb-lock-holder' AND query LIKE '%pg_sleep%'") != "1"
        {
            usleep(20_000)
        }
        let busy = try a.request(["op": "prune", "older_than_s": 0])
        #expect(busy["error"]?["code"]?.stringValue == "invalid_state", "\(busy)")
        #expect(busy["error"]?["message"]?.stringValue?.contains("another daemon") == true)
        #expect(Set(try listed(by: b).keys).isSuperset(of: ended))
        _ = try psql(server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tb-lock-holder'")
        holder.waitUntilExit()

        // Free again: A prunes the six ended jobs, whichever daemon ran them; the running one stays.
        let pruned = try a.request(["op": "prune", "older_than_s": 0])
        #expect(pruned["ok"]?.boolValue == true, "\(pruned)")
        #expect(pruned["pruned"]?["succeeded"]?.intValue == 6, "\(pruned)")
        let left = try listed(by: b)
        #expect(ended.allSatisfy { left[$0] == nil })
        #expect(left[long]?["state"]?.stringValue == "running")
        #expect(try b.request(["op": "show", "job": .string(ended[0])])["error"]?["code"]?.stringValue == "no_such_job")

        // A third daemon's sweep (`--keep-succeeded 1s`) prunes a job B ran.
        let c = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-c", "--queues", "elsewhere", "--keep-succeeded", "1s"])
        let swept = try b.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try b.waitForState(swept, "succeeded")
        let deadline = Date().addingTimeInterval(30)
        // The log line is written once the sweep is over, a moment after the rows are gone: wait for both.
        while try listed(by: a)[swept] != nil || !c.log().contains("retention: pruned"), Date() < deadline { usleep(100_000) }
        #expect(try listed(by: a)[swept] == nil, "the sweep did not prune it")
        #expect(c.log().contains("retention: pruned"), "\(c.log())")
        _ = try b.job(["op": "cancel", "job": .string(long)])
        for daemon in [a, b, c] { _ = try daemon.stop() }
    }

    /// A group commit (the turn's submits and ends) is sent without the loop waiting for it: while another session
    /// holds the jobs table locked against writes, so that a submit's INSERT waits for the lock, the daemon still
    /// answers `ping` and `show` of its running job at once. When the lock goes, the submit is answered, and its
    /// job runs and ends once.
    @Test func aGroupCommitWaitingForALockDoesNotHoldUpTheLoop() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // Leases of 10 minutes (a renewal every 200 s) and a running job that checkpoints once a minute: nothing
        // but the submit writes during the test, so the statement stuck on the lock below is its INSERT. (A
        // renewal or a checkpoint stuck first let the `list` reach the store before the INSERT was sent, and the
        // list then missed the new job: 4 failures in 10 runs under load.)
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--lease", "10m"])
        let long = try a.submitSleep(units: 1_000, unitMilliseconds: 60_000)
        _ = try a.waitFor(long, "running") { $0["state"]?.stringValue == "running" }
        let done = try a.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try a.waitForState(done, "succeeded")

        let holder = try lockJobsTable(server)
        defer { if holder.isRunning { holder.terminate() } }

        // The submit's group waits for the lock; its reply with it.
        let answered = DispatchSemaphore(value: 0)
        let reply = Mutex<JSONValue?>(nil)
        let socket = a.socketPath
        DispatchQueue.global().async {
            let value = try? DaemonClient(socketPath: socket).request(
                ["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:]])
            reply.withLock { $0 = value }
            answered.signal()
        }
        // The daemon's connection is stuck on the lock: the submit's INSERT.
        let stuck = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%trailbook_jobs%'"
        let waiting = Date().addingTimeInterval(30)
        while Date() < waiting, try psql(server, stuck) == "0" { usleep(20_000) }
        #expect(try psql(server, stuck) != "0")

        // A `show` of a job not running here, a `list`, and a `cancel`, `pause` and `resume` of one
        // read the store, behind the stuck INSERT; they wait for it without holding the loop (they used to: every
        // ping below then waited for them, up to 10 s each). So do a submit's look-up of its idempotency key (the
        // CLI always sends one) and an upload's look-up of unfinished jobs doing the same. Sent from here, so that
        // they are in the daemon's socket before the pings below.
        let source = a.home.file("behind-the-lock.jpg")
        try Data(repeating: 3, count: 2048).write(to: URL(fileURLWithPath: source))
        let destination = a.home.file("uploaded")
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        let keyedSubmit: JSONValue = [
            "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:], "key": "behind-the-lock",
        ]
        let upload: JSONValue = [
            "op": "submit", "kind": "upload", "params": ["files": [.string(source)], "to": .string("file://" + destination)],
        ]
        let reads = DispatchGroup()
        let readReplies = Mutex<[String: JSONValue]>([:])
        let requests: [(String, JSONValue)] = [
            ("show", ["op": "show", "job": .string(done)]), ("list", ["op": "list"]),
            ("cancel", ["op": "cancel", "job": .string(done)]), ("pause", ["op": "pause", "job": .string(String(done.prefix(8)))]),
            ("resume", ["op": "resume", "job": .string(done)]), ("keyed submit", keyedSubmit), ("upload", upload),
        ]
        for (name, request) in requests {
            let fd = try a.rawConnection()
            #expect(DaemonHarness.send(fd, JSONCoding.encode(request) + [0x0A]))
            reads.enter()
            DispatchQueue.global().async {
                defer { close(fd) }
                var time = timeval(tv_sec: 30, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
                var line: [UInt8] = []
                var byte: UInt8 = 0
                while read(fd, &byte, 1) == 1, byte != 0x0A { line.append(byte) }
                readReplies.withLock { $0[name] = try? JSONCoding.decode(JSONValue.self, from: line) }
                reads.leave()
            }
        }

        // Meanwhile the loop answers: pings and the running job's `show` come straight back.
        for _ in 0..<10 {
            let started = Date()
            #expect(try a.request(["op": "ping"])["ok"]?.boolValue == true)
            #expect(try a.show(long)["state"]?.stringValue == "running")
            #expect(Date().timeIntervalSince(started) < 1, "the loop waited \(Date().timeIntervalSince(started)) s for the store")
            usleep(20_000)
        }
        #expect(answered.wait(timeout: .now()) == .timedOut, "the submit was answered while its INSERT waited for the lock")
        #expect(reads.wait(timeout: .now()) == .timedOut, "the reads were answered while the INSERT before them waited")

        try releaseJobsTable(server, holder)
        #expect(answered.wait(timeout: .now() + 20) == .success)
        #expect(reads.wait(timeout: .now() + 20) == .success)
        let (shown, listed) = readReplies.withLock { ($0["show"], $0["list"]) }
        #expect(shown?["job"]?["state"]?.stringValue == "succeeded", "\(String(describing: shown))")
        for name in ["cancel", "pause", "resume"] {
            let refused = readReplies.withLock { $0[name] }
            #expect(refused?["error"]?["code"]?.stringValue == "invalid_state", "\(name): \(String(describing: refused))")
        }
        // Read after the INSERT it waited behind: the submitted job is there too.
        let listedIDs = listed?["jobs"]?.arrayValue?.map { $0["id"]?.stringValue } ?? []
        #expect(listedIDs.count >= 3 && Array(listedIDs.prefix(2)) == [long, done], "\(String(describing: listed))")
        #expect(listed?["counts"]?["running"]?.intValue == 1, "\(String(describing: listed))")
        let submitted = try #require(reply.withLock { $0 })
        let id = try #require(submitted["job"]?["id"]?.stringValue, "\(submitted)")
        _ = try a.waitForState(id, "succeeded")
        #expect(successLines(id, in: [a]) == 1)
        // The two submits that looked the store up behind the lock were queued and ran; the key now finds its job.
        let (keyed, uploaded) = readReplies.withLock { ($0["keyed submit"], $0["upload"]) }
        let keyedID = try #require(keyed?["job"]?["id"]?.stringValue, "\(String(describing: keyed))")
        #expect(keyed?["existing"]?.boolValue == false)
        let uploadID = try #require(uploaded?["job"]?["id"]?.stringValue, "\(String(describing: uploaded))")
        _ = try a.waitForState(keyedID, "succeeded")
        _ = try a.waitForState(uploadID, "succeeded")
        let again = try a.request(keyedSubmit)
        #expect(again["job"]?["id"]?.stringValue == keyedID && again["existing"]?.boolValue == true, "\(again)")
        _ = try a.job(["op": "cancel", "job": .string(long)])
        _ = try a.stop()
    }

    /// A `cancel` or `resume` reads the job, then writes its new state; another daemon may run the job to its end,
    /// or cancel it, in between. The write is fenced by the stored state (only a waiting job is written), so the
    /// other daemon's change stands and the request is answered from the job as it is now (`invalid_state`); the
    /// write used to be fenced only against a running job, so the cancel overwrote a `succeeded` job and the
    /// resume queued a cancelled one again (and wrote a resumed upload's new credentials into it). Deterministic: a `psql` session makes the other daemon's change
    /// without committing it, so that A reads the old row and its `UPDATE` waits for the row's lock, and commits
    /// once it waits.
    @Test func aCancelOrResumeRacingAnotherDaemonsChangeLeavesThatChange() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a"])
        func parked() throws -> String {
            let job = try a.job(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "parked"]])
            return try #require(job["id"]?.stringValue)
        }
        let queued = try parked()
        let paused = try parked()
        #expect(try a.job(["op": "pause", "job": .string(paused)])["state"]?.stringValue == "paused")
        // A paused upload given new credentials on resume: they are not written to a job that is no longer paused.
        let source = a.home.file("photo.jpg")
        try Data(repeating: 1, count: 512).write(to: URL(fileURLWithPath: source))
        let upload = try #require(try a.job([
            "op": "submit", "kind": "upload", "options": ["queue": "parked"],
            "params": ["files": [.string(source)], "to": "http://127.0.0.1:9/files/", "headers": ["Authorization: Bearer old"]],
        ])["id"]?.stringValue)
        #expect(try a.job(["op": "pause", "job": .string(upload)])["state"]?.stringValue == "paused")
        let cancellation = #"{"reason":"user_stop","at":"2026-12-04T00:00:00Z","detail":"cancelled by user"}"#
        let cancelled = "state = 'cancelled', cancellation = '\(cancellation)'"
        let races: [(id: String, request: JSONValue, change: String, state: String)] = [
            (queued, ["op": "cancel", "job": .string(queued)], "state = 'succeeded', attempt = 1, result = '{}'", "succeeded"),
            (paused, ["op": "resume", "job": .string(paused)], cancelled, "cancelled"),
            (upload, ["op": "resume", "job": .string(upload), "headers": ["Authorization: Bearer new"]], cancelled, "cancelled"),
        ]
        for race in races {
            let other = Process()
            other.executableURL = URL(fileURLWithPath: server.psqlPath)
            other.arguments = [server.socketConnectionString + " application_name=tb-other-daemon", "-q"]
            let input = Pipe()
            other.standardInput = input
            other.standardOutput = FileHandle.nullDevice
            try other.run()
            defer { if other.isRunning { other.terminate() } }
            input.fileHandleForWriting.write(Data("BEGIN;\nUPDATE trailbook_jobs SET \(race.change) WHERE id = '\(race.id)';\n".utf8))
            let changed = Date().addingTimeInterval(30)
            while Date() < changed,
                try psql(server, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tb-other-daemon' AND state = 'idle in transaction'") != "1"
            {
                usleep(20_000)
            }
            let answered = DispatchSemaphore(value: 0)
            let reply = Mutex<JSONValue?>(nil)
            let socket = a.socketPath
            let request = race.request
            DispatchQueue.global().async {
                let value = try? DaemonClient(socketPath: socket).request(request)
                reply.withLock { $0 = value }
                answered.signal()
            }
            let waiting = Date().addingTimeInterval(30)
            while Date() < waiting,
                try psql(server, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%trailbook_jobs%'") == "0"
            {
                usleep(20_000)
            }
            input.fileHandleForWriting.write(Data("COMMIT;\n".utf8))
            try input.fileHandleForWriting.close()
            other.waitUntilExit()
            #expect(answered.wait(timeout: .now() + 20) == .success)
            let answer = reply.withLock { $0 }
            #expect(answer?["error"]?["code"]?.stringValue == "invalid_state", "\(race.request): \(String(describing: answer))")
            #expect(answer?["error"]?["message"]?.stringValue?.contains("already ended (\(race.state))") == true)
            #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(race.id)'") == race.state, "\(race.request)")
        }
        let params = try psql(server, "SELECT params FROM trailbook_jobs WHERE id = '\(upload)'")
        #expect(params.contains("Bearer old") && !params.contains("Bearer new"), "\(params)")
        _ = try a.stop()
    }

    /// A `cancel` of a job whose newer state this daemon holds unwritten (the store refused its `pause`), after
    /// another daemon ended the job: the fenced-off write drops the unwritten state, and the cancel answers from
    /// the store (`invalid_state`, `succeeded`). It used to read its own unwritten state again and again, each
    /// write fenced off, without ever letting go of the loop: no request was answered after it. The refusals come
    /// from a trigger; the store retry is kept from the job by an older refused write ahead of it (J1's).
    @Test func aCancelOverAnUnwrittenStateAnotherDaemonOverrodeAnswersFromTheStore() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a"])
        let ids = try (0..<2).map { _ in
            try #require(try a.job([
                "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "parked"],
            ])["id"]?.stringValue)
        }
        func refuseUpdates(of refused: [String]) throws {
            let list = refused.map { "'\($0)'" }.joined(separator: ", ")
            _ = try psql(server, """
                CREATE OR REPLACE FUNCTION tb_refuse() RETURNS trigger LANGUAGE plpgsql AS
                    $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
                DROP TRIGGER IF EXISTS tb_refuse ON trailbook_jobs;
                CREATE TRIGGER tb_refuse BEFORE UPDATE ON trailbook_jobs FOR EACH ROW WHEN (OLD.id IN (\(list)))
                    EXECUTE FUNCTION tb_refuse();
                """)
        }
        try refuseUpdates(of: ids)
        for id in ids {
            #expect(try a.job(["op": "pause", "job": .string(id)])["state"]?.stringValue == "paused", "kept unwritten")
        }
        try refuseUpdates(of: [ids[0]])
        _ = try psql(server, "UPDATE trailbook_jobs SET state = 'succeeded', attempt = 1, result = '{}' WHERE id = '\(ids[1])'")
        let fd = try a.rawConnection()
        defer { close(fd) }
        #expect(DaemonHarness.send(fd, JSONCoding.encode(["op": "cancel", "job": .string(ids[1])] as JSONValue) + [0x0A]))
        let reply = SubmitBatchEndToEndTests.readLine(fd, timeout: 20).flatMap { try? JSONParser.parse($0) }
        #expect(reply?["error"]?["code"]?.stringValue == "invalid_state", "\(String(describing: reply))")
        #expect(reply?["error"]?["message"]?.stringValue?.contains("already ended (succeeded)") == true)
        // Stuck, the daemon answers nothing more (the harness kills it).
        guard reply != nil else { return }
        #expect(try a.request(["op": "ping"])["ok"]?.boolValue == true)
        #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(ids[1])'") == "succeeded")
        // Once the store takes writes again, J1's pause is written.
        _ = try psql(server, "DROP TRIGGER tb_refuse ON trailbook_jobs")
        let written = Date().addingTimeInterval(20)
        while Date() < written, try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(ids[0])'") != "paused" {
            usleep(50_000)
        }
        #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(ids[0])'") == "paused")
        _ = try a.stop()
    }

    /// A cancel of a waiting upload the store refused to write is kept and retried (the cancel answers
    /// `store_unavailable`: until the store has it, another daemon may still run the job); if the first try was in fact
    /// committed (its answer lost: simulated here by writing the same end from another session), the retry is
    /// fenced off, and finds its own end in the row: what follows the write still runs, the partial copy is
    /// removed. It used to be dropped as another daemon's change, and the `.part` file stayed for good.
    @Test func aRetriedCancelThatHadLandedStillRemovesThePartialCopy() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a"])
        let source = a.home.file("big.bin")
        _ = try UploadEndToEndTests.randomFile(source, bytes: 1 << 20)
        let destination = a.home.file("dest")
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        let id = try #require(try a.job([
            "op": "submit", "kind": "upload",
            "params": ["files": [.string(source)], "to": .string("file://" + destination), "max_rate": 65536, "chunk_size": 65536],
        ])["id"]?.stringValue)
        _ = try a.waitFor(id, "some bytes copied") { ($0["progress"]?["completed"]?.intValue ?? 0) > 0 }
        #expect(try a.job(["op": "pause", "job": .string(id)])["state"]?.stringValue == "paused")
        func partFiles() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: destination)) ?? []).filter { $0.hasSuffix(".part") }
        }
        #expect(partFiles().count == 1, "\(partFiles())")
        _ = try psql(server, """
            CREATE FUNCTION tb_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
            CREATE TRIGGER tb_refuse BEFORE UPDATE ON trailbook_jobs FOR EACH ROW WHEN (OLD.id = '\(id)') EXECUTE FUNCTION tb_refuse();
            """)
        let unconfirmed = try a.request(["op": "cancel", "job": .string(id)])
        #expect(unconfirmed["error"]?["code"]?.stringValue == "store_unavailable", "kept unwritten: \(unconfirmed)")
        let cancellation = try #require(try a.show(id)["cancellation"])
        #expect(partFiles().count == 1, "removed only once the cancel is written")
        // The first try's commit, as if its answer had been lost on the way.
        let json = String(decoding: JSONCoding.encode(cancellation), as: UTF8.self)
        _ = try psql(server, """
            SET session_replication_role = replica;
            UPDATE trailbook_jobs SET state = 'cancelled', cancellation = '\(json)' WHERE id = '\(id)';
            DROP TRIGGER tb_refuse ON trailbook_jobs;
            """)
        let removed = Date().addingTimeInterval(20)
        while Date() < removed, !partFiles().isEmpty { usleep(50_000) }
        #expect(partFiles().isEmpty, "the partial copy stayed: \(partFiles())")
        #expect(try psql(server, "SELECT state FROM trailbook_jobs WHERE id = '\(id)'") == "cancelled")
        #expect(a.log().contains("was written by an earlier try whose answer was lost"))
        _ = try a.stop()
    }

    /// A daemon claims only when a notice says there is work it may take (`WorkNotice`): each claim costs a round
    /// trip, and every daemon hears every submit. While another session holds the jobs table locked (a claim would
    /// wait for it), notices of work in another queue, or pinned to another host, send no claim: none waits for the
    /// lock, and A's pings come straight back (they used to wait up to 10 s each behind the claim, when claims
    /// waited on the loop). A notice of its own queue still wakes it: a job submitted through B to A's queue runs
    /// on A at once, long before the lease tick (every 40 s here) would have claimed it.
    @Test func noticesOfWorkADaemonMayNotClaimCostItNoClaim() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // B claims from a queue nobody submits to either: nothing but a claim of A's could wait for the lock below.
        let (a, b) = try daemonsClaimingSeldom(server)
        _ = try a.request(["op": "ping"])
        _ = try b.request(["op": "ping"])

        let holder = try lockJobsTable(server)
        defer { if holder.isRunning { holder.terminate() } }
        for payload in ["queue default", "queue elsewhere host host-b", "queue photos host host-a"] {
            _ = try psql(server, "NOTIFY trailbook_jobs, '\(payload)'")
        }
        for _ in 0..<10 {
            let started = Date()
            #expect(try a.request(["op": "ping"])["ok"]?.boolValue == true)
            #expect(Date().timeIntervalSince(started) < 1, "the loop waited \(Date().timeIntervalSince(started)) s for a claim")
            usleep(50_000)
        }
        let claimsWaiting = try psql(
            server, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%trailbook_jobs%'")
        #expect(claimsWaiting == "0", "a claim waits for the lock")
        try releaseJobsTable(server, holder)

        let started = Date()
        let job = try b.job(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "elsewhere"]])
        let id = try #require(job["id"]?.stringValue)
        _ = try a.waitForState(id, "succeeded")
        #expect(Date().timeIntervalSince(started) < 20, "A claimed its queue's job only at its lease tick")
        #expect(successLines(id, in: [a]) == 1 && successLines(id, in: [b]) == 0)
        _ = try a.stop()
        _ = try b.stop()
    }

    /// A claim does not wait on the loop: while one takes 2 s in the database (a test trigger sleeps in its
    /// `UPDATE`), the daemon answers pings at once; work noticed meanwhile is claimed right after it (not at the
    /// lease tick, every 40 s here). A SIGTERM waits for the claim in flight: its job runs and is stopped
    /// (`resource_reclaim`, back in the queue at once), instead of being left under a lease nobody renews until it
    /// expires (2 min here). Before, each ping waited for the claim.
    @Test func aSlowClaimLeavesTheLoopFreeAndAShutdownWaitsForIt() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let (a, b) = try daemonsClaimingSeldom(server)
        _ = try psql(server, """
            CREATE FUNCTION tb_slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$;
            CREATE TRIGGER tb_slow_claim BEFORE UPDATE ON trailbook_jobs FOR EACH ROW
                WHEN (OLD.state = 'queued' AND NEW.state = 'running') EXECUTE FUNCTION tb_slow_claim();
            """)
        func submit(units: Int) throws -> String {
            try #require(try b.job([
                "op": "submit", "kind": "sleep", "params": ["units": .number(Double(units)), "unit_ms": 10], "options": ["queue": "elsewhere"],
            ])["id"]?.stringValue)
        }
        let sleeping = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%trailbook_jobs%'"
        func waitForAClaimInTheTrigger() throws {
            let deadline = Date().addingTimeInterval(10)
            while try psql(server, sleeping) != "1", Date() < deadline { usleep(20_000) }
            #expect(try psql(server, sleeping) == "1", "a claim of A's sleeps in the trigger")
        }
        let first = try submit(units: 1)
        try waitForAClaimInTheTrigger()
        // Submitted while A's claim is in flight: its notice asks for another claim, made once the first is answered.
        let second = try submit(units: 1)
        var slowest = 0.0
        for _ in 0..<10 {
            let started = Date()
            #expect(try a.request(["op": "ping"])["ok"]?.boolValue == true)
            slowest = max(slowest, Date().timeIntervalSince(started))
            usleep(50_000)
        }
        #expect(slowest < 0.5, "a ping waited \(slowest) s for the claim")
        for id in [first, second] { _ = try a.waitForState(id, "succeeded", timeout: 15) }

        // Nothing else in flight (no run, no group): a SIGTERM during a claim.
        let third = try submit(units: 400)
        try waitForAClaimInTheTrigger()
        let stopped = try a.stop(timeout: 15)
        #expect(stopped.status == 0)
        _ = try psql(server, "DROP TRIGGER tb_slow_claim ON trailbook_jobs")
        #expect(try psql(server, "SELECT state || ' ' || coalesce(lease_daemon, '-') FROM trailbook_jobs WHERE id = '\(third)'") == "queued -")
        #expect(a.log().contains("job \(third.prefix(8)) sleep running -> queued: resource_reclaim"), "\(a.log().suffix(1_500))")
        // It runs to its end, once, when A is back.
        try a.start()
        _ = try a.waitForState(third, "succeeded", timeout: 40)
        for id in [first, second, third] { #expect(successLines(id, in: [a, b]) == 1) }
        _ = try a.stop()
        _ = try b.stop()
    }

    /// A job put back in the queue by a single write (a `resume` here) wakes the daemons that may claim it, as a
    /// submit does: B runs the job A resumed at once, not at its next lease tick (every 40 s here), which is how
    /// it found it before (no notice was sent but with a group commit's writes).
    @Test func aResumedJobWakesTheDaemonsThatMayRunIt() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere", "--lease", "120s"])
        let id = try #require(try a.job([
            "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "photos"],
        ])["id"]?.stringValue)
        #expect(try a.job(["op": "pause", "job": .string(id)])["state"]?.stringValue == "paused")
        // B serves the job's queue from now on; its start finds nothing to claim.
        let b = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--queues", "photos", "--lease", "120s"])
        _ = try b.request(["op": "ping"])
        let resumed = Date()
        // Answered as read after the write: B may have taken it by then.
        let state = try a.job(["op": "resume", "job": .string(id)])["state"]?.stringValue ?? "-"
        #expect(["queued", "running", "succeeded"].contains(state), "\(state)")
        _ = try b.waitForState(id, "succeeded")
        #expect(Date().timeIntervalSince(resumed) < 20, "B found the job only at its lease tick")
        #expect(successLines(id, in: [b]) == 1)
        _ = try a.stop()
        _ = try b.stop()
    }

    /// A daemon's own submits cost it no claim (a round trip) when it may not take their
    /// jobs: a group commit's answer claims only when a run's end freed a slot or a claim waited for the group;
    /// submits wake the daemons that may claim them through their notice, this one too. Counted in the server's
    /// statement log (each claim is one `WITH picked AS (…) UPDATE`), by the session's `application_name`. Before,
    /// each of the submits below was followed by a claim. The claim that runs A's own job is one statement, and its
    /// run reads no checkpoint.
    @Test func aDaemonsOwnSubmitsCostItNoClaimUnlessItMayTakeTheirJobs() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        _ = try psql(server, "ALTER SYSTEM SET log_statement = 'all'")
        _ = try psql(server, "ALTER SYSTEM SET log_line_prefix = '[%a] '")
        _ = try psql(server, "SELECT pg_reload_conf()")
        let a = try DaemonHarness(arguments: [
            "--store", server.socketConnectionString + " application_name=daemon-a", "--host", "host-a",
            "--queues", "elsewhere", "--lease", "120s",
        ])
        // A's statements in the server log: each starts on a line of its own with the prefix, and goes on until
        // the next prefixed line.
        func statements() -> [String] {
            var found: [String] = []
            var current: String?
            for line in server.log.split(separator: "\n") {
                if line.hasPrefix("[") {
                    if let current { found.append(current) }
                    current = line.hasPrefix("[daemon-a] ") ? String(line) : nil
                } else if current != nil {
                    current! += "\n" + line
                }
            }
            if let current { found.append(current) }
            return found
        }
        func claims() -> Int { statements().filter { $0.contains("WITH picked AS") }.count }
        // A claims once as it starts, without waiting on its loop: in the log soon after.
        let startClaim = Date().addingTimeInterval(10)
        while claims() == 0, Date() < startClaim { usleep(20_000) }
        let before = claims()
        #expect(before == 1, "the claim at start")
        for _ in 0..<5 {
            _ = try a.job(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "parked"]])
        }
        // Anything A does about the last submit's answer is done by the time it answers a later request.
        _ = try a.request(["op": "list"])
        usleep(200_000)
        #expect(claims() == before, "claims after submits A cannot take: \(claims() - before)")
        // A submit to its own queue: its notice wakes A, which claims and runs the job.
        let own = try #require(try a.job([
            "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "elsewhere"],
        ])["id"]?.stringValue)
        _ = try a.waitForState(own, "succeeded")
        #expect(claims() > before)
        // A claim is one statement: its RETURNING gives the rows (they used to be read in a second round trip).
        let rowReads = statements().filter { $0.contains("WHERE id = ANY($1::text[])") }
        #expect(rowReads.isEmpty, "\(rowReads)")
        // Nor is its checkpoint read again as the run starts: the claim's RETURNING has it (that read was a round
        // trip on the loop for every job).
        let checkpointReads = statements().filter { $0.contains("SELECT checkpoint FROM trailbook_jobs") }
        #expect(checkpointReads.isEmpty, "\(checkpointReads)")
        _ = try a.stop()
    }

    /// A daemon stopped with SIGTERM puts its running jobs back in the queue (`resource_reclaim`); those last
    /// events reach the other daemons' watchers before it exits, also while its relay is busy with its jobs'
    /// progress (an event that comes while a send is in flight waits for it).
    @Test func aStoppingDaemonsLastEventsReachTheOtherDaemonsWatchers() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // A serves a queue nobody submits to: every job runs on B.
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"])
        for round in 0..<3 {
            let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
            let onA = try FeedRecorder(a)
            let ids = try (0..<4).map { _ in try b.submitSleep(units: 1_000_000, unitMilliseconds: 2) }
            for id in ids { _ = try onA.waitFor(id, "running", timeout: 10) }
            usleep(300_000)
            #expect(try b.stop().status == 0)
            for id in ids {
                let queued = try? onA.waitFor(id, "queued", timeout: 5)
                #expect(queued?["cancellation"]?["reason"]?.stringValue == "resource_reclaim", "round \(round): \(onA.events(of: id).suffix(3))")
            }
            for id in ids { _ = try a.job(["op": "cancel", "job": .string(id)]) }
        }
        _ = try a.stop()
    }

    /// Another daemon's feed events sent while this daemon's connection to the store was down never reach it
    /// (`NOTIFY` is not kept for a session that is gone): once it is back, its watchers get a `gap` line, and
    /// `watch ID` through it of a job that ended meanwhile reads the job again and exits with its end, instead of
    /// waiting for an event that will never come.
    @Test func aDaemonBackFromACutTellsItsWatchersWhatTheyMissed() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let proxy = try CutProxy(unixSocket: server.socketPath)
        defer { proxy.stop() }
        // A reaches the database through the proxy and runs nothing (a queue nobody uses); its lease tick (every
        // second with 3 s leases) is what notices the cut.
        let a = try DaemonHarness(arguments: [
            "--store", server.tcpURI(port: proxy.port), "--host", "host-a", "--queues", "elsewhere", "--lease", "3s",
            "--store-timeout", "2s",
        ])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let onA = try FeedRecorder(a)
        let work = TemporaryDirectory("tbj-watch")
        /// Runs the CLI through A in the background, its stdout in `work/<name>`.
        func background(_ name: String, _ arguments: [String]) throws -> Process {
            FileManager.default.createFile(atPath: work.file(name), contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Binary.path)
            process.arguments = arguments
            process.environment = a.environment
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file(name)))
            process.standardInput = FileHandle.nullDevice
            try process.run()
            return process
        }
        func printed(_ name: String) -> String { (try? String(contentsOfFile: work.file(name), encoding: .utf8)) ?? "" }

        let id = try b.submitSleep(units: 30, unitMilliseconds: 100)
        _ = try onA.waitFor(id, "running", timeout: 10)
        // `watch ID` through A, and a `submit --wait` through A of an upload that B runs (3 MiB at 1 MiB/s).
        let watch = try background("watch", ["watch", id])
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        let source = try sourceFile("photo.bin", bytes: 3 << 20, in: work)
        let wait = try background(
            "wait", ["submit", "upload", source, "--to", "file://" + work.file("out"), "--any-host", "--max-rate", "1MiB", "--wait"])
        defer { for process in [watch, wait] where process.isRunning { process.terminate() } }
        let submitted = Date().addingTimeInterval(10)
        while !printed("wait").contains("\n") && Date() < submitted { usleep(10_000) }
        let upload = printed("wait").trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try onA.waitFor(upload, "running", timeout: 10)

        try proxy.cut()
        _ = try b.waitForState(id, "succeeded")
        _ = try b.waitForState(upload, "succeeded")
        try proxy.heal()
        let gap = try onA.waitForUnnumbered("gap", timeout: 40)
        #expect(gap["message"]?.stringValue?.contains("refresh with list") == true)
        // The scenario: A never heard of the ends.
        #expect(!onA.states(of: id).contains("succeeded"), "\(onA.states(of: id))")
        #expect(!onA.states(of: upload).contains("succeeded"), "\(onA.states(of: upload))")
        let exited = Date().addingTimeInterval(10)
        while (watch.isRunning || wait.isRunning) && Date() < exited { usleep(20_000) }
        for (name, process) in [("watch ID", watch), ("submit --wait", wait)] {
            #expect(!process.isRunning, "\(name) still waits for the end it missed")
            if !process.isRunning { #expect(process.terminationStatus == 0, "\(name)") }
        }
        #expect(printed("watch").contains("succeeded"), "\(printed("watch"))")
        #expect(printed("wait").contains("succeeded"), "\(printed("wait"))")
        // A watcher that was away when the gap was announced, back with a `since` from before it, gets the gap
        // after its replay: A's buffer never held the events it missed either.
        let beforeGap = onA.all().prefix { $0["type"]?.stringValue != "gap" }.compactMap { $0["seq"]?.intValue }.max()
        let returning = try FeedRecorder(a, since: try #require(beforeGap))
        let replayedGap = try returning.waitForUnnumbered("gap", timeout: 5)
        #expect(replayedGap["message"] == gap["message"])
        // A's feed goes on: a later job, run by B, is seen live again.
        let later = try b.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try onA.waitFor(later, "succeeded", timeout: 20)
        // A watcher back with a `since` after the gap has missed nothing, and is not told it did.
        let afterGap = try #require(onA.events(of: later).last?["seq"]?.intValue)
        let caughtUp = try FeedRecorder(a, since: afterGap)
        let last = try b.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try caughtUp.waitFor(last, "succeeded", timeout: 20)
        #expect(!caughtUp.all().contains { $0["type"]?.stringValue == "gap" }, "\(caughtUp.all())")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// A network cut (no FIN, no RST: the proxy between the daemon and PostgreSQL stops forwarding and keeps the
    /// socket open) is noticed once the requests in flight went unanswered for the store's request timeout
    /// (`--store-timeout`, 3 s here): the daemon drops the connection and tries again, its jobs keep running (to
    /// their end), and meanwhile a submit is refused at once with `store_unavailable`. Once the network heals it
    /// reconnects; the jobs that ended during the cut are written then, each once.
    @Test func aSilentNetworkCutIsNoticedAndTheDaemonReconnectsOnceItHeals() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let proxy = try CutProxy(unixSocket: server.socketPath)
        defer { proxy.stop() }
        // A 3 s `--store-timeout` (10 s by default): the cut must be noticed well before the default would.
        let a = try DaemonHarness(arguments: ["--store", server.tcpURI(port: proxy.port), "--host", "host-a", "--store-timeout", "3s"])
        let jobs = try (0..<2).map { _ in try a.submitSleep(units: 20, unitMilliseconds: 300) }
        for id in jobs { _ = try a.waitForState(id, "running") }
        #expect(try proxy.connections() == (1, 0))

        try proxy.cut()
        let cut = Date()
        // Until the daemon gives the silent connection up and dials again (into the cut), it keeps answering.
        var slowest = 0.0
        while try proxy.connections().silent < 2 {
            guard Date().timeIntervalSince(cut) < 30 else {
                Issue.record("the daemon did not notice the cut within 30 s")
                break
            }
            let started = Date()
            #expect(try a.request(["op": "ping"])["ok"]?.boolValue == true)
            slowest = max(slowest, Date().timeIntervalSince(started))
            usleep(100_000)
        }
        let noticed = Date().timeIntervalSince(cut)
        #expect(noticed < 8, "noticed after \(noticed) s")
        // One call may wait out its request timeout (3 s); none waits behind another's.
        #expect(slowest < 3.5, "a ping waited \(slowest) s")
        let refusedAt = Date()
        let refused = try a.request(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:]])
        #expect(refused["error"]?["code"]?.stringValue == "store_unavailable", "\(refused)")
        #expect(Date().timeIntervalSince(refusedAt) < 2)
        #expect(!"\(refused)".contains(server.password))
        // The jobs run to their end within the cut: kept in memory until it heals, and announced only once
        // written (the log says they wait).
        let ended = Date().addingTimeInterval(20)
        func endedInTheCut() -> Bool {
            jobs.allSatisfy { a.log().contains("job \($0.prefix(8)) sleep: running -> succeeded waits for the shared store") }
        }
        while !endedInTheCut(), Date() < ended { usleep(100_000) }
        #expect(endedInTheCut(), "\(a.log().suffix(2_000))")
        #expect(jobs.allSatisfy { !a.log().contains("job \($0.prefix(8)) sleep running -> succeeded") }, "announced unwritten")
        #expect(try proxy.connections().forwarding == 0, "still cut")

        try proxy.heal()
        let healed = Date().addingTimeInterval(40)
        var late: String?
        while late == nil, Date() < healed {
            let reply = try a.request(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:]])
            late = reply["job"]?["id"]?.stringValue
            if late == nil { usleep(200_000) }
        }
        let after = try #require(late, "no submit accepted within 40 s of the heal")
        for id in jobs + [after] { _ = try a.waitForState(id, "succeeded") }
        #expect(try proxy.connections().forwarding == 1)
        _ = try a.stop()
        #expect(try psql(server, "SELECT string_agg(state, ',') FROM trailbook_jobs") == "succeeded,succeeded,succeeded")
        for id in jobs + [after] { #expect(successLines(id, in: [a]) == 1) }
        #expect(!a.log().contains(server.password))
    }

    /// Runs `sql` in a `psql` session of its own on `server`; its output, trimmed.
    /// Another session holding the jobs table in `EXCLUSIVE` mode (plain reads pass; writes and claims wait for
    /// it), once it holds it, until `releaseJobsTable`.
    /// Two daemons on `server` that claim only when told of work: A serves queue `elsewhere` on `host-a`, B queue
    /// `other` (which nobody submits to) on `host-b`, and both tick their leases every 40 s (`--lease 120s`), so no
    /// tick's claim happens within a test.
    /// Two daemons whose only store traffic is what the tests look at: long leases (the lease tick claims seldom)
    /// and no retention (its sweeps are store calls of their own, which would meet the tests' table lock or slow
    /// claim and be counted as claims).
    private func daemonsClaimingSeldom(_ server: PostgresServer) throws -> (a: DaemonHarness, b: DaemonHarness) {
        let quiet = ["--lease", "120s", "--keep-succeeded", "forever", "--keep-failed", "forever", "--keep-cancelled", "forever"]
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"] + quiet)
        let b = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--queues", "other"] + quiet)
        return (a, b)
    }

    private func lockJobsTable(_ server: PostgresServer) throws -> Process {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: server.psqlPath)
        // One query string is one transaction: the lock is held until the session ends.
        holder.arguments = [
            server.socketConnectionString + " application_name=tb-table-lock", "-c",
            "LOCK TABLE trailbook_jobs IN EXCLUSIVE MODE; SELECT pg_sleep(120)",
        ]
        holder.standardOutput = FileHandle.nullDevice
        try holder.run()
        let held = Date().addingTimeInterval(30)
        while Date() < held,
            try psql(server, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tb-table-lock' AND query LIKE '%pg_sleep%' AND state = 'active'") != "1"
        {
            usleep(20_000)
        }
        return holder
    }

    /// Ends `lockJobsTable`'s session, and with it the lock.
    private func releaseJobsTable(_ server: PostgresServer, _ holder: Process) throws {
        _ = try psql(server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tb-table-lock'")
        holder.waitUntilExit()
    }

    private func psql(_ server: PostgresServer, _ sql: String) throws -> String {
        let result = try DaemonHarness.run(server.psqlPath, [server.socketConnectionString, "-At", "-c", sql])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The live feed across daemons (issue 15): a watcher of daemon A sees a job that runs on daemon B (submitted
    /// through B) from its submit to its end, progress included, in A's `seq` order, each event naming B's host;
    /// `list` through A counts B's running job; `watch ID` through A follows it to its end; `since` replays A's
    /// numbers and refuses B's. Fails with a local-only feed (A would see nothing of the job).
    @Test func aWatcherOfOneDaemonSeesAnotherDaemonsJobLiveAndInOrder() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // A serves a queue nobody submits to: every job runs on B.
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let onA = try FeedRecorder(a)
        let onB = try FeedRecorder(b)
        // 40 × 50 ms: about 2 s of progress.
        let id = try b.submitSleep(units: 40, unitMilliseconds: 50)
        _ = try a.waitFor(id, "running") { $0["state"]?.stringValue == "running" }
        #expect(b.logShows("job \(id.prefix(8)) sleep queued -> running"), "\(b.log())")
        // The summary counts through A are the store's: B's job is running.
        #expect(try a.request(["op": "list", "limit": 1])["counts"]?["running"]?.intValue == 1)
        // `watch ID` through A follows the job on B and exits at its end.
        let watched = try a.cli(["watch", String(id.prefix(8))])
        #expect(watched.status == 0, "\(watched.stderr)")
        #expect(watched.stdout.contains("-> succeeded"), "\(watched.stdout)")

        let deadline = Date().addingTimeInterval(10)
        while !onA.states(of: id).contains("succeeded") && Date() < deadline { usleep(10_000) }
        let seen = onA.events(of: id)
        #expect(seen.first?["type"]?.stringValue == "submitted", "\(seen)")
        #expect(onA.states(of: id) == ["running", "succeeded"])
        let progress = seen.filter { $0["type"]?.stringValue == "progress" }
        #expect(progress.count >= 2, "live progress from B: \(progress.count) events")
        let end = try #require(seen.firstIndex { $0["to"]?.stringValue == "succeeded" })
        let lastProgress = try #require(seen[..<end].last { $0["type"]?.stringValue == "progress" })
        #expect(lastProgress["progress"]?["completed"]?.intValue == 40, "flushed before the end: \(lastProgress)")
        #expect(seen[end]["result"] != nil && seen[end]["result"] != .null, "the end's result: \(seen[end])")
        #expect(seen.allSatisfy { $0["host"]?.stringValue == "host-b" }, "\(seen)")
        // In A's numbering, in order, and the same events B's own watcher saw (B numbers its own).
        let seqs = seen.compactMap { $0["seq"]?.intValue }
        #expect(seqs.count == seen.count && seqs == seqs.sorted() && Set(seqs).count == seqs.count, "\(seqs)")
        let onBTypes = onB.events(of: id).map { "\($0["type"]?.stringValue ?? "") \($0["to"]?.stringValue ?? "")" }
        let onATypes = seen.map { "\($0["type"]?.stringValue ?? "") \($0["to"]?.stringValue ?? "")" }
        #expect(onATypes.filter { !$0.hasPrefix("progress") } == onBTypes.filter { !$0.hasPrefix("progress") })

        // `since` means what it means on one daemon: A replays what it delivered after one of its numbers...
        let replay = try DaemonClient(socketPath: a.socketPath)
        _ = try replay.request(["op": "watch", "since": .number(Double(seqs[0])), "jobs": [.string(id)]])
        var replayed: [Int64] = []
        while replayed.count < seqs.count - 1, replay.waitReadable(timeoutSeconds: 2), let event = try replay.readLine() {
            replayed.append(event["seq"]?.intValue ?? -1)
        }
        #expect(replayed == Array(seqs.dropFirst()))
        // ...and a number of B's is not one of A's: the watcher is told to refresh instead of getting a wrong replay.
        let bSeq = try #require(onB.events(of: id).first?["seq"]?.intValue)
        let foreign = try DaemonClient(socketPath: a.socketPath)
        _ = try foreign.request(["op": "watch", "since": .number(Double(bSeq)), "jobs": [.string(id)]])
        #expect(foreign.waitReadable(timeoutSeconds: 5))
        #expect(try foreign.readLine()?["type"]?.stringValue == "gap")
        _ = try a.stop()
        _ = try b.stop()
    }

    /// A retry that comes due after the daemon that ran the job is gone is moved to the queue by another daemon's
    /// lease tick, in SQL; that daemon announces it (`needs_retry` → `queued`), so watchers do not keep showing a
    /// countdown that ran out.
    @Test func aRetryComingDueWhileItsDaemonIsGoneIsAnnouncedByAnother() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--retry-base", "2s"])
        // B serves another queue: it runs nothing of A's, but its lease tick (every third of a second) moves due retries.
        let b = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--queues", "elsewhere", "--lease", "1s"])
        let onB = try FeedRecorder(b)
        // Stalls after 2 units: stopped for `timeout` after 0.5 s without progress, retried after about 1-2 s.
        let id = try a.submitSleep(
            units: 10, unitMilliseconds: 20, stallAfter: 2, options: ["stall_timeout_s": 0.5, "max_attempts": 3])
        // A's own announcement reaches B's watchers (relayed) before A dies: A crashes only after B has shown it.
        _ = try onB.waitFor(id, "needs_retry", timeout: 30)
        try a.crash()
        let deadline = Date().addingTimeInterval(15)
        while !onB.states(of: id).contains("queued") && Date() < deadline { usleep(20_000) }
        #expect(onB.states(of: id) == ["running", "needs_retry", "queued"], "\(onB.events(of: id))")
        let moved = try #require(onB.events(of: id).last { $0["to"]?.stringValue == "queued" })
        #expect(moved["from"]?.stringValue == "needs_retry" && moved["host"]?.stringValue == "host-b", "\(moved)")
        #expect(try b.show(id)["state"]?.stringValue == "queued")
        _ = try b.stop()
    }

    @Test func postgresStoppedForTenSecondsMidRunLosesNothingAndEndsEachJobOnce() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let daemons = try (0..<2).map { _ in
            try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--concurrency", "2"])
        }
        // 4 jobs of 300 × 50 ms (15 s), all running at once across the two daemons.
        let ids = try submit(4, units: 300, unitMilliseconds: 50, through: daemons)
        let deadline = Date().addingTimeInterval(30)
        while daemons.map({ unfinishedRuns(in: $0, of: ids).count }).reduce(0, +) < 4 && Date() < deadline { usleep(10_000) }
        try server.shutDown()
        defer { try? server.startUp() }
        let downAt = Date()
        // A submit fails fast and says why (the CLI exits 3 on store_unavailable).
        let refused = try daemons[0].request([
            "op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:],
        ])
        #expect(refused["ok"]?.boolValue == false)
        #expect(refused["error"]?["code"]?.stringValue == "store_unavailable")
        // The CLI exits 3 for it, as when the daemon is not reachable.
        let lines = daemons[0].home.file("one.ndjson")
        try Data("{\"kind\": \"sleep\", \"params\": {\"units\": 1}}\n".utf8).write(to: URL(fileURLWithPath: lines))
        let cliSubmit = try daemons[0].cli(["submit", "--from", lines])
        #expect(cliSubmit.status == 3, "\(cliSubmit.stderr)")
        #expect(cliSubmit.stderr.contains("store_unavailable"), "\(cliSubmit.stderr)")
        // `show` answers from the daemon's own state for its running jobs meanwhile.
        let runningOnA = unfinishedRuns(in: daemons[0], of: ids)
        for id in runningOnA { #expect(try daemons[0].show(id)["state"]?.stringValue == "running") }
        usleep(useconds_t(max(0, 10 - Date().timeIntervalSince(downAt)) * 1_000_000))
        try server.startUp()

        try waitUntilAll(ids, in: ["succeeded"], by: daemons[1])
        for id in ids {
            #expect(successLines(id, in: daemons) == 1, "job \(id) ended \(successLines(id, in: daemons)) times")
        }
        let logs = daemons.map { $0.log() }.joined()
        #expect(logs.contains("the shared job store (PostgreSQL) is unavailable"))
        #expect(logs.contains("the job store takes writes again"))
        #expect(!logs.contains("lease was lost"))
        // The runs went on through the outage (progress skipped, checkpoints kept and written after): no job was
        // stopped for the store or retried.
        #expect(!logs.contains("running -> needs_retry"), "\(logs.split(separator: "\n").filter { $0.contains("needs_retry") || $0.contains("warning") || $0.contains("store") })")
        let jobs = try listed(by: daemons[0])
        for id in ids { #expect(jobs[id]?["result"]?["attempt"]?.doubleValue == 1) }
        for daemon in daemons { _ = try daemon.stop() }
    }

    @Test func aBadOrUnreachableStoreStopsTheDaemonWithAReasonAndNoPassword() throws {
        let home = TemporaryDirectory()
        let environment = ["TRAILBOOK_JOBS_HOME": home.path]
        let bad = try DaemonHarness.run(Binary.path, ["daemon", "--store", "mysql://db/jobs"], environment: environment)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--store takes 'sqlite' or a PostgreSQL connection string"), "\(bad.stderr)")
        // Nothing listens on port 1: the daemon gives up after its connect and says why, password masked.
        let unreachable = try DaemonHarness.run(
            Binary.path, ["daemon", "--store", "postgres://alice:s3cret-pw@127.0.0.1:1/jobs?connect_timeout=2"],
            environment: environment)
        #expect(unreachable.status == 1)
        #expect(unreachable.stderr.contains("postgres://<redacted>@127.0.0.1:1/jobs"), "\(unreachable.stderr)")
        #expect(!(unreachable.stdout + unreachable.stderr).contains("s3cret-pw"))
    }

    /// Whether `daemon`'s log shows it started job `id` of `kind` (the line is written after the claim).
    private func ran(_ id: String, _ kind: String, on daemon: DaemonHarness) -> Bool {
        daemon.log().contains("job \(id.prefix(8)) \(kind) queued -> running")
    }

    /// A file of `bytes` bytes in `directory`; its path.
    private func sourceFile(_ name: String, bytes: Int, in directory: TemporaryDirectory) throws -> String {
        try directory.create(BytePath(name), contents: [UInt8](repeating: 0x5a, count: bytes))
        return directory.file(name)
    }

    @Test func pinnedJobsRunOnlyOnTheirHostAndQueuesOnlyOnDaemonsServingThem() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        // Two "hosts" on one machine: A serves the default queue one job at a time, B the default and gpu queues.
        let a = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--concurrency", "1"])
        let b = try DaemonHarness(arguments: [
            "--store", server.socketConnectionString, "--host", "host-b", "--queues", "default,gpu", "--concurrency", "4",
        ])
        #expect(a.log().contains("on host host-a, queues default,"))
        let work = TemporaryDirectory()
        for out in ["busy", "pinned", "shared"] {
            try FileManager.default.createDirectory(atPath: work.file(out), withIntermediateDirectories: true)
        }
        // A is busy with a slow upload (32 MiB at 1 MiB/s) submitted through it, so pinned to it.
        let busy = try a.submitUpload([
            try sourceFile("busy.bin", bytes: 32 << 20, in: work), "--to", "file://" + work.file("busy"), "--max-rate", "1MiB",
        ])
        let deadline = Date().addingTimeInterval(30)
        while !ran(busy, "upload", on: a) && !ran(busy, "upload", on: b) && Date() < deadline { usleep(10_000) }
        #expect(ran(busy, "upload", on: a) && !ran(busy, "upload", on: b))
        // Then a pinned upload, and one whose paths are shared (--any-host), both through A while B is idle.
        let pinned = try a.submitUpload([try sourceFile("pinned.bin", bytes: 64 << 10, in: work), "--to", "file://" + work.file("pinned")])
        let shared = try a.submitUpload([
            try sourceFile("shared.bin", bytes: 64 << 10, in: work), "--to", "file://" + work.file("shared"), "--any-host",
        ])
        // B runs the shared one, submitted after the pinned one: claims go in submission order, so B skipped it.
        try b.waitForState(shared, "succeeded", timeout: 60)
        #expect(ran(shared, "upload", on: b))
        let waiting = try b.show(pinned)
        #expect(waiting["state"]?.stringValue == "queued")
        #expect(waiting["pinned_host"]?.stringValue == "host-a")
        #expect(waiting["queue"]?.stringValue == "default")
        #expect(try b.show(shared)["pinned_host"] == .null)
        #expect(!ran(pinned, "upload", on: b))
        // The photo library's kinds are pinned the same way (the library is on A's disk).
        let folder = TemporaryDirectory()
        let imported = try a.job(["op": "submit", "kind": "import", "params": ["dir": .string(folder.path)]])
        #expect(imported["pinned_host"]?.stringValue == "host-a")
        // A free again: it runs its pinned jobs.
        _ = try a.job(["op": "cancel", "job": .string(busy)])
        try a.waitForState(pinned, "succeeded", timeout: 60)
        try a.waitForState(imported["id"]?.stringValue ?? "", "succeeded", timeout: 60)
        #expect(ran(pinned, "upload", on: a) && !ran(pinned, "upload", on: b))

        // A queue only B serves: with B stopped, A (idle, one slot) runs a default-queue job submitted after the
        // gpu one and leaves the gpu one queued; B, woken, runs it.
        kill(b.pid, SIGSTOP)
        var stoppedB = true
        defer { if stoppedB { kill(b.pid, SIGCONT) } }
        let gpu = try a.submitSleep(units: 2, unitMilliseconds: 20, options: ["queue": "gpu"])
        let plain = try a.submitSleep(units: 2, unitMilliseconds: 20)
        try a.waitForState(plain, "succeeded", timeout: 60)
        #expect(try a.show(gpu)["state"]?.stringValue == "queued")
        #expect(!ran(gpu, "sleep", on: a))
        kill(b.pid, SIGCONT)
        stoppedB = false
        try b.waitForState(gpu, "succeeded", timeout: 60)
        #expect(ran(gpu, "sleep", on: b))
        // `list --json` through either daemon shows each job's queue and pinned host.
        let listed = try a.cliJSON(["list", "--json"])
        var byID: [String: JSONValue] = [:]
        for job in listed.arrayValue ?? listed["jobs"]?.arrayValue ?? [] { byID[job["id"]?.stringValue ?? ""] = job }
        #expect(byID[gpu]?["queue"]?.stringValue == "gpu")
        #expect(byID[gpu]?["pinned_host"] == .null)
        #expect(byID[pinned]?["pinned_host"]?.stringValue == "host-a")
        let shown = try b.cli(["show", pinned])
        #expect(shown.stdout.contains("runs on:   host host-a"), "\(shown.stdout)")
        #expect(!(a.log() + b.log()).contains("refused a write"))
        _ = try a.stop()
        _ = try b.stop()
    }

    @Test func aKilledHostsPinnedJobsWaitForItInsteadOfBeingRescuedElsewhere() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(arguments: [
            "--store", server.socketConnectionString, "--host", "host-a", "--concurrency", "1", "--lease", "1s",
        ])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b", "--lease", "1s"])
        let work = TemporaryDirectory()
        for out in ["first", "second"] {
            try FileManager.default.createDirectory(atPath: work.file(out), withIntermediateDirectories: true)
        }
        // A runs a pinned upload (8 MiB at 1 MiB/s) and has another queued behind it.
        let first = try a.submitUpload([
            try sourceFile("first.bin", bytes: 8 << 20, in: work), "--to", "file://" + work.file("first"), "--max-rate", "1MiB",
            "--chunk-size", "256KiB",
        ])
        try a.waitFor(first, timeout: 30, "1 MiB uploaded") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        let second = try a.submitUpload([try sourceFile("second.bin", bytes: 64 << 10, in: work), "--to", "file://" + work.file("second")])
        // kill -9 of A: once its lease expires the running job goes back to the queue, but stays A's.
        try a.crash()
        try b.waitForState(first, "queued", timeout: 30)
        // B is idle and claims: a job submitted after both runs on B, and both pinned jobs stay queued.
        let later = try b.submitSleep(units: 2, unitMilliseconds: 20)
        try b.waitForState(later, "succeeded", timeout: 60)
        for id in [first, second] {
            let job = try b.show(id)
            #expect(job["state"]?.stringValue == "queued")
            #expect(job["pinned_host"]?.stringValue == "host-a")
            #expect(!ran(id, "upload", on: b))
        }
        // A comes back: it runs them, the first from its checkpoint.
        try a.start()
        for id in [first, second] {
            try a.waitForState(id, "succeeded", timeout: 60)
            #expect(!ran(id, "upload", on: b))
        }
        let done = try a.show(first)
        #expect(done["attempt"]?.intValue == 1)
        #expect((done["result"]?["bytes_resent"]?.intValue ?? Int64.max) < 8 << 20)
        _ = try a.stop()
        _ = try b.stop()
    }

    @Test func sharedStoreOptionsAreRefusedWithTheSQLiteStore() throws {
        let home = TemporaryDirectory()
        let refused = try DaemonHarness.run(
            Binary.path, ["daemon", "--queues", "gpu"], environment: ["TRAILBOOK_JOBS_HOME": home.path])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--queues is for daemons sharing a PostgreSQL store"), "\(refused.stderr)")
        for option in ["host", "lease", "store-timeout"] {
            let value = option == "host" ? "b" : "5s"
            let alone = try DaemonHarness.run(
                Binary.path, ["daemon", "--\(option)", value], environment: ["TRAILBOOK_JOBS_HOME": home.path])
            #expect(alone.status == 2, "--\(option)")
            #expect(alone.stderr.contains("--\(option) is for daemons sharing a PostgreSQL store"), "\(alone.stderr)")
        }
        let daemon = try DaemonHarness()
        let reply = try daemon.request(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "gpu"]])
        #expect(reply["error"]?["code"]?.stringValue == "invalid_options")
        // An upload on SQLite is pinned to nothing (one daemon, one host) and in the default queue.
        let job = try daemon.job(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["any_host": true]])
        #expect(job["queue"]?.stringValue == "default")
        #expect(job["pinned_host"] == .null)
        _ = try daemon.stop()
    }
}
