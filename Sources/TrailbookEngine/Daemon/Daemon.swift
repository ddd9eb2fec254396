import Synchronization
import TrailbookLoop

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The daemon's settings, from its command line.
public struct DaemonConfiguration: Sendable {
    /// State directory (`$TRAILBOOK_JOBS_HOME`); created mode 0700 if missing.
    public var home: String
    /// Control socket path; `home/daemon.sock` unless `--socket` says otherwise.
    public var socketPath: String
    /// Scheduler defaults and limits.
    public var scheduler = SchedulerOptions()
    /// How long ended jobs are kept (`--keep-succeeded`, `--keep-failed`, `--keep-cancelled`).
    public var retention = RetentionPolicy()
    /// Worker processes for job kinds that decode untrusted files (`.workerProcess`).
    public var workers = WorkerPoolOptions()
    /// Where jobs are kept: the embedded SQLite store (default) or a shared PostgreSQL database (`--store`).
    public var store = JobStoreLocation.sqlite
    /// Version reported by `ping`.
    public var version = "0.1.0"
    /// On a shared store, seconds the daemon goes on receiving the other daemons' feed after its last watcher
    /// that wanted their events left (`FeedRelay.followLinger`).
    public var feedFollowLingerSeconds = 30.0

    public init(home: String, socketPath: String? = nil) {
        self.home = home
        self.socketPath = socketPath ?? home + "/daemon.sock"
    }

    /// Path of the job store.
    public var storePath: String { home + "/jobs.sqlite3" }
}

/// The trailbook-jobs daemon: the loop, the store, the scheduler, the feed and the control socket, wired together.
///
/// `run` blocks the calling (main) thread running the loop. SIGTERM, SIGINT or SIGHUP stops every running job with
/// `resource_reclaim`, waits for them to checkpoint (at most `shutdownGraceSeconds`), and returns 0.
///
/// SIGHUP means "stop as on SIGTERM", with a log line naming it: it comes when the terminal the daemon was started
/// from closes (its stderr, the log, is gone with it), or from `kill -HUP`. The daemon has no configuration file to
/// reload and logs to stderr, which a service manager holds open, so there is nothing to reopen; dying by the
/// signal's default action instead left running jobs `running` in the store, unlogged, until the next start.
@LoopActor
public final class Daemon {
    let configuration: DaemonConfiguration
    let scheduler: Scheduler
    let server: ControlServer
    let retention: Retention
    private var signals: [SignalWatcher] = []
    private var stopping = false
    /// The service manager's notification socket (systemd `Type=notify`); inactive when not run by one.
    private let notifier: ServiceNotifier
    /// Sends `WATCHDOG=1` at half the manager's interval while the loop turns; nil without `WatchdogSec=`.
    private var watchdogTimer: LoopTimer?
    /// Coalesces `STATUS=` updates after state changes to at most one a second; armed only after a change.
    private var statusTimer: LoopTimer?
    /// Writes the loop turn's log lines before each poll (`DaemonLog.bufferUntilPoll`).
    private var logFlush: PrepareHandle?
    /// On a shared store: sends this daemon's feed events to the other daemons and theirs to its watchers.
    private var relay: FeedRelay?
    /// The running daemon, kept alive until the loop stops.
    private static var current: Daemon?

    private init(configuration: DaemonConfiguration, scheduler: Scheduler, notifier: ServiceNotifier) {
        self.configuration = configuration
        self.scheduler = scheduler
        self.notifier = notifier
        retention = Retention(scheduler: scheduler, policy: configuration.retention)
        server = ControlServer(scheduler: scheduler, retention: retention, version: configuration.version)
    }

