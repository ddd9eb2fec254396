import TrailbookEngine
// For `@LoopActor`, the actor job kinds run on (the engine does not re-export it).
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// An upload to a local directory (`file:///abs/dir`).
///
/// For each file in order: copy it in chunks into `DIR/NAME.<job>.part` (pieces of at most 8 MiB copied in the
/// kernel, hashed from the `.part` file beside the copy: see `PartFile`), `fsync` and checkpoint at each chunk end,
/// then re-check the source, rename the `.part` file to `DIR/NAME` (replacing a file there) and `fsync` the
/// directory. Files smaller than a chunk are copied whole without a sync and land in batches
/// (`DirectoryLandingBatch`): one flush of the file system for many files, then their renames, then another flush.
///
/// On resume, bytes past the checkpoint's offset (written before a crash) are cut off and counted in
/// `bytes_resent`; a `.part` file shorter than the offset (or gone) restarts that file from 0 with a warning; the
/// SHA-256 of the kept prefix is recomputed from the `.part` file.
@LoopActor
struct DirectoryUpload: UploadTransfer {
    let params: UploadJob.Params
    /// The files, their names under the directory and their identities (`UploadFileList`).
    let files: UploadFileList
    /// The destination directory, as parsed from the URL.
    let directory: BytePath
    /// Told of each file renamed into place (see `FileLanded`).
    var landed: FileLanded?

    /// Bytes hashed per pool call when re-hashing a kept prefix on resume.
    static let rehashStep: Int64 = 8 << 20

    /// The job's own `.part` file for file `index`: `DIR/NAME.<first 8 hex digits of the job id>.part`. Per job,
    /// so two jobs uploading files of the same name to one directory (one paused, one running) can never write
    /// into, or resume from, each other's partial file.
    func partPath(_ name: BytePath, job: JobContext) -> BytePath {
        BytePath.join(directory, name + ("." + String(job.id.prefix(8)) + UploadNames.partSuffix))
    }
    /// Where the file named `name` lands: `DIR/NAME`.
    func finalPath(_ name: BytePath) -> BytePath { BytePath.join(directory, name) }

    /// Submit-time checks that need the file system (see `DirectoryIO.preflight`), run off the loop thread so a
    /// slow disk cannot stall the daemon.
    static func validate(files: [BytePath], names: [BytePath], directory: BytePath) async throws(JobError) {
        let outcome = await Task.detached {
            Result { () throws(JobError) in
                _ = try DirectoryIO.preflight(files: files, names: names, directory: directory, indices: files.indices)
            }
        }.value
        try outcome.get()
    }

    /// Runs (or resumes) the upload; see the type's documentation. Waits for the small file copied ahead
    /// (`SmallFileCopyAhead`) on every way out, so no copy of the job outlives its run.
    func run(in job: JobContext) async throws -> JSONValue {
        var ahead = SmallFileCopyAhead()
        do {
            let result = try await run(in: job, ahead: &ahead)
            _ = await ahead.settle()
            return result
        } catch {
            _ = await ahead.settle()
            throw error
        }
    }

