import TrailbookEngine
import TrailbookHTTP
import TrailbookLoop
import TusClient

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's one HTTP client, shared by every tus upload: made on first use, on the loop, and kept for the
/// daemon's life (connections to a server are reused between chunks and jobs).
@LoopActor
enum TusTransport {
    private static var client: HTTPClient?

    /// The shared client on `EventLoop.main`.
    static var shared: HTTPClient {
        if let client { return client }
        let made = HTTPClient(loop: .main)
        client = made
        return made
    }
}

/// An upload to a tus 1.0 server (`http(s)://…/files/`), https://tus.io/protocols/resumable-upload.
///
/// Files that go in one `PATCH` are sent several at a time (`uploadOnePatchFiles`, at most `filesInFlight`); a
/// larger file goes alone. For each file: `OPTIONS` once per run (size limit, checksum algorithms), `POST` to create
/// the upload (or, when the checkpoint has one, `HEAD` to learn the server's offset), then one `PATCH` per chunk
/// (`chunk_size` bytes read and hashed on the thread pool), each with `Upload-Checksum` when the server offers the
/// checksum extension. For a file of more than one chunk the checkpoint is saved when its upload is created,
/// before each `PATCH` (the range about to be sent) and after it (the offset the server confirmed), so a resume
/// after a crash, a timeout, a reclaim or a dropped connection starts from the server's offset and counts what had
/// to be sent again in `bytes_resent`. Files that go in one `PATCH` are recorded as they land, on
/// `LandedFilesCadence`'s terms (see `upload`).
///
/// The resume and error policy is `TusUpload`'s: 409 → `HEAD` and continue (a persistent conflict waits, 4 PATCHes
/// at most, then `offset_mismatch`); 404/410 → a new upload, once, then `gone`; 460 → wait, the chunk again (4
/// PATCHes at most, then `checksum_mismatch`); 413 or above `Tus-Max-Size` → `too_large` before sending anything;
/// 401/403 → `unauthorized` (the job is paused; `resume --header` gives new credentials); 5xx, 423, 429, resets,
/// DNS, TLS and stalls → wait (`Retry-After` at least, plus backoff with full jitter) and try again, for as long as
/// `--give-up-after` (24 h), then `unavailable`; the waits (`JobContext.waitOut`) use up neither the stall timeout
/// nor the attempt's deadline, and a 429 holds every job's requests to that host (`HTTPClient`). An upload whose
/// `Upload-Expires` has passed is not resumed: a new one is created.
///
/// The source's identity is checked after each chunk is read, before its `PATCH`: a changed source stops the job
/// before its last byte is sent (`source_changed`), and the engine's clean-up then deletes the upload.
///
/// Progress: `completed` is the acknowledged bytes, `in_flight` those of the current `PATCH` already sent (see
/// `TusProgress`); with the checksum extension, `TusUpload`'s probe decides `checksum_verified`. The SHA-256 in the result is of
/// the source's bytes, hashed in order as they are read; on resume the prefix the server already has is re-hashed
/// from the source.
@LoopActor
struct TusUploadRun: UploadTransfer {
    let params: UploadJob.Params
    /// The files, their names (the `filename` metadata) and identities (`UploadFileList`).
    let files: UploadFileList
    let endpoint: String
    /// Told of each upload the server completed (see `FileLanded`).
    var landed: FileLanded?

    /// Most progress reports per second from the send callback (curl reports every few KiB).
    static let progressInterval = 0.02

