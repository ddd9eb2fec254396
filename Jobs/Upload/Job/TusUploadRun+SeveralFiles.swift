import TrailbookEngine
import TrailbookLoop
import TusClient

/// Files that go in one `PATCH` are sent several at a time (`filesInFlight`, the cap S3's single `PUT`s have), so a
/// folder of small files is not one round trip after another: see `uploadOnePatchFiles`. A larger file still goes
/// alone, one chunk after another, with its checkpoint saved around each `PATCH` (`upload`).
extension TusUploadRun {
    /// Most files of one `PATCH` in flight at once: `S3Options.defaultPartsInFlight` (4), as for S3's single `PUT`s.
    static let filesInFlight = S3Options.defaultPartsInFlight

    /// Whether file `index` goes up in one `PATCH` (at most `chunk_size` bytes).
    /// - Throws: `JobError` `store_error` when the file list cannot be read.
    func isOnePatch(_ index: Int) throws(JobError) -> Bool { try files.identity(index).size <= params.chunkSize }

    /// Sends the files from `checkpoint.fileIndex` on that go in one `PATCH`, up to the next larger one, at most
    /// `filesInFlight` at a time, with the server's `info` (found by the run's first file).
    ///
    /// Each file is remembered as created in the upload memory before its `PATCH` (`remember`), as a lone file of
    /// one `PATCH` is; its state is not saved in the checkpoint on the way. A file landed is recorded as it lands
    /// (`land`: out of order ones wait in `finishedAhead`), on `cadence`'s terms. A `kill -9` or a stop therefore
    /// leaves every file in flight in the memory as created: the next attempt asks the server its offset (`HEAD`)
    /// and goes on from there on the same upload (`remembered`), and takes one the memory shows complete as landed.
    /// A file whose source went away or changed fails alone: its own unfinished upload is deleted first. Any other
    /// error cancels the files in flight (the task group cancels its children, whose requests are aborted) and is
    /// thrown once they have stopped.
    /// - Throws: what `upload` throws; `JobError` `unavailable` (retryable) when a failed file's upload cannot be
    ///   deleted yet; `store_write_failed`.
    func uploadOnePatchFiles(
        checkpoint: inout UploadCheckpoint, cadence: inout LandedFilesCadence, info: TusServerInfo,
        client: TusClient, progress: TusProgress, remembered: [Int: RememberedFile], in job: JobContext
    ) async throws {
        try await withThrowingTaskGroup(of: (Int, Result<UploadedFile, JobError>).self) { group in
            var inFlight = 0
            var next = checkpoint.fileIndex
            /// Records file `index` as failed alone (`UploadCheckpoint.failAlone`, which saves the checkpoint).
            @LoopActor func failAlone(_ index: Int, _ failure: JobError) async throws {
                let failed = try files.file(index)
                try await checkpoint.failAlone(index, name: failed.name, path: failed.path, failure: failure, in: job)
                cadence.saved()
            }
            @LoopActor func record(_ done: (Int, Result<UploadedFile, JobError>)) async throws {
                inFlight -= 1
                let (index, outcome) = done
                switch outcome {
                case .success(let file):
                    checkpoint.bytesResent += file.bytesResent
                    try await land(index, file, checkpoint: &checkpoint, cadence: &cadence, progress: progress, in: job)
                case .failure(let failure):
                    // Its own upload was deleted by the send (`OnePatchSend`): nothing of it is on the server.
                    if index == checkpoint.fileIndex { checkpoint.uploadURL = nil }
                    try await failAlone(index, failure)
                }
            }
            while next < files.count {
                if checkpoint.landedAhead(next) || checkpoint.failedAhead?.contains(next) == true {
                    next += 1
                    continue
                }
                guard try isOnePatch(next) else { break }
                try job.checkCancellation()
                if inFlight == Self.filesInFlight, let done = try await group.next() { try await record(done) }
                let found = remembered[next]
                if let found, let sha256 = found.state.sha256, found.size == (try files.identity(next).size) {
                    do {
                        try await adopt(
                            found, index: next, sha256: sha256, checkpoint: &checkpoint, cadence: &cadence,
                            progress: progress, in: job)
                    } catch {
                        guard job.stopReason == nil, let failure = checkpoint.fileFailure(error) else { throw error }
                        try await failAlone(next, failure)
                    }
                    next += 1
                    continue
                }
                let send = OnePatchSend(
                    run: self, index: next, start: start(of: next, in: checkpoint, remembered: found), info: info,
                    client: client, progress: progress, job: job, failsAlone: checkpoint.tree != nil)
                let index = next
                group.addTask { (index, try await send.send()) }
                inFlight += 1
                next += 1
            }
            while let done = try await group.next() { try await record(done) }
        }
    }

