/// The statements prepared on one session of a `PostgresConnection`, by SQL text, so that a statement sent again
/// is bound and run without being parsed and planned again (`PQsendPrepare` once, then `PQsendQueryPrepared`).
///
/// Prepared statements live as long as the server session: a new session (after a reconnection) starts with
/// none (`removeAll`), and its statements are prepared again on first use. Only statements with parameters are
/// prepared: those are the ones the daemon sends again and again with other values (every other statement —
/// `BEGIN`, `LISTEN`, DDL — may not be preparable at all). At most `capacity` are kept; statements beyond are sent
/// unnamed, as before.
struct PreparedStatements {
    /// The most statements prepared on one session.
    static let capacity = 256

    private var names: [String: String] = [:]
    private var made = 0

    /// How many are prepared (or being prepared) now.
    var count: Int { names.count }

    /// The name `sql` is prepared under on this session, or `nil`.
    func name(of sql: String) -> String? { names[sql] }

    /// Names `sql` for a prepare the caller sends before any use of the name; `nil` when `capacity` are prepared.
    mutating func add(_ sql: String) -> String? {
        guard names.count < Self.capacity else { return nil }
        made += 1
        let name = "tb_\(made)"
        names[sql] = name
        return name
    }

    /// Forgets `sql`: its prepare failed (or was skipped after an earlier error), so the name does not exist.
    mutating func remove(_ sql: String) { names[sql] = nil }

    /// Forgets them all: the session is gone.
    mutating func removeAll() { names.removeAll() }
}
