import Testing
import TrailbookSQLite

/// The row-at-a-time statement API the bulk photo jobs use (bind, step, read a column, rewind).
struct StatementRowAccessTests {
    @Test func bindStepAndReadWithoutRows() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER); INSERT INTO t VALUES ('a', 1), ('b', NULL)")
        let select = try db.prepare("SELECT v FROM t WHERE k = ?")
        let key = Array("a".utf8)
        let one = try key.withUnsafeBytes { bytes in
            try select.withBinding(utf8: bytes, at: 1) { () throws(SQLiteError) -> Int64? in
                defer { select.rewind() }
                return try select.next() ? select.int64(at: 0) : nil
            }
        }
        #expect(one == 1)
        // The in-place binding is gone afterwards: the parameter is NULL, which matches no row.
        #expect(try select.next() == false)
        select.rewind()
        try select.bind("b", at: 1)
        #expect(try select.next() && select.int64(at: 0) == nil, "NULL reads as nil")
        select.rewind()
        #expect(try select.next(), "rewind keeps the binding")
        select.rewind()
        let empty = try select.withBinding(utf8: UnsafeRawBufferPointer(start: nil, count: 0), at: 1) {
            () throws(SQLiteError) -> Bool in
            defer { select.rewind() }
            return try select.next()
        }
        #expect(empty == false, "empty text matches nothing")
        #expect(throws: SQLiteError.self) { try select.bind(1, at: 9) }
        let insert = try db.prepare("INSERT INTO t VALUES (?, ?)")
        try insert.bind("a", at: 1)
        try insert.bind(5, at: 2)
        #expect(throws: SQLiteError.self) { _ = try insert.next() }
    }
}