    private func run(in job: JobContext, ahead: inout SmallFileCopyAhead) async throws -> JSONValue {
        let files = self.files
        let directory = self.directory
        var (checkpoint, resumed) = try await UploadCheckpoint.startOrResume(
            files: files, in: job, filesFailAlone: true
        ) { _, paths, names in
            try DirectoryIO.preflight(files: paths, names: names, directory: directory, indices: paths.indices)
        }

        let sizes = try files.sizes()
        var progress = UploadProgress(sizes: sizes) { files.label($0) }
        for (index, bytes) in try checkpoint.landedBefore(sizes: sizes, files: files) {
            progress.set(index, bytes)
            progress.filesDone += 1
        }
        var pacer = params.maxRate.map { RatePacer(unitsPerSecond: $0) }
        var batch = DirectoryLandingBatch()
        while let index = batch.nextIndex ?? (checkpoint.fileIndex < files.count ? checkpoint.fileIndex : nil) {
            do {
                if index == files.count {
                    try await land(&batch, checkpoint: &checkpoint, progress: &progress, in: job)
                    continue
                }
                try job.checkCancellation()
                let batched = index > checkpoint.fileIndex || checkpoint.offset == 0
                    ? DirectoryLandingBatch.admits(
                        size: try files.identity(index).size, syncBytes: syncBytes, paced: pacer != nil)
                    : false
                // A large file syncs and checkpoints inside itself, which names it as the file in progress: the
                // files before it land first.
                if !batched { try await land(&batch, checkpoint: &checkpoint, progress: &progress, in: job) }
                try await upload(
                    index, checkpoint: &checkpoint, batch: &batch, batched: batched, countLeftovers: resumed,
                    progress: &progress, pacer: &pacer, ahead: &ahead, in: job)
                if batch.isFull(syncBytes: syncBytes) {
                    try await land(&batch, checkpoint: &checkpoint, progress: &progress, in: job)
                }
            } catch {
                // A folder's file removed before its turn or changed while copied fails alone; the others go on
                // (once the files copied before it landed: a failure is recorded at the file in progress).
                let failure = job.stopReason == nil ? checkpoint.fileFailure(error) : nil
                // A pause, a shutdown, a timeout or a failure keeps what is copied: the files copied whole land
                // first, so the next attempt does not copy them again (a user stop removes them with the rest).
                if failure == nil, job.stopReason != .userStop {
                    // The next files, copied ahead whole, land with them.
                    for (next, copied) in await ahead.settle() {
                        guard batch.nextIndex == next, let listed = try? files.file(next) else { break }
                        addCopied(
                            next, listed, copied, resentBefore: 0, checkpoint: &checkpoint, batch: &batch,
                            progress: &progress, countLeftovers: resumed, in: job)
                    }
                    if !batch.isEmpty {
                        try? await land(&batch, checkpoint: &checkpoint, progress: &progress, saving: true, in: job)
                    }
                }
                guard let failure else { throw error }
                try await land(&batch, checkpoint: &checkpoint, progress: &progress, in: job)
                try await skipFailed(index, failure, checkpoint: &checkpoint, in: job)
            }
        }
        job.reportProgress(
            completed: progress.completed, total: progress.total, current: nil, items: progress.items,
            files: progress.files)
        return UploadJob.result(files: checkpoint.finished, bytesResent: checkpoint.bytesResent, destination: params.to)
    }

    /// Adds file `index` (`listed`), copied whole (`copied`), to `batch` to land with others: counts the bytes an
    /// earlier attempt had left in its `.part` as resent (when `countLeftovers`; `resentBefore` are the file's
    /// resent bytes so far) and reports its progress.
    private func addCopied(
        _ index: Int, _ listed: UploadFileList.File, _ copied: SmallFileCopy, resentBefore: Int64,
        checkpoint: inout UploadCheckpoint, batch: inout DirectoryLandingBatch, progress: inout UploadProgress,
        countLeftovers: Bool, in job: JobContext
    ) {
        let name = listed.name
        let size = listed.identity.size
        var resent = resentBefore
        if copied.leftover > 0, countLeftovers {
            checkpoint.bytesResent += copied.leftover
            resent += copied.leftover
            if index == checkpoint.fileIndex { checkpoint.fileBytesResent = resent }
            job.log(.info, "\(name): discarding \(copied.leftover) bytes written after the last checkpoint")
        }
        progress.set(index, size)
        job.reportProgress(
            completed: progress.completed, total: progress.total, current: name.description, items: progress.items,
            files: progress.files)
        let finalPath = finalPath(name)
        let record = UploadedFile(
            name: name, path: finalPath, bytes: size, sha256: copied.file.hash.hexDigest, bytesResent: resent)
        batch.add(
            .init(index: index, partPath: partPath(name, job: job), node: copied.file.node, finalPath: finalPath,
                record: record))
    }

    /// The bytes copied between two syncs of a large file: `--chunk-size`, else `defaultSyncBytes`.
    var syncBytes: Int64 { params.chunkSizeGiven ? params.chunkSize : Self.defaultSyncBytes }

