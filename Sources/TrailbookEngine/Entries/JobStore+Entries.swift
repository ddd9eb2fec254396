import TrailbookSQLite

/// Entry lists in the SQLite store (schema migration 11: `job_entries`, `job_entry_lists`).
extension JobStore: JobEntryStoring {
    public func removeEntries(jobID: String) throws {
        try database.transaction {
            try database.query("DELETE FROM job_entries WHERE job_id = ?", [.text(jobID)])
            try database.query("DELETE FROM job_entry_lists WHERE job_id = ?", [.text(jobID)])
        }
    }

    public func appendEntries(jobID: String, _ entries: [JobEntry]) throws {
        try database.transaction {
            for entry in entries {
                try database.query(
                    """
                    INSERT INTO job_entries (job_id, position, size, item, state, code, message)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        .text(jobID), .integer(Int64(entry.position)), .integer(entry.size), .text(Self.text(entry.item)),
                        .text(entry.outcome.state.rawValue), Self.optional(entry.outcome.code),
                        Self.optional(entry.outcome.message),
                    ])
            }
        }
    }

    public func moveEntries(jobID: String, from: Int, to: Int) throws {
        try database.query(
            "UPDATE job_entries SET position = position - ? WHERE job_id = ? AND position >= ?",
            [.integer(Int64(from - to)), .text(jobID), .integer(Int64(from))])
    }

    public func sealEntries(jobID: String, count: Int) throws {
        try database.query(
            "INSERT INTO job_entry_lists (job_id, count) VALUES (?, ?) ON CONFLICT (job_id) DO UPDATE SET count = excluded.count",
            [.text(jobID), .integer(Int64(count))])
    }

    public func recordOutcomes(jobID: String, _ outcomes: [(position: Int, outcome: JobEntryOutcome)]) throws {
        try database.transaction {
            for (position, outcome) in outcomes {
                try database.query(
                    "UPDATE job_entries SET state = ?, code = ?, message = ? WHERE job_id = ? AND position = ?",
                    [
                        .text(outcome.state.rawValue), Self.optional(outcome.code), Self.optional(outcome.message),
                        .text(jobID), .integer(Int64(position)),
                    ])
            }
        }
    }

    public func entries(jobID: String, after: Int, limit: Int, state: JobEntryState?) throws -> [JobEntry] {
        let rows =
            if let state {
                try database.query(
                    """
                    SELECT position, size, item, state, code, message FROM job_entries
                    WHERE job_id = ? AND state = ? AND position > ? ORDER BY position LIMIT ?
                    """,
                    [.text(jobID), .text(state.rawValue), .integer(Int64(after)), .integer(Int64(limit))])
            } else {
                try database.query(
                    """
                    SELECT position, size, item, state, code, message FROM job_entries
                    WHERE job_id = ? AND position > ? ORDER BY position LIMIT ?
                    """,
                    [.text(jobID), .integer(Int64(after)), .integer(Int64(limit))])
            }
        return rows.compactMap(Self.entry)
    }

    public func entryCounts(jobID: String) throws -> JobEntryCounts {
        let sealed = try !database.query("SELECT 1 FROM job_entry_lists WHERE job_id = ?", [.text(jobID)]).isEmpty
        let rows = try database.query(
            "SELECT state, count(*), coalesce(sum(size), 0) FROM job_entries WHERE job_id = ? GROUP BY state",
            [.text(jobID)])
        return Self.counts(sealed: sealed, rows)
    }

    private static func optional(_ text: String?) -> SQLiteValue { text.map { .text($0) } ?? .null }

    /// A row of `position, size, item, state, code, message`; `nil` if unreadable (a newer program's state).
    static func entry(_ row: some StoredRow) -> JobEntry? {
        guard let position = row.int(0), let size = row.int(1), let text = row.text(2),
            let item = try? JSONCoding.decode(JSONValue.self, from: Array(text.utf8)),
            let outcome = row.text(3).flatMap({ JobEntryOutcome(state: $0, code: row.text(4), message: row.text(5)) })
        else { return nil }
        return JobEntry(position: Int(position), size: size, item: item, outcome: outcome)
    }

    /// Counts from rows of `state, count, sum(size)`.
    static func counts(sealed: Bool, _ rows: [some StoredRow]) -> JobEntryCounts {
        var counts = JobEntryCounts(sealed: sealed, entries: [:], sizes: [:])
        for row in rows {
            guard let state = row.text(0).flatMap(JobEntryState.init(rawValue:)) else { continue }
            counts.entries[state] = Int(row.int(1) ?? 0)
            counts.sizes[state] = row.int(2) ?? 0
        }
        return counts
    }
}
