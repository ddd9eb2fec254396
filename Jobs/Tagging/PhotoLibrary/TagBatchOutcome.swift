import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What `PhotoStoreTransaction.changeTag(_:_:of:in:)` did to one batch of stable IDs.
public struct TagBatchOutcome: Hashable, Sendable {
    /// Photos whose tags changed (tag added, or removed).
    public var changed = 0
    /// Photos that already were as asked.
    public var unchanged = 0
    /// Positions (in the `StableIDList`) of entries that name no photo or are not stable IDs, in order.
    public var unknown: [Int] = []

    /// Nothing done yet: all counts zero.
    public init() {}
}