    /// Uploads file `index` from `checkpoint.offset`, then advances the checkpoint to the next file; or, when
    /// `batched` (a file smaller than `syncBytes`), copies it whole without a sync, checks it and adds it to
    /// `batch` to land with others (the checkpoint then still names the batch's first file, at offset 0).
    ///
    /// `countLeftovers`: whether bytes found past the offset were written by an earlier attempt of this job (and
    /// so count as resent). On a resume they were, for every file: the `.part` is named after the job's id, and a
    /// file after the checkpoint's may have one too (a crash before the checkpoint that would have named it).
    private func upload(
        _ index: Int, checkpoint: inout UploadCheckpoint, batch: inout DirectoryLandingBatch, batched: Bool,
        countLeftovers: Bool, progress: inout UploadProgress, pacer: inout RatePacer?,
        ahead: inout SmallFileCopyAhead, in job: JobContext
    ) async throws {
        let listed = try files.file(index)
        let sourcePath = listed.path
        let name = listed.name
        let partPath = partPath(name, job: job)
        let finalPath = finalPath(name)
        let directory = self.directory
        let expected = listed.identity
        // Only the file the checkpoint names (the first of a batch) has a saved offset and `.part` inode.
        let isCurrent = index == checkpoint.fileIndex
        var offset = isCurrent ? checkpoint.offset : 0
        // Bytes of this file written more than once (the checkpoint keeps the current file's).
        var resent = isCurrent ? checkpoint.fileBytesResent : 0

        if isCurrent, countLeftovers, let node = checkpoint.partFile,
            try await job.runOnPool({
                DirectoryIO.isFinished(finalPath: finalPath, partPath: partPath, node: node, size: expected.size)
            })
        {
            try await adoptFinished(index, checkpoint: &checkpoint, progress: &progress, in: job)
            return
        }

        if batched, offset == 0, pacer == nil {
            // A small file whole, in one trip to the pool (`SmallFileCopy`); its failure fails it alone. The next
            // small file is copied on another pool thread meanwhile (`SmallFileCopyAhead`).
            let running = ahead.take(index)
            startCopyAhead(after: index, ahead: &ahead, in: job)
            let copied: SmallFileCopy
            if let running {
                copied = try await running.value
            } else {
                copied = try await job.runOnPool(smallFileCopy(listed, job: job))
            }
            // Into the batch even if the job is being stopped: a stop lands the files copied whole.
            addCopied(
                index, listed, copied, resentBefore: resent, checkpoint: &checkpoint, batch: &batch,
                progress: &progress, countLeftovers: countLeftovers, in: job)
            return
        }
        // Copied ahead but not taken whole after all: let that copy end before this one opens the same `.part`.
        if let stale = ahead.take(index) { _ = try? await stale.value }
        if name.bytes.contains(UInt8(ascii: "/")) {
            // A file of a folder upload: its folders under the destination first.
            try await job.runOnPool { try DirectoryIO.makeParents(of: name, in: directory) }
        }
        let (file, partLength) = try await job.runOnPool {
            try PartFile.open(sourcePath: sourcePath, partPath: partPath, expected: expected)
        }
        do {
            if partLength > offset {
                let extra = partLength - offset
                let keep = offset
                try await job.runOnPool { try file.truncate(to: keep) }
                if countLeftovers {
                    checkpoint.bytesResent += extra
                    resent += extra
                    if isCurrent { checkpoint.fileBytesResent = resent }
                    job.log(.info, "\(name): discarding \(extra) bytes written after the last checkpoint; resuming at \(offset)")
                }
            } else if partLength < offset {
                job.log(
                    .warning,
                    "\(name): \(partPath) is missing or shorter (\(partLength) bytes) than the checkpoint (\(offset)); "
                        + "uploading this file again from the start")
                try await job.runOnPool { try file.truncate(to: 0) }
                checkpoint.bytesResent += offset
                resent += offset
                checkpoint.fileBytesResent = resent
                offset = 0
                checkpoint.offset = 0
                checkpoint.partFile = file.node
                try job.saveCheckpoint(checkpoint)
            }

            // Recompute the hash of the kept prefix from what is on disk.
            var hashed: Int64 = 0
            while hashed < offset {
                try job.checkCancellation()
                let from = hashed
                let count = min(Self.rehashStep, offset - hashed)
                let got = try await job.runOnPool { try file.rehash(from: from, count: count) }
                guard got == count else {
                    throw JobError(
                        code: "write_failed", message: "\(partPath) shrank while resuming; the upload will be retried",
                        retryable: true)
                }
                hashed += got
                UploadResumePhase.rehashed(bytes: hashed, in: job)
            }
            job.endPhase()

            progress.set(index, offset)
            job.reportProgress(
                completed: progress.completed, total: progress.total, current: name.description, items: progress.items,
                files: progress.files)
            let piece = RatePacer.pieceSize(maxRate: params.maxRate)
            // `--chunk-size` fixes the bytes between syncs; without it they follow bytes and time.
            let chunk = syncBytes
            // A batched file is copied whole (it is smaller than a chunk): no sync, no checkpoint inside it.
            let syncSeconds = params.chunkSizeGiven || batched ? Double.infinity : Self.defaultSyncSeconds
            var syncedAt = Timestamp.monotonic()
            // Claims `offset` in the checkpoint once the `.part` holds it on disk. The source is checked at every
            // chunk end, so a change (even in place with the mtime put back, which the ctime shows) stops the job
            // within one chunk, never after the whole file was copied.
            func syncAndCheckpoint() async throws {
                var synced = checkpoint
                synced.offset = offset
                synced.partFile = file.node
                let length = offset
                try await job.runOnPool {
                    try file.checkSource(is: expected)
                    try file.checkPart(length: length)
                    try file.sync()
                }
                try job.saveCheckpoint(synced)
                checkpoint = synced
            }
            do {
                while offset < expected.size {
                    let chunkEnd = min(expected.size, (offset / chunk + 1) * chunk)
                    while offset < chunkEnd, Timestamp.monotonic() - syncedAt < syncSeconds {
                        try job.checkCancellation()
                        // Under a rate limit one piece per call, paced; else as much of the chunk as a tenth of a
                        // second copies, in one pool call (a stop still ends it within a piece).
                        let count = pacer == nil ? chunkEnd - offset : min(Int64(piece), chunkEnd - offset)
                        if let wait = pacer?.delay(before: Int(count), now: Timestamp.monotonic()), wait > 0 {
                            try await job.sleep(seconds: wait)
                        }
                        let at = offset
                        let result = try await Self.copy(file, at: at, count: count, in: job)
                        let copied = result.bytes
                        if result.sourceEnded {
                            // The source ended early: it was truncated or replaced since it was examined.
                            let at = offset + copied
                            try await job.runOnPool { try file.checkSource(is: expected) }
                            let now = try await job.runOnPool { try file.sourceIdentity() }
                            throw PartFile.changed(
                                sourcePath, expected: expected, now: now,
                                detail: "it ended at byte \(at), before its recorded size of \(expected.size) bytes"
                                    + DirectoryIO.specialFileHint)
                        }
                        offset += copied
                        progress.set(index, offset)
                        job.reportProgress(
                            completed: progress.completed, total: progress.total, current: name.description,
                            items: progress.items, files: progress.files)
                    }
                    // The end of the file is recorded once it is renamed (below, where `commit` syncs it), with the
                    // next file's start; a chunk inside the file is synced before the checkpoint that claims it.
                    if offset < expected.size {
                        try await syncAndCheckpoint()
                        syncedAt = Timestamp.monotonic()
                    } else if !batched {
                        checkpoint.offset = offset
                        checkpoint.partFile = file.node
                    }
                }
            } catch {
                // A stop that keeps the upload (a pause, a shutdown, a timeout), wherever it surfaced (the pacer's
                // sleep, a copy, a check), keeps what is copied: the next attempt resumes here, not at the last
                // sync, up to a second or a chunk back (under a deadline shorter than that, no attempt got past
                // the first one's start). If that sync fails, the stop still stands and the older checkpoint too.
                if isCurrent, let reason = job.stopReason, reason != .userStop, offset > checkpoint.offset {
                    try? await syncAndCheckpoint()
                }
                throw error
            }

            try job.checkCancellation()
            if batched {
                try await job.runOnPool { try file.checkCopied(source: expected, length: expected.size) }
                let record = UploadedFile(
                    name: name, path: finalPath, bytes: expected.size, sha256: file.hash.hexDigest, bytesResent: resent)
                batch.add(
                    .init(index: index, partPath: partPath, node: file.node, finalPath: finalPath, record: record))
                return
            }
            try await job.runOnPool {
                try file.checkSource(is: expected)
                try file.checkSourceEnds(at: expected.size)
                try file.commit(to: finalPath, length: expected.size)
            }
        } catch {
            // Pieces copied before the failure may still wait to be hashed, and each holds the file: wait for them,
            // so its descriptors close when this returns (a failed upload's removed .part frees its disk space at
            // once, and no read of it outlives the job).
            _ = try? await job.runOnPool { file.drainHashing() }
            throw error
        }
        let record = UploadedFile(
            name: name, path: finalPath, bytes: expected.size, sha256: file.hash.hexDigest, bytesResent: resent)
        finish(index, record, checkpoint: &checkpoint, progress: &progress)
        await landed?(index, record)
        // Small files are many: the checkpoint (which lists every source and every finished file) is saved once a
        // chunk's worth of files has finished since the last save, not after each file, so a job of 20 000 small
        // files is not quadratic. A crash then re-copies at most one chunk of finished files (not counted in
        // bytes_resent, since no checkpoint knew of them).
        progress.unsavedFinishedBytes += expected.size
        if progress.unsavedFinishedBytes >= params.chunkSize || checkpoint.fileIndex == files.count
            || UploadTreeEntries.notedOutcomesAreDue(in: job)
        {
            try job.saveCheckpoint(checkpoint)
            progress.unsavedFinishedBytes = 0
        }
    }

