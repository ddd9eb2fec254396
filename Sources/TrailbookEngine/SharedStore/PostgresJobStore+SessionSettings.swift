extension PostgresJobStore {
    /// The settings of the daemon's session (`PostgresConnection.sessionStatements`).
    ///
    /// `enable_seqscan = off`: every statement the daemon sends repeatedly reaches its rows through an index (the
    /// primary key, the claim index), and must keep doing so however the table grows. Without it, the set-based
    /// write (`writesStatement`) was planned as a hash join over a sequential scan of every job: a prepared
    /// statement's plan is made once, early, while the table is small or its statistics stale (autovacuum
    /// analyzes it a minute later at best), and kept — so each group commit read the whole table, and a run of
    /// 20 000 jobs spent most of its server time there (bench/results/2026-12-07-pg-queue-4.md). Off is a cost
    /// penalty, not a ban: a statement with no usable index still scans.
    static let sessionStatements = ["SET enable_seqscan = off"]
}
