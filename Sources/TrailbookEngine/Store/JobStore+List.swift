import TrailbookSQLite

// `list`'s read: the newest jobs of some states and kind, a page at a time by the cursor `before`.
extension JobStore {
    /// Jobs in submission order, optionally only those in `states` and of `kind` and submitted before the job
    /// whose `sequence` is `before` (a page's cursor), the newest `limit` of them.
    ///
    /// Every page is an indexed read from its cursor down (`listSelect`): the thousandth costs what the first does.
    /// - Throws: `SQLiteError`.
    public func jobs(
        states: [JobState]? = nil, kind: String? = nil, before: Int64? = nil, limit: Int = 1_000
    ) throws -> [JobRecord] {
        guard let select = Self.listSelect(states: states, kind: kind, before: before, limit: limit) else { return [] }
        return try database.query(select.sql, select.bindings).compactMap(Self.record)
    }

    /// The `SELECT` of `jobs(states:kind:before:limit:)` and its bindings; `nil` for no states (nothing to read).
    ///
    /// With `states`, each state is read newest first from `jobs_by_state_sequence` (`state = ? AND sequence < ?`)
    /// and stops after `limit` rows (an indexed lookup however many jobs the state holds); the states' rows are then
    /// merged. Without, the rowid (`sequence`) is read down from `before`.
    static func listSelect(
        states: [JobState]?, kind: String?, before: Int64?, limit: Int
    ) -> (sql: String, bindings: [SQLiteValue])? {
        let kindFilter = kind == nil ? "" : " AND kind = ?"
        let beforeFilter = before == nil ? "" : " AND sequence < ?"
        var bindings: [SQLiteValue] = []
        let newest: String
        if let states {
            guard !states.isEmpty else { return nil }
            // One arm per state: an `IN` over several states would read all their rows to sort them by sequence.
            newest = Set(states).sorted { $0.rawValue < $1.rawValue }.map { state in
                bindings.append(.text(state.rawValue))
                if let before { bindings.append(.integer(before)) }
                if let kind { bindings.append(.text(kind)) }
                bindings.append(.integer(Int64(limit)))
                return "SELECT * FROM (SELECT \(columns) FROM jobs INDEXED BY jobs_by_state_sequence "
                    + "WHERE state = ?\(beforeFilter)\(kindFilter) ORDER BY sequence DESC LIMIT ?)"
            }.joined(separator: " UNION ALL ")
        } else {
            if let before { bindings.append(.integer(before)) }
            if let kind { bindings.append(.text(kind)) }
            bindings.append(.integer(Int64(limit)))
            newest = "SELECT \(columns) FROM jobs WHERE 1\(beforeFilter)\(kindFilter) ORDER BY sequence DESC LIMIT ?"
        }
        bindings.append(.integer(Int64(limit)))
        return ("SELECT * FROM (SELECT * FROM (\(newest)) ORDER BY sequence DESC LIMIT ?) ORDER BY sequence", bindings)
    }
}
