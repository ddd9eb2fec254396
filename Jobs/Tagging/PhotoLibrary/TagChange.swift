import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Whether a bulk tag job adds its tag or takes it off.
public enum TagChange: String, Sendable, Codable {
    /// Add the tag (`submit tag`).
    case add
    /// Take it off (`submit tag --remove`).
    case remove
}