    /// Starts copying the files after file `index` ahead (`SmallFileCopyAhead`), up to its depth, while each
    /// exists and would be copied whole into a batch at its turn (a file after the checkpoint's starts at offset
    /// 0; no pacing: the caller's path). Stops at the first that would not.
    private func startCopyAhead(after index: Int, ahead: inout SmallFileCopyAhead, in job: JobContext) {
        while let next = ahead.nextToStart(after: index), next < files.count, let listed = try? files.file(next),
            DirectoryLandingBatch.admits(size: listed.identity.size, syncBytes: syncBytes, paced: false)
        {
            ahead.start(next, in: job, smallFileCopy(listed, job: job))
            if ahead.nextToStart(after: index) == next { return }
        }
    }

    /// The pool call that copies file `listed` whole (`SmallFileCopy.copy`), at its turn or ahead of it.
    private func smallFileCopy(
        _ listed: UploadFileList.File, job: JobContext
    ) -> @Sendable () throws -> SmallFileCopy {
        let (sourcePath, name, expected) = (listed.path, listed.name, listed.identity)
        let (partPath, directory) = (partPath(name, job: job), directory)
        return {
            try SmallFileCopy.copy(
                sourcePath: sourcePath, partPath: partPath, name: name, directory: directory, expected: expected)
        }
    }

