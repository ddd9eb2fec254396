import S3Client
import TrailbookEngine
import TrailbookLoop

/// "Send only what changed" for a folder upload to `s3://BUCKET/PREFIX/`: before the first attempt sends
/// anything, the prefix is listed (`ListObjectsV2`, every page); each listed file whose key is there with the same
/// size is digested locally as this job would upload it (`S3LocalDigest`: the MD5 and SHA-256 of a single `PUT`,
/// the composite ETag and checksum of a multipart upload by the job's part plan) and compared with the object's
/// ETag; where the ETag cannot tell (SSE-KMS, SSE-C), `HeadObject` with `x-amz-checksum-mode: ENABLED` gives the
/// object's SHA-256 checksum. A file whose bytes are proven there is left out of the job (`already_there`); any
/// doubt sends it. Credentials that may not list the bucket (`access_denied`) fall back to one `HeadObject` per
/// file. Nothing is ever deleted.
///
/// Without reading: a listed object whose ETag is the one the upload memory remembers for its key (the server's
/// answer to this daemon's upload, or to the last comparison that read the file) holds the remembered SHA-256,
/// and a source whose `stat` is the remembered source's holds its remembered SHA-256 (`TreeSyncMemory`); when
/// both hold, the file is left out with no read and no request of its own. A re-run of an unchanged folder is
/// one listing (a request per 1 000 keys, once per job) and one read of the memory per 500 files. The listing of an
/// upload of one folder is read in step with the walk, holding a page of it (`S3ListingMarch`); of several
/// sources, held whole (`S3PrefixListing`).
@LoopActor
enum S3TreeSync {
    /// The indices of `plan`'s files (a page of the listing) that `bucket` holds under `prefix` with the same bytes.
    /// - Parameters:
    ///   - identities: the identities of `plan.files`, aligned with them.
    ///   - listing: the prefix's objects; listed here when `nil` (the first page) and kept for the next pages.
    ///   - phase: told of each page of objects listed, each file compared, each part hashed.
    /// - Throws: `JobError` with the S3 error's code when listing or a `HeadObject` fails for good (after
    ///   `S3UploadRun.retrying`), `JobStopped` when stopped.
    static func unchanged(
        _ plan: UploadTreePlan, identities: [SourceIdentity], params: UploadJob.Params, bucket: String,
        prefix: String, attemptStart: Double, listing: inout Objects?, phase: UploadListingPhase,
        in job: JobContext
    ) async throws -> [Int] {
        let run = S3UploadRun(params: params, names: [], bucket: bucket, prefix: prefix, landed: nil)
        let client = try await S3UploadRun.client(for: params, bucket: bucket, in: job)
        var memory = try TreeSyncMemory.load(
            plan, destination: .s3(bucket: bucket, prefix: prefix), params: params, attemptStart: attemptStart,
            in: job)
        defer { memory.write(in: job) }
        do {
            if listing == nil {
                // One folder: its names come in the walk's order, so the listing is read in step with them.
                listing =
                    params.files.count == 1
                    ? .marched(S3ListingMarch(prefix: prefix, client: client, run: run))
                    : .held(try await S3PrefixListing.list(prefix: prefix, client: client, run: run, in: job))
            }
            var candidates: [(index: Int, etag: String?)] = []
            if let listing { candidates = try await Self.candidates(plan, identities: identities, in: listing, job) }
            var same: [Int] = []
            for (index, etag) in candidates {
                try job.checkCancellation()
                if let etag, let row = memory.remembered(index), !row.location.isEmpty,
                    row.location.lowercased() == etag.lowercased(),
                    let known = memory.knownSHA256(index, path: plan.files[index], identity: identities[index]),
                    row.state.sha256 == known
                {
                    same.append(index)
                    memory.vouched += 1
                    continue
                }
                // Read (and perhaps asked): a step of the phase. Vouched files above cost no report each.
                phase.reached(index, in: job)
                guard let name = plan.names[index].text,
                    let partPlan = try? S3UploadRun.plan(size: identities[index].size, params: params, name: name)
                else { continue }
                let digest: S3LocalDigest
                do {
                    digest = try await S3LocalDigest.compute(
                        plan.files[index], expected: identities[index], plan: partPlan, in: job)
                } catch let error as JobError {
                    // Gone or changed since it was listed: it is sent (and fails alone) at its turn.
                    job.log(.info, "\(plan.files[index]): not compared with s3 (\(error.code)); it is sent")
                    continue
                }
                var verdict = etag.flatMap { digest.matches(S3ObjectHead(size: identities[index].size, etag: $0)) }
                var proof = etag
                if verdict == nil {
                    let key = prefix + name
                    let head = try await run.retrying("HEAD \(key)", in: job) { () throws(S3Error) in
                        try await client.headObject(key: key)
                    }
                    verdict = head.flatMap { digest.matches($0) }
                    proof = head?.etag
                }
                if verdict == true {
                    same.append(index)
                    memory.prove(
                        index, path: plan.files[index], identity: identities[index], sha256: digest.sha256Hex,
                        location: proof ?? "")
                }
            }
            return same
        } catch let error as S3Error {
            try job.checkCancellation()
            throw JobError(code: error.code.rawValue, message: error.message, retryable: error.code == .expiredToken)
        }
    }

    /// The objects under the prefix, as the comparison reads them.
    enum Objects {
        /// Listed whole at the first page and held: an upload of several sources, whose names come in no one
        /// order.
        case held(S3PrefixListing)
        /// Read in step with the walk of the one folder uploaded, holding a page (`S3ListingMarch`).
        case marched(S3ListingMarch)
    }

    /// The files of `plan` that `objects` shows with their size, in order, each with the listed ETag; every file
    /// that can have a key (ETag `nil`, to be asked with `HeadObject`) when the credentials may not list the
    /// bucket.
    /// - Throws: `S3Error` when a page of a marched listing cannot be listed; `JobStopped`.
    private static func candidates(
        _ plan: UploadTreePlan, identities: [SourceIdentity], in objects: Objects, _ job: JobContext
    ) async throws -> [(index: Int, etag: String?)] {
        var candidates: [(index: Int, etag: String?)] = []
        // By the key's bytes: Swift's `String` equality would take a name in NFD for its NFC twin.
        for (index, name) in plan.names.enumerated() where name.text != nil {
            let object: S3PrefixListing.Object?
            switch objects {
            case .held(.notListable):
                candidates.append((index, nil))
                continue
            case .held(.objects(let all)):
                object = all[name.bytes]
            case .marched(let march):
                object = try await march.object(named: name.bytes, in: job)
                if march.notListable {
                    candidates.append((index, nil))
                    continue
                }
            }
            if let object, object.size == identities[index].size { candidates.append((index, object.etag)) }
        }
        return candidates
    }
}
