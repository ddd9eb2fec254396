import Foundation
import TrailbookPostgres

// `list --state S` on the shared store: each state read down its own index range.
extension PostgresJobStore {
    /// The `SELECT` of a list page filtered by `states`: the newest `limit` jobs of those states (and of `kind`, when
    /// given) older than `before`, in submission order. Each state is read on its own (a `LATERAL` subquery per
    /// state) newest first from the cursor down `trailbook_jobs_by_state_sequence` (state, sequence), and stops
    /// after `limit` rows: a page costs the same however many rows the other states hold. (`state = ANY(…)` would
    /// take PostgreSQL 15 off the index's order, to read and sort every row of those states.)
    ///
    /// The state is bounded as a row, `state >= s AND (state, sequence) < (s, before)`, which is `state = s AND
    /// sequence < before`, ordered by both columns: written as an equality, the planner (which takes a state it cannot
    /// see as a third of the table) would rather walk `trailbook_jobs_sequence` and filter, reading every row down to
    /// the tenth job of a rare state (99 990 rows for 10 queued among 100 000, seen in `StateListPlanTests`).
    static func stateListStatement(states: [JobState], kind: String?, before: Int64?, limit: Int) -> PostgresStatement {
        PostgresStatement(
            """
            SELECT * FROM (
                SELECT page.* FROM unnest($1::text[]) AS wanted(state) CROSS JOIN LATERAL (
                    SELECT \(columns) FROM trailbook_jobs
                    WHERE state >= wanted.state AND (state, sequence) < (wanted.state, $4::bigint)
                        AND ($2::text IS NULL OR kind = $2)
                    ORDER BY state DESC, sequence DESC LIMIT $3::bigint
                ) AS page
                ORDER BY page.sequence DESC LIMIT $3::bigint
            ) newest ORDER BY sequence
            """,
            [
                .textArray(Array(Set(states.map(\.rawValue))).sorted()), kind.map { .text($0) } ?? .null,
                .integer(Int64(limit)), .integer(before ?? Int64.max),
            ])
    }
}
