import PhotoLibrary
import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Job kind `import`: adds the photos (JPEG, HEIC/HEIF, AVIF; see `PhotoScan`, `PhotoFormat`) under a directory to
/// the photo library (`photos import DIR`).
///
/// Walks the tree (`PhotoScan`, on the thread pool), skips files whose size, mtime and inode match the stored
/// row, reads the others' EXIF metadata and stable ID in worker processes (`photo.inspect`, the file's bytes are
/// untrusted) and upserts them in the daemon, the store's single writer. Progress unit: files. The checkpoint is
/// the number of files of the (stably ordered) walk done, saved after each batch; a resumed import skips
/// those and, for any file done but not checkpointed, the unchanged-file check makes the redo free.
///
/// Params: `dir` (absolute path). Result: `files`, `inserted`, `updated`, `unchanged`, `same_content` (bytes
/// already in the library at another path), `failed` and `failures` (the first 50: path, code, message).
/// Paths are bytes (`BytePath`): a file whose name is not UTF-8 is imported like any other, and every path in the
/// params, the worker payload and the result is a string, or `{"base64", "text"}` for a name that is not UTF-8.
/// A file that cannot be read is a failure in the result, never the job's. Nothing is passed over in silence:
/// `skipped` counts every entry the walk did not import (`PhotoScan.Skip.Reason`: `not_photo_name`, `hidden`,
/// `not_regular`, `unreadable`, `unreadable_directory`, `already_visited`), `skipped_by_reason` counts them per
/// reason and `skips` lists the first 50 (`path` — a `BytePath` as above —, `reason`, `detail`).
public struct ImportJob: JobKind {
    /// Parameters, as submitted.
    public struct Params: Codable, Sendable {
        /// The directory to import, absolute (its exact bytes).
        public var dir: BytePath

        enum CodingKeys: String, CodingKey, CaseIterable { case dir }
    }

    struct Checkpoint: Codable {
        var done = 0
        var inserted = 0
        var updated = 0
        var unchanged = 0
        var sameContent = 0
        var failed = 0
        var failures: [Failure] = []
        /// Keywords found in the files' XMP (embedded, sidecars) that became tags, counted per photo and keyword.
        var keywords: Int?
    }

    struct Failure: Codable {
        var path: BytePath
        var code: String
        var message: String
    }

