import S3Client
import TrailbookEngine
import TrailbookLoop
import TusClient

/// The digests S3 would keep of a local file uploaded by this job's part plan: for a single `PUT` the file's MD5
/// (its ETag) and SHA-256 (its `x-amz-checksum-sha256`); for a multipart upload the composite ETag and checksum
/// of its parts (`S3MultipartDigest`). Compared with an object's to tell whether S3 already holds the file's
/// bytes (`S3TreeSync`).
struct S3LocalDigest: Sendable {
    /// The file's size in bytes.
    let size: Int64
    /// The whole file's SHA-256, 64 lower-case hex digits (what the upload memory keeps).
    let sha256Hex: String
    /// The digests, by the way the file goes up.
    let kind: Kind

    /// How the file goes up, with what S3 would keep of it.
    enum Kind: Sendable {
        /// One `PUT`: the MD5 in hex and the SHA-256 in base64.
        case single(md5Hex: String, sha256: String)
        /// A multipart upload: its parts' composite digests.
        case multipart(S3MultipartDigest)
    }

    /// Reads `path` part by part (one pool call per part, so a stop ends it between parts, and each part hashed is
    /// reported as the job's phase: a file of many GiB takes longer than a stall timeout) and digests it as
    /// `plan` would upload it.
    /// - Throws: `JobError` `source_missing`, `source_unreadable`, `source_changed` (not as `expected`), or
    ///   `JobStopped`.
    @LoopActor
    static func compute(
        _ path: BytePath, expected: SourceIdentity, plan: S3PartPlan, in job: JobContext
    ) async throws -> S3LocalDigest {
        let source = try await job.runOnPool { () throws(JobError) in try TusSource.open(path, expected: expected) }
        if plan.isSinglePut {
            let md5 = try await job.runOnPool { () throws(JobError) in
                TusChecksumAlgorithm.md5.digest(try source.read(at: 0, count: Int(plan.size)))
            }
            return S3LocalDigest(
                size: plan.size, sha256Hex: source.hash.hexDigest,
                kind: .single(md5Hex: SHA256.hex(md5), sha256: Base64.encode(source.hash.finalize())))
        }
        var digest = S3MultipartDigest()
        for number in 1...plan.count {
            try job.checkCancellation()
            let (offset, length) = plan.range(ofPart: number)
            digest = try await job.runOnPool { [digest] () throws(JobError) in
                var next = digest
                next.add(part: try source.read(at: offset, count: Int(length)))
                return next
            }
            UploadListingPhase.hashed(bytes: offset + length, in: job)
        }
        return S3LocalDigest(size: plan.size, sha256Hex: source.hash.hexDigest, kind: .multipart(digest))
    }

    /// Whether `head` is an object holding these bytes: same size, and the SHA-256 checksum when it has one, else
    /// an ETag of the MD5 form.
    /// - Returns: `nil` when the object carries neither digest in a form this can check (an SSE-KMS ETag, a
    ///   listing without checksums): nothing proves or disproves it.
    func matches(_ head: S3ObjectHead) -> Bool? {
        switch kind {
        case .multipart(let digest):
            return digest.matches(head, size: size)
        case .single(let md5Hex, let sha256):
            guard head.size == size else { return false }
            if let checksum = head.checksumSHA256 { return checksum == sha256 }
            let etag = head.etag.lowercased()
            guard etag.count == 32, etag.allSatisfy(\.isHexDigit) else { return nil }
            return etag == md5Hex
        }
    }
}
