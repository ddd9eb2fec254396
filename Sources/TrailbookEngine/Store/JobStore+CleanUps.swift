import TrailbookSQLite

extension JobStore {
    /// The pending clean-ups due at `now` (Unix seconds), earliest first.
    /// - Throws: `SQLiteError`.
    public func dueCleanUps(now: Double) throws -> [PendingCleanUp] {
        try database.query(
            "SELECT job_id, tries, created_at, next_at FROM cleanups WHERE next_at <= ? ORDER BY next_at", [.real(now)]
        ).compactMap { row in
            row.text(0).map {
                PendingCleanUp(
                    jobID: $0, tries: Int(row.int(1) ?? 0), createdAt: row.double(2) ?? 0, nextAt: row.double(3) ?? 0)
            }
        }
    }

    /// Records a failed try of a job's clean-up: `tries` so far, the next due time and the last error.
    /// - Throws: `SQLiteError`.
    public func rescheduleCleanUp(jobID: String, tries: Int, nextAt: Double, error: String) throws {
        try database.query(
            "UPDATE cleanups SET tries = ?, next_at = ?, last_error = ? WHERE job_id = ?",
            [.integer(Int64(tries)), .real(nextAt), .text(error), .text(jobID)])
    }

    /// Forgets a job's pending clean-up (done, or given up).
    /// - Throws: `SQLiteError`.
    public func removeCleanUp(jobID: String) throws {
        try database.query("DELETE FROM cleanups WHERE job_id = ?", [.text(jobID)])
    }
}