    /// The service-manager variables (`NOTIFY_SOCKET`, `WATCHDOG_*`, `LISTEN_*`), read once and removed from the
    /// environment, so worker processes and other children never notify or take the socket in the daemon's name.
    private static func takeServiceEnvironment() -> [String: String] {
        var taken: [String: String] = [:]
        for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
            if let value = getenv(name) {
                taken[name] = String(cString: value)
                unsetenv(name)
            }
        }
        return taken
    }

    /// Runs the daemon until SIGTERM, SIGINT or SIGHUP, on the calling thread (which becomes the loop thread).
    ///
    /// - Parameters:
    ///   - configuration: where state lives and the scheduler's defaults.
    ///   - register: registers the job kinds with the scheduler (called on the loop before anything runs).
    /// - Returns: the process exit status (`ExitStatus`): 0 after a clean shutdown, 1 if the daemon could not
    ///   start (the reason, with its stable code, is printed to stderr).
    public nonisolated static func run(
        _ configuration: DaemonConfiguration, register: @escaping @LoopActor @Sendable (Scheduler) -> Void
    ) -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        // A launcher may hand us a blocked signal mask (test runners, some supervisors); SIGTERM and SIGINT must
        // reach the loop's signal handles, and SIGCHLD libuv's child watcher (else a dead worker is never reaped
        // and its exit callback never runs).
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGTERM)
        sigaddset(&unblock, SIGINT)
        sigaddset(&unblock, SIGHUP)
        sigaddset(&unblock, SIGCHLD)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        let status = StatusBox()
        Task.onLoop {
            do {
                current = try Daemon.start(configuration, register: register)
            } catch {
                DaemonLog.write("cannot start: \(error)")
                status.value = ExitStatus.jobFailed.rawValue
                EventLoop.main.stop()
            }
        }
        EventLoop.main.run()
        DaemonLog.flush()
        return status.value
    }

    private static func start(_ configuration: DaemonConfiguration, register: @LoopActor (Scheduler) -> Void) throws
        -> Daemon
    {
        let service = takeServiceEnvironment()
        let activationSocket = try ActivationSocket.fromEnvironment(service)
        try prepareHome(configuration.home)
        try lockHome(configuration.home)
        raiseOpenFileLimit()
        // A passed socket answers connects (the manager holds it): only a socket we bind ourselves is probed.
        if activationSocket == nil, SocketProbe.isAnswering(configuration.socketPath) {
            throw JobError(
                code: "already_running",
                message: "a daemon is already listening on \(configuration.socketPath); stop it first or use --socket")
        }
        let store: any JobStoring
        let storeName: String
        switch configuration.store {
        case .sqlite:
            store = try JobStore(path: configuration.storePath)
            storeName = configuration.storePath
        case .postgres(let connectionString, let options):
            let shared = try PostgresJobStore(connectionString: connectionString, options: options)
            store = shared
            storeName =
                "PostgreSQL \(connectionString) as daemon \(shared.owner.daemonID) on host \(shared.owner.host), "
                + "queues \(shared.queues.joined(separator: ",")), leases of \(Scheduler.seconds(options.leaseSeconds))"
        }
        let feed = ProgressFeed(firstSeq: try store.reserveSequenceBlock(count: 1_000_000_000))
        let scheduler = Scheduler(store: store, feed: feed, options: configuration.scheduler)
        scheduler.workerPool = WorkerPool(loop: .main, options: configuration.workers)
        register(scheduler)
        let daemon = Daemon(configuration: configuration, scheduler: scheduler, notifier: ServiceNotifier(environment: service))
        if let shared = store as? any LeasingJobStoring {
            daemon.relay = FeedRelay(
                store: shared, feed: feed, instance: configuration.socketPath,
                followLinger: configuration.feedFollowLingerSeconds)
        }
        if let activationSocket {
            try daemon.server.listen(descriptor: activationSocket)
        } else {
            try daemon.server.listen(path: configuration.socketPath)
        }
        for number in [SIGTERM, SIGINT, SIGHUP] {
            daemon.signals.append(
                SignalWatcher(loop: .main, signal: number) { [weak daemon] signal in
                    LoopIsolation.assume { daemon?.shutDown(signal: signal) }
                })
        }
        do {
            try scheduler.start()
        } catch {
            // The listening socket and the signal handles would keep the loop (and the process) alive for good.
            daemon.server.close()
            for watcher in daemon.signals { watcher.close() }
            daemon.signals.removeAll()
            throw error
        }
        daemon.retention.start()
        daemon.logFlush = DaemonLog.bufferUntilPoll(on: .main)
        let listening = activationSocket.map { "the socket passed by the service manager (descriptor \($0))" }
        DaemonLog.write(
            "listening on \(listening ?? configuration.socketPath); store \(storeName); "
                + "concurrency \(configuration.scheduler.concurrency); kinds \(scheduler.kindNames.joined(separator: ", "))")
        daemon.startServiceNotifications()
        return daemon
    }

    /// Says `READY=1` with a first status, arms the watchdog keep-alive when the manager asked for one, and keeps
    /// `STATUS=` in step with state changes. Nothing when no manager listens.
    private func startServiceNotifications() {
        guard notifier.isActive else { return }
        notifier.send([("READY", "1"), ("STATUS", statusLine()), ("MAINPID", "\(getpid())")])
        if let interval = notifier.watchdogIntervalSeconds {
            // Half the interval, as sd_watchdog_enabled(3) recommends: a late tick still lands in time.
            let milliseconds = max(UInt64(interval * 500), 1)
            let timer = LoopTimer(loop: .main)
            timer.start(milliseconds: milliseconds, repeatMilliseconds: milliseconds) { [weak self] in
                LoopIsolation.assume { self?.notifier.send([("WATCHDOG", "1")]) }
            }
            watchdogTimer = timer
        }
        scheduler.feed.onStateChange = { [weak self] in
            LoopIsolation.assume { self?.statusChanged() }
        }
        scheduler.onSummaryChanged = { [weak self] in self?.statusChanged() }
    }

    private func statusChanged() {
        guard statusTimer == nil, !stopping else { return }
        let timer = LoopTimer(loop: .main)
        timer.start(seconds: 1) { [weak self] in
            LoopIsolation.assume {
                guard let self else { return }
                self.statusTimer?.close()
                self.statusTimer = nil
                if !self.stopping { self.notifier.send([("STATUS", self.statusLine())]) }
            }
        }
        statusTimer = timer
    }

    /// `systemctl status`'s line: how many jobs run here and wait, from the scheduler's summary (its counters; on
    /// a shared store the store's count of every daemon's waiting jobs, refreshed with the heartbeat).
    func statusLine() -> String {
        let counts = scheduler.summaryCounts()
        let waiting = (counts[.needsRetry] ?? 0) > 0 ? " · \(counts[.needsRetry] ?? 0) waiting to retry" : ""
        return "\(scheduler.runningCount) running · \(counts[.queued] ?? 0) queued\(waiting)"
    }

    private static func prepareHome(_ home: String) throws {
        var path = home.hasPrefix("/") ? "" : "."
        for part in home.split(separator: "/") {
            path += "/" + part
            mkdir(path, 0o700)
        }
        var info = stat()
        guard stat(home, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw JobError(code: "bad_home", message: "cannot create the state directory \(home): \(String(cString: strerror(errno)))")
        }
    }

    /// Takes an exclusive `flock` on `home/daemon.lock` for the life of the process, so a second daemon on the same
    /// state directory (even one told to listen on another socket) refuses to start instead of running the same
    /// jobs twice. The lock goes with the process, crash included; the file holds the owner's pid for people.
    private static func lockHome(_ home: String) throws {
        let path = home + "/daemon.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw JobError(code: "bad_home", message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = read(fd, &buffer, buffer.count)
            let owner = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).filter(\.isNumber)
            close(fd)
            throw JobError(
                code: "already_running",
                message: "another daemon (pid \(owner.isEmpty ? "?" : owner)) is using \(home); stop it first")
        }
        ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        lockDescriptor = fd
    }

    /// The descriptor holding the state directory's lock; never closed while the process runs.
    private static var lockDescriptor: Int32 = -1

    /// Lifts the soft limit on open files to the hard limit (at most 65 536): every client, watcher and worker
    /// pipe is a descriptor, and the usual soft limit of 1 024 is low for a daemon.
    private static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = min(limit.rlim_max, 65_536)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = wanted
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }

    private func shutDown(signal: Int32) {
        guard !stopping else {
            DaemonLog.write("second signal: exiting now; running jobs resume on the next start")
            DaemonLog.flush()
            _exit(0)
        }
        stopping = true
        let name = [SIGTERM: "SIGTERM", SIGINT: "SIGINT", SIGHUP: "SIGHUP (its terminal closed, or kill -HUP)"][signal]
        DaemonLog.write(
            "signal \(signal)\(name.map { " \($0)" } ?? ""): stopping running jobs (resource_reclaim) and shutting down")
        notifier.send([("STOPPING", "1"), ("STATUS", "stopping: checkpointing \(scheduler.runningCount) running job(s)")])
        watchdogTimer?.close()
        watchdogTimer = nil
        statusTimer?.close()
        statusTimer = nil
        scheduler.feed.onStateChange = nil
        server.close()
        retention.close()
        Task.onLoop { [self] in
            await scheduler.shutdown()
            if scheduler.runningCount > 0 {
                // A job that ignores its stop must not keep the daemon past its 2 s promise; it stays `running`
                // in the store and resumes from its checkpoint on the next start, as after a crash.
                DaemonLog.write("\(scheduler.runningCount) job(s) did not stop in time; they resume on the next start")
                DaemonLog.flush()
                // _exit, not exit: atexit handlers (OpenSSL's cleanup among them) may wait on a pool thread that
                // is stuck in the very call that did not stop. Committed SQLite transactions are already in the WAL.
                _exit(0)
            }
            if let pool = scheduler.workerPool {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    pool.shutdown { continuation.resume() }
                }
            }
            // The jobs' last events (paused to stop, queued) go to the other daemons' watchers (at most 0.5 s).
            await relay?.close()
            relay = nil
            scheduler.feed.close()
            for watcher in signals { watcher.close() }
            signals.removeAll()
            DaemonLog.write("stopped")
            DaemonLog.endBuffering(logFlush)
            logFlush = nil
            Daemon.current = nil
            EventLoop.main.stop()
            Self.exitIfTheLoopStaysOpen(seconds: 3)
        }
    }
}

