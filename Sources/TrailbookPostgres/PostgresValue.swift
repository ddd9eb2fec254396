import CLibPQ

/// Why a PostgreSQL call failed. Messages never contain a connection string's password.
public struct PostgresError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The kind of failure, for callers that react differently (fail fast, retry later, give up).
    public enum Kind: String, Sendable, Equatable {
        /// libpq refused the connection string.
        case invalidConnectionString = "invalid_connection_string"
        /// A connection attempt failed (server down, refused, authentication failed, timed out).
        case connectionFailed = "connection_failed"
        /// The connection is not up (still connecting, or waiting to reconnect): nothing was sent.
        case notConnected = "not_connected"
        /// The connection broke with the request in flight: it may or may not have been committed.
        case connectionLost = "connection_lost"
        /// The server answered with an error (`sqlState` says which); nothing of the request was committed.
        case server
        /// The connection was closed by its owner.
        case closed
    }

    /// The kind of failure.
    public let kind: Kind
    /// The server's SQLSTATE code (https://www.postgresql.org/docs/15/errcodes-appendix.html) for `.server`,
    /// for example `23505` (unique violation); `nil` otherwise.
    public let sqlState: String?
    /// What happened, in libpq's or the server's words.
    public let message: String

    /// Makes an error.
    public init(kind: Kind, sqlState: String? = nil, message: String) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
    }

    public var description: String {
        "[postgres_\(kind.rawValue)\(sqlState.map { " \($0)" } ?? "")] \(message)"
    }
}

/// A query parameter, sent in PostgreSQL's text format (cast in SQL where the type matters: `$1::bigint`).
public enum PostgresValue: Sendable, Equatable {
    case null
    case text(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    /// A `text[]` array (for `= ANY($1::text[])`).
    case textArray([String])
    /// A one-dimensional array of scalar values (`.null` elements are SQL NULLs), cast in SQL to its type
    /// (`$1::integer[]`, `$2::float8[]`): a column of a set-based write (`unnest($1::text[], $2::integer[])`).
    case array([PostgresValue])

    /// The text form libpq sends, or `nil` for SQL NULL.
    var wireText: String? {
        switch self {
        case .null: return nil
        case .text(let value): return value
        case .integer(let value): return String(value)
        case .double(let value): return value.isFinite ? "\(value)" : (value.isNaN ? "NaN" : (value > 0 ? "Infinity" : "-Infinity"))
        case .bool(let value): return value ? "t" : "f"
        case .textArray(let values):
            // Array literal syntax (https://www.postgresql.org/docs/15/arrays.html#ARRAYS-IO): every element
            // double-quoted, with `"` and `\` escaped by a backslash.
            return "{" + values.map(Self.arrayElement).joined(separator: ",") + "}"
        case .array(let values):
            return "{" + values.map { $0.wireText.map(Self.arrayElement) ?? "NULL" }.joined(separator: ",") + "}"
        }
    }

    /// `text` as an element of an array literal: double-quoted, `"` and `\` escaped by a backslash. One pass over
    /// the UTF-8 bytes (most elements need no escape: ids, states, numbers), not a generic `replacing`, which
    /// was a large part of a set-based write's cost.
    private static func arrayElement(_ text: String) -> String {
        var text = text
        return text.withUTF8 { bytes in
            let escapes = bytes.reduce(0) { $0 + ($1 == UInt8(ascii: "\\") || $1 == UInt8(ascii: "\"") ? 1 : 0) }
            return String(unsafeUninitializedCapacity: bytes.count + escapes + 2) { out in
                var at = 0
                out[at] = UInt8(ascii: "\"")
                at += 1
                for byte in bytes {
                    if byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") {
                        out[at] = UInt8(ascii: "\\")
                        at += 1
                    }
                    out[at] = byte
                    at += 1
                }
                out[at] = UInt8(ascii: "\"")
                return at + 1
            }
        }
    }
}

/// One SQL statement and its parameters (`$1`, `$2`…), as sent with `PQsendQueryParams`.
public struct PostgresStatement: Sendable, Equatable {
    /// One SQL statement (the extended protocol takes one per message).
    public var sql: String
    /// The values of `$1`, `$2`…
    public var parameters: [PostgresValue]

    public init(_ sql: String, _ parameters: [PostgresValue] = []) {
        self.sql = sql
        self.parameters = parameters
    }
}

/// One row of a result, in text format.
public struct PostgresRow: Sendable, Equatable {
    /// The values by column; `nil` is SQL NULL.
    public let values: [String?]

    /// A row of these values (a part of another row's, say).
    public init(values: [String?]) {
        self.values = values
    }

    /// Column `index` as text, or `nil` (NULL or out of range).
    public func text(_ index: Int) -> String? { index < values.count ? values[index] : nil }
    /// Column `index` as an integer, or `nil`.
    public func int(_ index: Int) -> Int64? { text(index).flatMap { Int64($0) } }
    /// Column `index` as a double, or `nil`.
    public func double(_ index: Int) -> Double? { text(index).flatMap { Double($0) } }
    /// Column `index` as a boolean (`t`/`f`), or `nil`.
    public func bool(_ index: Int) -> Bool? { text(index).map { $0 == "t" } }
}

/// The result of one statement.
public struct PostgresResult: Sendable, Equatable {
    /// The column names, in order.
    public let columns: [String]
    /// The rows returned (empty for a statement without `RETURNING`).
    public let rows: [PostgresRow]
    /// Rows inserted, updated or deleted (`PQcmdTuples`), or the row count of a `SELECT`.
    public let affectedRows: Int

    /// Copies a libpq result into Swift values (the `PGresult` is not kept).
    init(_ result: OpaquePointer) {
        let columnCount = Int(PQnfields(result))
        columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        rows = (0..<Int(PQntuples(result))).map { row in
            PostgresRow(
                values: (0..<columnCount).map { column in
                    PQgetisnull(result, Int32(row), Int32(column)) != 0
                        ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
                })
        }
        affectedRows = Int(String(cString: PQcmdTuples(result))) ?? rows.count
    }
}

/// A notification received on a channel the connection listens to (`NOTIFY channel, 'payload'`).
public struct PostgresNotification: Sendable, Equatable {
    /// The channel.
    public let channel: String
    /// The payload ('' if none).
    public let payload: String
    /// The process id of the server backend that sent it (the sender's session).
    public let senderPID: Int32
}
