import Dispatch
import Foundation
import Synchronization
import TrailbookLoop
import TrailbookPostgres

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif


/// The job store on PostgreSQL, shared by several daemons (docs/explanation/shared-store.md): the SQLite store's contract
/// (`JobStoring`) plus leases (`LeasingJobStoring`): a daemon claims queued jobs with `FOR UPDATE SKIP LOCKED`,
/// holds a lease (token + expiry on the database's clock) on each job it runs, renews it with progress writes
/// and a heartbeat, and every write about a running job is fenced by its token, so a daemon that lost a lease
/// (it was cut off, and another daemon rescued the job) writes nothing more about that run.
///
/// The connection (`PostgresConnection`, libpq's non-blocking API) runs on a loop of its own, on its own thread;
/// each call of this class, on the daemon's loop thread, waits for its answer (one round trip, a pipeline of
/// statements in one transaction), as a SQLite call waits for its commit, at most `requestTimeoutSeconds`. While
/// the database is unreachable calls fail at once (`JobStoreError.unavailable`) and the connection reconnects
/// with backoff. Messages never contain the connection string's password.
public final class PostgresJobStore: LeasingJobStoring {
    /// This daemon as a lease holder (host name + a random id per start).
    public let owner: PostgresJobQueue.Owner
    /// How long a claimed job's lease lasts without renewal, in seconds (`daemon --lease`); renewed every third.
    public let leaseSeconds: Double
    /// The host this daemon claims pinned jobs for (`daemon --host`, else the host name).
    public var host: String { owner.host }
    /// The queues whose jobs this daemon claims (`daemon --queues`; `default` unless given).
    public let queues: [String]
    /// The longest a call waits for PostgreSQL's answer before it fails with `JobStoreError.unavailable`, in seconds;
    /// also how long requests in flight may go without a byte from the server before the connection is dropped
    /// as lost and made again (`PostgresConnection.responseTimeoutSeconds`), and the longest one reconnection
    /// attempt may take: `SharedStoreOptions`'s, 10 s by default.
    public let requestTimeoutSeconds: Double
    /// Where it connects (its description has no password).
    public let connectionString: PostgresConnectionString
    let database: PostgresStoreActor
    /// Leases this daemon holds, by job id (loop thread only).
    var leases: [String: PostgresJobQueue.Lease] = [:]
    /// Runs whose lease was found lost, by job id, until the run is over (`forgetLostLease`, or its fenced write):
    /// writes about the job stay fenced by the lost token. Without it the job would read as one no daemon runs
    /// here, and an end written after another daemon ended the job would pass that fence.
    var lostLeases: [String: PostgresJobQueue.Lease] = [:]
    /// Jobs whose fenced write in the last `commitGroup` found the lease gone (see `takeLostWrites`).
    var lostWrites: Set<String> = []
    let wake = WorkSignal()

    /// Called on the loop thread when another daemon announced work (`NOTIFY`): a submit, a retry that came due.
    public var onWorkAvailable: (() -> Void)? {
        get { wake.callback }
        set { wake.callback = newValue }
    }

    /// Called on the loop thread with a job id and the control (cancel, pause) another daemon asked for a job
    /// this daemon runs (`NOTIFY trailbook_control`).
    public var onControl: ((String, JobControl) -> Void)? {
        get { wake.control }
        set { wake.control = newValue }
    }

    /// Called on the loop thread with the id of a job whose run ended while another daemon's control request
    /// was pending (`NOTIFY trailbook_control 'ended <job>'`, sent by the end's own statement).
    public var onControlledEnd: ((String) -> Void)? {
        get { wake.controlledEnd }
        set { wake.controlledEnd = newValue }
    }

    /// Called on the loop thread with the id of a running job whose lease a renewal sent without waiting (its
    /// progress, the heartbeat) found lost.
    public var onLeaseLost: ((String) -> Void)? {
        get { wake.leaseLost }
        set { wake.leaseLost = newValue }
    }

    /// Called on the loop thread with the events of a feed payload another daemon sent (`publishFeed`).
    public var onFeed: ((String) -> Void)? {
        get { wake.feed }
        set { wake.feed = newValue }
    }

    /// Called on the loop thread when the connection is back after it was lost: feed payloads sent meanwhile by
    /// other daemons are gone (`NOTIFY` reaches only the sessions listening when it is committed).
    public var onFeedInterrupted: (() -> Void)? {
        get { wake.feedInterrupted }
        set { wake.feedInterrupted = newValue }
    }

