import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Attempts to break the feed followed on demand (`FeedRelay`, "Following"): watches that wait longer than
/// `followWait`, watchers that miss events untold, daemons that never stop (or start) following.
@Suite(.serialized)
struct SharedStoreFeedFollowingBreakTests {
    private static let following = "feed relay: following the other daemons' events"
    private static let stopped = "feed relay: stopped following the other daemons' events"

    /// The seconds `body` took.
    private func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        let started = Date()
        let value = try body()
        return (value, Date().timeIntervalSince(started))
    }

    /// A `watch` without `local` waits at most `followWait` (2 s) for the store to follow, also when it comes
    /// while an earlier one's `LISTEN` is still unanswered (the daemon's link to PostgreSQL silently cut): the
    /// second watcher used to join the waiters after their timer had fired, with no timer of its own, and wait
    /// until the `LISTEN` failed (the store's request timeout, 8 s here), holding the heavy gate (every `list`
    /// and replay) all along.
    @Test func aWatchWaitsAtMostTheFollowWaitWhileTheStoreDoesNotAnswer() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let proxy = try CutProxy(unixSocket: server.socketPath)
        defer { proxy.stop() }
        let a = try DaemonHarness(
            arguments: [
                "--store", server.tcpURI(port: proxy.port), "--host", "host-a", "--queues", "elsewhere", "--lease", "120s",
                "--store-timeout", "8s",
            ],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        try proxy.cut()
        let (first, firstSeconds) = try timed { try FeedRecorder(a) }
        #expect(first.header["watching"]?.boolValue == true, "\(first.header)")
        #expect(firstSeconds < 3.5, "the first watch waited \(firstSeconds) s")
        // The `LISTEN` is still unanswered (it fails only after 8 s): a second and a third watcher, one after the
        // other, each wait at most the follow wait too.
        var watchers = [first]
        for round in 2...3 {
            let (next, seconds) = try timed { try FeedRecorder(a) }
            #expect(next.header["watching"]?.boolValue == true, "\(next.header)")
            #expect(seconds < 2.5, "watch \(round) waited \(seconds) s")
            watchers.append(next)
        }
        // Added before the store followed, each is told it may have missed events once the `LISTEN` fails.
        for (index, watcher) in watchers.enumerated() {
            let gap = try watcher.waitForUnnumbered("gap", timeout: 20)
            #expect(gap["message"]?.stringValue?.contains("refresh with list") == true, "watcher \(index + 1): \(gap)")
        }
        try proxy.heal()
        _ = try a.stop()
    }

    /// A daemon whose link to PostgreSQL is silently cut, with a `watch` waiting for the store to follow: SIGTERM
    /// stops it promptly (the pending follow, its timer and its waiter do not hold the loop open).
    @Test func aDaemonStopsPromptlyWhileAWatchWaitsForTheStoreToFollow() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let proxy = try CutProxy(unixSocket: server.socketPath)
        defer { proxy.stop() }
        let a = try DaemonHarness(
            arguments: [
                "--store", server.tcpURI(port: proxy.port), "--host", "host-a", "--queues", "elsewhere", "--lease", "120s",
                "--store-timeout", "8s",
            ],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        // The claim of the daemon's start is answered before the cut: the follow is the store request pending.
        // (A claim in flight at the cut holds the shutdown until the store timeout, follow or not.)
        usleep(1_000_000)
        try proxy.cut()
        let client = try DaemonClient(socketPath: a.socketPath)
        try client.send(["op": "watch"])
        usleep(300_000)
        let stopped = try a.stop(timeout: 8)
        #expect(stopped.status == 0, "\(a.log().suffix(2_000))")
        #expect(stopped.seconds < 3, "stopped after \(stopped.seconds) s: \(a.log().suffix(2_000))")
        #expect(!a.log().contains("still open"), "\(a.log().suffix(2_000))")
        try proxy.heal()
    }

    /// A client that hangs up while its `watch` waits for the store to follow (its link silently cut until the
    /// `LISTEN` fails after the 3 s store timeout): once the store answers, nobody wants the other daemons'
    /// events, and the daemon stops following after the linger; a later watcher starts it again.
    @Test func aWatcherGoneWhileItsWatchWaitedForTheStoreDoesNotKeepTheDaemonFollowing() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let proxy = try CutProxy(unixSocket: server.socketPath)
        defer { proxy.stop() }
        let a = try DaemonHarness(
            arguments: [
                "--store", server.tcpURI(port: proxy.port), "--host", "host-a", "--queues", "elsewhere", "--lease", "120s",
                "--store-timeout", "3s",
            ],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        try proxy.cut()
        do {
            let client = try DaemonClient(socketPath: a.socketPath)
            try client.send(["op": "watch"])
            usleep(500_000)
            shutdown(client.fileDescriptor, Int32(SHUT_RDWR))
        }
        #expect(a.logShows(Self.following, within: 10), "\(a.log())")
        #expect(a.logShows(Self.stopped, within: 5), "\(a.log())")
        try proxy.heal()
        // Back on the network, a watcher of every daemon's events makes A follow again and sees B's jobs.
        let deadline = Date().addingTimeInterval(40)
        while (try? a.request(["op": "list", "limit": 1]))?["ok"]?.boolValue != true, Date() < deadline { usleep(200_000) }
        let watcher = try FeedRecorder(a)
        let id = try b.submitSleep(units: 1, unitMilliseconds: 1)
        let lines = Date().addingTimeInterval(20)
        while !watcher.states(of: id).contains("succeeded"),
            !watcher.all().contains(where: { $0["type"]?.stringValue == "gap" }), Date() < lines
        {
            usleep(20_000)
        }
        #expect(
            watcher.states(of: id).contains("succeeded") || watcher.all().contains { $0["type"]?.stringValue == "gap" },
            "\(watcher.all())")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// Watchers come and go around the linger (0.3 s) while B runs jobs: each one, subscribed before its job is
    /// submitted, sees the job's end or is told (`gap`) it may have missed events; the daemon stops and starts
    /// following again and again (an `UNLISTEN` and the next `LISTEN` may be in flight together).
    @Test func watchersComingAndGoingAroundTheLingerMissNothingUntold() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.3"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        var untold: [String] = []
        for round in 0..<24 {
            let watcher = try FeedRecorder(a)
            let id = try b.submitSleep(units: 1, unitMilliseconds: 1)
            let deadline = Date().addingTimeInterval(15)
            func gap() -> Bool { watcher.all().contains { $0["type"]?.stringValue == "gap" } }
            while !watcher.states(of: id).contains("succeeded"), !gap(), Date() < deadline { usleep(5_000) }
            if !watcher.states(of: id).contains("succeeded") && !gap() { untold.append("round \(round): \(watcher.all())") }
            watcher.close()
            // Around the linger: before it, at it, after it.
            usleep(UInt32([200_000, 290_000, 300_000, 310_000, 330_000, 400_000][round % 6]))
        }
        #expect(untold.isEmpty, "\(untold)")
        let stops = a.log().components(separatedBy: Self.stopped).count - 1
        let starts = a.log().components(separatedBy: Self.following).count - 1
        #expect(starts >= 1 && starts - stops <= 1, "started \(starts), stopped \(stops)")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// With no linger at all (`TRAILBOOK_JOBS_TEST_FEED_LINGER=0`), a watcher that made the daemon follow is
    /// subscribed before following can stop: the relay starts its linger when the store answers, before the
    /// watchers it resumes have subscribed; a linger that fired before they did would stop following under them
    /// (they would miss every other daemon's event, untold). Held: the resumed watches run before the timer.
    @Test func aWatcherThatMadeTheDaemonFollowIsSubscribedBeforeTheLingerCanStopIt() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        var untold: [String] = []
        for round in 0..<10 {
            let watcher = try FeedRecorder(a)
            let id = try b.submitSleep(units: 1, unitMilliseconds: 1)
            let deadline = Date().addingTimeInterval(10)
            func gap() -> Bool { watcher.all().contains { $0["type"]?.stringValue == "gap" } }
            while !watcher.states(of: id).contains("succeeded"), !gap(), Date() < deadline { usleep(5_000) }
            if !watcher.states(of: id).contains("succeeded") && !gap() { untold.append("round \(round): \(watcher.all())") }
            watcher.close()
            #expect(a.logShows(Self.stopped, within: 5))
            usleep(50_000)
        }
        #expect(untold.isEmpty, "\(untold) \(a.log().suffix(3_000))")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// A watcher that sent more requests after its `watch` than the daemon queues (64: its reads pause), then hung
    /// up: the daemon notices it is gone, drops it, and stops following after the linger. (Its reads were never
    /// started again once it watched, so its end was never read: it stayed a subscriber, and the daemon followed
    /// the other daemons' events for nobody, forever.)
    @Test func aWatcherGoneWithItsReadsPausedDoesNotKeepTheDaemonFollowing() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let fd = try a.rawConnection()
        let pings = Array(String(repeating: "{\"op\":\"ping\"}\n", count: 80).utf8)
        #expect(DaemonHarness.send(fd, Array("{\"op\":\"watch\"}\n".utf8) + pings))
        #expect(a.logShows(Self.following, within: 10), "\(a.log())")
        usleep(200_000)
        close(fd)
        // Events go to it (and fail) while B runs jobs.
        for _ in 0..<3 { _ = try b.waitForState(try b.submitSleep(units: 1, unitMilliseconds: 1), "succeeded") }
        #expect(a.logShows(Self.stopped, within: 5), "\(a.log().suffix(2_000))")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// Submits a job through `hooked` (a daemon started with `TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT` 86, so it
    /// exits after the submit's commit, before its `NOTIFY`), starts that daemon again without the hook
    /// (`arguments`, `home`), waits for the job (the one job but `besides`) to succeed, and expects `watcher` to
    /// have its `submitted` event or a `gap` line. Returns the daemon started again.
    private func killBeforeNotifyAndRestart(
        _ hooked: DaemonHarness, arguments: [String], home: TemporaryDirectory, server: PostgresServer,
        watcher: FeedRecorder, besides: String? = nil
    ) throws -> DaemonHarness {
        _ = try? hooked.request(["op": "submit", "kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": [:]])
        let process = try #require(hooked.process)
        let exited = Date().addingTimeInterval(20)
        while process.isRunning && Date() < exited { usleep(5_000) }
        #expect(!process.isRunning && process.terminationStatus == 86, "the hook's exit")
        let query = "SELECT id FROM trailbook_jobs" + (besides.map { " WHERE id <> '\($0)'" } ?? "")
        let id = try #require(try server.psql(query).split(separator: "\n").first.map(String.init))
        // Started again without the hook: it runs the job.
        let b = try DaemonHarness(arguments: arguments, home: home)
        _ = try b.waitForState(id, "succeeded")
        let seen = Date().addingTimeInterval(10)
        func gap() -> Bool { watcher.all().contains { $0["type"]?.stringValue == "gap" } }
        while !watcher.states(of: id).contains("succeeded") && Date() < seen { usleep(10_000) }
        usleep(500_000)
        let submitted = watcher.events(of: id).contains { $0["type"]?.stringValue == "submitted" }
        #expect(submitted || gap(), "neither the submitted event nor a gap: \(watcher.all())")
        return b
    }

    /// Another daemon killed after a commit and before its `NOTIFY` (here B, by the test hook after a submit's
    /// commit: its `submitted` event is never sent) and started again: the watchers of a daemon that follows are
    /// told (`gap`, "started again") when B's new run is heard (`RestartedDaemons`). A started following after
    /// B's start and heard nothing of B's first run before the kill (B sent nothing meanwhile): it knows that run
    /// from the store (`trailbook_feed_relays`, read with the `LISTEN`), so B's second run is a restart to it.
    /// Failed when A knew only the runs it had heard (B's second run looked like a first: no gap, no `submitted`).
    @Test func aDaemonKilledBeforeItsNotifyAndStartedAgainIsToldToWatchersOfADaemonThatFollowedAfterItsStart() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"])
        let bHome = TemporaryDirectory()
        let bArguments = ["--store", server.socketConnectionString, "--host", "host-b"]
        let hooked = try DaemonHarness(
            arguments: bArguments, home: bHome, environment: ["TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT": "86"])
        // B's first run has sent its `relay_started` (at once, on start) before A follows.
        usleep(300_000)
        let watcher = try FeedRecorder(a)
        #expect(a.logShows(Self.following))
        let b = try killBeforeNotifyAndRestart(hooked, arguments: bArguments, home: bHome, server: server, watcher: watcher)
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// A client that sends `watch` and half-closes at once (as `nc -N` does) while the watch waits for the store
    /// to follow, then hangs up for good: its end of input came before it watched, so the daemon read nothing
    /// more from it and never saw it go; its writes failed, and it stayed a subscriber, keeping the daemon
    /// following the other daemons' events for nobody.
    @Test func aHalfClosedWatcherThatHangsUpDoesNotKeepTheDaemonFollowing() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let fd = try a.rawConnection()
        #expect(DaemonHarness.send(fd, Array("{\"op\":\"watch\"}\n".utf8)))
        shutdown(fd, Int32(SHUT_WR))
        #expect(a.logShows(Self.following, within: 10), "\(a.log())")
        // It reads its header: it watches.
        var chunk = [UInt8](repeating: 0, count: 4096)
        var time = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        let header = read(fd, &chunk, chunk.count)
        #expect(header > 0 && String(decoding: chunk[..<max(0, header)], as: UTF8.self).contains("\"watching\":true"))
        close(fd)
        for _ in 0..<3 { _ = try b.waitForState(try b.submitSleep(units: 1, unitMilliseconds: 1), "succeeded") }
        #expect(a.logShows(Self.stopped, within: 5), "\(a.log().suffix(2_000))")
        for daemon in [a, b] { _ = try daemon.stop() }
    }
    /// `submit --wait` and `watch ID` through A, which follows nobody, of jobs B runs, again and again around the
    /// linger (0.3 s): each exits with the job's end (the daemon stops and starts following between them).
    @Test func submitWaitAndWatchThroughADaemonThatStopsAndStartsFollowingNeverHang() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.3"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let work = TemporaryDirectory("tbj-follow-wait")
        try FileManager.default.createDirectory(atPath: work.file("out"), withIntermediateDirectories: true)
        try Data(repeating: 7, count: 1_000).write(to: URL(fileURLWithPath: work.file("small.bin")))
        /// Runs the CLI through A; its status, or nil if it did not exit within 20 s (then it is killed).
        func run(_ arguments: [String]) throws -> Int32? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Binary.path)
            process.arguments = arguments
            process.environment = a.environment
            process.standardOutput = FileHandle.nullDevice
            let errors = work.file("stderr")
            FileManager.default.createFile(atPath: errors, contents: nil)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
            process.standardInput = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            guard !process.isRunning else {
                process.terminate()
                process.waitUntilExit()
                return nil
            }
            return process.terminationStatus
        }
        var hung: [String] = []
        for round in 0..<8 {
            try FileManager.default.createDirectory(atPath: work.file("out/\(round)"), withIntermediateDirectories: true)
            let status = try run([
                "submit", "upload", work.file("small.bin"), "--to", "file://" + work.file("out/\(round)"), "--any-host", "--wait",
            ])
            if status != 0 {
                let errors = (try? String(contentsOfFile: work.file("stderr"), encoding: .utf8)) ?? ""
                hung.append("round \(round) submit --wait: \(status.map(String.init) ?? "hung") \(errors)")
            }
            usleep(UInt32([250_000, 300_000, 350_000, 450_000][round % 4]))
            let id = try b.submitSleep(units: 3, unitMilliseconds: 30)
            let watched = try run(["watch", id])
            if watched != 0 { hung.append("round \(round) watch ID: \(watched.map(String.init) ?? "hung")") }
            usleep(UInt32([250_000, 300_000, 350_000, 450_000][(round + 1) % 4]))
        }
        #expect(hung.isEmpty, "\(hung) \(a.log().suffix(2_000))")
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// As the test above, but A heard B's first run while it followed before: following stops (no watcher,
    /// linger), starts again for a new watcher, and B is killed after a commit and before its `NOTIFY`, then
    /// started again. A knew B's first run; following again forgot it (`RestartedDaemons` reset when following
    /// starts), so B's second run looked like a first and the watcher missed the `submitted` event untold.
    @Test func aDaemonHeardBeforeAPauseInFollowingAndRestartedAfterItIsToldToTheWatchers() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.3"])
        let bHome = TemporaryDirectory()
        let bArguments = ["--store", server.socketConnectionString, "--host", "host-b"]
        let hooked = try DaemonHarness(
            arguments: bArguments, home: bHome, environment: ["TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT": "86"])
        // A follows while B's first run sends events (a job submitted through A, run by B), then stops.
        let first = try FeedRecorder(a)
        let early = try a.submitSleep(units: 1, unitMilliseconds: 1)
        _ = try first.waitFor(early, "succeeded", timeout: 20)
        first.close()
        #expect(a.logShows(Self.stopped, within: 10), "\(a.log())")
        // Following again, for a new watcher; B is killed after its next submit's commit, before its NOTIFY.
        let watcher = try FeedRecorder(a)
        let b = try killBeforeNotifyAndRestart(
            hooked, arguments: bArguments, home: bHome, server: server, watcher: watcher, besides: early)
        for daemon in [a, b] { _ = try daemon.stop() }
    }

    /// The protocol said a `local` watcher gets "those of the jobs it runs and of the submits, cancels and other
    /// requests it was sent"; but a cancel sent to A of a job B runs is carried out by B: the cancellation
    /// (`running` -> `cancelled`) is B's event, which A's local watcher does not get (the wording now says so).
    /// And it is not told of a gap either.
    @Test func aLocalWatcherDoesNotGetTheOutcomeOfACancelAnotherDaemonCarriesOut() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let a = try DaemonHarness(
            arguments: ["--store", server.socketConnectionString, "--host", "host-a", "--queues", "elsewhere"],
            environment: ["TRAILBOOK_JOBS_TEST_FEED_LINGER": "0.5"])
        let b = try DaemonHarness(arguments: ["--store", server.socketConnectionString, "--host", "host-b"])
        let local = try FeedRecorder(a, local: true)
        let id = try b.submitSleep(units: 100, unitMilliseconds: 100)
        _ = try b.waitForState(id, "running")
        _ = try a.job(["op": "cancel", "job": .string(id)])
        _ = try b.waitForState(id, "cancelled")
        usleep(500_000)
        #expect(!local.all().contains { $0["type"]?.stringValue == "gap" })
        #expect(!local.states(of: id).contains("cancelled"), "\(local.all())")
        for daemon in [a, b] { _ = try daemon.stop() }
    }
}