    /// Without `--chunk-size`, the `.part` is synced and checkpointed once this many bytes were copied since the
    /// last sync, or `defaultSyncSeconds` passed, whichever comes first: a sync costs a disk cache flush, so on a
    /// fast disk a fixed 8 MiB cadence spent more time flushing than copying (issue 14), while on a slow one (or
    /// under `--max-rate`) the second keeps what a crash makes the job copy again small.
    nonisolated static let defaultSyncBytes: Int64 = 64 << 20
    /// See `defaultSyncBytes`.
    nonisolated static let defaultSyncSeconds = 1.0

    /// Time one copy call may take before it returns to report progress, in seconds.
    nonisolated static let copyCallSeconds = 0.1

    /// Copies up to `count` bytes at `at` on the pool (`PartFile.copy`); a stop of the job raises the flag the
    /// copy checks between pieces, so it returns within a piece.
    private static func copy(_ file: PartFile, at: Int64, count: Int64, in job: JobContext) async throws -> PartFile.Copied {
        let stop = CopyStop()
        return try await job.runCancellingOnStop {
            try await withTaskCancellationHandler {
                try await job.runOnPool { try file.copy(at: at, count: count, stop: stop, timeLimit: copyCallSeconds) }
            } onCancel: {
                stop.raise()
            }
        }
    }