    /// `import`.
    public static let name = "import"
    /// `dir` only: any other member is refused at submit (`invalid_params`).
    public static var paramsMembers: [String: [String]]? { ["": Params.CodingKeys.allCases.map(\.rawValue)] }
    /// Progress in files; long-running; walks on the thread pool and reads files in worker processes.
    /// Scans the submitting host's folders into its library: pinned to it on a shared store.
    public static let traits = JobKindTraits(
        unit: .files, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool, .workerProcess],
        readsHostFiles: true)

    /// Files sent to the workers at once (a few per worker keeps both busy).
    public static let batchSize = 8

    let library: PhotoLibraryService

    /// An `import` kind writing to `library`.
    public init(library: PhotoLibraryService) {
        self.library = library
    }

    /// Checks that `dir` is an absolute path to a directory.
    ///
    /// - Throws: `JobError` `source_missing`.
    public func validate(_ params: Params) async throws(JobError) {
        guard params.dir.isAbsolute else {
            throw JobError(code: "source_missing", message: "\(params.dir) is not an absolute path; give the folder's full path")
        }
        guard !params.dir.containsNUL else {
            throw JobError(code: "source_missing", message: "\(params.dir) holds a NUL byte, which no path can; give the folder's path")
        }
        var info = stat()
        guard params.dir.withCString({ stat($0, &info) }) == 0 else {
            throw JobError(
                code: "source_missing",
                message: "cannot import \(params.dir): \(String(cString: strerror(errno))); give a folder of photos")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw JobError(
                code: "source_missing",
                message: "\(params.dir) is a file, not a folder; import the folder that holds it (photos import DIR)")
        }
    }

    /// Imports the tree, from the checkpoint.
    ///
    /// - Throws: `JobError` `source_missing`, `photo_store_error` (retryable); `JobStopped` when stopped. A file
    ///   that cannot be read is a failure in the result, not of the job.
    public func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        try await validate(params)
        let store = try library.store()
        let root = params.dir
        let (files, skips) = try await job.runOnPool { () -> ([PhotoScan.File], [PhotoScan.Skip]) in
            var skips: [PhotoScan.Skip] = []
            let files = Array(PhotoScan(root: root, passedOver: { skips.append($0) }))
            return (files, skips)
        }
        var checkpoint = try job.loadCheckpoint(as: Checkpoint.self) ?? Checkpoint()
        job.reportProgress(completed: Int64(checkpoint.done), total: Int64(files.count))
        while checkpoint.done < files.count {
            try job.checkCancellation()
            let batch = files[checkpoint.done..<min(files.count, checkpoint.done + Self.batchSize)]
            var toRead: [PhotoScan.File] = []
            for file in batch {
                do {
                    if try store.unchangedPhoto(path: file.path, stamp: file.stamp) != nil {
                        checkpoint.unchanged += 1
                    } else {
                        toRead.append(file)
                    }
                } catch {
                    throw error.jobError
                }
            }
            let answers = try await job.runInWorkers(
                task: InspectPhotoTask.name, toRead.map { ["path": $0.path.json, "pixels": false, "keywords": true] })
            for (file, answer) in zip(toRead, answers) {
                do {
                    let inspection = try JSONCoding.convert(try answer.get(), to: PhotoInspection.self)
                    switch try store.upsert(inspection.importRecord) {
                    case .inserted: checkpoint.inserted += 1
                    case .updated: checkpoint.updated += 1
                    case .unchanged: checkpoint.unchanged += 1
                    case .sameContent: checkpoint.sameContent += 1
                    }
                    if let keywords = inspection.keywords, !keywords.isEmpty {
                        checkpoint.keywords = (checkpoint.keywords ?? 0) + (try Self.tag(inspection.stableID, with: keywords, in: store))
                    }
                } catch let error as JobError {
                    Self.record(&checkpoint, Failure(path: file.path, code: error.code, message: error.message))
                } catch let error as PhotoLibraryError where error.code == .store {
                    throw error.jobError
                } catch {
                    Self.record(&checkpoint, Failure(path: file.path, code: "bad_answer", message: "\(error)"))
                }
            }
            checkpoint.done += batch.count
            try job.saveCheckpoint(checkpoint)
            job.reportProgress(completed: Int64(checkpoint.done), total: Int64(files.count), current: batch.last?.path.description)
        }
        return [
            "dir": root.json, "files": .number(files.count), "inserted": .number(checkpoint.inserted),
            "updated": .number(checkpoint.updated), "unchanged": .number(checkpoint.unchanged),
            "same_content": .number(checkpoint.sameContent), "failed": .number(checkpoint.failed),
            "keywords": .number(checkpoint.keywords ?? 0),
            "failures": JSONCoding.value(of: checkpoint.failures),
            "skipped": .number(skips.count),
            "skipped_by_reason": .object(
                Dictionary(grouping: skips, by: \.reason.rawValue).mapValues { .number($0.count) }),
            "skips": .array(
                skips.prefix(50).map { skip in
                    [
                        "path": BytePath(bytes: skip.path).json, "reason": .string(skip.reason.rawValue),
                        "detail": .string(skip.detail),
                    ]
                }),
        ]
    }

    /// Tags the photo `stableID` with the XMP keywords it carries (each normalized like any tag; one that is no
    /// valid tag, such as one over 200 bytes, is left out). Returns how many it did not have yet.
    static func tag(_ stableID: StableID, with keywords: [String], in store: PhotoStore) throws(PhotoLibraryError) -> Int {
        guard let photo = try store.photo(stableID: stableID) else { return 0 }
        var added = 0
        for keyword in keywords {
            guard let tag = try? TagName.validated(keyword) else { continue }
            added += try store.addTag(tag, to: [photo.localID]).added
        }
        return added
    }

    static func record(_ checkpoint: inout Checkpoint, _ failure: Failure) {
        checkpoint.failed += 1
        if checkpoint.failures.count < 50 { checkpoint.failures.append(failure) }
    }
}
