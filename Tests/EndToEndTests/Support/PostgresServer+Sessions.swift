import Foundation

/// `psql` sessions of a test's own on a `PostgresServer`: a statement's output, and a table lock held by another
/// session while the test watches a daemon meet it.
extension PostgresServer {
    /// Runs `sql` in a `psql` session of its own; its output, trimmed.
    func psql(_ sql: String) throws -> String {
        let result = try DaemonHarness.run(psqlPath, [socketConnectionString, "-At", "-c", sql])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Another session holding the jobs table in `EXCLUSIVE` mode (plain reads pass; writes, claims and
    /// retention's deletes wait for it), once it holds it, until `releaseJobsTable`.
    func lockJobsTable() throws -> Process {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: psqlPath)
        // One query string is one transaction: the lock is held until the session ends.
        holder.arguments = [
            socketConnectionString + " application_name=tb-table-lock", "-c",
            "LOCK TABLE trailbook_jobs IN EXCLUSIVE MODE; SELECT pg_sleep(120)",
        ]
        holder.standardOutput = FileHandle.nullDevice
        try holder.run()
        let held = Date().addingTimeInterval(30)
        while Date() < held,
            try psql(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tb-table-lock' AND query LIKE '%pg_sleep%' AND state = 'active'"
            ) != "1"
        {
            usleep(20_000)
        }
        return holder
    }

    /// Ends `lockJobsTable`'s session, and with it the lock.
    func releaseJobsTable(_ holder: Process) throws {
        _ = try psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tb-table-lock'")
        holder.waitUntilExit()
    }

    /// Waits up to `seconds` until a session waits for a lock in a statement containing `text`; whether one did.
    func waitsForLock(inStatementContaining text: String, within seconds: Double = 30) throws -> Bool {
        let query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%\(text)%'"
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try psql(query) != "0" { return true }
            usleep(20_000)
        }
        return false
    }
}
