import TrailbookEngine
import TrailbookLoop

/// One destination's transfer: the seam under `UploadJob`, which keeps the promises every destination shares.
///
/// `UploadJob` parses the destination, makes its transfer (`UploadJob.transfer(for:)`), and then:
/// - runs it (`run`); each transfer starts through `UploadCheckpoint.startOrResume`, so sources are captured once
///   and checked on every resume the same way, and checks the source again before each piece it sends;
/// - once the job ended `failed` or `cancelled` (whatever the reason; not after `timeout` or `resource_reclaim`,
///   which keep the partial upload for the next attempt), calls `discardPartial` from `UploadJob.cleanUp`, which the
///   engine retries until it is done, so no ending leaves half a file behind that nothing will ever resume.
///
/// Conformers: `DirectoryUpload` (`file://`), `TusUploadRun` (tus), `S3UploadRun` (`s3://`).
@LoopActor
protocol UploadTransfer {
    /// Uploads (or resumes) every file and returns the job's result (`UploadJob.result`).
    /// - Throws: `JobError` with the kind's codes, or `JobStopped` when stopped.
    func run(in job: JobContext) async throws -> JSONValue

    /// Removes the partial upload after the job ended `failed` or `cancelled`. Files already complete stay.
    /// - Returns: `.done`, or `.retry`/`.giveUp` with what is left behind and where.
    func discardPartial(in job: JobContext) async -> CleanUpOutcome
}

/// Called by a transfer once file `index` has landed — renamed into place, its tus upload complete, its object
/// made and its size checked — with its record, before the job moves on. An upload of library photos remembers
/// the photo there (`UploadPhotoLibrary.remember`), so a crash forgets at most the file that just landed, which
/// the resumed job finds complete and records then.
typealias FileLanded = @LoopActor (_ index: Int, _ file: UploadedFile) async -> Void

extension UploadCheckpoint {
    /// Stats the sources at `indices` (`paths` and `names` are theirs, aligned) and returns their identities; may
    /// check the destination too. Runs on the thread pool.
    typealias Identities = @Sendable (_ indices: Range<Int>, _ paths: [BytePath], _ names: [BytePath]) throws ->
        [SourceIdentity]

    /// The job's checkpoint, checked against the sources, or a new one: the start every transfer shares.
    ///
    /// On resume, the sources not yet finished are examined again with `identities` and must be what they were
    /// when the job first ran; on a first run, every source's identity is captured and saved at once. `files`
    /// then knows every file's identity (`UploadFileList.capture`).
    /// - Parameters:
    ///   - files: the job's files (given, or a folder upload's list in the store).
    ///   - identities: see `Identities`.
    ///   - filesFailAlone: a folder upload whose transfer fails a file by itself (`failFile`): only the file in
    ///     progress is checked now (the others at their turn), and one that changed or is gone is failed alone
    ///     and passed (saved), then the next is checked.
    ///   - discardFile: with `filesFailAlone`, removes what the destination holds of the file in progress (a tus
    ///     upload, a multipart upload) before it is failed alone; `nil` when there is nothing to remove.
    /// - Returns: the checkpoint and whether it was resumed from a saved one.
    /// - Throws: `bad_checkpoint`, `source_changed`, `store_error`, and what `identities` throws.
    @LoopActor
    static func startOrResume(
        files: UploadFileList, in job: JobContext, filesFailAlone: Bool = false,
        discardFile: (@LoopActor (UploadCheckpoint) async throws -> Void)? = nil,
        identities: @escaping Identities
    ) async throws -> (checkpoint: UploadCheckpoint, resumed: Bool) {
        if let saved = try UploadCheckpoint.load(in: job) {
            files.capture(saved)
            try saved.check(files: files)
            if filesFailAlone, saved.tree != nil {
                let checked = try await saved.checkCurrentFile(
                    files: files, in: job, discardFile: discardFile, identities: identities)
                return (checked, true)
            }
            let remaining = saved.fileIndex..<files.count
            let (paths, names) = try files.slice(remaining)
            let now = try await job.runOnPool { try identities(remaining, paths, names) }
            for (index, identity) in zip(remaining, now) {
                let expected = try files.identity(index)
                if identity != expected { throw PartFile.changed(try files.path(index), expected: expected, now: identity) }
            }
            return (saved, true)
        }
        let all = files.indices
        let (paths, names) = try files.slice(all)
        let checkpoint = UploadCheckpoint(sources: try await job.runOnPool { try identities(all, paths, names) })
        try job.saveCheckpoint(checkpoint)
        files.capture(checkpoint)
        return (checkpoint, false)
    }
}
