import S3Client
import TrailbookEngine
import TrailbookHTTP
import TrailbookLoop
import TusClient

#if canImport(Glibc)
    import Glibc
#endif

/// An upload to S3 or an S3-compatible server (`s3://BUCKET/PREFIX/`): each file becomes the object
/// PREFIX + its name.
///
/// Files that fit in one part go up in one `PUT` each, several at once: a run of such files is sent up to
/// `parts_in_flight` at a time (the budget parts use), each read whole on the thread pool after checking the source
/// is unchanged, its SHA-256 (the file's, which is also the signed payload hash) and MD5 computed there, and sent
/// with `Content-MD5`. They may land out of order; the checkpoint keeps those that landed ahead
/// (`finishedAhead`), so the result lists every file in order and a resume sends none of them again.
///
/// A larger file is a multipart upload, alone (the small files before it land first, the ones after it wait): its
/// part plan (`S3PartPlan`) is fixed and saved first, then `CreateMultipartUpload` (its UploadId saved at once),
/// then the parts in order, up to `parts_in_flight` at a time on the daemon's HTTP client, each read from the
/// source on the thread pool after checking the source is unchanged, and sent with `Content-MD5` and its SHA-256
/// signed; then `CompleteMultipartUpload` listing 1…N with their ETags, and a `HEAD` that checks the object's size.
/// Memory stays about `parts_in_flight` × part size either way.
///
/// Resume (after a crash, a stop, a timeout): the saved UploadId is reused; `ListParts` (every page) says which
/// parts the server has; each is read again for the file's SHA-256 and kept when its size and ETag (the part's
/// MD5) match; only the others are sent. An upload the server no longer knows (`NoSuchUpload`) is created anew,
/// with a warning in the job's log. A `CreateMultipartUpload` whose UploadId was never saved (a crash, a lost
/// answer) is found again with `ListMultipartUploads` before another is made (`createOrAdopt`).
///
/// Errors: transient ones (5xx, 429, `SlowDown`, dropped connections, a damaged part) are retried with
/// exponential backoff (or the server's `Retry-After`), 5 times, then the job stops itself with reason
/// `timeout` and keeps the upload; others fail the job with the S3 error's code (`S3Error.Code`);
/// `expired_token` is retryable (the next attempt reads the credentials again).
@LoopActor
struct S3UploadRun: UploadTransfer {
    let params: UploadJob.Params
    /// The files, their object names after the prefix (UTF-8: checked before) and identities (`UploadFileList`).
    let files: UploadFileList
    let bucket: String
    let prefix: String
    /// Told of each object made and checked (see `FileLanded`).
    var landed: FileLanded?

    /// An upload of `files` to `s3://bucket/prefix…`.
    init(params: UploadJob.Params, files: UploadFileList, bucket: String, prefix: String, landed: FileLanded?) {
        self.params = params
        self.files = files
        self.bucket = bucket
        self.prefix = prefix
        self.landed = landed
    }

    /// An upload of `params.files` named `names` (the first `names.count` of them: none for a run that only
    /// sends requests, as `S3TreeSync`'s).
    init(params: UploadJob.Params, names: [String], bucket: String, prefix: String, landed: FileLanded?) {
        let files = UploadFileList(paths: Array(params.files.prefix(names.count)), names: names.map { BytePath($0) })
        self.init(params: params, files: files, bucket: bucket, prefix: prefix, landed: landed)
    }

    /// Tries of one request in a row before giving up (the first and 5 retries).
    static let maxTries = 6
    /// First backoff, doubling per try, capped at `maxBackoff`; seconds.
    static let firstBackoff = 0.5
    static let maxBackoff = 20.0

    var options: S3Options { params.s3 ?? S3Options() }
    /// Whether bodies carry `x-amz-checksum-sha256` (`S3Checksum`; a multipart upload follows its plan instead).
    var sendsSHA256Checksums: Bool { options.sendsSHA256Checksums }
    /// File `index`'s object name after the prefix. Throws as `UploadFileList.file`.
    func name(_ index: Int) throws(JobError) -> String {
        let name = try files.name(index)
        return name.text ?? name.description
    }
    /// File `index`'s object key. Throws as `UploadFileList.file`.
    func key(_ index: Int) throws(JobError) -> String { prefix + (try name(index)) }

