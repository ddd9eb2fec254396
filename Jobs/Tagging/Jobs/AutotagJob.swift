import PhotoLibrary
import TrailbookEngine
import TrailbookSQLite

/// Job kind `autotag`: analyses photos on the device and writes the namespaced tags of `AutoTags` (capture year
/// and month, camera, nearest place, aspect, `night`, dominant colour, `unreadable`) plus `duplicate-of:<stable
/// id>` for a near-duplicate (perceptual hash within `PerceptualHash.nearDuplicateDistance` bits) of an earlier
/// imported photo.
///
/// Each photo's file is decoded in a worker process (`photo.inspect` with pixels): a crash or hang there costs
/// that photo (tag `unreadable`, listed in the result), never the daemon. Results are applied in the daemon:
/// per batch, the tags, the hashes and the job's checkpoint commit in one transaction of the photo store, so a
/// resumed job continues after the last committed batch. A re-run replaces only the tags autotag owns
/// (`AutoTags.isManaged`); a person's own keywords stay.
///
/// Params: one of `ids` / `ids_file` / `all`, and `places` (a `name,lat,lon` CSV to use instead of the bundled
/// table). Result: `photos`, `tagged`, `unknown_count`, `unknown_first`, `duplicates`, `unreadable_count` and
/// `unreadable` (the first 1000: id, path, code and message; the code is the photo library's — `truncated`,
/// `too_large`, `empty`, … — or `worker_crashed` / `worker_timeout`). Progress unit: photos.
public struct AutotagJob: JobKind {
    /// Parameters, as submitted.
    public struct Params: Codable, Sendable {
        /// Which photos.
        public var selection: PhotoSelection
        /// A user's places table (CSV `name,lat,lon`), absolute path.
        public var places: String?

        enum CodingKeys: String, CodingKey { case places }

        /// Decodes the flat params object (`places` plus the selection keys).
        public init(from decoder: any Decoder) throws {
            places = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .places)
            selection = try PhotoSelection(from: decoder)
        }

        /// Encodes the flat params object.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(places, forKey: .places)
            try selection.encode(to: encoder)
        }
    }

    struct Bad: Codable {
        var id: String
        var path: String
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
        var finished = false
    }

    /// `autotag`.
    public static let name = "autotag"
    /// Progress in photos; long-running; decodes in worker processes, reads ID files on the thread pool.
    public static let traits = JobKindTraits(
        unit: .photos, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool, .workerProcess])

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
        if checkpoint.finished { return Self.result(checkpoint) }
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
                task: InspectPhotoTask.name, records.map { ["path": .string($0.path), "pixels": true] })
            checkpoint = try PhotoLibraryService.commit(checkpoint, job: job.id, in: store, what: "an autotag batch") {
                tx, next in
                for (record, answer) in zip(records, answers) {
                    var tags: [String]
                    switch answer.flatMap({ value in
                        Result { try JSONCoding.convert(value, to: PhotoInspection.self) }
                            .mapError { JobError(code: "bad_answer", message: "\($0)") }
                    }) {
                    case .success(let inspection):
                        tags = AutoTags.tags(
                            metadata: inspection.metadata, pixels: inspection.pixels, places: places)
                        if let pixels = inspection.pixels {
                            let hash = pixels.perceptualHash
                            try store.setPerceptualHash(hash, for: record.localID)
                            if let twin = try store.nearestDuplicate(of: hash, importedBefore: record.localID) {
                                tags.append("duplicate-of:" + twin.stableID.text)
                                next.duplicates += 1
                            }
                        } else {
                            let reason = inspection.pixelError ?? "undecodable: pixels not decodable"
                            let code =
                                reason.split(separator: ":", maxSplits: 1).first.map(String.init) ?? "undecodable"
                            Self.noteUnreadable(&next, record, code: code, reason)
                        }
                    case .failure(let error):
                        tags = ["unreadable"]
                        Self.noteUnreadable(&next, record, code: error.code, error.message)
                    }
                    try tx.replaceTags(of: record.localID, with: tags, where: AutoTags.isManaged)
                    next.tagged += 1
                }
                next.advance(past: batch, missing: batch.localIDs.count - records.count)
            }
            job.reportProgress(
                completed: checkpoint.processed, total: max(checkpoint.total, checkpoint.processed),
                current: records.last?.path)
        }
        checkpoint.finished = true
        checkpoint = try PhotoLibraryService.commit(checkpoint, job: job.id, in: store, what: "the end of the job")
        return Self.result(checkpoint)
    }

    static func noteUnreadable(_ checkpoint: inout Checkpoint, _ record: PhotoRecord, code: String, _ message: String) {
        checkpoint.unreadableCount += 1
        if checkpoint.unreadable.count < 1_000 {
            checkpoint.unreadable.append(Bad(id: record.stableID.text, path: record.path, code: code, message: message))
        }
    }

    /// Drops the job's checkpoint from the photo store: the job store now holds its end and result.
    public func jobEnded(id: String, state: JobState) {
        library.forgetCheckpoint(job: id)
    }

    static func result(_ checkpoint: Checkpoint) -> JSONValue {
        [
            "photos": .number(checkpoint.processed), "tagged": .number(checkpoint.tagged),
            "duplicates": .number(checkpoint.duplicates), "unknown_count": .number(checkpoint.unknownCount),
            "unknown_first": .array(checkpoint.unknownFirst.map { .string($0) }),
            "unreadable_count": .number(checkpoint.unreadableCount),
            "unreadable": JSONCoding.value(of: checkpoint.unreadable),
        ]
    }
}
