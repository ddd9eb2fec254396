import PhotoLibrary
import TrailbookEngine
import TrailbookSQLite

/// Job kind `tag`: adds (or with `remove`, takes off) one keyword on photos chosen by stable ID.
///
/// Identifiers only: for each stable ID the job probes the unique `stable_id` index for the local ID, then sets
/// the photo's bit in the tag's bitmap (one row per 64 local IDs, see `PhotoStore`); it never reads a photo's
/// metadata. It works in batches of
/// `batchSize` (5000) photos, and each batch's tag writes and the job's checkpoint (in the photo store's
/// `job_checkpoints` table) commit in one SQLite transaction, so after a crash (`kill -9`) the job resumes after
/// the last committed batch: no photo is tagged twice and none is skipped, and the counts stay exact.
///
/// Params: `tag`, one of `ids` / `ids_file` / `all` (see `PhotoSelection`), `remove` (default false), `max_rate`
/// (photos per second, optional: paces the job, for background work that should leave the disk to others).
/// Result: `tag`, `remove`, `photos` (inputs processed), `tagged` and `already_had` (photos that got the tag,
/// photos that had it) — with `remove`, `removed` and `did_not_have` instead — `unknown_count` and
/// `unknown_first` (the first `StableIDList.listedUnknownIDs` IDs that name no photo). Progress unit: photos.
///
/// Cancellation: `user_stop` keeps the tags of batches already committed and stops within one batch;
/// `timeout` and `resource_reclaim` resume from the checkpoint.
public struct TagJob: JobKind {
    /// Parameters, as submitted.
    public struct Params: Codable, Sendable {
        /// The keyword (any text without control characters, at most 200 bytes).
        public var tag: String
        /// Take the tag off instead of adding it.
        public var remove: Bool?
        /// Benchmark switch: load every photo's full record (metadata and tags) before tagging it, the
        /// "array of entities" way; off by default, and slower by design.
        public var loadRecords: Bool?
        /// At most this many photos per second (≥ 1), on average; `nil`: as fast as the store goes.
        public var maxRate: Int64?
        /// Which photos.
        public var selection: PhotoSelection
        /// Write the change to each photo's XMP sidecar too; `nil`: the daemon's default (`daemon --xmp`).
        public var xmp: Bool?
        /// The sidecars' naming; `nil`: the daemon's default (darktable, `IMG_0001.jpg.xmp`).
        public var xmpNaming: XMPSidecarNaming?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case tag, remove, xmp
            case loadRecords = "load_records"
            case maxRate = "max_rate"
            case xmpNaming = "xmp_naming"
        }