    /// Submit-time checks: options, names and keys (two sources of one name would overwrite each other), the
    /// sources, and each file's plan (a file beyond S3's limits is refused). The server is not contacted.
    /// - Throws: `JobError` `invalid_params`, `bad_destination`, `bad_name`, `duplicate_name`, `too_large`,
    ///   `source_missing`, `source_not_regular`, `source_unreadable`.
    static func validate(_ params: UploadJob.Params, prefix: String) async throws(JobError) {
        let options = params.s3 ?? S3Options()
        try options.check()
        if let endpoint = options.endpoint {
            do throws(S3Error) {
                try S3Settings.checkEndpoint(endpoint)
            } catch {
                throw JobError(code: "bad_destination", message: error.message + "; give --endpoint http(s)://HOST[:PORT]")
            }
            // A host or port curl can never reach (`http://[::1`, port 0 or 99999) is refused now, not after
            // every attempt failed.
            let authority = endpoint.drop { $0 != "/" }.drop { $0 == "/" }.prefix { $0 != "/" }
            if let problem = UploadDestination.authorityProblem(authority) {
                throw JobError(
                    code: "bad_destination",
                    message: "S3 endpoint '\(URLRedaction.url(endpoint))' \(problem); give --endpoint http(s)://HOST[:PORT]")
            }
        }
        guard params.headers.isEmpty, params.caBundle == nil else {
            throw JobError(code: "invalid_params", message: "headers and ca_bundle apply to tus destinations only")
        }
        let names = try names(of: params.files, prefix: prefix)
        let files = params.files
        let outcome = await Task.detached {
            Result { () throws(JobError) in try DirectoryIO.sourceIdentities(files: files, indices: files.indices) }
        }.value
        let identities = try outcome.get()
        for (identity, name) in zip(identities, names) {
            _ = try plan(size: identity.size, params: params, name: name)
        }
    }

    /// The object names of `files`, checked: plain names in UTF-8 (S3 keys are UTF-8), unique, keys of at most
    /// 1024 bytes.
    nonisolated static func names(of files: [BytePath], prefix: String) throws(JobError) -> [String] {
        var seen: [String: BytePath] = [:]
        return try files.map { source throws(JobError) in
            guard let name = try UploadNames.name(ofSource: source).text else {
                throw JobError(
                    code: "bad_name",
                    message: "the name of '\(source)' is not UTF-8, and S3 keys are; rename the file to upload it to S3")
            }
            if let other = seen[name] {
                throw JobError(
                    code: "duplicate_name",
                    message: "'\(source)' and '\(other)' would both be stored as '\(prefix + name)'; rename one, or "
                        + "upload them to different prefixes (one would replace the other under the same one)")
            }
            seen[name] = source
            guard (prefix + name).utf8.count <= 1024 else {
                throw JobError(code: "bad_name", message: "the key '\(prefix + name)' is over S3's 1024 bytes; shorten the name or prefix")
            }
            return name
        }
    }

    /// The part plan of a file of `size` bytes under `params`. Without `--chunk-size`, a file of at most
    /// `singlePutBytes` is planned as one part, so it goes up in one `PUT` (beside others: `uploadSinglePuts`).
    static func plan(size: Int64, params: UploadJob.Params, name: String) throws(JobError) -> S3PartPlan {
        let options = params.s3 ?? S3Options()
        let whole = !params.chunkSizeGiven && size <= singlePutBytes
        return try S3PartPlan.plan(
            size: size, preferred: whole ? max(params.chunkSize, size) : params.chunkSize,
            minPartSize: options.minPartSize ?? S3Options.defaultMinPartSize,
            maxParts: options.maxParts ?? S3Options.defaultMaxParts, name: name,
            checksumSHA256: options.sendsSHA256Checksums)
    }

