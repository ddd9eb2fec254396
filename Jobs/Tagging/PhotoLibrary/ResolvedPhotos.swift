import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Stable IDs resolved to local IDs (`PhotoStore.resolve`).
public struct ResolvedPhotos: Hashable, Sendable {
    /// Local IDs of the photos found, in input order, each once.
    public var localIDs: [PhotoLocalID]
    /// Inputs that are not in the library or not stable IDs, in input order.
    public var unknown: [String]
}