extension Daemon {
    /// Exits the process `seconds` after the stop if the loop has not returned by then: `run()` returns only once
    /// every handle is closed, and one left open (a fault: a timer or poll handle not closed, a request that never
    /// completes) kept a stopped daemon alive until killed. Everything is written by then ("stopped" is logged);
    /// the log names the handles still open, to find the fault.
    nonisolated static func exitIfTheLoopStaysOpen(seconds: UInt32) {
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { argument in
            sleep(UInt32(UInt(bitPattern: argument)))
            DaemonLog.write(
                "the event loop was still open \(UInt(bitPattern: argument)) s after the stop (a handle not closed); "
                    + "exiting anyway. Open handles:\n" + EventLoop.main.openHandlesDescription())
            DaemonLog.flush()
            _exit(0)
        }, UnsafeMutableRawPointer(bitPattern: UInt(seconds)))
        if started == 0 { pthread_detach(thread) }
    }
}

/// The exit status, written on the loop and read after it stops.
private final class StatusBox: @unchecked Sendable {
    var value: Int32 = 0
}

/// The daemon's log: one line per message on stderr, with an ISO 8601 time.
///
/// While the daemon runs (`bufferUntilPoll`), lines written on the loop thread are collected and written together
/// just before the loop next waits for I/O: a busy loop turn logs many lines (three per job: submitted, started,
/// ended), and one `write(2)` each was a syscall per line on the loop thread (issue 14). A line never waits past the
/// turn that wrote it, or past a line from another thread (which writes everything before it, in order). The cost:
/// a `kill -9` or a crash in the middle of a turn loses that turn's lines.
public enum DaemonLog {
    private static let pending = Mutex<[UInt8]>([])
    private static let buffering = Atomic<Bool>(false)
    /// Past this many bytes the lines go out at once, even mid-turn.
    private static let flushBytes = 64 * 1024

