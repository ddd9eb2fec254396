import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What `PhotoStore.upsert` did.
public enum ImportOutcome: Hashable, Sendable {
    /// A new photo with this local ID.
    case inserted(PhotoLocalID)
    /// The row at this path was refreshed (the file changed).
    case updated(PhotoLocalID)
    /// The file's stamp matched; nothing was written.
    case unchanged(PhotoLocalID)
    /// The same bytes are already in the library at another path; nothing was written.
    case sameContent(as: PhotoLocalID, path: BytePath)
}
