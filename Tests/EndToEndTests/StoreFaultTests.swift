import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine
import TrailbookSQLite

/// The daemon when its own machine misbehaves: the store's (or an upload destination's) file system fills up,
/// another process locks the store, the wall clock steps. Real faults: a small tmpfs the test fills, a python3 `sqlite3` process holding
/// the write lock, libfaketime stepping the daemon's wall clock.
@Suite(.serialized)
struct StoreFaultTests {
    @Test func aFullStoreDiskStopsUploadsRetryablyAndTheyRunAgainOnceItFrees() throws {
        let work = TemporaryDirectory()
        let disk = try SmallFileSystem(in: work, size: "8m")
        let state = disk.path
        defer { disk.unmount() }
        let daemon = try DaemonHarness(arguments: ["--retry-base", "3s"], state: state)
        defer { _ = try? daemon.stop() }
        let events = try FeedRecorder(daemon)
        let destination = work.file("out")
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        let kept = work.file("kept.bin")
        let keptSHA = try UploadEndToEndTests.randomFile(kept, bytes: 12 << 20)
        let dropped = work.file("dropped.bin")
        _ = try UploadEndToEndTests.randomFile(dropped, bytes: 12 << 20)
        let options = ["--to", destination, "--chunk-size", "256KiB", "--max-rate", "2MiB"]
        let retried = try daemon.submitUpload([kept] + options)
        let cancelled = try daemon.submitUpload([dropped] + options)
        for id in [retried, cancelled] {
            try daemon.waitFor(id, "1 MiB uploaded") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 1 << 20 }
        }

