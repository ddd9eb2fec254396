import PhotoLibrary
import TrailbookEngine
import TrailbookLoop
import TrailbookSQLite

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Which photos a bulk job works on: stable IDs given inline (`--ids`), in a file (`--ids-file`, one a line), or
/// every photo (`--all`). Exactly one must be given. Identifiers only: nothing else about a photo is read to
/// select it (docs/explanation/design.md, "Bulk work carries identifiers").
public struct PhotoSelection: Codable, Sendable, Equatable {
    /// Stable IDs, in full (the CLI turns `--ids` prefixes into full IDs before it submits).
    public var ids: [String]?
    /// Absolute path of a file with one stable ID a line; blank lines and lines starting with `#` are skipped.
    /// Its exact bytes (JSON: a string, or `{"base64", "text"}` for a name that is not UTF-8).
    public var idsFile: BytePath?
    /// Every photo in the library, in local-ID order.
    public var all: Bool?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case ids
        case idsFile = "ids_file"
        case all
    }

    /// Checks that exactly one source is given and, for a file, that it can be read.
    ///
    /// - Throws: `JobError` `invalid_params`.
    public func validate() throws(JobError) {
        let given = (ids != nil ? 1 : 0) + (idsFile != nil ? 1 : 0) + (all == true ? 1 : 0)
        guard given == 1 else {
            throw JobError(code: "invalid_params", message: "give exactly one of ids, ids_file or all")
        }
        if let idsFile {
            try Self.checkRegularFile(idsFile)
            if idsFile.withCString({ access($0, R_OK) }) != 0 {
                throw JobError(
                    code: "invalid_params",
                    message: "cannot read the ID file \(idsFile): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Refuses an ID file that is not a regular file: reading a FIFO or a device would block a pool thread for
    /// good (and `/dev/zero` never ends), and the daemon's own stdin is not the user's.
    static func checkRegularFile(_ path: BytePath, what: String = "ID file") throws(JobError) {
        var info = stat()
        guard !path.containsNUL, path.withCString({ stat($0, &info) }) == 0 else {
            throw JobError(
                code: "source_missing", message: "cannot read the \(what) \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw JobError(
                code: "source_not_regular", message: "the \(what) \(path) is not a regular file; give a file")
        }
    }

    /// The stable IDs of an `ids` or `ids_file` selection, compactly (1 000 000 IDs from a 37 MB file take
    /// 36 MB); `nil` for `all`. Reads and parses the file on the thread pool when the kind allows it, else on
    /// the loop.
    ///
    /// - Throws: `JobError` `source_missing` if the file cannot be read.
    @LoopActor
    public func stableIDs(in job: JobContext) async throws -> StableIDList? {
        if let ids { return StableIDList(ids) }
        guard let idsFile else { return nil }
        try Self.checkRegularFile(idsFile)
        let read: @Sendable () throws -> StableIDList = {
            StableIDList(fileContents: try PhotoFile.read(path: idsFile, maxBytes: 1 << 30).bytes)
        }
        do {
            return try await job.runOnPool(read)
        } catch let error as PhotoLibraryError {
            throw JobError(code: "source_missing", message: "cannot read the ID file: \(error.message)")
        }
    }
}

/// One batch of a selection, as local IDs plus the inputs that named no photo.
struct SelectedBatch {
    var localIDs: [PhotoLocalID]
    var unknown: [String]
    /// Inputs consumed (stable IDs for `ids`, photos for `all`): what progress counts.
    var consumed: Int
    /// The cursor after this batch: an index into the ID list, or the last local ID for `all`.
    var nextCursor: Int64
}

extension PhotoStore {
    /// The next batch of at most `size` photos of a selection, from `cursor`.
    ///
    /// With a list of stable IDs: resolves entries `cursor ..< cursor + size` (one index probe each). With `nil` (`all`): the
    /// local IDs after `cursor` in order, from the primary key alone.
    func batch(of ids: StableIDList?, from cursor: Int64, size: Int) throws(PhotoLibraryError) -> SelectedBatch? {
        if let ids {
            let start = Int(cursor)
            guard start < ids.count else { return nil }
            let end = min(ids.count, start + size)
            let resolved = try resolve(ids, in: start..<end)
            return SelectedBatch(
                localIDs: resolved.localIDs, unknown: resolved.unknown, consumed: end - start, nextCursor: Int64(end))
        }
        let rows: [Row]
        do {
            rows = try database.query(
                "SELECT id FROM photos WHERE id > ? ORDER BY id LIMIT ?", [.integer(cursor), .integer(Int64(size))])
        } catch {
            throw PhotoLibraryError(.store, error.description)
        }
        let local = rows.compactMap { $0.int(0) }
        guard let last = local.last else { return nil }
        return SelectedBatch(localIDs: local, unknown: [], consumed: local.count, nextCursor: last)
    }

    /// Units in a selection: the number of IDs listed, or the photos in the library for `all`.
    func selectionTotal(_ ids: StableIDList?) throws(PhotoLibraryError) -> Int64 {
        if let ids { return Int64(ids.count) }
        return Int64(try count())
    }
}