    /// Submit-time checks: header lines well-formed, names, sources (`DirectoryIO.sourceIdentities`), a readable
    /// CA bundle. Off the loop thread. The server is not contacted.
    /// - Throws: `JobError` `invalid_params`, `bad_name`, `source_missing`, `source_not_regular`,
    ///   `source_unreadable`.
    static func validate(_ params: UploadJob.Params) async throws(JobError) {
        _ = try params.headerFields()
        for file in params.files { _ = try UploadNames.name(ofSource: file) }
        let files = params.files
        let caBundle = params.caBundle
        let outcome = await Task.detached {
            Result { () throws(JobError) in
                _ = try DirectoryIO.sourceIdentities(files: files, indices: files.indices)
                if let caBundle {
                    guard caBundle.hasPrefix("/"), case .success(let (_, mode)) = DirectoryIO.status(BytePath(caBundle)),
                        DirectoryIO.isRegular(mode), access(caBundle, R_OK) == 0
                    else {
                        throw JobError(
                            code: "invalid_params",
                            message: "CA bundle \(caBundle) is not a readable file; give a PEM file (--ca-bundle)")
                    }
                }
            }
        }.value
        try outcome.get()
    }

    /// A client for this upload's endpoint with its headers, CA bundle and rate limit.
    /// `quiet`: the limits that keep a request on a silent network from outlasting the job's stall timeout.
    static func client(
        for params: UploadJob.Params, endpoint: String, requestTimeoutMilliseconds: Int = 30_000,
        quiet: NetworkQuietLimit? = nil
    ) throws(JobError) -> TusClient {
        var headers = HTTPHeaders()
        for field in try params.headerFields() { headers.add(name: field.name, value: field.value) }
        var options = TusClient.Options(
            headers: headers, caBundlePath: params.caBundle, maxSendBytesPerSecond: params.maxRate,
            requestTimeoutMilliseconds: requestTimeoutMilliseconds)
        if let quiet {
            options.stallTimeoutSeconds = quiet.stallSeconds
            options.connectTimeoutMilliseconds = quiet.connectMilliseconds
            options.requestTimeoutMilliseconds = min(requestTimeoutMilliseconds, quiet.requestMilliseconds)
        }
        return TusClient(http: TusTransport.shared, endpoint: endpoint, options: options)
    }

    /// Runs (or resumes) the upload; see the type's documentation.
    func run(in job: JobContext) async throws -> JSONValue {
        let files = self.files
        var (checkpoint, _) = try await UploadCheckpoint.startOrResume(
            files: files, in: job, filesFailAlone: true, discardFile: { try await discardFailed($0, in: job) }
        ) { _, paths, _ in
            try DirectoryIO.sourceIdentities(files: paths, indices: paths.indices)
        }

        let sizes = try files.sizes()
        let progress = TusProgress(job: job, files: files, sizes: sizes)
        for (index, bytes) in try checkpoint.landedBefore(sizes: sizes, files: files) {
            progress.acknowledged(index, bytes)
            progress.landed()
        }
        let client = try Self.client(for: params, endpoint: endpoint, quiet: NetworkQuietLimit(for: job))
        var info: TusServerInfo?
        var cadence = LandedFilesCadence()
        // What this job did that its checkpoint does not show (a stop between saves): see TusUploadRun+Memory.
        let remembered = ownRemembered(from: checkpoint.fileIndex, in: job)
        do {
            while checkpoint.fileIndex < files.count {
                try job.checkCancellation()
                do {
                    if let found = remembered[checkpoint.fileIndex] {
                        let size = sizes[checkpoint.fileIndex]
                        if let sha256 = found.state.sha256, found.size == size {
                            try await adopt(
                                found, index: checkpoint.fileIndex, sha256: sha256, checkpoint: &checkpoint,
                                cadence: &cadence, progress: progress, in: job)
                            continue
                        }
                        // Created and not known complete: resumed. The memory is written before the checkpoint,
                        // so its upload is the newest this job made for the file.
                        if found.state == .created, checkpoint.uploadURL != found.location {
                            checkpoint.uploadURL = found.location
                            checkpoint.offset = 0
                            checkpoint.uploadExpires = nil
                        }
                    }
                    let index = checkpoint.fileIndex
                    // Files of one PATCH go several at a time once the server is known (its first file found it).
                    if let known = info, try isOnePatch(index) {
                        try await uploadOnePatchFiles(
                            checkpoint: &checkpoint, cadence: &cadence, info: known, client: client,
                            progress: progress, remembered: remembered, in: job)
                        continue
                    }
                    let file = try await upload(
                        index, checkpoint: &checkpoint, cadence: &cadence, info: &info, client: client,
                        progress: progress, in: job)
                    try await land(index, file, checkpoint: &checkpoint, cadence: &cadence, progress: progress, in: job)
                } catch {
                    // A folder's file removed before its turn or changed while sent fails alone; the others go on.
                    guard job.stopReason == nil, let failure = checkpoint.fileFailure(error) else { throw error }
                    try await skipFailed(failure, checkpoint: &checkpoint, in: job)
                    cadence.saved()
                }
            }
            if cadence.hasUnsaved { try job.saveCheckpoint(checkpoint) }
        } catch {
            // A stop or an error keeps the files that landed for the next attempt, as far as it can.
            if cadence.hasUnsaved { try? job.saveCheckpoint(checkpoint) }
            throw error
        }
        progress.report(current: nil)
        return UploadJob.result(files: checkpoint.finished, bytesResent: checkpoint.bytesResent, destination: params.to)
    }

