import S3Client
import TrailbookEngine
import TrailbookHTTP
import TrailbookLoop
import TusClient

#if canImport(Glibc)
    import Glibc
#endif

/// Multipart uploads this job may have left on the server: found again before another is created
/// (`createOrAdopt`, `orphans`), and aborted (`abort`).
extension S3UploadRun {
    /// The UploadId for file `index`'s multipart upload, saved in the checkpoint: an upload this job created
    /// but never recorded, or a new one.
    ///
    /// A `CreateMultipartUpload` whose answer never arrived (a `kill -9` before the checkpoint, a dropped
    /// connection, a 5xx after the server did the work) leaves an upload on the server that nothing would ever
    /// complete or abort. So the time is saved before the first `CreateMultipartUpload` (`s3CreateStarted`), and
    /// whenever it is set when a Create is due (a resume, a retry), `orphans` are looked for first: the newest is
    /// reused, the others are aborted.
    func createOrAdopt(
        key: String, name: String, checksumSHA256: Bool, checkpoint: inout UploadCheckpoint, client: S3Client,
        in job: JobContext
    ) async throws -> String {
        var since = checkpoint.s3CreateStarted
        if since == nil {
            checkpoint.s3CreateStarted = Int64(time(nil))
            try job.saveCheckpoint(checkpoint)
        }
        let started = checkpoint.s3CreateStarted!
        var refused = false
        let found: (String, Bool)
        do {
            found = try await retrying("CreateMultipartUpload \(key)", in: job) { () async throws(S3Error) -> (String, Bool) in
                refused = false
                if since != nil {
                    let orphans = try await Self.orphans(
                        key: key, since: started, client: client, checksumSHA256: checksumSHA256)
                    if let newest = orphans.first {
                        for other in orphans.dropFirst() {
                            try await client.abortMultipartUpload(key: key, uploadID: other.uploadID)
                            job.log(.info, "\(name): aborted multipart upload \(other.uploadID), created by this job but never used")
                        }
                        return (newest.uploadID, true)
                    }
                }
                // A failed Create may still have created an upload: look before the next one.
                since = started
                do throws(S3Error) {
                    let contentType = TusUploadRun.mediaType(of: name)
                    let id = try await client.createMultipartUpload(
                        key: key, contentType: contentType, checksumSHA256: checksumSHA256)
                    return (id, false)
                } catch {
                    // A 4xx refusal (bad key, no bucket, skewed clock…) created nothing: nothing to look for later.
                    refused = !error.isTransient && (error.status.map { (400..<500).contains($0) && $0 != 429 } ?? false)
                    throw error
                }
            }
        } catch {
            if refused {
                checkpoint.s3CreateStarted = nil
                try? job.saveCheckpoint(checkpoint)
            }
            throw error
        }
        if found.1 {
            job.log(.info, "\(name): reusing multipart upload \(found.0), created by this job before its UploadId was saved")
        }
        checkpoint.s3UploadID = found.0
        checkpoint.s3CreateStarted = nil
        try job.saveCheckpoint(checkpoint)
        return found.0
    }

    /// The multipart uploads of `key` this job may have created without hearing back, newest first: uploads of
    /// exactly `key` that the server initiated no earlier than `since` (the daemon's clock) less 15 minutes (the
    /// clock skew S3 accepts), and with no parts (this job sends no part to an upload it does not know).
    /// Assumes, as every S3 upload of one key does, a single writer of the key: an empty upload of the same key
    /// that another client started in that window is taken for this job's.
    ///
    /// `checksumSHA256`: when given, an upload the server says was created with another checksum algorithm is not
    /// this job's (a part sent to it with the wrong checksum type would be refused).
    static func orphans(key: String, since: Int64, client: S3Client, checksumSHA256: Bool? = nil)
        async throws(S3Error) -> [S3MultipartUpload]
    {
        var found: [S3MultipartUpload] = []
        for upload in try await client.listMultipartUploads(prefix: key)
        where upload.key == key && (upload.initiated ?? since) >= since - 900 {
            if let checksumSHA256, let algorithm = upload.checksumAlgorithm, (algorithm == "SHA256") != checksumSHA256 {
                continue
            }
            do {
                guard try await client.listParts(key: key, uploadID: upload.uploadID).parts.isEmpty else { continue }
            } catch where error.code == .noSuchUpload {
                continue
            }
            found.append(upload)
        }
        return found.sorted { ($0.initiated ?? 0, $0.uploadID) > ($1.initiated ?? 0, $1.uploadID) }
    }

    /// `AbortMultipartUpload`, then `ListParts`: `nil` when the server answers `NoSuchUpload` (gone), else the
    /// number of parts it still lists.
    static func abort(key: String, uploadID: String, client: S3Client) async throws(S3Error) -> Int? {
        try await client.abortMultipartUpload(key: key, uploadID: uploadID)
        let left: [Int: S3Part]
        do {
            left = try await client.listParts(key: key, uploadID: uploadID).parts
        } catch {
            guard error.code == .noSuchUpload else { throw error }
            return nil
        }
        return left.count
    }
}
