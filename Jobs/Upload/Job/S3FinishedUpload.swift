import S3Client
import TrailbookEngine
import TrailbookLoop

/// Tells a multipart upload the server finished from one it lost.
///
/// `NoSuchUpload` for an UploadId the job recorded means the upload is gone, which is also what S3 answers once it
/// was completed: a `kill -9` (or a lost answer) after `CompleteMultipartUpload` did its work but before the
/// checkpoint recorded it leaves exactly that. So before starting over, the object itself is looked at
/// (`HeadObject`): it is this upload's when its size is the file's and its digest is the one the plan's parts of
/// this source make (the composite SHA-256 checksum where the server keeps one, else the multipart ETag; see
/// `S3MultipartDigest`). An object of another form of ETag and no checksum proves nothing either way: the upload
/// is sent again.
@LoopActor
struct S3FinishedUpload {
    /// What the look found.
    enum Finding: Equatable {
        /// The object is there and holds exactly the source's bytes in the plan's parts.
        case finished
        /// No object at the key.
        case absent
        /// An object at the key that is not this upload's (another size or digest: an older object).
        case other(size: Int64)
        /// An object of the right size whose digests cannot be checked.
        case unproven
    }

    let plan: S3PartPlan
    let source: TusSource

    /// Judges `head` (what `S3Client.headObject` said of the key, `nil` for no object): if its size is the
    /// plan's, reads the source's parts on the thread pool (which also completes `source.hash`) to compare digests.
    /// - Throws: `JobError` for the source (`source_changed`, …); `JobStopped`.
    func look(at head: S3ObjectHead?, in job: JobContext) async throws -> Finding {
        guard let head else { return .absent }
        guard head.size == plan.size else { return .other(size: head.size) }
        var digest = S3MultipartDigest()
        for number in 1...plan.count {
            try job.checkCancellation()
            let (offset, length) = plan.range(ofPart: number)
            let (source, previous) = (source, digest)
            digest = try await job.runOnPool { () throws -> S3MultipartDigest in
                var next = previous
                next.add(part: try source.read(at: offset, count: Int(length)))
                return next
            }
        }
        switch digest.matches(head, size: plan.size) {
        case true?: return .finished
        case false?: return .other(size: head.size)
        case nil: return .unproven
        }
    }
}

extension S3UploadRun {
    /// Records file `index` as landed (the object `key` is complete and checked, with `etag` when the server's
    /// answer gave it), tells `landed` (whose note of the file's outcome the save writes) and saves the checkpoint.
    func finish(
        _ index: Int, key: String, plan: S3PartPlan, source: TusSource, etag: String? = nil,
        checkpoint: inout UploadCheckpoint, progress: S3Progress, in job: JobContext
    ) async throws {
        progress.finishFile(index)
        let file = UploadedFile(
            name: try files.name(index), path: BytePath("s3://\(bucket)/\(key)"), bytes: plan.size,
            sha256: source.hash.hexDigest, bytesResent: checkpoint.fileBytesResent,
            etag: etag.flatMap { $0.isEmpty ? nil : $0 })
        checkpoint.land(index, file)
        if let landed { await landed(index, file) }
        try job.saveCheckpoint(checkpoint)
    }

    /// After `NoSuchUpload` for the recorded upload `uploadID`: whether it is gone because it was completed, the
    /// object `key` being there with the source's bytes (`S3FinishedUpload`). Logs what it found: that the upload
    /// was done, or (a warning) that it is gone and why the object at the key is not it.
    func isFinished(
        _ index: Int, key: String, plan: S3PartPlan, source: TusSource, uploadID: String, client: S3Client,
        in job: JobContext
    ) async throws -> Bool {
        let name = files.label(index)
        let object = "s3://\(bucket)/\(key)"
        let head = try await retrying("HEAD \(key)", in: job) { () async throws(S3Error) in
            try await client.headObject(key: key)
        }
        let finding = try await S3FinishedUpload(plan: plan, source: source).look(at: head, in: job)
        let gone = "\(name): the multipart upload \(uploadID) is gone on the server (NoSuchUpload)"
        switch finding {
        case .finished:
            job.log(.info, "\(name): the multipart upload \(uploadID) was completed before this job recorded it: \(object) has the file's \(plan.size) bytes and digest; nothing is sent again")
            return true
        case .absent:
            job.log(.warning, "\(gone) and there is no object \(object); creating a new upload and sending every part again")
        case .other(let size):
            job.log(.warning, "\(gone), and the object \(object) (\(size) bytes) is not this file; creating a new upload and sending every part again")
        case .unproven:
            job.log(.warning, "\(gone); the object \(object) has the file's size but no digest that can be checked, so it is sent again")
        }
        return false
    }
}
