import Foundation
import TrailbookPostgres

extension PostgresJobStore {
    // MARK: rows

    /// The SQLite store's columns, in its order (`JobStore.record` decodes both).
    static let columns = """
        id, kind, state, priority, timeout_s, stall_timeout_s, max_attempts, attempt, params, progress,
        cancellation, error, result, retry_at - extract(epoch FROM clock_timestamp()), created_at, updated_at, sequence,
        resumes_attempt::int, give_up_after_s,
        idempotency_key, queue, pinned_host
        """
    /// `columns`, one by one.
    static let columnList = columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    /// How many columns `columns` names: a statement's own columns come after them.
    static let columnCount = columnList.count

    /// A row of `columns` (the SQLite store's, then the shared store's own `queue` and `pinned_host`). Its
    /// `retry_at` comes as seconds from the database's now (`DatabaseClock`) and is made the daemon's time.
    static func record(_ row: PostgresRow) -> JobRecord? {
        guard var job = JobStore.record(row) else { return nil }
        job.retryAt = DatabaseClock.local(remaining: job.retryAt)
        job.queue = row.text(20) ?? JobRecord.defaultQueue
        job.pinnedHost = row.text(21)
        return job
    }

    func records(_ sql: String, _ parameters: [PostgresValue] = []) throws -> [JobRecord] {
        try rows(sql, parameters).compactMap(Self.record)
    }

    static func optionalText(_ value: JSONValue?) -> PostgresValue {
        guard let value, !value.isNull else { return .null }
        return .text(JobStore.text(value))
    }
}