        let filler = try disk.fill()
        // The next checkpoint write fails: each job stops with the retryable store_write_failed, not wedged running.
        for id in [retried, cancelled] {
            let stopped = try events.waitFor(id, "needs_retry", timeout: 10)
            #expect(stopped["error"]?["code"]?.stringValue == "store_write_failed")
            #expect(stopped["error"]?["message"]?.stringValue?.contains("its file system is full") == true)
        }
        // The daemon keeps answering, from memory where the store is behind.
        let listStarted = Date()
        let listed = try daemon.cli(["list", "--json"])
        #expect(listed.status == 0)
        #expect(Date().timeIntervalSince(listStarted) < 1)
        // A submit is refused with a clear error and stores nothing.
        let other = work.file("other.bin")
        _ = try UploadEndToEndTests.randomFile(other, bytes: 1 << 20)
        let refused = try daemon.cli(["submit", "upload", other, "--to", destination])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("[store_write_failed]"), "\(refused.stderr)")
        #expect(refused.stderr.contains("its file system is full"), "\(refused.stderr)")
        // A stopped job stays cancellable while nothing can be written.
        let cancel = try daemon.cli(["cancel", cancelled])
        #expect(cancel.status == 0, "\(cancel.stderr)")
        #expect(try daemon.show(cancelled)["state"]?.stringValue == "cancelled")
        usleep(500_000)
        #expect(["needs_retry", "queued"].contains(try daemon.show(retried)["state"]?.stringValue ?? ""), "cannot start yet")

        try FileManager.default.removeItem(atPath: filler)
        let done = try daemon.waitForState(retried, "succeeded", timeout: 30)
        #expect(done["attempt"]?.intValue == 2)
        #expect(done["result"]?["sha256"]?.stringValue == keptSHA)
        #expect(try UploadEndToEndTests.sha256(ofFile: destination + "/kept.bin") == keptSHA)
        // The cancellation is written once the disk has room, then the clean-up removes the partial file.
        let part = destination + "/dropped.bin.\(cancelled.prefix(8)).part"
        let deadline = Date().addingTimeInterval(5)
        while FileManager.default.fileExists(atPath: part) && Date() < deadline { usleep(20_000) }
        #expect(!FileManager.default.fileExists(atPath: part))
        #expect(!FileManager.default.fileExists(atPath: destination + "/dropped.bin"))
        let store = try Database(path: state + "/jobs.sqlite3", readOnly: true)
        let rows = try store.query("SELECT id, state FROM jobs ORDER BY sequence")
        #expect(rows.map { $0.text(1) ?? "" } == ["succeeded", "cancelled"], "the refused submit stored nothing")
        let log = daemon.log()
        #expect(log.contains("the job store refused a write"), "\(log)")
        #expect(log.contains("the job store takes writes again"), "\(log)")
    }

    @Test func aStoreLockedByAnotherProcessNeverStallsTheDaemon() throws {
        let daemon = try DaemonHarness()
        defer { _ = try? daemon.stop() }
        let events = try FeedRecorder(daemon)
        // A checkpoint per unit, 33 a second: most of them meet the lock.
        let running = try daemon.submitSleep(units: 330, unitMilliseconds: 30)
        try daemon.waitFor(running, "progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 5 }

        let holder = try StoreLockHolder(path: daemon.statePath + "/jobs.sqlite3", seconds: 5)
        let lockedAt = Date()
        let socket = daemon.socketPath
        let submit = Thread.detachedResult {
            let request: JSONValue = ["op": "submit", "kind": "sleep", "params": ["units": 2, "unit_ms": 10]]
            return (try? DaemonClient(socketPath: socket).request(request), Date())
        }
        var slowest = 0.0
        var lists = 0
        var progressAtHalfASecond = 0
        while Date().timeIntervalSince(lockedAt) < 4.5 {
            if progressAtHalfASecond == 0 && Date().timeIntervalSince(lockedAt) >= 0.5 {
                progressAtHalfASecond = events.progressCount(of: running)
            }
            let started = Date()
            let reply = try daemon.request(["op": "list"])
            slowest = max(slowest, Date().timeIntervalSince(started))
            #expect(reply["ok"]?.boolValue == true)
            lists += 1
            usleep(100_000)
        }
        let progressDuringLock = events.progressCount(of: running) - progressAtHalfASecond
        #expect(lists >= 20)
        #expect(slowest < 0.1, "slowest list under the lock took \(slowest) s")
        // Coalesced to 4 a second: 4 s of the lock carry about 16.
        #expect(progressDuringLock >= 10, "progress events in 4 s of the lock: \(progressDuringLock)")
        #expect(try daemon.show(running)["state"]?.stringValue == "running")

        try holder.finish()
        let (reply, repliedAt) = try submit.value()
        #expect(reply?["ok"]?.boolValue == true, "\(String(describing: reply))")
        let waited = repliedAt.timeIntervalSince(lockedAt)
        #expect(waited >= 4.5 && waited < 7, "the submit waited for the lock: \(waited) s")
        let submitted = try #require(reply?["job"]?["id"]?.stringValue)
        try daemon.waitForState(submitted, "succeeded", timeout: 10)
        let done = try daemon.waitForState(running, "succeeded", timeout: 20)
        #expect(done["result"]?["units"]?.intValue == 330)
        #expect(done["attempt"]?.intValue == 1)
        let log = daemon.log()
        #expect(log.contains("another process holds a lock on it"), "\(log)")
        #expect(log.contains("the job store takes writes again"), "\(log)")
    }

    @Test func aWallClockStepBackDuringARetryWaitDoesNotDelayTheRetry() throws {
        let clock = try FakeClock()
        let daemon = try DaemonHarness(arguments: ["--retry-base", "2s"], environment: clock.environment)
        defer { _ = try? daemon.stop() }
        let id = try daemon.submitSleep(
            units: 10, unitMilliseconds: 10, stallAfter: 1, options: ["stall_timeout_s": 0.3, "max_attempts": 2])
        try daemon.waitForState(id, "needs_retry", timeout: 10)
        let steppedAt = Date()
        try clock.set("-1h")
        // The backoff of attempt 1 is at most 2 s; measured on the monotonic clock, the step changes nothing.
        try daemon.waitFor(id, timeout: 5, "attempt 2") { $0["attempt"]?.intValue == 2 }
        #expect(Date().timeIntervalSince(steppedAt) < 3)
    }

    @Test func aDueTimeBeyondTheBackoffCapIsClampedOnStart() throws {
        let clock = try FakeClock()
        let home = TemporaryDirectory()
        // Attempt 1's backoff with a 10 min base is the cap's: 150-300 s.
        let daemon = try DaemonHarness(arguments: ["--retry-base", "10m"], home: home, environment: clock.environment)
        let id = try daemon.submitSleep(
            units: 10, unitMilliseconds: 10, stallAfter: 1, options: ["stall_timeout_s": 0.3, "max_attempts": 2])
        let waiting = try daemon.waitForState(id, "needs_retry", timeout: 10)
        let before = try #require(waiting["retry_at"]?.stringValue.flatMap(Self.unixSeconds))
        #expect(before - Date().timeIntervalSince1970 > 140)
        _ = try daemon.stop()
        // The daemon comes back with its wall clock an hour behind: the stored due time is over an hour ahead.
        try clock.set("-1h")
        try daemon.start()
        defer { _ = try? daemon.stop() }
        let fakeNow = Date().timeIntervalSince1970 - 3600
        let after = try #require(try daemon.show(id)["retry_at"]?.stringValue.flatMap(Self.unixSeconds))
        #expect(after - fakeNow <= 302 && after - fakeNow >= 290, "due in \(after - fakeNow) s, at most the 300 s cap")
        #expect(daemon.log().contains("further ahead than the longest backoff (300 s)"), "\(daemon.log())")
    }

    /// Issue 11 §2: an upload to a destination disk that stays full retries while it has attempts left, keeping its
    /// `.part` and saying it resumes; once out of attempts it ends `failed` (`write_failed`), its message no longer
    /// promises a resume, and its `.part` is removed, so the disk has all its space back.
    @Test func anUploadOutOfAttemptsOnAFullDiskRemovesItsPartAndDoesNotPromiseAResume() throws {
        let work = TemporaryDirectory()
        let disk = try SmallFileSystem(in: work, size: "4m", named: "out")
        defer { disk.unmount() }
        let daemon = try DaemonHarness(arguments: ["--retry-base", "2s"])
        defer { _ = try? daemon.stop() }
        let events = try FeedRecorder(daemon)
        let source = work.file("big.bin")
        _ = try UploadEndToEndTests.randomFile(source, bytes: 8 << 20)
        let id = try daemon.submitUpload([
            source, "--to", "file://" + disk.path, "--chunk-size", "1MiB", "--max-attempts", "2",
        ])
        let part = disk.path + "/big.bin.\(id.prefix(8)).part"

        // Attempt 1 of 2 hits ENOSPC: retryable, and the .part (the whole disk) is kept for the resume.
        let retry = try events.waitFor(id, "needs_retry", timeout: 20)
        #expect(retry["error"]?["code"]?.stringValue == "write_failed")
        let retryMessage = retry["error"]?["message"]?.stringValue ?? ""
        #expect(retryMessage.contains("cannot write \(part): No space left on device"), "\(retryMessage)")
        #expect(retryMessage.contains("the upload resumes where it stopped"), "\(retryMessage)")
        #expect(FileManager.default.fileExists(atPath: part), "kept for the next attempt")
        #expect(try disk.space().free < 64 << 10, "the .part fills the disk")

        // Attempt 2 of 2 hits it again: the last one.
        let failed = try daemon.waitForState(id, "failed", timeout: 30)
        #expect(failed["attempt"]?.intValue == 2)
        #expect(failed["error"]?["code"]?.stringValue == "write_failed")
        let message = failed["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("cannot write \(part): No space left on device"), "\(message)")
        #expect(message.contains("this was the last attempt; the partial file is removed"), "\(message)")
        #expect(!message.contains("resume"), "a failed job does not resume: \(message)")
        // The clean-up runs right after the end is recorded, and says so once `unlink` has returned. Not the
        // name's disappearance: the name goes while the daemon's `unlink` is still in the kernel, before the
        // kernel frees the file's blocks, so the free space read then can still be none.
        _ = try events.waitForLog(id, containing: "removed the partial file \(part)", timeout: 5)
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk.path).isEmpty, "no .part left")
        let space = try disk.space()
        #expect(space.free == space.total, "all \(space.total) bytes free again, \(space.free) are")
    }

    @Test func photosListAndShowReadAStoreOnAReadOnlyFileSystem() throws {
        let work = TemporaryDirectory()
        let disk = try SmallFileSystem(in: work, size: "16m")
        let state = disk.path
        defer { disk.unmount() }
        let folder = TemporaryDirectory("tbj-photos")
        for n in 0..<3 {
            let picture = Fixtures.image(64, 48) { x, y in (UInt8(truncatingIfNeeded: x * (n + 1)), UInt8(y), UInt8(n * 60)) }
            PhotoTestSupport.write(try picture.jpegData(), folder.file("p\(n).jpg"))
        }
        let daemon = try DaemonHarness(state: state)
        _ = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        let before = try daemon.cli(["photos", "list"])
        #expect(before.status == 0)
        let ids = try daemon.cliJSON(["photos", "list", "--json"]).arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        try #require(ids.count == 3)
        let shown = try daemon.cli(["photos", "show", String(ids[0].prefix(8))])
        #expect(shown.status == 0)
        _ = try daemon.stop()
        // SIGTERM closes the store cleanly: its log is folded in and removed, so nothing but the database is left
        // for a reader, who would have to create the -wal and -shm files beside it.
        #expect(!FileManager.default.fileExists(atPath: state + "/photos.sqlite3-wal"))

        try disk.remount(readOnly: true)
        let listed = try daemon.cli(["photos", "list"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout == before.stdout)
        let again = try daemon.cli(["photos", "show", String(ids[0].prefix(8))])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == shown.stdout)
    }

    @Test func anotherUserReadsThePhotoStoreOrIsToldWhyNot() throws {
        let home = TemporaryDirectory()
        chmod(home.path, 0o755)
        let folder = TemporaryDirectory("tbj-photos")
        for n in 0..<4 {
            let picture = Fixtures.image(64, 48) { x, y in (UInt8(truncatingIfNeeded: x * (n + 1)), UInt8(y), UInt8(n * 60)) }
            PhotoTestSupport.write(try picture.jpegData(), folder.file("p\(n).jpg"))
        }
        let later = TemporaryDirectory("tbj-photos")
        try FileManager.default.moveItem(atPath: folder.file("p3.jpg"), toPath: later.file("p3.jpg"))
        let daemon = try DaemonHarness(home: home)
        _ = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        let mine = try daemon.cli(["photos", "list"])
        _ = try daemon.stop()
        let storeFiles = { (try? FileManager.default.contentsOfDirectory(atPath: home.path)) ?? [] }
        for name in storeFiles() where name.hasPrefix("photos.sqlite3") { chmod(home.file(name), 0o644) }
        // `nobody` may read the files but not write the directory, so SQLite cannot make its -shm file there.
        let asNobody = {
            try DaemonHarness.run(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", Binary.path, "photos", "list"],
                environment: daemon.environment)
        }
        let theirs = try asNobody()
        #expect(theirs.status == 0, "\(theirs.stderr)")
        #expect(theirs.stdout == mine.stdout)
        #expect(theirs.stdout.split(separator: "\n").count == 3)

        // Changes still in the write-ahead log (the daemon was killed), and no -shm beside it (a copy of the state
        // directory without SQLite's transient index): reading them needs to create one, which nobody may do here.
        try daemon.start()
        _ = try daemon.cliJSON(["photos", "import", later.path, "--wait", "--json"])
        try daemon.crash()
        try? FileManager.default.removeItem(atPath: home.file("photos.sqlite3-shm"))
        for name in storeFiles() where name.hasPrefix("photos.sqlite3") { chmod(home.file(name), 0o644) }
        let refused = try asNobody()
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("its write-ahead log (\(home.path)/photos.sqlite3-wal) holds changes"), "\(refused.stderr)")
        #expect(refused.stderr.contains("cannot be created in \(home.path) (Permission denied)"), "\(refused.stderr)")
        // Its owner reads all four.
        let owner = try daemon.cli(["photos", "list"])
        #expect(owner.status == 0)
        #expect(owner.stdout.split(separator: "\n").count == 4)
    }

    static func unixSeconds(_ iso: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        return formatter.date(from: iso)?.timeIntervalSince1970
    }
}

