import PhotoLibrary
import TrailbookEngine
import TrailbookSQLite

/// Job kind `autotag`: analyses photos on the device and writes the namespaced tags of `AutoTags` (capture year
/// and month, camera, nearest place, aspect, `night`, dominant colour, `unreadable`) plus `duplicate-of:<stable
/// id>` for a near-duplicate (perceptual hash within `PerceptualHash.nearDuplicateDistance` bits) of an earlier
/// imported photo.
///
/// Each photo's file is decoded in a worker process (`photo.inspect` with pixels): a crash there costs that photo
/// (tag `unreadable`, listed in the result), never the daemon. A failure that may pass on another try (the worker
/// timed out on a slow or leased file, an I/O error, no worker) changes nothing on the photo: its tags stay, and it
/// is listed in `retryable` for `submit autotag --retry JOB`. Results are applied in the daemon:
/// per batch, the tags, the hashes and the job's checkpoint commit in one transaction of the photo store, so a
/// resumed job continues after the last committed batch. A re-run replaces only the tags autotag owns
/// (`AutoTags.isManaged`); a person's own keywords stay.
///
/// Params: one of `ids` / `ids_file` / `all`, and `places` (a `name,lat,lon` CSV to use instead of the bundled
/// table). Result: `photos`, `tagged`, `unknown_count`, `unknown_first`, `duplicates`, `unreadable_count`,
/// `unreadable` (the first 1000: id, path, code and message; the code is the photo library's — `truncated`,
/// `too_large`, `empty`, … — or `worker_crashed`), `retryable_count` and `retryable` (the first 1000 likewise:
/// `worker_timeout`, `io`, `worker_unavailable`). Progress unit: photos.
public struct AutotagJob: JobKind {
    /// Parameters, as submitted.
    public struct Params: Codable, Sendable {
        /// Which photos.
        public var selection: PhotoSelection
        /// A user's places table (CSV `name,lat,lon`), absolute path, its exact bytes.
        public var places: BytePath?
        /// Write each photo's tag changes to its XMP sidecar too; `nil`: the daemon's default (`daemon --xmp`).
        public var xmp: Bool?
        /// The sidecars' naming; `nil`: the daemon's default (darktable, `IMG_0001.jpg.xmp`).
        public var xmpNaming: XMPSidecarNaming?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case places, xmp
            case xmpNaming = "xmp_naming"
        }