    /// Uploads file `index`, driving a `TusUpload` state machine with `client`; the caller records the file it
    /// returns as landed (`land`). `alone`: the file is `checkpoint`'s file in progress and its state is saved on
    /// the way; `false` for a file sent beside others (`uploadOnePatchFiles`), whose `checkpoint` is its own scratch
    /// copy and is never saved (its upload is in the upload memory from creation on).
    ///
    /// A file that goes in one `PATCH` (at most `chunk_size` bytes) saves no checkpoint of its own on the way
    /// (creation, before the `PATCH`): it is recorded as it lands, on `cadence`'s terms, so a job of n small files
    /// saves O(n) entries in all instead of O(n²) (each save writes the list of every landed file). A `kill -9`
    /// then forgets the upload under way and the landed files not yet saved: the resumed job sends them again as
    /// new uploads (not counted in `bytes_resent`: no checkpoint knew of them), and the earlier uploads stay on the
    /// server. A larger file keeps its saves at creation and before each `PATCH` (each one is worth a chunk).
    func upload(
        _ index: Int, checkpoint: inout UploadCheckpoint, cadence: inout LandedFilesCadence,
        info: inout TusServerInfo?, client: TusClient, progress: TusProgress, in job: JobContext, alone: Bool = true
    ) async throws -> UploadedFile {
        let file = try files.file(index)
        let name = file.name
        let path = file.path
        let identity = file.identity
        let onePatch = identity.size <= params.chunkSize
        /// Saves the checkpoint, which records the landed files too.
        func save(_ checkpoint: UploadCheckpoint) throws(JobError) {
            guard alone else { return }
            try job.saveCheckpoint(checkpoint)
            cadence.saved()
        }
        let source = try await job.runOnPool { try TusSource.open(path, expected: identity) }

        var url = checkpoint.uploadURL
        if let existing = url, let expires = checkpoint.uploadExpires, let at = HTTPDate.parse(expires),
            Double(at) <= Timestamp.now()
        {
            job.log(.info, "\(name): the upload \(existing) expired at \(expires); creating a new one")
            url = nil
            checkpoint.uploadExpires = nil
            checkpoint.offset = 0
        }
        var policy = TusUpload.Policy()
        policy.giveUpAfterMilliseconds = Int64(min(job.giveUpAfterSeconds, 1e12) * 1000)
        var machine = TusUpload(
            length: identity.size, chunkSize: Int(params.chunkSize), policy: policy, url: url,
            sentThrough: checkpoint.sentThrough ?? 0, confirmedOffset: checkpoint.offset,
            failingSince: checkpoint.failingSince)
        let resentBefore = (all: checkpoint.bytesResent, file: checkpoint.fileBytesResent)
        let verifiedBefore = checkpoint.checksumVerified
        func record(_ machine: TusUpload, into checkpoint: inout UploadCheckpoint) {
            checkpoint.uploadURL = machine.url
            checkpoint.offset = machine.confirmedOffset
            checkpoint.sentThrough = machine.sentThrough
            checkpoint.failingSince = machine.failingSince
            checkpoint.uploadExpires = machine.expires ?? checkpoint.uploadExpires
            checkpoint.bytesResent = resentBefore.all + machine.bytesResent
            checkpoint.fileBytesResent = resentBefore.file + machine.bytesResent
            // Verified only if every run that probed found a server that checks (a run that did not probe yet
            // changes nothing).
            if let verified = machine.checksumVerified {
                checkpoint.checksumVerified = verified && (verifiedBefore ?? true)
            }
        }

        progress.acknowledged(index, checkpoint.offset)
        progress.report(current: name)
        var action = info.map { machine.discovered($0) } ?? machine.start()
        while true {
            try job.checkCancellation()
            // Beside other files: a sibling's error cancels this task, and nothing here should go on retrying.
            if !alone { try Task.checkCancellation() }
            do {
                switch action {
                case .discover:
                    let found = try await client.discover()
                    info = found
                    if let max = found.maxSize {
                        for later in index..<files.count {
                            let size = try files.identity(later).size
                            guard size > max else { continue }
                            throw JobError(
                                code: "too_large",
                                message: "\(try files.name(later)) (\(size) bytes) exceeds the "
                                    + "server's Tus-Max-Size of \(max) bytes; nothing was sent")
                        }
                    }
                    action = machine.discovered(found)

                case .create(let length):
                    let created = try await client.create(
                        length: length, metadata: [("filetype", Self.mediaType(of: name.description))],
                        binaryMetadata: [("filename", name.bytes)])
                    action = machine.created(url: created.url)
                    record(machine, into: &checkpoint)
                    checkpoint.uploadExpires = created.expires
                    remember(index, url: created.url, size: length, state: .created, in: job)
                    if !onePatch { try save(checkpoint) }
                    job.log(.info, "\(name): created upload \(created.url)")
                    let had = progress.upload.done(index)
                    if had > 0 {
                        // A new upload after the server lost the old one (404/410): the one way back to 0.
                        progress.lost(index, to: 0)
                        progress.report(current: name)
                        job.log(
                            .warning,
                            "server_offset_regressed: \(name): the server lost the upload that had \(had) bytes "
                                + "acknowledged; sending again from 0")
                    }

                case .queryOffset(let url):
                    let status = try await client.status(of: url)
                    let regressions = machine.regressions.count
                    let shrinks = machine.shrinks.count
                    action = machine.offsetReported(status)
                    if machine.shrinks.count > shrinks, let shrink = machine.shrinks.last {
                        job.log(
                            .warning,
                            "\(name): \(machine.chunkSizer.cutsBeforeShrinking) PATCHes of \(shrink.from) bytes in a "
                                + "row were cut off mid-body and the server gained nothing: a proxy or gateway between "
                                + "here and the server likely limits the size of requests; sending \(shrink.to)-byte "
                                + "chunks from now on (a smaller --chunk-size avoids this)")
                    }
                    record(machine, into: &checkpoint)
                    try save(checkpoint)
                    if machine.regressions.count > regressions, let lost = machine.regressions.last {
                        progress.lost(index, to: lost.reported)
                        job.log(
                            .warning,
                            "server_offset_regressed: \(name): the server now reports \(lost.reported) bytes, less "
                                + "than the \(lost.confirmed) it had acknowledged; sending again from \(lost.reported)")
                    } else {
                        progress.acknowledged(index, machine.confirmedOffset)
                    }
                    progress.report(current: name)
                    job.log(
                        .info,
                        "\(name): the server has \(status.offset) of \(identity.size) bytes; continuing from there")

                case .send(let url, let offset, let length):
                    // Bytes the server had before this run read anything: hash them from the source first.
                    if source.hashedThrough < offset { try await source.hash(through: offset, in: job) }
                    // Read, then check the source's identity (size, mtime, ctime, inode), before every PATCH
                    // including the last: a source changed before or during the read stops the job before a
                    // byte of the new version reaches the server, so no complete mixed object is ever made.
                    let chunk = try await job.runOnPool { () throws -> [UInt8] in
                        let bytes = try source.read(at: offset, count: length)
                        try source.checkUnchanged()
                        return bytes
                    }
                    record(machine, into: &checkpoint)
                    // Before the PATCH, the bound of what it may send: after a crash those bytes count as resent.
                    checkpoint.sentThrough = machine.sendingThrough
                    if !onePatch { try save(checkpoint) }
                    let status = try await client.upload(
                        chunk, to: url, at: offset, checksum: info?.checksumAlgorithm,
                        onSendProgress: { sent in progress.sending(index, sent: sent, current: name) })
                    action = machine.chunkAccepted(status)
                    // No checkpoint here: the save before the next PATCH (or at `.succeed`) records this offset;
                    // a resume asks the server anyway.
                    progress.acknowledged(index, machine.confirmedOffset)
                    progress.report(current: name)

                case .probeChecksum(let url, let offset):
                    guard let algorithm = info?.checksumAlgorithm else {
                        action = machine.failed(TusError(code: .protocolError, message: "no checksum algorithm"))
                        continue
                    }
                    switch await Self.probe(client, url, at: offset, algorithm: algorithm) {
                    case .success(let status):
                        action = machine.chunkAccepted(status)
                        job.log(
                            .warning,
                            "\(name): the server offers the checksum extension but accepted a wrong Upload-Checksum; "
                                + "what it stores is not verified (checksum_verified: false)")
                    case .failure(let error) where error.code == .checksumMismatch:
                        action = machine.failed(error)
                        job.log(.info, "\(name): the server verifies checksums (it refused a wrong Upload-Checksum)")
                    case .failure(let error):
                        throw error
                    }

                case .wait(let milliseconds):
                    // Saved so that a restart keeps counting towards --give-up-after from the first failure.
                    record(machine, into: &checkpoint)
                    try save(checkpoint)
                    job.log(.info, "\(name): retrying in \(milliseconds) ms")
                    // Waiting out an outage is not a stall and does not use up the attempt's deadline.
                    try await job.waitOut(seconds: Double(milliseconds) / 1000)
                    action = machine.backoffElapsed()

                case .succeed(let url, let bytes, _):
                    if source.hashedThrough < bytes { try await source.hash(through: bytes, in: job) }
                    try await job.runOnPool { try source.checkUnchanged() }
                    record(machine, into: &checkpoint)
                    var file = UploadedFile(
                        name: name, path: BytePath(url), bytes: bytes, sha256: source.hash.hexDigest,
                        bytesResent: checkpoint.fileBytesResent, url: url)
                    file.checksumVerified = checkpoint.checksumVerified ?? false
                    remember(index, url: url, size: bytes, state: .complete(sha256: file.sha256), in: job)
                    progress.acknowledged(index, bytes)
                    return file

                case .fail(let error):
                    throw Self.jobError(error, name: name, retryable: false)

                case .giveUp(let error):
                    if error.code == .retryable {
                        let what =
                            error.resetWhileSending
                            ? error.message
                            : error.transport.map { "could not reach the tus server (\($0.message))" }
                                ?? error.status.map { "the tus server answered HTTP \($0)" } ?? error.message
                        throw JobError(
                            code: "unavailable",
                            message: "\(name): the tus server kept failing for \(Self.duration(job.giveUpAfterSeconds)) "
                                + "(--give-up-after); last: \(what). Submit it again once the server works")
                    }
                    throw Self.jobError(error, name: name, retryable: true)
                }
            } catch let error as TusError {
                progress.acknowledged(index, machine.confirmedOffset)
                if error.code == .cancelled, job.stopReason != nil {
                    // Stopped mid-PATCH: record exactly what went out, so the resume counts it as resent.
                    machine.stopped(bytesSent: error.bytesSent ?? 0)
                    record(machine, into: &checkpoint)
                    try? save(checkpoint)
                    try job.checkCancellation()
                }
                job.log(.warning, "\(name): \(error)")
                action = machine.failed(
                    error.code == .cancelled ? TusError(code: .retryable, message: error.message) : error,
                    at: Int64(Timestamp.now() * 1000))
            }
        }
    }