/// A tmpfs of a few MiB mounted over a directory (needs root, or CAP_SYS_ADMIN), that the test fills and frees.
final class SmallFileSystem {
    let path: String
    private var mounted = false

    /// Mounts one of `size` (tmpfs syntax: `8m`) on a new directory `name` (the daemon's state, or an upload's
    /// destination) in `work`.
    /// - Throws: `HarnessError` naming why when `mount` is refused.
    init(in work: TemporaryDirectory, size: String, named name: String = "state") throws {
        path = work.file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let result = try DaemonHarness.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path])
        guard result.status == 0 else {
            throw HarnessError("this test mounts a small tmpfs and needs root: mount said \(result.stderr)")
        }
        mounted = true
    }

    /// Writes a file until the file system is full (`ENOSPC`) and returns its path.
    func fill() throws -> String {
        let filler = path + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw HarnessError("cannot create \(filler)") }
        defer { close(fd) }
        let block = [UInt8](repeating: 0xA5, count: 4096)
        while block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        guard errno == ENOSPC else { throw HarnessError("filling stopped with errno \(errno), not ENOSPC") }
        return filler
    }

    /// Remounts it read-only (`readOnly`) or read-write.
    func remount(readOnly: Bool) throws {
        let result = try DaemonHarness.run("/bin/mount", ["-o", readOnly ? "remount,ro" : "remount,rw", path])
        guard result.status == 0 else { throw HarnessError("remount of \(path) failed: \(result.stderr)") }
    }

    /// Free and total bytes, from `statvfs(2)`.
    func space() throws -> (free: Int, total: Int) {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { throw HarnessError("statvfs \(path): errno \(errno)") }
        return (Int(info.f_bfree) * Int(info.f_frsize), Int(info.f_blocks) * Int(info.f_frsize))
    }

    func unmount() {
        guard mounted else { return }
        mounted = false
        _ = try? DaemonHarness.run("/bin/umount", ["-l", path])
    }

    deinit { unmount() }
}

