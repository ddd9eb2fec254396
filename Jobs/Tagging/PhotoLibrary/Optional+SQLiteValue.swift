import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Optional where Wrapped == Int {
    var sqlite: SQLiteValue { map { .integer(Int64($0)) } ?? .null }
}

extension Optional where Wrapped == String {
    var sqlite: SQLiteValue { map { .text($0) } ?? .null }
}