    /// `TusClient.probeChecksum` as a `Result`.
    private static func probe(
        _ client: TusClient, _ url: String, at offset: Int64, algorithm: TusChecksumAlgorithm
    ) async -> Result<TusUploadStatus, TusError> {
        do {
            return .success(try await client.probeChecksum(url, at: offset, algorithm: algorithm))
        } catch {
            return .failure(error)
        }
    }

    /// The job error for a tus failure: the tus code as the job's stable code.
    static func jobError(_ error: TusError, name: BytePath, retryable: Bool) -> JobError {
        let advice: String
        switch error.code {
        case .tooLarge: advice = "the server refuses a file this large"
        case .unauthorized:
            // Paused, not failed: a token that expired or was rotated is the user's to renew, and the upload (URL
            // and checkpoint) stays valid for when they have.
            return JobError(
                code: "unauthorized",
                message: "\(name): \(error.message) — the server refused the credentials; the job is paused with its "
                    + "upload kept: give new ones with `resume ID --header \"Authorization: Bearer …\"` and it continues from "
                    + "the server's offset",
                pausesJob: true)
        case .gone: advice = "the server lost the upload again after it was created anew"
        case .checksumMismatch: advice = "the data was corrupted on the way several times in a row"
        case .offsetMismatch: advice = "the server's offset kept disagreeing"
        case .requestCutOff:
            advice = "a proxy or gateway between here and the server likely cuts off requests this large; raise its "
                + "request size limit (nginx: client_max_body_size), or upload past it"
        default: advice = "the server's answer does not follow the tus protocol"
        }
        return JobError(code: error.code.description, message: "\(name): \(error.message) — \(advice)", retryable: retryable)
    }