    /// Lands the files waiting in `batch` (`DirectoryIO.land`) and records each one that landed, in order, as
    /// finished (told to `landed`); saves the checkpoint once `chunkSize` bytes of finished files are unsaved, or
    /// `UploadTreeEntries.notedLimit` file outcomes wait to be written, or at the last file, or when the landing stopped short, or when `saving` (a stop: the next attempt starts after
    /// them). A checkpoint never names a file of the batch before this.
    /// - Throws: why a file did not land (`write_failed`), after saving those before it; `store_write_failed`.
    private func land(
        _ batch: inout DirectoryLandingBatch, checkpoint: inout UploadCheckpoint, progress: inout UploadProgress,
        saving: Bool = false, in job: JobContext
    ) async throws {
        guard !batch.isEmpty else { return }
        let members = batch.take()
        let landing = try await job.runOnPool { DirectoryIO.land(members) }
        for member in members.prefix(landing.landed) {
            precondition(member.index == checkpoint.fileIndex, "a batch lands at the file in progress")
            finish(member.index, member.record, checkpoint: &checkpoint, progress: &progress)
            await landed?(member.index, member.record)
            progress.unsavedFinishedBytes += member.record.bytes
        }
        job.reportProgress(
            completed: progress.completed, total: progress.total, current: nil, items: progress.items,
            files: progress.files)
        let due =
            saving || progress.unsavedFinishedBytes >= params.chunkSize || checkpoint.fileIndex == files.count
            || UploadTreeEntries.notedOutcomesAreDue(in: job)
        if landing.landed > 0, due || landing.failure != nil {
            try job.saveCheckpoint(checkpoint)
            progress.unsavedFinishedBytes = 0
        }
        if let failure = landing.failure { throw failure }
    }

    /// File `index` of a folder upload failed by itself (`UploadCheckpoint.fileFailure`): removes its `.part`,
    /// lists it in the checkpoint's failures and moves on (saved), so the job uploads every other file and then
    /// ends `failed` with `some_files_failed`.
    private func skipFailed(
        _ index: Int, _ failure: JobError, checkpoint: inout UploadCheckpoint, in job: JobContext
    ) async throws {
        let file = try files.file(index)
        let partPath = partPath(file.name, job: job)
        job.log(.warning, "\(file.name): \(failure.code): \(failure.message); going on with the other files")
        _ = try await job.runOnPool { partPath.withCString(unlink) }
        checkpoint.failFile(index, path: file.path, name: file.name, error: failure)
        UploadTreeEntries.failed(index, error: failure, in: job)
        try job.saveCheckpoint(checkpoint)
    }

    private func finish(
        _ index: Int, _ record: UploadedFile, checkpoint: inout UploadCheckpoint, progress: inout UploadProgress
    ) {
        checkpoint.appendFinished(record)
        checkpoint.fileIndex = index + 1
        checkpoint.offset = 0
        checkpoint.fileBytesResent = 0
        checkpoint.partFile = nil
        progress.set(index, record.bytes)
        progress.filesDone += 1
    }