    /// The settings, resolved from the params and the daemon's environment and AWS files, on the pool.
    static func client(for params: UploadJob.Params, bucket: String, in job: JobContext) async throws -> S3Client {
        let options = params.s3 ?? S3Options()
        let overrides = S3Settings.Overrides(
            endpoint: options.endpoint, region: options.region, pathStyle: options.pathStyle, profile: options.profile)
        let resolved = try await job.runOnPool { () throws(JobError) -> S3Settings in
            do throws(S3Error) {
                return try S3Settings.resolve(overrides: overrides, environment: ProcessEnvironment.current())
            } catch {
                // Missing credentials may be added before the next attempt: retryable.
                throw JobError(code: error.code.rawValue, message: error.message, retryable: error.code == .noCredentials)
            }
        }
        var client = S3Client(http: TusTransport.shared, settings: resolved, bucket: bucket)
        let inFlight = Int64(options.partsInFlight ?? S3Options.defaultPartsInFlight)
        client.maxSendBytesPerSecond = params.maxRate.map { max(1 << 10, $0 / inFlight) }
        let quiet = NetworkQuietLimit(for: job)
        client.stallTimeoutSeconds = quiet.stallSeconds
        client.connectTimeoutMilliseconds = quiet.connectMilliseconds
        client.requestTimeoutMilliseconds = quiet.requestMilliseconds
        return client
    }

    /// Runs (or resumes) the upload; see the type's documentation.
    func run(in job: JobContext) async throws -> JSONValue {
        let files = self.files
        // Files that landed ahead of an earlier one are done: a resume does not look at them again (they may have
        // been moved or changed since, as any uploaded file may), it takes their saved identity as it is.
        let saved = try UploadCheckpoint.load(in: job)
        var landedAhead: [Int: SourceIdentity] = [:]
        if let saved {
            files.capture(saved)
            for ahead in saved.finishedAhead ?? [] where files.indices.contains(ahead.index) {
                landedAhead[ahead.index] = try files.identity(ahead.index)
            }
        }
        var (checkpoint, _) = try await UploadCheckpoint.startOrResume(
            files: files, in: job, filesFailAlone: true, discardFile: { try await discardFailed($0, in: job) }
        ) { [landedAhead] indices, paths, _ in
            var identities: [SourceIdentity] = []
            for (offset, index) in indices.enumerated() {
                if let known = landedAhead[index] {
                    identities.append(known)
                } else {
                    identities += try DirectoryIO.sourceIdentities(files: paths, indices: offset..<offset + 1)
                }
            }
            return identities
        }
        let client = try await Self.client(for: params, bucket: bucket, in: job)
        let sizes = try files.sizes()
        let progress = S3Progress(job: job, files: files, sizes: sizes)
        for (index, bytes) in try checkpoint.landedBefore(sizes: sizes, files: files) { progress.upload.set(index, bytes) }
        for ahead in checkpoint.finishedAhead ?? [] { progress.upload.set(ahead.index, ahead.file.bytes) }
        progress.upload.filesDone = Int64(checkpoint.landedCount)
        while checkpoint.fileIndex < files.count {
            try job.checkCancellation()
            let index = checkpoint.fileIndex
            if checkpoint.s3UploadID == nil, checkpoint.s3CreateStarted == nil, try isSinglePut(index, checkpoint) {
                try await uploadSinglePuts(checkpoint: &checkpoint, client: client, progress: progress, in: job)
                continue
            }
            do {
                try await upload(index, checkpoint: &checkpoint, client: client, progress: progress, in: job)
            } catch {
                // A folder's file removed before its turn or changed while sent fails alone; the others go on.
                guard job.stopReason == nil, let failure = checkpoint.fileFailure(error) else { throw error }
                try await skipFailed(index, failure, checkpoint: &checkpoint, in: job)
            }
        }
        progress.report(current: nil)
        return UploadJob.result(files: checkpoint.finished, bytesResent: checkpoint.bytesResent, destination: params.to)
    }