    /// Writes `message` as one line to stderr (now, or before the loop next polls; see the type's comment), URLs
    /// in it without their secrets (`URLRedaction.text`).
    public static func write(_ message: String) {
        var message = URLRedaction.text(message)
        message.withUTF8 { write(utf8: $0) }
    }

    /// `write(_:)` of a message given as UTF-8 bytes (built without a `String` on a hot path).
    public static func write(utf8 message: some Collection<UInt8>) {
        let time = Timestamp.nowISO8601()
        let inTurn = buffering.load(ordering: .relaxed) && EventLoop.main.inLoopThread
        pending.withLock { buffer in
            buffer.append(contentsOf: time.utf8)
            buffer.append(contentsOf: " trailbook-jobs: ".utf8)
            buffer.append(contentsOf: message)
            buffer.append(0x0A)
            if !inTurn || buffer.count >= flushBytes { writeOut(&buffer) }
        }
    }

    /// Writes the lines collected so far.
    public static func flush() {
        pending.withLock { writeOut(&$0) }
    }

    private static func writeOut(_ buffer: inout [UInt8]) {
        var written = 0
        buffer.withUnsafeBytes { bytes in
            while written < bytes.count {
                let count = Glibc.write(STDERR_FILENO, bytes.baseAddress! + written, bytes.count - written)
                if count > 0 {
                    written += count
                } else if count < 0 && errno == EINTR {
                    continue
                } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    // A non-blocking stderr that is full (a pipe its reader is slow to drain): wait for room a
                    // little, rather than drop a whole turn's lines; a reader gone for 100 ms loses them.
                    var ready = pollfd(fd: STDERR_FILENO, events: Int16(POLLOUT), revents: 0)
                    if poll(&ready, 1, 100) <= 0 { break }
                } else {
                    break  // stderr closed: the lines are lost, as with fputs
                }
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// From now on lines written on `loop`'s thread (the daemon's) wait for the end of the loop iteration: the
    /// returned handle writes them before each poll. Closing it (`endBuffering`) writes what is left and goes back
    /// to writing each line at once.
    @LoopActor
    static func bufferUntilPoll(on loop: EventLoop) -> PrepareHandle {
        let handle = PrepareHandle(loop: loop)
        handle.keepsLoopAlive = false
        handle.start { DaemonLog.flush() }
        buffering.store(true, ordering: .relaxed)
        return handle
    }

    /// Ends `bufferUntilPoll`: closes its handle and writes what is left.
    @LoopActor
    static func endBuffering(_ handle: PrepareHandle?) {
        buffering.store(false, ordering: .relaxed)
        handle?.close()
        flush()
    }
}

/// Checks whether something answers on a Unix socket, without an event loop.
public enum SocketProbe {
    /// Whether a connect to `path` succeeds (a daemon is listening there).
    public static func isAnswering(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}