        /// Decodes the flat params object (`places`, `xmp`, `xmp_naming` plus the selection keys).
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            places = try container.decodeIfPresent(BytePath.self, forKey: .places)
            xmp = try container.decodeIfPresent(Bool.self, forKey: .xmp)
            xmpNaming = try container.decodeIfPresent(XMPSidecarNaming.self, forKey: .xmpNaming)
            selection = try PhotoSelection(from: decoder)
        }

        /// Encodes the flat params object.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(places, forKey: .places)
            try container.encodeIfPresent(xmp, forKey: .xmp)
            try container.encodeIfPresent(xmpNaming, forKey: .xmpNaming)
            try selection.encode(to: encoder)
        }
    }

    struct Bad: Codable {
        var id: String
        /// The photo's exact path (JSON: a string, or `{"base64", "text"}` when not UTF-8).
        var path: BytePath
        var code: String
        var message: String
    }

    struct Checkpoint: PhotoBatchCheckpoint {
        var cursor: Int64 = 0
        var processed: Int64 = 0
        var total: Int64 = 0
        var tagged = 0
        var duplicates = 0
        var unknownCount = 0
        var unknownFirst: [String] = []
        var unreadableCount = 0
        var unreadable: [Bad] = []
        var retryableCount = 0
        var retryable: [Bad] = []
        var finished = false
        /// XMP sidecars written, and the last batch's still pending (only for a job that writes them).
        var xmp: XMPSidecarTally?

        init() {}

        /// Reads checkpoints saved before `retryable` existed too.
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            cursor = try c.decode(Int64.self, forKey: .cursor)
            processed = try c.decode(Int64.self, forKey: .processed)
            total = try c.decode(Int64.self, forKey: .total)
            tagged = try c.decode(Int.self, forKey: .tagged)
            duplicates = try c.decode(Int.self, forKey: .duplicates)
            unknownCount = try c.decode(Int.self, forKey: .unknownCount)
            unknownFirst = try c.decode([String].self, forKey: .unknownFirst)
            unreadableCount = try c.decode(Int.self, forKey: .unreadableCount)
            unreadable = try c.decode([Bad].self, forKey: .unreadable)
            retryableCount = try c.decodeIfPresent(Int.self, forKey: .retryableCount) ?? 0
            retryable = try c.decodeIfPresent([Bad].self, forKey: .retryable) ?? []
            finished = try c.decode(Bool.self, forKey: .finished)
            xmp = try c.decodeIfPresent(XMPSidecarTally.self, forKey: .xmp)
        }
    }

    /// `autotag`.
    public static let name = "autotag"
    /// Its own members and the selection's (flat): any other is refused at submit (`invalid_params`).
    public static var paramsMembers: [String: [String]]? {
        ["": Params.CodingKeys.allCases.map(\.rawValue) + PhotoSelection.CodingKeys.allCases.map(\.rawValue)]
    }
    /// Progress in photos; long-running; decodes in worker processes, reads ID files on the thread pool.
    /// Reads the photos and the library of the submitting host: pinned to it on a shared store.
    public static let traits = JobKindTraits(
        unit: .photos, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool, .workerProcess],
        readsHostFiles: true)

    /// Photos per batch: sent to the workers together, committed together.
    public static let batchSize = 16

    let library: PhotoLibraryService

    /// An `autotag` kind working on `library`.
    public init(library: PhotoLibraryService) {
        self.library = library
    }

    /// Checks the selection and loads the places file, so a bad one is refused at submit.
    ///
    /// - Throws: `JobError` `invalid_params`.
    public func validate(_ params: Params) async throws(JobError) {
        try params.selection.validate()
        if let places = params.places {
            try PhotoSelection.checkRegularFile(places, what: "places file")
            do { _ = try PlaceTable.load(csvAt: places) } catch {
                throw JobError(code: "invalid_params", message: "bad places file: \(error.message)")
            }
        }
    }

    /// Tags the selection batch by batch, from the checkpoint in the photo store.
    ///
    /// - Throws: `JobError` `photo_store_error` (retryable), `invalid_params`, `execution_target_not_allowed`;
    ///   `JobStopped` when stopped. A bad photo is never an error of the job.
    public func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        let store = try library.store()
        var places = PlaceTable.bundled
        do {
            if let path = params.places { places = try PlaceTable.load(csvAt: path) }
        } catch {
            throw JobError(code: "invalid_params", message: "bad places file: \(error.message)")
        }
        var checkpoint = try library.checkpoint(job: job.id, as: Checkpoint.self) ?? Checkpoint()
        let sidecars = library.xmpDefaults.naming(xmp: params.xmp, naming: params.xmpNaming)
        if checkpoint.finished { return Self.result(checkpoint, sidecars: sidecars) }
        if let sidecars {
            // A crash may have come between the last commit and its sidecar writes: those first.
            var tally = checkpoint.xmp ?? XMPSidecarTally()
            try await tally.writePending(naming: sidecars, in: job)
            checkpoint.xmp = tally
        }
        let ids = try await params.selection.stableIDs(in: job)
        if checkpoint.processed == 0 {
            do { checkpoint.total = try store.selectionTotal(ids) } catch { throw error.jobError }
        }
        job.reportProgress(completed: checkpoint.processed, total: checkpoint.total)
        while true {
            try job.checkCancellation()
            let selected: SelectedBatch?
            var records: [PhotoRecord] = []
            do {
                selected = try store.batch(of: ids, from: checkpoint.cursor, size: Self.batchSize)
                for id in selected?.localIDs.sorted() ?? [] {
                    if let record = try store.photo(localID: id) { records.append(record) }
                }
            } catch {
                throw error.jobError
            }
            guard let batch = selected else { break }
            let answers = try await job.runInWorkers(
                task: InspectPhotoTask.name, records.map { ["path": $0.path.json, "pixels": true] })
            checkpoint = try PhotoLibraryService.commit(checkpoint, job: job.id, in: store, what: "an autotag batch") {
                tx, next in
                next.xmp?.pending = []
                for (record, answer) in zip(records, answers) {
                    var tags: [String]
                    var warnings: [String]
                    switch answer.flatMap({ value in
                        Result { try JSONCoding.convert(value, to: PhotoInspection.self) }
                            .mapError { JobError(code: "bad_answer", message: "\($0)") }
                    }) {
                    case .success(let inspection):
                        tags = AutoTags.tags(
                            metadata: inspection.metadata, pixels: inspection.pixels, places: places)
                        warnings = inspection.warnings
                        if let pixels = inspection.pixels {
                            // A hash with too little detail (flat, plain gradient) is no evidence: it is neither
                            // searched with nor kept where a later photo could find it.
                            let hash = pixels.hashIsEvidence ? pixels.perceptualHash : nil
                            try store.setPerceptualHash(hash, for: record.localID)
                            if let hash, let twin = try store.nearestDuplicate(of: hash, importedBefore: record.localID) {
                                tags.append("duplicate-of:" + twin.stableID.text)
                                next.duplicates += 1
                            }
                        } else {
                            Self.note(
                                &next.unreadable, &next.unreadableCount, record,
                                code: inspection.pixelErrorCode ?? "corrupt",
                                inspection.pixelError ?? "the pixels did not decode")
                        }
                    case .failure(let error) where Self.mayPass(error.code):
                        // Nothing learnt about the photo: what it had stays, and it can be tried again alone.
                        Self.note(&next.retryable, &next.retryableCount, record, code: error.code, error.message)
                        continue
                    case .failure(let error):
                        tags = ["unreadable"]
                        warnings = ["unreadable (\(error.code)): " + error.message]
                        Self.note(&next.unreadable, &next.unreadableCount, record, code: error.code, error.message)
                    }
                    try tx.replaceTags(of: record.localID, with: tags, where: AutoTags.isManaged)
                    if sidecars != nil {
                        // The sidecar gets what this run changed: its tags, and the managed tags it took off.
                        let dropped = record.tags.filter { AutoTags.isManaged($0) && !tags.contains($0) }
                        next.xmp?.pending.append(XMPSidecarChange(path: record.path, add: tags, remove: dropped))
                    }
                    try store.setWarnings(warnings, for: record.localID)
                    next.tagged += 1
                }
                next.advance(past: batch, missing: batch.localIDs.count - records.count)
            }
            if let sidecars { try await checkpoint.xmp?.writePending(naming: sidecars, in: job) }
            job.reportProgress(
                completed: checkpoint.processed, total: max(checkpoint.total, checkpoint.processed),
                current: records.last?.path.description)
        }
        checkpoint.finished = true
        checkpoint = try PhotoLibraryService.commit(checkpoint, job: job.id, in: store, what: "the end of the job")
        return Self.result(checkpoint, sidecars: sidecars)
    }

    /// Counts a photo in `count` and lists it in `list` while that holds fewer than `listLimit`.
    static func note(_ list: inout [Bad], _ count: inout Int, _ record: PhotoRecord, code: String, _ message: String) {
        count += 1
        if list.count < listLimit {
            list.append(Bad(id: record.stableID.text, path: record.path, code: code, message: message))
        }
    }

    /// How many unreadable (and retryable) photos the result lists in full; the counts are always exact.
    public static let listLimit = 1_000

    /// Error codes of a failure that may pass on another try, so it must not change what is known of the photo:
    /// the worker ran past its time limit (a slow disk, a file under another process's lease), the file could not
    /// be opened or read (`io`: EIO, EAGAIN, a network file system gone for a while), or there was no worker.
    /// A crash (twice, in fresh workers) or a decoder's verdict on the bytes is final: `unreadable`.
    public static let retryableCodes: Set<String> = ["worker_timeout", "worker_unavailable", "io"]

    /// Whether a failure with `code` may pass on another try (`retryableCodes`).
    public static func mayPass(_ code: String) -> Bool { retryableCodes.contains(code) }

    /// Drops the job's checkpoint from the photo store: the job store now holds its end and result.
    public func jobEnded(id: String, state: JobState) {
        library.forgetCheckpoint(job: id)
    }

    /// Drops pruned jobs' checkpoints that `jobEnded` left behind (a crash in between).
    public func jobsPruned(ids: [String]) {
        library.forgetCheckpoints(jobs: ids)
    }

    static func result(_ checkpoint: Checkpoint, sidecars: XMPSidecarNaming?) -> JSONValue {
        var result: [String: JSONValue] = [
            "photos": .number(checkpoint.processed), "tagged": .number(checkpoint.tagged),
            "duplicates": .number(checkpoint.duplicates), "unknown_count": .number(checkpoint.unknownCount),
            "unknown_first": .array(checkpoint.unknownFirst.map { .string($0) }),
            "unreadable_count": .number(checkpoint.unreadableCount),
            "unreadable": JSONCoding.value(of: checkpoint.unreadable),
            "retryable_count": .number(checkpoint.retryableCount),
            "retryable": JSONCoding.value(of: checkpoint.retryable),
        ]
        if let sidecars { result["xmp"] = (checkpoint.xmp ?? XMPSidecarTally()).result(naming: sidecars) }
        return .object(result)
    }
}
