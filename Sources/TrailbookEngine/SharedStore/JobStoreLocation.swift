import TrailbookPostgres

/// Where a daemon keeps its jobs: the embedded SQLite store in its home (the default), or a PostgreSQL database
/// that several daemons share (`daemon --store postgres://…`, issue 15).
public enum JobStoreLocation: Sendable, Equatable {
    /// `$TRAILBOOK_JOBS_HOME/jobs.sqlite3`.
    case sqlite
    /// A shared PostgreSQL database, and how this daemon takes part (lease length, host, queues).
    case postgres(PostgresConnectionString, SharedStoreOptions)
}

/// How a daemon takes part in a shared store (`daemon --store postgres://… --lease --host --queues`).
public struct SharedStoreOptions: Sendable, Equatable {
    /// How long a run's lease lasts unless renewed (by progress and a heartbeat), in seconds.
    public var leaseSeconds: Double
    /// The host name its leases carry and its pinned jobs name (`--host`); `nil` for the machine's (`gethostname`).
    /// Two daemons on one machine given different names act as two hosts (tests).
    public var host: String?
    /// The queues it claims from (`--queues`), at least one.
    public var queues: [String]
    /// The longest a store call waits for the database's answer, the longest requests in flight may go without a
    /// byte back before the connection is given up as lost, and the longest a reconnection attempt may take
    /// (`--store-timeout`), in seconds.
    public var requestTimeoutSeconds: Double

    /// Options; see the members.
    public init(
        leaseSeconds: Double = 30, host: String? = nil, queues: [String] = [JobRecord.defaultQueue],
        requestTimeoutSeconds: Double = 10
    ) {
        self.leaseSeconds = leaseSeconds
        self.host = host
        self.queues = queues
        self.requestTimeoutSeconds = requestTimeoutSeconds
    }
}