    /// "24 h", "90 s": a give-up budget in words.
    static func duration(_ seconds: Double) -> String {
        seconds >= 3_600 && seconds.truncatingRemainder(dividingBy: 3_600) == 0
            ? "\(Int(seconds / 3_600)) h" : "\(Int(seconds.rounded())) s"
    }

    /// `Upload-Metadata` `filetype` from the name's extension.
    static func mediaType(of name: String) -> String {
        let ext = name.split(separator: ".").last.map { $0.lowercased() } ?? ""
        switch ext {
        case "jpg", "jpeg": return "image/jpeg"
        case "png": return "image/png"
        case "heic": return "image/heic"
        case "gif": return "image/gif"
        case "tif", "tiff": return "image/tiff"
        case "mp4": return "video/mp4"
        case "mov": return "video/quicktime"
        default: return "application/octet-stream"
        }
    }

    /// After the job ended `failed` or `cancelled`: deletes the current file's unfinished upload on the server
    /// (`DELETE`, termination). Files already complete stay.
    /// - Returns: `.done` once the server answered 204, 404 or 410 (or there is no unfinished upload); `.retry`
    ///   (with the URL) when it did not answer, answered 5xx, 423 or 429; `.giveUp` when it refuses termination
    ///   for good (401/403, 405 or another status outside tus).
    func discardPartial(in job: JobContext) async -> CleanUpOutcome {
        guard let checkpoint = try? job.loadCheckpoint(as: UploadCheckpoint.self) else { return .done }
        return await discard(checkpoint, in: job)
    }

