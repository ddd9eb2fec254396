import TrailbookPostgres
import TrailbookSQLite

/// A stored row read by column index, so one decoder (`JobStore.record`) reads a job from the SQLite store's
/// `Row` and the PostgreSQL store's `PostgresRow` alike (the same columns in the same order).
protocol StoredRow {
    func text(_ index: Int) -> String?
    func int(_ index: Int) -> Int64?
    func double(_ index: Int) -> Double?
}

extension Row: StoredRow {}
extension PostgresRow: StoredRow {}
