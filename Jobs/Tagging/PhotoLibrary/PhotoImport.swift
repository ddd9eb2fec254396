import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One file's import: what the importer read, for `PhotoStore.upsert`.
public struct PhotoImport: Hashable, Sendable, Codable {
    /// Absolute path, its exact bytes.
    public var path: BytePath
    /// Its stamp when read.
    public var stamp: FileStamp
    /// Its content ID.
    public var stableID: StableID
    /// Its metadata.
    public var metadata: PhotoMetadata

    public init(path: BytePath, stamp: FileStamp, stableID: StableID, metadata: PhotoMetadata) {
        self.path = path
        self.stamp = stamp
        self.stableID = stableID
        self.metadata = metadata
    }
}