    /// Feed payloads sent so far: numbers each one's header, so that two equal payloads of one transaction are
    /// both delivered (PostgreSQL folds equal notifications of a transaction into one).
    var feedPayloads = 0

    /// Connects (waiting at most `connectTimeoutSeconds`) as daemon `daemonID` (a new random id by default) of
    /// host `options.host` (the machine's name by default), claiming from `options.queues`, migrates the schema
    /// (safe when daemons start together) and listens for new work and control requests (the feed only when
    /// asked: `followFeed`).
    /// - Throws: `JobStoreError.unavailable` if the database cannot be reached or migrated.
    public init(
        connectionString: PostgresConnectionString, options: SharedStoreOptions, daemonID: String? = nil,
        connectTimeoutSeconds: Double = 10
    ) throws {
        self.connectionString = connectionString
        self.leaseSeconds = options.leaseSeconds
        requestTimeoutSeconds = options.requestTimeoutSeconds
        queues = options.queues
        owner = PostgresJobQueue.Owner(host: options.host ?? Self.hostName(), daemonID: daemonID ?? UUID.random())
        let loop = EventLoop()
        let thread = Thread { loop.run() }
        thread.name = "postgres-store"
        thread.start()
        database = PostgresStoreActor(loop: loop)
        let wake = self.wake
        let me = owner.daemonID
        let (queues, host) = (options.queues, owner.host)
        let responseTimeout = requestTimeoutSeconds
        try wait(timeout: connectTimeoutSeconds) { database in
            let connection = PostgresConnection(loop: database.loop, connectionString: connectionString)
            // A silent network cut (no FIN) fails the requests in flight and reconnects once a call would have
            // given up anyway, instead of leaving every later request queued behind the lost ones.
            connection.responseTimeoutSeconds = responseTimeout
            // Likewise a reconnection attempt into the cut: given up after the same silence, so that the next
            // attempt, once the network is back, comes that much sooner.
            connection.reconnectPolicy.attemptTimeoutSeconds = responseTimeout
            connection.sessionStatements = PostgresJobStore.sessionStatements
            connection.onNotification = { notification in
                if notification.channel == PostgresJobQueue.feedChannel {
                    // "<daemon> <number>\n<events>": this daemon's own are not relayed back to it.
                    let payload = notification.payload
                    guard let newline = payload.firstIndex(of: "\n"),
                        !payload[..<newline].hasPrefix(me + " ")
                    else { return }
                    let events = String(payload[payload.index(after: newline)...])
                    return EventLoop.main.execute { wake.feed?(events) }
                }
                guard notification.channel == PostgresJobQueue.controlChannel else {
                    // Work this daemon may not claim (another queue, pinned to another host) costs it no claim.
                    guard WorkNotice(payload: notification.payload).concerns(queues: queues, host: host) else { return }
                    return EventLoop.main.execute { wake.fire() }
                }
                // "<daemon> <control> <job>": only the daemon named acts. "ended <job>": a controlled run's end
                // is written, for whichever daemon asked.
                let parts = notification.payload.split(separator: " ").map(String.init)
                if parts.count == 2, parts[0] == "ended" {
                    return EventLoop.main.execute { wake.controlledEnd?(parts[1]) }
                }
                guard parts.count == 3, parts[0] == me, let control = JobControl(rawValue: parts[1]) else { return }
                EventLoop.main.execute { wake.control?(parts[2], control) }
            }
            // Notifications sent while the connection was down are lost: look for work once it is back.
            connection.onReconnect = {
                EventLoop.main.execute {
                    wake.fire()
                    wake.feedInterrupted?()
                }
            }
            let queue = PostgresJobQueue(connection: connection)
            database.queue = queue
            try await connection.connect()
            try await queue.migrate()
            try await connection.listen(PostgresJobQueue.jobsChannel)
            try await connection.listen(PostgresJobQueue.controlChannel)
        }
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(cString: buffer)
    }

    // MARK: waiting for the database