    /// `discardPartial` of the unfinished upload `checkpoint` names (its `uploadURL`), and of those of this job's
    /// files from `checkpoint.fileIndex` on that the upload memory shows as only created (a file of one `PATCH`
    /// saves no checkpoint when its upload is created: see TusUploadRun+Memory).
    func discard(_ checkpoint: UploadCheckpoint, in job: JobContext) async -> CleanUpOutcome {
        var unfinished = ownCreated(from: checkpoint.fileIndex, in: job)
        if let url = checkpoint.uploadURL, !unfinished.contains(where: { $0.url == url }) {
            unfinished.insert((checkpoint.fileIndex, url), at: 0)
        }
        for (index, url) in unfinished {
            let outcome = await discardUpload(index, url: url, in: job)
            guard case .done = outcome else { return outcome }
        }
        return .done
    }

    /// Deletes file `index`'s unfinished upload at `url` on the server (`DELETE`) and forgets it in the upload
    /// memory. The outcomes are `discardPartial`'s.
    func discardUpload(_ index: Int, url: String, in job: JobContext) async -> CleanUpOutcome {
        do {
            let client = try Self.client(for: params, endpoint: endpoint, requestTimeoutMilliseconds: 5_000)
            try await client.terminate(url)
            job.log(.info, "deleted the unfinished upload \(url) on the server")
            forget(index, in: job)
            return .done
        } catch let error as TusError where error.code == .retryable || error.code == .cancelled {
            return .retry("the unfinished upload \(url) is still on the server: \(error)")
        } catch {
            return .giveUp("the unfinished upload \(url) stays on the server: DELETE failed: \(error)")
        }
    }
}