    /// The scratch checkpoint file `index` starts from when sent beside others: the checkpoint's own state of it
    /// when it is the file in progress (its upload URL, offset, resent bytes), else the upload this job created for
    /// it in an earlier attempt (`remembered` as created), else nothing (a new upload).
    private func start(
        of index: Int, in checkpoint: UploadCheckpoint, remembered: RememberedFile?
    ) -> UploadCheckpoint {
        var start = UploadCheckpoint(version: checkpoint.version, fileIndex: index, sources: [])
        if index == checkpoint.fileIndex {
            start.offset = checkpoint.offset
            start.uploadURL = checkpoint.uploadURL
            start.uploadExpires = checkpoint.uploadExpires
            start.sentThrough = checkpoint.sentThrough
            start.failingSince = checkpoint.failingSince
            start.fileBytesResent = checkpoint.fileBytesResent
            start.checksumVerified = checkpoint.checksumVerified
        }
        // The memory is written before the checkpoint, so its upload is the newest this job made for the file.
        if let remembered, remembered.state == .created, start.uploadURL != remembered.location {
            start.uploadURL = remembered.location
            start.offset = 0
            start.uploadExpires = nil
        }
        return start
    }

    /// Records file `index` (at or past `checkpoint.fileIndex`) as landed with result `file`
    /// (`UploadCheckpoint.land`: in order, or ahead in `finishedAhead`), clears the per-file tus state when it was
    /// the file in progress, counts it in the progress, tells `landed`, and saves the checkpoint when `cadence`
    /// says a save is due.
    /// - Throws: `store_write_failed`.
    func land(
        _ index: Int, _ file: UploadedFile, checkpoint: inout UploadCheckpoint, cadence: inout LandedFilesCadence,
        progress: TusProgress, in job: JobContext
    ) async throws {
        let wasCurrent = index == checkpoint.fileIndex
        checkpoint.land(index, file)
        if wasCurrent {
            checkpoint.uploadURL = nil
            checkpoint.uploadExpires = nil
            checkpoint.sentThrough = nil
            checkpoint.failingSince = nil
            checkpoint.checksumVerified = nil
        }
        progress.acknowledged(index, file.bytes)
        progress.landed()
        // Told first: the save writes the file's outcome it notes, before the checkpoint that passes it.
        await landed?(index, file)
        if cadence.landed(bytes: file.bytes, landed: checkpoint.landedCount) {
            try job.saveCheckpoint(checkpoint)
            cadence.saved()
        }
    }

    /// One file of one `PATCH` sent beside others, as a value a child task can own.
    @LoopActor
    struct OnePatchSend {
        let run: TusUploadRun
        let index: Int
        /// The file's own scratch checkpoint (see `start(of:in:remembered:)`); never saved.
        let start: UploadCheckpoint
        let info: TusServerInfo
        let client: TusClient
        let progress: TusProgress
        let job: JobContext
        /// A folder's file: its source going away or changing fails it alone.
        let failsAlone: Bool

        /// Uploads the file (`TusUploadRun.upload`, not alone).
        /// - Returns: its result row, or the failure of this file alone (its unfinished upload deleted).
        /// - Throws: what `upload` throws that is not one file's failure; `JobError` `unavailable` (retryable)
        ///   when the failed file's upload cannot be deleted yet.
        func send() async throws -> Result<UploadedFile, JobError> {
            var checkpoint = start
            var cadence = LandedFilesCadence()
            var known: TusServerInfo? = info
            do {
                return .success(
                    try await run.upload(
                        index, checkpoint: &checkpoint, cadence: &cadence, info: &known, client: client,
                        progress: progress, in: job, alone: false))
            } catch {
                guard failsAlone, job.stopReason == nil, let failure = UploadCheckpoint.failsAlone(error) else {
                    throw error
                }
                if let url = checkpoint.uploadURL {
                    switch await run.discardUpload(index, url: url, in: job) {
                    case .done: break
                    case .retry(let left):
                        throw JobError(
                            code: "unavailable",
                            message: "\(left); the upload resumes where it stopped once the server answers",
                            retryable: true)
                    case .giveUp(let left): job.log(.warning, left)
                    }
                }
                return .failure(failure)
            }
        }
    }
}