/// A python3 process that holds the SQLite write lock (`BEGIN IMMEDIATE`) on a database for a while, as an open
/// `sqlite3` shell or a backup tool would.
final class StoreLockHolder {
    private let process = Process()

    /// Returns once the lock is held.
    init(path: String, seconds: Double) throws {
        let script = """
            import sqlite3, sys, time
            connection = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
            connection.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            time.sleep(float(sys.argv[2]))
            connection.execute("COMMIT")
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script, path, String(seconds)]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard line.hasPrefix("locked") else { throw HarnessError("the lock holder did not lock: \(line)") }
    }

    /// Waits until it committed and exited.
    func finish() throws {
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw HarnessError("the lock holder failed") }
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}

/// libfaketime for the daemon: its wall clock (`CLOCK_REALTIME`) follows an offset in a file the test rewrites,
/// its monotonic clock stays real. `NO_FAKE_STAT=1` keeps file times true (a shifted mtime would look like a
/// changed source); `FAKETIME_SHARED` must be set or Swift's `CommandLine.arguments` comes out empty. Its
/// semaphore and shared memory are named for this clock alone: libfaketime's first process under a name creates
/// them and unlinks them when it exits, so a name shared by every test let a daemon still exiting from one test
/// unlink them while the next test's daemon was opening them ("sem_open failed"; it did not start).
final class FakeClock {
    let file: TemporaryDirectory
    let library: String
    /// The name of this clock's semaphore and shared memory (`FAKETIME_SHARED`).
    let sharedName = "/tbj_clock_\(getpid())_\(UInt32.random(in: 0 ... .max))"

    init() throws {
        let candidates = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib")) ?? [])
            .map { "/usr/lib/\($0)/faketime/libfaketimeMT.so.1" }
        guard let library = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw HarnessError("libfaketime is missing: run scripts/install-deps.sh (Debian package faketime)")
        }
        self.library = library
        file = TemporaryDirectory("clock")
        try set("+0")
    }

    var environment: [String: String] {
        [
            "LD_PRELOAD": library, "FAKETIME_TIMESTAMP_FILE": file.file("offset"), "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "NO_FAKE_STAT": "1", "FAKETIME_SHARED": sharedName + " " + sharedName,
        ]
    }

    /// Removes what a process killed with this clock left in /dev/shm (one that exits removes its own).
    deinit {
        let name = sharedName.dropFirst()
        for leftover in ["/dev/shm/sem.\(name)", "/dev/shm/\(name)"] { unlink(leftover) }
    }

    /// Sets the daemon's wall clock to the real one plus `offset` (libfaketime's syntax: `-1h`, `+30`).
    func set(_ offset: String) throws {
        try (offset + "\n").write(toFile: file.file("offset"), atomically: true, encoding: .utf8)
    }
}

extension FeedRecorder {
    /// Waits until a state event of `job` to `state` arrives and returns it.
    func waitFor(_ job: String, _ state: String, timeout: Double) throws -> JSONValue {
        try waitForEvent(of: job, "state event to \(state)", timeout: timeout) {
            $0["type"]?.stringValue == "state" && $0["to"]?.stringValue == state
        }
    }

    /// Waits until a log event of `job` whose message contains `text` arrives and returns it.
    func waitForLog(_ job: String, containing text: String, timeout: Double) throws -> JSONValue {
        try waitForEvent(of: job, "log event containing \"\(text)\"", timeout: timeout) {
            $0["type"]?.stringValue == "log" && ($0["message"]?.stringValue ?? "").contains(text)
        }
    }

    /// Polls every 10 ms, for up to `timeout` seconds, for the first event of `job` that `matches`.
    private func waitForEvent(
        of job: String, _ what: String, timeout: Double, _ matches: (JSONValue) -> Bool
    ) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let event = events(of: job).first(where: matches) { return event }
            usleep(10_000)
        }
        throw HarnessError("no \(what) of \(job) within \(timeout) s: \(events(of: job).suffix(5))")
    }

    /// Waits until a line of `type` that names no job (a `gap`) arrives and returns it.
    func waitForUnnumbered(_ type: String, timeout: Double) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = all().first(where: { $0["job"] == nil && $0["type"]?.stringValue == type }) { return line }
            usleep(10_000)
        }
        throw HarnessError("no \(type) line within \(timeout) s: \(all().suffix(5))")
    }

    /// The progress events of `job` so far.
    func progressCount(of job: String) -> Int {
        events(of: job).count { $0["type"]?.stringValue == "progress" }
    }
}

extension Thread {
    /// Runs `body` on a new thread; `value()` waits for its result.
    static func detachedResult<T>(_ body: @escaping @Sendable () -> T) -> ThreadResult<T> {
        let result = ThreadResult<T>()
        Thread { result.set(body()) }.start()
        return result
    }
}

/// The result of `Thread.detachedResult`.
final class ThreadResult<T>: @unchecked Sendable {
    private let condition = NSCondition()
    private var stored: T?

    func set(_ value: T) {
        condition.withLock {
            stored = value
            condition.broadcast()
        }
    }

    /// Waits up to 30 s for the result.
    func value() throws -> T {
        try condition.withLock {
            let deadline = Date().addingTimeInterval(30)
            while stored == nil { if !condition.wait(until: deadline) { break } }
            guard let stored else { throw HarnessError("the thread did not finish within 30 s") }
            return stored
        }
    }
}
