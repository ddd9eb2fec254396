import PhotoLibrary
import TrailbookEngine
import TrailbookLoop
import UploadJob

/// The photo library as the upload job sees it (`UploadPhotoLibrary`, the seam the upload kind declares): selections
/// resolved to files, and the memory of where each photo went (`photo_uploads`, see `PhotoStore+Uploads.swift`).
/// It lives here, beside the store's one connection in the daemon, so the upload kind needs neither SQLite nor the
/// library's image code; the daemon hands this service to `UploadJob(photos:)` where it registers its kinds.
extension PhotoLibraryService: UploadPhotoLibrary {
    /// Checks the tags' spelling (`TagName`) and that an ID file is a readable regular file.
    /// - Throws: `JobError` `invalid_params` (a bad tag, an unreadable file), `source_missing`,
    ///   `source_not_regular`.
    public func check(_ selection: UploadPhotoSelection) throws(JobError) {
        for tag in selection.tags ?? [] {
            do {
                _ = try TagName.validated(tag)
            } catch {
                throw JobError(code: "invalid_params", message: "bad tag \"\(tag)\": \(error.message)")
            }
        }
        if let idsFile = selection.idsFile {
            try PhotoSelection(ids: nil, idsFile: idsFile, all: nil).validate()
        }
    }

    /// The photos of `selection`: listed IDs in their order (unknown ones as `.notInLibrary`), or the photos with
    /// every tag in local-ID order. Reads an ID file on the thread pool.
    /// - Throws: `JobError` `photo_store_error` (retryable), `source_missing` (the ID file), `invalid_params` (a bad
    ///   tag).
    public func resolve(_ selection: UploadPhotoSelection, in job: JobContext) async throws -> [ResolvedUploadPhoto] {
        let store = try store()
        do {
            if let tags = selection.tags {
                return try store.uploadSources(of: try store.localIDs(withEveryTag: tags)).map {
                    .found(id: $0.stableID, path: $0.path)
                }
            }
            guard let ids = try await PhotoSelection(ids: selection.ids, idsFile: selection.idsFile, all: nil).stableIDs(in: job)
            else { return [] }
            var resolved: [ResolvedUploadPhoto] = []
            resolved.reserveCapacity(ids.count)
            for start in stride(from: 0, to: ids.count, by: PhotoStore.uploadLookupBatch) {
                let range = start..<min(ids.count, start + PhotoStore.uploadLookupBatch)
                let found = try store.resolve(ids, in: range)
                let sources = Dictionary(
                    try store.uploadSources(of: found.localIDs).map { ($0.stableID, $0) }, uniquingKeysWith: { a, _ in a })
                // In the order listed: each entry is found, or not in the library.
                for index in range {
                    let text = ids.text(at: index)
                    let key = text.lowercased()
                    if let source = sources[key] {
                        resolved.append(.found(id: source.stableID, path: source.path))
                    } else {
                        resolved.append(.notInLibrary(id: text))
                    }
                }
            }
            return resolved
        } catch let error as PhotoLibraryError {
            throw error.code == .invalidTag
                ? JobError(code: "invalid_params", message: "bad tag: \(error.message)") : error.jobError
        }
    }

    /// The uploads remembered of `photoIDs` to `destination`.
    /// - Throws: `JobError` `photo_store_error` (retryable).
    public func uploads(of photoIDs: [String], to destination: String) throws(JobError) -> [String: RememberedUpload] {
        try asJobError {
            try store().uploads(of: photoIDs, to: destination).mapValues { upload in
                RememberedUpload(
                    photoID: upload.stableID, destination: upload.destination, job: upload.job,
                    uploadedAtMilliseconds: upload.uploadedAtMilliseconds, location: upload.location,
                    bytes: upload.bytes, sha256: upload.sha256)
            }
        }
    }

    /// Remembers `uploads` in one transaction of the photo store.
    /// - Throws: `JobError` `photo_store_error` (retryable).
    public func remember(_ uploads: [RememberedUpload]) throws(JobError) {
        let rows = uploads.map { upload in
            PhotoUpload(
                stableID: upload.photoID, destination: upload.destination, job: upload.job,
                uploadedAtMilliseconds: upload.uploadedAtMilliseconds, location: upload.location,
                bytes: upload.bytes, sha256: upload.sha256)
        }
        try asJobError { try store().remember(rows) }
    }

    /// The library's root (`PhotoStore.libraryRoot`).
    /// - Throws: `JobError` `photo_store_error` (retryable).
    public func root() throws(JobError) -> BytePath? {
        try asJobError { try store().libraryRoot() }
    }

    /// Runs `body` with the library's errors as job errors (`PhotoLibraryError.jobError`).
    private func asJobError<R>(_ body: () throws -> R) throws(JobError) -> R {
        do {
            return try body()
        } catch let error as PhotoLibraryError {
            throw error.jobError
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(code: "photo_store_error", message: "\(error)", retryable: true)
        }
    }
}