        /// Decodes the flat params object (`tag`, `remove`, `load_records`, `max_rate` plus the selection keys).
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            tag = try container.decode(String.self, forKey: .tag)
            remove = try container.decodeIfPresent(Bool.self, forKey: .remove)
            loadRecords = try container.decodeIfPresent(Bool.self, forKey: .loadRecords)
            maxRate = try container.decodeIfPresent(Int64.self, forKey: .maxRate)
            xmp = try container.decodeIfPresent(Bool.self, forKey: .xmp)
            xmpNaming = try container.decodeIfPresent(XMPSidecarNaming.self, forKey: .xmpNaming)
            selection = try PhotoSelection(from: decoder)
        }

        /// Encodes the flat params object.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(tag, forKey: .tag)
            try container.encodeIfPresent(remove, forKey: .remove)
            try container.encodeIfPresent(loadRecords, forKey: .loadRecords)
            try container.encodeIfPresent(maxRate, forKey: .maxRate)
            try container.encodeIfPresent(xmp, forKey: .xmp)
            try container.encodeIfPresent(xmpNaming, forKey: .xmpNaming)
            try selection.encode(to: encoder)
        }
    }

    /// The checkpoint kept in the photo store, committed with each batch.
    struct Checkpoint: PhotoBatchCheckpoint {
        var cursor: Int64 = 0
        var processed: Int64 = 0
        var total: Int64 = 0
        var changed = 0
        var unchanged = 0
        var unknownCount = 0
        var unknownFirst: [String] = []
        var finished = false
        /// XMP sidecars written, and the last batch's still pending (only for a job that writes them).
        var xmp: XMPSidecarTally?
    }

    /// `tag`.
    public static let name = "tag"
    /// Its own members and the selection's (flat): any other is refused at submit (`invalid_params`).
    public static var paramsMembers: [String: [String]]? {
        ["": Params.CodingKeys.allCases.map(\.rawValue) + PhotoSelection.CodingKeys.allCases.map(\.rawValue)]
    }
    /// Progress in photos; long-running; writes on the daemon loop, reads ID files on the thread pool.
    /// Writes the library (and sidecars) of the submitting host: pinned to it on a shared store.
    public static let traits = JobKindTraits(
        unit: .photos, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool], readsHostFiles: true)

    /// Photos per batch (and per transaction). 5000 photos take about 10 ms on the ID-only path and 0.1 s when
    /// loading records (bench/README.md), so `user_stop` still lands within a fraction of a second, and the fixed
    /// cost of a commit is spread thinner than at 1000 (the ID-only job ran about 1.25x faster).
    public static let batchSize = 5_000

    /// Photos per batch for a job paced to `maxRate` photos per second: a tenth of a second's worth (at least 1,
    /// at most `batchSize`), so a paced job's progress moves smoothly and it stops as promptly as an unpaced one.
    public static func batchSize(maxRate: Int64?) -> Int {
        guard let maxRate else { return batchSize }
        return Int(min(Int64(batchSize), max(1, maxRate / 10)))
    }

    let library: PhotoLibraryService

    /// A `tag` kind working on `library`.
    public init(library: PhotoLibraryService) {
        self.library = library
    }

    /// Checks the tag's spelling and the selection.
    ///
    /// - Throws: `JobError` `invalid_params`.
    public func validate(_ params: Params) async throws(JobError) {
        do {
            _ = try TagName.validated(params.tag)
        } catch {
            throw JobError(code: "invalid_params", message: "bad tag: \(error.message)")
        }
        if let rate = params.maxRate, rate < 1 {
            throw JobError(code: "invalid_params", message: "max_rate must be at least 1 photo per second, not \(rate)")
        }
        try params.selection.validate()
    }

    /// Tags the selection batch by batch, from the checkpoint in the photo store.
    ///
    /// - Throws: `JobError` `photo_store_error` (retryable), `source_missing`; `JobStopped` when stopped.
    public func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        let store = try library.store()
        let tag: String
        do { tag = try TagName.validated(params.tag) } catch { throw error.jobError }
        var checkpoint = try library.checkpoint(job: job.id, as: Checkpoint.self) ?? Checkpoint()
        if checkpoint.finished {
            return Self.result(checkpoint, params, sidecars: library.xmpDefaults.naming(xmp: params.xmp, naming: params.xmpNaming))
        }
        let ids = try await params.selection.stableIDs(in: job)
        if checkpoint.processed == 0 {
            do { checkpoint.total = try store.selectionTotal(ids) } catch { throw error.jobError }
        }
        job.reportProgress(completed: checkpoint.processed, total: checkpoint.total)
        let change: TagChange = params.remove == true ? .remove : .add
        let size = Self.batchSize(maxRate: params.maxRate)
        let sidecars = library.xmpDefaults.naming(xmp: params.xmp, naming: params.xmpNaming)
        if let sidecars {
            // A crash may have come between the last commit and its sidecar writes: those first.
            var tally = checkpoint.xmp ?? XMPSidecarTally()
            try await tally.writePending(naming: sidecars, in: job)
            checkpoint.xmp = tally
        }
        var pacer = params.maxRate.map { RatePacer(unitsPerSecond: $0) }
        while true {
            try job.checkCancellation()
            if let wait = pacer?.delay(before: size, now: Timestamp.monotonic()), wait > 0 {
                try await job.sleep(seconds: wait)
            }
            let next =
                if let ids {
                    try listedBatch(of: ids, size: size, tag, change, after: checkpoint,
                        loadRecords: params.loadRecords == true, sidecars: sidecars != nil, job: job.id, in: store)
                } else {
                    try libraryBatch(size: size, tag, change, after: checkpoint,
                        loadRecords: params.loadRecords == true, sidecars: sidecars != nil, job: job.id, in: store)
                }
            guard let next else { break }
            checkpoint = next
            if let sidecars { try await checkpoint.xmp?.writePending(naming: sidecars, in: job) }
            job.reportProgress(completed: checkpoint.processed, total: max(checkpoint.total, checkpoint.processed))
            // Let the control socket and the feed run between batches: a loop turn (`Task.yield()` would send
            // the task through Swift's global executor and back).
            await Scheduler.nextTurn()
        }
        checkpoint.finished = true
        checkpoint = try PhotoLibraryService.commit(checkpoint, job: job.id, in: store, what: "the end of the job")
        return Self.result(checkpoint, params, sidecars: sidecars)
    }

    /// Tags the next `size` entries of a list of stable IDs (`ids`, `ids_file`) and commits them with the
    /// checkpoint; `nil` when the list is done. Each entry costs one index probe; the tag costs one bitmap-word
    /// write per 64 local IDs, in the same transaction.
    private func listedBatch(
        of ids: StableIDList, size: Int, _ tag: String, _ change: TagChange, after checkpoint: Checkpoint, loadRecords: Bool,
        sidecars: Bool, job: String, in store: PhotoStore
    ) throws(JobError) -> Checkpoint? {
        let start = Int(checkpoint.cursor)
        guard start < ids.count else { return nil }
        let range = start..<min(ids.count, start + size)
        if loadRecords {
            for index in range {
                guard let id = ids.stableID(at: index) else { continue }
                do { _ = try store.photo(stableID: id) } catch { throw error.jobError }
            }
        }
        let pending: [XMPSidecarChange]
        do {
            pending = sidecars ? Self.sidecarChanges(try store.paths(of: try store.resolve(ids, in: range).localIDs), tag, change) : []
        } catch {
            throw error.jobError
        }
        return try PhotoLibraryService.commit(checkpoint, job: job, in: store, what: "a tag batch") { tx, next in
            if sidecars { next.xmp = next.xmp ?? XMPSidecarTally() }
            next.xmp?.pending = pending
            let outcome = try tx.changeTag(tag, change, of: ids, in: range)
            next.changed += outcome.changed
            next.unchanged += outcome.unchanged
            next.advance(
                consumed: range.count, unknownCount: outcome.unknown.count,
                unknownFirst: outcome.unknown.prefix(StableIDList.listedUnknownIDs).map { ids.text(at: $0) },
                to: Int64(range.upperBound))
        }
    }

    /// Tags the next `size` photos of the whole library (`all`), by local ID, and commits them with the
    /// checkpoint; `nil` when every photo is done.
    private func libraryBatch(
        size: Int, _ tag: String, _ change: TagChange, after checkpoint: Checkpoint, loadRecords: Bool, sidecars: Bool,
        job: String, in store: PhotoStore
    ) throws(JobError) -> Checkpoint? {
        let selected: SelectedBatch?
        do { selected = try store.batch(of: nil, from: checkpoint.cursor, size: size) } catch {
            throw error.jobError
        }
        guard let batch = selected else { return nil }
        if loadRecords {
            for id in batch.localIDs {
                do { _ = try store.photo(localID: id) } catch { throw error.jobError }
            }
        }
        let pending: [XMPSidecarChange]
        do { pending = sidecars ? Self.sidecarChanges(try store.paths(of: batch.localIDs), tag, change) : [] } catch {
            throw error.jobError
        }
        return try PhotoLibraryService.commit(checkpoint, job: job, in: store, what: "a tag batch") { tx, next in
            if sidecars { next.xmp = next.xmp ?? XMPSidecarTally() }
            next.xmp?.pending = pending
            let counts = try tx.changeTag(tag, change, of: batch.localIDs)
            next.changed += counts.changed
            next.unchanged += counts.unchanged
            next.advance(past: batch, missing: counts.missing)
        }
    }

    /// Drops the job's checkpoint from the photo store: the job store now holds its end and result.
    public func jobEnded(id: String, state: JobState) {
        library.forgetCheckpoint(job: id)
    }

    /// Drops pruned jobs' checkpoints that `jobEnded` left behind (a crash in between).
    public func jobsPruned(ids: [String]) {
        library.forgetCheckpoints(jobs: ids)
    }

    /// The sidecar change of each photo at `paths`: hold `tag`, or drop it.
    static func sidecarChanges(_ paths: [BytePath], _ tag: String, _ change: TagChange) -> [XMPSidecarChange] {
        paths.map { XMPSidecarChange(path: $0, add: change == .add ? [tag] : [], remove: change == .remove ? [tag] : []) }
    }

    static func result(_ checkpoint: Checkpoint, _ params: Params, sidecars: XMPSidecarNaming?) -> JSONValue {
        let removing = params.remove == true
        var result: [String: JSONValue] = [
            "tag": .string(params.tag), "remove": .bool(removing), "photos": .number(checkpoint.processed),
            (removing ? "removed" : "tagged"): .number(checkpoint.changed),
            (removing ? "did_not_have" : "already_had"): .number(checkpoint.unchanged),
            "unknown_count": .number(checkpoint.unknownCount),
            "unknown_first": .array(checkpoint.unknownFirst.map { .string($0) }),
        ]
        if let sidecars { result["xmp"] = (checkpoint.xmp ?? XMPSidecarTally()).result(naming: sidecars) }
        return .object(result)
    }
}
