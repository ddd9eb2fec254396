import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Counts from one tag batch.
public struct TagCounts: Hashable, Sendable, Codable {
    /// Photos whose tags changed (tag added, or removed).
    public var changed: Int
    /// Photos that already were as asked (already had the tag, or did not have it).
    public var unchanged: Int
    /// Local IDs with no photo (deleted since they were resolved).
    public var missing: Int

    /// For adds: photos that got the tag.
    public var added: Int { changed }
    /// For adds: photos that already had it.
    public var alreadyHad: Int { unchanged }

    public init(changed: Int, unchanged: Int, missing: Int) {
        self.changed = changed
        self.unchanged = unchanged
        self.missing = missing
    }

    /// Sums two batches.
    public static func + (a: TagCounts, b: TagCounts) -> TagCounts {
        TagCounts(changed: a.changed + b.changed, unchanged: a.unchanged + b.unchanged, missing: a.missing + b.missing)
    }
}