/// Byte progress of a tus upload, reported from the loop: `completed` is the bytes the server acknowledged and
/// never decreases (except when the server itself reports less than it acknowledged: `lost(_:to:)`);
/// `in_flight` is the bytes of the `PATCH`es under way (one per file in flight) that went out but are not
/// acknowledged yet.
@LoopActor
final class TusProgress {
    let job: JobContext
    private(set) var upload: UploadProgress
    /// Bytes sent and not yet acknowledged, by file index.
    private var inFlight: [Int: Int64] = [:]
    private var lastReport = 0.0

    /// Progress of `files` (their names label the rows) of `sizes` bytes.
    init(job: JobContext, files: UploadFileList, sizes: [Int64]) {
        self.job = job
        upload = UploadProgress(sizes: sizes) { files.label($0) }
    }

    /// File `index` has `bytes` acknowledged by the server (a lower number than before is ignored: see
    /// `lost(_:to:)`); nothing is in flight any more.
    func acknowledged(_ index: Int, _ bytes: Int64) {
        inFlight[index] = nil
        upload.set(index, max(bytes, upload.done(index)))
    }

    /// The server reports only `bytes` of file `index`, less than it had acknowledged: the one way `completed`
    /// goes down, logged by the caller.
    func lost(_ index: Int, to bytes: Int64) {
        inFlight[index] = nil
        upload.set(index, bytes)
    }

    /// A file's upload is complete: counted in the files landed (`JobProgress.files`).
    func landed() { upload.filesDone += 1 }

    /// Reports the current numbers.
    func report(current: BytePath?) {
        lastReport = Timestamp.monotonic()
        job.reportProgress(
            completed: upload.completed, total: upload.total, current: current?.description, items: upload.items,
            inFlight: inFlight.values.reduce(0, +), files: upload.files)
    }

    /// The `PATCH` of file `index` has sent `sent` bytes: reports them as in flight, at most every
    /// `TusUploadRun.progressInterval` seconds.
    func sending(_ index: Int, sent: Int64, current: BytePath) {
        inFlight[index] = sent
        let now = Timestamp.monotonic()
        guard now - lastReport >= TusUploadRun.progressInterval else { return }
        report(current: current)
    }
}