    /// Uploads file `index`, then advances the checkpoint to the next file. S3 errors become job errors; an
    /// upload the server lost while its parts were being sent is created anew, once.
    private func upload(
        _ index: Int, checkpoint: inout UploadCheckpoint, client: S3Client, progress: S3Progress, in job: JobContext,
        createdAgain: Bool = false
    ) async throws {
        do {
            try await uploadFile(index, checkpoint: &checkpoint, client: client, progress: progress, in: job)
        } catch let error as S3Error where error.code == .noSuchUpload && !createdAgain {
            // Aborted by a lifecycle rule or another client while we were sending: start it anew, once.
            job.log(.warning, "\(files.label(index)): the multipart upload \(checkpoint.s3UploadID ?? "") is gone on the server (NoSuchUpload); creating a new one and sending every part again")
            checkpoint.s3UploadID = nil
            try job.saveCheckpoint(checkpoint)
            try await upload(index, checkpoint: &checkpoint, client: client, progress: progress, in: job, createdAgain: true)
        } catch let error as S3Error {
            try job.checkCancellation()
            throw JobError(code: error.code.rawValue, message: error.message, retryable: error.code == .expiredToken)
        }
    }

    /// Uploads file `index` (one `PUT`, or multipart), then advances the checkpoint.
    private func uploadFile(
        _ index: Int, checkpoint: inout UploadCheckpoint, client: S3Client, progress: S3Progress, in job: JobContext
    ) async throws {
        let file = try files.file(index)
        let name = try self.name(index)
        let key = prefix + name
        let identity = file.identity
        let plan: S3PartPlan
        if let saved = checkpoint.s3Plan, saved.size == identity.size {
            plan = saved
        } else {
            plan = try Self.plan(size: identity.size, params: params, name: name)
            checkpoint.s3Plan = plan
            try job.saveCheckpoint(checkpoint)
        }
        let path = file.path
        let source = try await job.runOnPool { try TusSource.open(path, expected: identity) }
        progress.startFile(index)
        try await uploadParts(
            index, key: key, plan: plan, source: source, checkpoint: &checkpoint, client: client, progress: progress,
            in: job)
    }