    /// File `index` was finished (renamed into place) before a crash lost the checkpoint that said so: takes it
    /// as it is instead of copying it again. Its SHA-256 is read back from the file (reading, no writing: the
    /// cost of a normal resume's re-hash of the kept prefix plus at most one chunk); the source was checked
    /// unchanged before.
    private func adoptFinished(
        _ index: Int, checkpoint: inout UploadCheckpoint, progress: inout UploadProgress, in job: JobContext
    ) async throws {
        let file = try files.file(index)
        let finalPath = finalPath(file.name)
        let size = file.identity.size
        let hash = SHA256()
        var hashed: Int64 = 0
        while hashed < size {
            try job.checkCancellation()
            let from = hashed
            let count = min(Self.rehashStep, size - hashed)
            let got = try await job.runOnPool {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: DirectoryIO.maxPieceBytes, alignment: 4096)
                defer { buffer.deallocate() }
                return try DirectoryIO.hashRange(of: finalPath, from: from, count: count, into: hash, buffer: buffer)
            }
            guard got == count else {
                throw JobError(
                    code: "write_failed", message: "\(finalPath) shrank while it was read back; the upload will be retried",
                    retryable: true)
            }
            hashed += got
            UploadResumePhase.rehashed(bytes: hashed, in: job)
        }
        job.endPhase()
        job.log(.info, "\(file.name): already complete at \(finalPath) (finished before the daemon stopped); not copied again")
        let record = UploadedFile(
            name: file.name, path: finalPath, bytes: size, sha256: hash.hexDigest,
            bytesResent: checkpoint.fileBytesResent)
        finish(index, record, checkpoint: &checkpoint, progress: &progress)
        await landed?(index, record)
        try job.saveCheckpoint(checkpoint)
    }

    /// Deletes every `.part` file this job may have written (after it ended `failed` or `cancelled`); `.retry`
    /// when one could not be removed (an I/O error), so the engine tries again later.
    ///
    /// Not only the checkpoint's file: finished files are checkpointed in batches, so the job may have moved on
    /// to later files (and written their `.part`) since the last save. One `readdir` of the destination finds
    /// them: a name `NAME.<job>.part` with `NAME` one of the job's names and `<job>` this job's id prefix. A
    /// folder upload's names have folders: each folder that holds one of its files is read the same way.
    func discardPartial(in job: JobContext) async -> CleanUpOutcome {
        let suffix = "." + String(job.id.prefix(8)) + UploadNames.partSuffix
        let directory = self.directory
        // The folders first (a page of names at a time: a folder upload's list is read from the store), then the
        // names in them that end as this job's `.part` files do, then those of them that are one of the job's
        // names plus the suffix: never every name in memory at once.
        var folders: Set<BytePath> = [directory]
        do throws(JobError) {
            try files.forEachNamePage { names in folders.formUnion(DirectoryIO.folders(of: names, in: directory)) }
        } catch {
            return .retry("could not read the job's file list to find its partial files: \(error.message)")
        }
        let listing = try? await job.runOnPool { [folders] () -> (candidates: Set<BytePath>, failed: [(BytePath, Int32)]) in
            var candidates: Set<BytePath> = []
            var failed: [(BytePath, Int32)] = []
            for folder in folders {
                guard let stream = folder.withCString({ opendir($0) }) else {
                    // A folder never made holds no .part file.
                    if errno != ENOENT || folder == directory { failed.append((folder, errno)) }
                    continue
                }
                defer { closedir(stream) }
                while let entry = readdir(stream) {
                    // The name's bytes as they are: a name that is not UTF-8 is a name like any other.
                    let name = BytePath(bytes: DirectoryEntry.name(entry))
                    if name.bytes.count > suffix.utf8.count, name.bytes.reversed().starts(with: suffix.utf8.reversed()) {
                        candidates.insert(BytePath.join(folder, name))
                    }
                }
            }
            return (candidates, failed)
        }
        var found: [BytePath] = []
        if let candidates = listing?.candidates, !candidates.isEmpty {
            do throws(JobError) {
                try files.forEachNamePage { names in
                    for name in names {
                        let path = BytePath.join(directory, name + suffix)
                        if candidates.contains(path) { found.append(path) }
                    }
                }
            } catch {
                return .retry("could not read the job's file list to find its partial files: \(error.message)")
            }
        }
        let outcome = try? await job.runOnPool { [found] () -> (removed: [BytePath], failed: [(BytePath, Int32)]) in
            var removed: [BytePath] = []
            var failed: [(BytePath, Int32)] = listing?.failed ?? []
            for path in found.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) {
                if path.withCString(unlink) == 0 {
                    removed.append(path)
                } else if errno != ENOENT {
                    failed.append((path, errno))
                }
            }
            return (removed, failed)
        }
        for path in outcome?.removed ?? [] { job.log(.info, "removed the partial file \(path)") }
        let failed = (outcome?.failed ?? []).map { path, code in "\(path): \(DirectoryIO.errorText(code))" }
        return failed.isEmpty ? .done : .retry("could not remove the partial files " + failed.joined(separator: ", "))
    }
}