    /// Runs `body` on the database's loop, after every request made before it, and waits for it on the calling
    /// thread, at most `timeout` seconds.
    func wait<T: Sendable>(
        timeout: Double? = nil, _ body: @escaping @Sendable (isolated PostgresStoreActor) async throws -> T
    ) throws -> T {
        let outcome = Mutex<WaitOutcome<T>>(.waiting)
        let done = DispatchSemaphore(value: 0)
        database.submit { database in
            // A request given up on before it started is not made: the caller was told it failed.
            guard outcome.withLock({ $0.start() }) else { return }
            let result: Result<T, any Error>
            do { result = .success(try await body(database)) } catch { result = .failure(error) }
            outcome.withLock { $0 = .answered(result) }
            done.signal()
        }
        let seconds = timeout ?? requestTimeoutSeconds
        let answered = done.wait(timeout: .now() + seconds) == .success
        let result = outcome.withLock { state -> Result<T, any Error>? in
            if case .answered(let result) = state { return result }
            state.giveUp()
            return nil
        }
        guard answered, let result else { throw unanswered(within: seconds) }
        return try unwrapped(result)
    }

    /// Where a request made by `wait` or `sendWaitingAtMost` is.
    enum WaitOutcome<T: Sendable>: Sendable {
        case waiting, started, abandoned
        case answered(Result<T, any Error>)

        /// Marks a waiting request started; `false` if it was given up on first (then it must not be made).
        mutating func start() -> Bool {
            guard case .waiting = self else { return false }
            self = .started
            return true
        }

        /// The caller stops waiting: a request not started yet never will be.
        mutating func giveUp() {
            if case .waiting = self { self = .abandoned }
        }
    }

    /// The error of a request the database did not answer within `seconds`.
    func unanswered(within seconds: Double) -> JobStoreError {
        .unavailable(message: "PostgreSQL (\(connectionString)) did not answer within \(Self.seconds(seconds))")
    }

    /// Runs `body` on the database's loop, after every request made before it, without waiting; `completion` gets
    /// its outcome on the daemon's loop thread (errors as `wait` throws them). With `key`, a newer request of the
    /// same key made before this one started replaces it, and `completion` is not called.
    func send<T: Sendable>(
        coalescing key: String? = nil, job: String? = nil, ahead: Set<String>? = nil,
        _ body: @escaping @Sendable (isolated PostgresStoreActor) async throws -> T,
        completion: @escaping (Result<T, any Error>) -> Void
    ) {
        let completion = LoopConfined(completion)
        database.submit({ database in
            let result: Result<T, any Error>
            do { result = .success(try await body(database)) } catch { result = .failure(error) }
            EventLoop.main.execute { completion.value(result) }
        }, coalescing: key, job: job, ahead: ahead)
    }

    /// `send`, given up after `requestTimeoutSeconds` as `wait` gives up: `completion` then gets
    /// `JobStoreError.unavailable`, and a request not started by then is never made. A request already under way
    /// may still land; its answer is then dropped.
    func sendWaitingAtMost<T: Sendable>(
        ahead: Set<String>? = nil, _ body: @escaping @Sendable (isolated PostgresStoreActor) async throws -> T,
        completion: @escaping (Result<T, any Error>) -> Void
    ) {
        let outcome = Mutex<WaitOutcome<T>>(.waiting)
        let seconds = requestTimeoutSeconds
        let timeout = unanswered(within: seconds)
        let timer = LoopTimer(loop: .main)
        var delivered = false
        let deliver: (Result<T, any Error>) -> Void = { result in
            guard !delivered else { return }
            delivered = true
            timer.close()
            completion(result)
        }
        timer.start(seconds: seconds) {
            outcome.withLock { $0.giveUp() }
            deliver(.failure(timeout))
        }
        send(ahead: ahead, { database -> T? in
            guard outcome.withLock({ $0.start() }) else { return nil }
            return try await body(database)
        }) { [weak self] result in
            guard let self else { return }
            // `nil`: given up on before it started; the timer has answered.
            if case .success(nil) = result { return }
            deliver(Result { try self.unwrapped(result)! })
        }
    }

    func unwrapped<T>(_ result: Result<T, any Error>) throws -> T {
        switch result {
        case .success(let value): return value
        case .failure(let error as PostgresError):
            // PostgresConnection redacts its messages; the connection string printed here is redacted too.
            throw JobStoreError.unavailable(message: "\(error) (\(connectionString))")
        case .failure(let error): throw error
        }
    }

    static func seconds(_ value: Double) -> String { Scheduler.seconds(value) }

    /// One pipeline (one round trip, one transaction).
    func run(_ statements: [PostgresStatement]) throws -> [PostgresResult] {
        try wait { database in try await database.queue!.connection.pipeline(statements) }
    }

    func rows(_ sql: String, _ parameters: [PostgresValue] = []) throws -> [PostgresRow] {
        try run([PostgresStatement(sql, parameters)])[0].rows
    }
}