    /// The multipart path of `upload`: create or reuse the upload, list what the server has, send the rest,
    /// complete.
    private func uploadParts(
        _ index: Int, key: String, plan: S3PartPlan, source: TusSource, checkpoint: inout UploadCheckpoint,
        client: S3Client, progress: S3Progress, in job: JobContext
    ) async throws {
        var planned = plan
        let name = try self.name(index)
        var listed: [Int: S3Part] = [:]
        // Parts up to here went out before (an earlier attempt, or an upload the server lost): those not listed
        // now are sent again, and count in bytes_resent.
        let sentBefore = checkpoint.s3PartsSent ?? 0
        if let existing = checkpoint.s3UploadID {
            do {
                let listing = try await retrying("ListParts \(key)", in: job) { () async throws(S3Error) in
                    try await client.listParts(key: key, uploadID: existing)
                }
                listed = listing.parts
                // The upload's checksum algorithm, where the server names it, decides: parts and the Complete must
                // carry the checksums it was created with (a plan saved by another version may say otherwise).
                if let algorithm = listing.checksumAlgorithm, (algorithm == "SHA256") != planned.checksumSHA256 {
                    planned.checksumSHA256 = algorithm == "SHA256"
                    checkpoint.s3Plan = planned
                    try job.saveCheckpoint(checkpoint)
                    job.log(.warning, "\(name): the multipart upload \(existing) was created with checksum algorithm \(algorithm); its parts are sent \(planned.checksumSHA256 ? "with" : "without") SHA-256 checksums to match")
                }
                job.log(.info, "\(name): resuming multipart upload \(existing); the server has \(listed.count) of \(plan.count) parts")
            } catch let error as S3Error where error.code == .noSuchUpload {
                // Also what S3 answers once the upload was completed (a crash before the checkpoint said so).
                if try await isFinished(index, key: key, plan: planned, source: source, uploadID: existing, client: client, in: job) {
                    try await finish(index, key: key, plan: planned, source: source, checkpoint: &checkpoint, progress: progress, in: job)
                    return
                }
                checkpoint.s3UploadID = nil
            }
        }
        let uploadID: String
        if let existing = checkpoint.s3UploadID {
            uploadID = existing
        } else {
            uploadID = try await createOrAdopt(
                key: key, name: name, checksumSHA256: planned.checksumSHA256, checkpoint: &checkpoint, client: client,
                in: job)
            job.log(.info, "\(name): multipart upload \(uploadID) of \(plan.count) parts of \(plan.partSize) bytes")
        }

        let plan = planned
        var etags = [String?](repeating: nil, count: plan.count + 1)
        // Each part's SHA-256 in base64, for an upload created with SHA-256 checksums (the Complete lists them).
        var checksums = [String?](repeating: nil, count: plan.count + 1)
        let inFlightLimit = options.partsInFlight ?? S3Options.defaultPartsInFlight
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            var inFlight = 0
            @LoopActor func collect(_ done: (Int, String)) {
                etags[done.0] = done.1
                progress.acknowledged(file: index, part: done.0, bytes: plan.range(ofPart: done.0).length)
                inFlight -= 1
            }
            for number in 1...plan.count {
                try job.checkCancellation()
                let (offset, length) = plan.range(ofPart: number)
                // One read per part, in order: it feeds the file's SHA-256 and the part's own digests. The source
                // is checked before each part, so a change stops the upload within one part.
                // An upload with SHA-256 checksums needs no MD5 (the server verifies the SHA-256); a part listed on
                // resume without its checksum but with an MD5 ETag is compared by MD5.
                let withMD5 = !plan.checksumSHA256 || (listed[number].map { $0.checksumSHA256 == nil } ?? false)
                let piece = try await job.runOnPool { () throws -> S3Piece in
                    try source.checkUnchanged()
                    return S3Piece(bytes: try source.read(at: offset, count: Int(length)), withMD5: withMD5)
                }
                let checksum = plan.checksumSHA256 ? piece.sha256Base64 : nil
                checksums[number] = checksum
                if let have = listed[number] {
                    let sameDigest: Bool
                    if let listed = have.checksumSHA256, let checksum {
                        sameDigest = listed == checksum
                    } else {
                        sameDigest = !S3Piece.isMD5(have.etag) || have.etag == piece.md5Hex
                    }
                    if have.size == length && sameDigest {
                        etags[number] = have.etag
                        progress.acknowledged(file: index, part: number, bytes: length)
                        continue
                    }
                    job.log(.warning, "\(name): part \(number) on the server (\(have.size) bytes, ETag \(have.etag), SHA-256 \(have.checksumSHA256 ?? "not given")) differs from the source (\(length) bytes, MD5 \(piece.md5Hex ?? "not computed"), SHA-256 \(piece.sha256Base64)); sending it again")
                }
                if inFlight == inFlightLimit, let done = try await group.next() { collect(done) }
                if number <= sentBefore || listed[number] != nil {
                    // Handed to the transport before and not on the server as the source has it: sent again.
                    checkpoint.bytesResent += length
                    checkpoint.fileBytesResent += length
                }
                checkpoint.s3PartsSent = max(checkpoint.s3PartsSent ?? 0, number)
                // Saved as the part goes out, so that after a crash its bytes count as resent if it never landed.
                try job.saveCheckpoint(checkpoint)
                let sender = PartSender(
                    run: self, client: client, key: key, uploadID: uploadID, file: index, number: number, piece: piece,
                    checksumSHA256: checksum, progress: progress, job: job)
                group.addTask { try await sender.send() }
                inFlight += 1
            }
            while let done = try await group.next() { collect(done) }
        }

