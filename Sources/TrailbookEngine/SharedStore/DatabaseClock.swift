import TrailbookPostgres

/// The one clock of a shared store: the database's. Daemons on several hosts share the store and their clocks
/// need not agree (one 2 h ahead once pruned jobs that had ended seconds before; one 1 h behind retried every
/// second), so every time the store keeps and compares across hosts (`updated_at`, which retention compares;
/// `retry_at`, which due retries compare; a clean-up's `next_at` and `created_at`; leases) is the database's
/// `clock_timestamp()`, never a daemon's.
///
/// The daemon still thinks in its own wall clock (`JobRecord.retryAt`, `PendingCleanUp.nextAt`, retention's
/// cutoffs): at the store's edge a time of the daemon's is turned into a duration from its own now, sent, and added
/// to the database's now in SQL; a time read back is turned into a duration from the database's now, in SQL, and
/// added to the daemon's now. A duration is the same on both sides: only the round trip's latency is lost.
enum DatabaseClock {
    /// SQL: the database's now, in Unix seconds (`double precision`).
    static let now = "extract(epoch FROM clock_timestamp())"

    /// SQL: `column` as seconds from the database's now (negative: past), `NULL` when it is.
    static func remaining(_ column: String) -> String { "(\(column) - \(now))" }

    /// The parameter that `at(_:)` adds to the database's now for the daemon's wall-clock `time` (Unix seconds):
    /// seconds from the daemon's now; `NULL` for none.
    static func offset(of time: Double?) -> PostgresValue {
        guard let time else { return .null }
        return .double(time - Timestamp.now())
    }

    /// SQL: the database's now plus parameter `parameter` (seconds, `offset(of:)`): the daemon's time on the
    /// database's clock; `NULL` when the parameter is.
    static func at(_ parameter: Int) -> String { "(\(now) + $\(parameter)::float8)" }

    /// The daemon's wall-clock time (Unix seconds) of a time the database gave as seconds from its now
    /// (`remaining(_:)`).
    static func local(remaining seconds: Double?) -> Double? {
        seconds.map { Timestamp.now() + $0 }
    }
}
