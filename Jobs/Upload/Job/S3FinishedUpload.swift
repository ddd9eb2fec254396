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
