import TrailbookSQLite

/// Why the store refused a write, whichever store it is: SQLite's error, or the shared store being unreachable
/// (`JobStoreError.unavailable`, which is transient like a lock: progress is skipped, checkpoints and transitions
/// are kept and retried).
struct StoreRefusal: Error, CustomStringConvertible {
    /// SQLite's extended result code; `unavailableCode` for an unreachable shared store. (A fenced-off write is no
    /// refusal: see `StoreWrite.fencedOff`.)
    let code: Int32
    /// Whether trying again later can succeed without anything else changing (a lock, an outage).
    let isLocked: Bool
    /// The cause in a few words, for messages.
    let cause: String
    let description: String

    /// The code of an unreachable shared store.
    static let unavailableCode: Int32 = -2

    /// The protocol's error code for a read the store refused: `store_unavailable` (shared store down: the CLI exits
    /// 3), `store_busy` (a lock), else `store_error`.
    var readErrorCode: String {
        code == Self.unavailableCode ? "store_unavailable" : isLocked ? "store_busy" : "store_error"
    }

    init(code: Int32, isLocked: Bool, cause: String, description: String) {
        self.code = code
        self.isLocked = isLocked
        self.cause = cause
        self.description = description
    }

    init(_ error: any Error) {
        switch error {
        case let sqlite as SQLiteError:
            self.init(code: sqlite.code, isLocked: sqlite.isLocked, cause: sqlite.cause, description: sqlite.description)
        case JobStoreError.unavailable(let message):
            self.init(
                code: Self.unavailableCode, isLocked: true, cause: "the shared job store (PostgreSQL) is unavailable",
                description: message)
        default:
            self.init(code: 1, isLocked: false, cause: "the store refused it", description: "\(error)")
        }
    }
}