        try job.checkCancellation()
        // The last chance to refuse a changed source: once completed, the object is visible to everyone.
        try await job.runOnPool { try source.checkUnchanged() }
        let parts = (1...plan.count).map { (number: $0, etag: etags[$0]!, checksumSHA256: checksums[$0]) }
        var etag: String?
        do {
            etag = try await retrying("CompleteMultipartUpload \(key)", in: job) { () async throws(S3Error) in
                try await client.completeMultipartUpload(key: key, uploadID: uploadID, parts: parts)
            }
            job.log(.info, "\(name): completed multipart upload \(uploadID) (\(plan.count) parts)")
            try await checkSize(index, key: key, size: plan.size, client: client, in: job)
        } catch let error as S3Error where error.code == .noSuchUpload {
            // A Complete that worked but whose answer was lost: its retry finds the upload gone.
            guard try await isFinished(index, key: key, plan: plan, source: source, uploadID: uploadID, client: client, in: job)
            else { throw error }
        }
        try await finish(
            index, key: key, plan: plan, source: source, etag: etag, checkpoint: &checkpoint, progress: progress,
            in: job)
    }

    /// One part's `UploadPart` with retries, as a value a child task can own.
    @LoopActor
    struct PartSender {
        let run: S3UploadRun
        let client: S3Client
        let key: String
        let uploadID: String
        let file: Int
        let number: Int
        let piece: S3Piece
        /// The part's SHA-256 in base64 when the upload carries SHA-256 checksums.
        let checksumSHA256: String?
        let progress: S3Progress
        let job: JobContext

        /// Sends the part; returns its number and ETag.
        func send() async throws -> (Int, String) {
            let (client, key, uploadID, file, number, piece, progress, checksum) =
                (client, key, uploadID, file, number, piece, progress, checksumSHA256)
            let etag = try await run.retrying("UploadPart \(number) of \(key)", in: job) {
                () async throws(S3Error) -> String in
                let stored = try await client.uploadPart(
                    key: key, uploadID: uploadID, number: number, body: piece.bytes, md5: piece.md5,
                    sha256Hex: piece.sha256Hex, checksumSHA256: checksum, onSendProgress: { sent in progress.sending(file: file, part: number, sent: sent) })
                _ = try S3UploadRun.check(stored, piece: piece, checksum: checksum, what: "UploadPart \(number) of \(key)")
                return stored.etag
            }
            return (number, etag)
        }
    }

    /// Checks with a `HEAD` that the object `key` (file `index`) has `size` bytes. (The source was checked before
    /// the object was made: before reading a single `PUT`'s bytes, before `CompleteMultipartUpload`.)
    /// - Throws: `JobError` `size_mismatch`; `S3Error` when the `HEAD` fails.
    func checkSize(_ index: Int, key: String, size: Int64, client: S3Client, in job: JobContext) async throws {
        let stored = try await retrying("HEAD \(key)", in: job) { () async throws(S3Error) in
            try await client.objectSize(key: key)
        }
        guard stored == size else {
            throw JobError(
                code: "size_mismatch",
                message: "\(files.label(index)): the object s3://\(bucket)/\(key) has \(stored) bytes, the source \(size); "
                    + "submit the upload again")
        }
    }

    /// Checks what the server says it stored for `piece`: an MD5-shaped ETag must be the MD5 sent (unencrypted
    /// objects; other forms are not checked), and a SHA-256 checksum it echoes must be `checksum`, the one sent.
    /// - Returns: whether that proves the server has exactly the bytes sent (it checked a digest and confirmed it).
    /// - Throws: `bad_digest` (retried) when either differs.
    nonisolated static func check(_ stored: S3Stored, piece: S3Piece, checksum: String?, what: String) throws(S3Error) -> Bool {
        var proven = false
        if let md5Hex = piece.md5Hex, S3Piece.isMD5(stored.etag) {
            guard stored.etag == md5Hex else {
                throw S3Error(code: .badDigest, message: "\(what): the server's ETag \(stored.etag) is not the MD5 \(md5Hex) of the bytes sent")
            }
            proven = true
        }
        if let checksum, let echoed = stored.checksumSHA256 {
            guard echoed == checksum else {
                throw S3Error(code: .badDigest, message: "\(what): the server's SHA-256 \(echoed) is not the \(checksum) of the bytes sent")
            }
            proven = true
        }
        return proven
    }

    /// Runs `request`, retrying transient failures with backoff, waited out (`JobContext.waitOut`: the waits
    /// count towards neither the stall timeout nor the deadline). A server's error answers (5xx, 429, `SlowDown`,
    /// a damaged part) get `maxTries` in a row, then the job stops itself with reason `timeout` (it keeps the
    /// upload and resumes later). Failures with no answer at all (the endpoint cannot be reached, the connection
    /// is reset, or the network went silent: `S3Outage`) are an outage: waited out with backoff for as long as
    /// `--give-up-after`, then the job fails with `s3_unavailable`.
    func retrying<R: Sendable>(
        _ what: String, in job: JobContext, _ request: () async throws(S3Error) -> R
    ) async throws -> R {
        var tries = 0
        var outage = S3Outage(giveUpAfterSeconds: job.giveUpAfterSeconds)
        while true {
            do {
                return try await request()
            } catch {
                try job.checkCancellation()
                if Task.isCancelled { throw CancellationError() }
                guard error.isTransient else { throw error }
                if S3Outage.isOutage(error) {
                    guard let delay = outage.failed(at: Timestamp.monotonic()) else {
                        throw JobError(
                            code: S3Error.Code.unavailable.rawValue,
                            message: "\(error.message) — the endpoint could not be reached or stayed silent for "
                                + "\(TusUploadRun.duration(job.giveUpAfterSeconds)) (--give-up-after); submit the "
                                + "upload again once the network works")
                    }
                    job.log(.info, "\(error.message); waiting \(Int(delay * 1000)) ms")
                    try await job.waitOut(seconds: delay)
                    continue
                }
                tries += 1
                guard tries < Self.maxTries else {
                    throw job.stopSelf(.timeout, detail: "\(error.message) — \(tries) tries in a row; the upload is kept for the next attempt")
                }
                let backoff = min(Self.maxBackoff, Self.firstBackoff * Double(1 << (tries - 1)))
                let delay = error.retryAfterSeconds.map { Double(min($0, 300)) } ?? backoff * Double.random(in: 0.5...1)
                job.log(.info, "\(error.message); try \(tries + 1) of \(Self.maxTries) in \(Int(delay * 1000)) ms")
                try await job.waitOut(seconds: delay)
            }
        }
    }

    /// After the job ended `failed` or `cancelled`: aborts the current file's multipart upload
    /// (`AbortMultipartUpload`), then asks `ListParts`, which must answer `NoSuchUpload` (a part in flight may land
    /// after an abort). Objects already complete stay.
    /// - Returns: `.done` once the upload is gone (or there was none); `.retry` while parts are still listed or the
    ///   server cannot be reached or is busy (the engine tries again with backoff, across restarts); `.giveUp` when
    ///   the server refuses for good (access denied, no such bucket).
    func discardPartial(in job: JobContext) async -> CleanUpOutcome {
        guard let checkpoint = try? job.loadCheckpoint(as: UploadCheckpoint.self) else { return .done }
        return await discard(checkpoint, in: job)
    }

    /// `discardPartial` of the unfinished multipart upload `checkpoint` names for its file in progress.
    func discard(_ checkpoint: UploadCheckpoint, in job: JobContext) async -> CleanUpOutcome {
        guard checkpoint.s3UploadID != nil || checkpoint.s3CreateStarted != nil, checkpoint.fileIndex < files.count
        else { return .done }
        let key: String
        do throws(JobError) {
            key = try self.key(checkpoint.fileIndex)
        } catch {
            return .retry("could not read the job's file list to find its unfinished upload: \(error.message)")
        }
        let object = "s3://\(bucket)/\(key)"
        var uploadID = checkpoint.s3UploadID ?? "(created, UploadId not heard)"
        do {
            var client = try await Self.client(for: params, bucket: bucket, in: job)
            client.requestTimeoutMilliseconds = 5_000
            // Also the uploads a Create whose answer never came may have left.
            var ids = checkpoint.s3UploadID.map { [$0] } ?? []
            if let since = checkpoint.s3CreateStarted {
                ids += try await Self.orphans(key: key, since: since, client: client).map(\.uploadID)
            }
            for id in ids {
                uploadID = id
                if let left = try await Self.abort(key: key, uploadID: id, client: client) {
                    return .retry("multipart upload \(id) of \(object) still lists \(left) parts after an abort")
                }
                job.log(.info, "aborted the unfinished multipart upload \(id) of \(object)")
            }
            return .done
        } catch let error as S3Error
            where error.isTransient || [.expiredToken, .requestTimeTooSkewed, .invalidPart].contains(error.code)
        {
            return .retry("multipart upload \(uploadID) of \(object) is still on the server: \(error)")
        } catch let error as JobError where error.retryable {
            return .retry("multipart upload \(uploadID) of \(object) is still on the server: \(error)")
        } catch {
            return .giveUp("multipart upload \(uploadID) of \(object) stays on the server: abort failed: \(error)")
        }
    }
}
