import S3Client
import TrailbookEngine
import TrailbookHTTP
import TrailbookLoop
import TusClient

/// Files that fit in one `PUT`, sent several at a time (`parts_in_flight`): see `S3UploadRun`.
extension S3UploadRun {
    /// Without `--chunk-size`, files of at most this many bytes go up in one `PUT` (16 MiB: a phone's or a
    /// camera's photo), as rclone sends files below its 200 MiB cutoff; a larger file is a multipart upload of
    /// `--chunk-size` parts. One `PUT` is one round trip where a multipart upload of two parts is four in a row.
    nonisolated static let singlePutBytes: Int64 = 16 << 20

    /// Whether file `index` goes up in one `PUT` (its plan has one part).
    func isSinglePut(_ index: Int, _ checkpoint: UploadCheckpoint) throws(JobError) -> Bool {
        try Self.plan(size: try files.identity(index).size, params: params, name: try name(index)).isSinglePut
    }

    /// Sends the files from `checkpoint.fileIndex` on that go up in one `PUT`, up to the next multipart one, at most
    /// `parts_in_flight` at a time, and at most `parts_in_flight` parts' worth of bytes (`--chunk-size` each, the
    /// memory a multipart upload holds) in flight unless one file alone is more. Each file's result is saved in the
    /// checkpoint as it lands (out of order ones in `finishedAhead`). On an error or a stop the requests in flight
    /// are cancelled (the task group cancels its children, which aborts their transfers); what landed stays
    /// recorded, the others are sent again on resume (a `PUT` of the same bytes to the same key is idempotent).
    func uploadSinglePuts(
        checkpoint: inout UploadCheckpoint, client: S3Client, progress: S3Progress, in job: JobContext
    ) async throws {
        let limit = options.partsInFlight ?? S3Options.defaultPartsInFlight
        let byteBudget = Int64(limit) * params.chunkSize
        do {
            let failsAlone = checkpoint.tree != nil
            try await withThrowingTaskGroup(of: (Int, Result<UploadedFile, JobError>).self) { group in
                var inFlight = 0
                var next = checkpoint.fileIndex
                var cadence = LandedFilesCadence()
                // The bytes of each file in flight (its body is held in memory while it is sent).
                var flyingBytes: [Int: Int64] = [:]
                @LoopActor func record(_ done: (Int, Result<UploadedFile, JobError>)) async throws {
                    inFlight -= 1
                    flyingBytes[done.0] = nil
                    let file: UploadedFile
                    switch done.1 {
                    case .success(let landed): file = landed
                    case .failure(let failure):
                        // A folder's file removed or changed: it fails alone (nothing of it is on the server).
                        let failed = try files.file(done.0)
                        try await checkpoint.failAlone(
                            done.0, name: failed.name, path: failed.path, failure: failure, in: job)
                        cadence.saved()
                        return
                    }
                    progress.finishFile(done.0)
                    checkpoint.land(done.0, file)
                    // Told first: the save writes the file's outcome it notes, before the checkpoint that passes it.
                    if let landed { await landed(done.0, file) }
                    if cadence.landed(bytes: file.bytes, landed: checkpoint.landedCount) {
                        try job.saveCheckpoint(checkpoint)
                        cadence.saved()
                    }
                }
                // A stop (timeout, reclaim, an error) keeps what landed for the next attempt, as far as it can.
                defer { if cadence.hasUnsaved { try? job.saveCheckpoint(checkpoint) } }
                while next < files.count {
                    if checkpoint.landedAhead(next) || checkpoint.failedAhead?.contains(next) == true {
                        next += 1
                        continue
                    }
                    guard try isSinglePut(next, checkpoint) else { break }
                    try job.checkCancellation()
                    let file = try files.file(next)
                    while inFlight == limit
                        || (inFlight > 0 && flyingBytes.values.reduce(0, +) + file.identity.size > byteBudget),
                        let done = try await group.next()
                    {
                        try await record(done)
                    }
                    flyingBytes[next] = file.identity.size
                    let put = SinglePut(
                        run: self, index: next, name: try name(next), path: file.path, identity: file.identity,
                        client: client, progress: progress, job: job)
                    let index = next
                    group.addTask {
                        do {
                            let (_, file) = try await put.send()
                            return (index, .success(file))
                        } catch {
                            guard failsAlone, let failure = UploadCheckpoint.failsAlone(error) else { throw error }
                            return (index, .failure(failure))
                        }
                    }
                    inFlight += 1
                    next += 1
                }
                while let done = try await group.next() { try await record(done) }
                if cadence.hasUnsaved {
                    try job.saveCheckpoint(checkpoint)
                    cadence.saved()
                }
            }
        } catch let error as S3Error {
            try job.checkCancellation()
            throw JobError(code: error.code.rawValue, message: error.message, retryable: error.code == .expiredToken)
        }
    }

    /// One file's single `PUT` with retries, as a value a child task can own.
    @LoopActor
    struct SinglePut {
        let run: S3UploadRun
        let index: Int
        /// The object name after the prefix.
        let name: String
        /// The source.
        let path: BytePath
        let identity: SourceIdentity
        let client: S3Client
        let progress: S3Progress
        let job: JobContext

        /// Reads the file (checking it is unchanged first), `PUT`s it and checks what the server stored.
        /// - Returns: its index and result row.
        /// - Throws: `S3Error` from the requests; `JobError` for the source (`source_changed`, …).
        func send() async throws -> (Int, UploadedFile) {
            let (name, key, path, identity, progress, client, index) =
                (name, run.prefix + name, path, identity, progress, client, index)
            progress.startFile(index)
            // One hop to the pool per file: open (which checks the source), read, and both digests. The body is the
            // whole file, so the file's SHA-256 is also the signed payload hash: computed once.
            let withSHA256 = run.sendsSHA256Checksums
            let piece = try await job.runOnPool { () throws -> S3Piece in
                let source = try TusSource.open(path, expected: identity)
                let bytes = try source.read(at: 0, count: Int(identity.size))
                return S3Piece(bytes: bytes, sha256Hex: source.hash.hexDigest, withMD5: !withSHA256)
            }
            let checksum = withSHA256 ? piece.sha256Base64 : nil
            let (proven, etag) = try await run.retrying("PUT \(key)", in: job) {
                () async throws(S3Error) -> (Bool, String) in
                let stored = try await client.putObject(
                    key: key, body: piece.bytes, md5: piece.md5, sha256Hex: piece.sha256Hex, checksumSHA256: checksum,
                    contentType: TusUploadRun.mediaType(of: name),
                    onSendProgress: { sent in progress.sending(file: index, part: 1, sent: sent) })
                return (try S3UploadRun.check(stored, piece: piece, checksum: checksum, what: "PUT \(key)"), stored.etag)
            }
            progress.acknowledged(file: index, part: 1, bytes: identity.size)
            // A digest the server checked and confirmed proves it stored exactly these bytes, so their size; without
            // one (an ETag of another form, with KMS or some providers, and no checksum echoed) the HEAD checks it.
            if !proven { try await run.checkSize(index, key: key, size: identity.size, client: client, in: job) }
            return (index, UploadedFile(
                name: BytePath(name), path: BytePath("s3://\(run.bucket)/\(key)"), bytes: identity.size,
                sha256: piece.sha256Hex, bytesResent: 0, etag: etag.isEmpty ? nil : etag))
        }
    }
}
