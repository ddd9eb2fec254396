import TrailbookEngine
import TrailbookLoop

/// A file of a folder upload that cannot be sent fails alone: the job goes on with the next file and ends
/// `failed` with `some_files_failed` (`UploadTreePlan.failure`) once every other file was uploaded.
extension UploadCheckpoint {
    /// The error codes that concern one source file only — it was removed before its turn (`source_missing`),
    /// changed while (or before) it was copied (`source_changed`), made unreadable (`source_unreadable`, unless
    /// retryable) or replaced by something that is not a file (`source_not_regular`) — and so fail that file of a
    /// folder upload, not the whole tree.
    static let fileFailureCodes: Set<String> = [
        "source_missing", "source_changed", "source_unreadable", "source_not_regular",
    ]

    /// `error` as the failure of one file of this folder upload, or `nil` when it is not one (not a folder
    /// upload, a stop, or an error about the destination or the job).
    func fileFailure(_ error: any Error) -> JobError? {
        tree == nil ? nil : Self.failsAlone(error)
    }

    /// `error` when it concerns one source file only (`fileFailureCodes`, not retryable), else `nil`.
    nonisolated static func failsAlone(_ error: any Error) -> JobError? {
        guard let error = error as? JobError, !error.retryable, fileFailureCodes.contains(error.code) else { return nil }
        return error
    }

    /// Records that file `index` failed with `error`: listed in the tree's failures with its path, name and code,
    /// and counted in `failedWhileUploading`. The file in progress (`fileIndex`) is passed: the checkpoint moves to
    /// the next file not yet landed or failed, with no per-file state left (offset 0, no `.part`, tus upload URL or
    /// S3 UploadId: the caller removes what they named first). A file further on (a single `PUT` sent alongside)
    /// waits in `failedAhead`. The caller saves the checkpoint.
    ///
    /// Version 2 lists at most `listedInStore` failures here (every one is in the job's file list).
    /// `name` is the file's destination name; `nil` takes it from the plan when it lists its files (version 1).
    mutating func failFile(_ index: Int, path: BytePath, name given: BytePath? = nil, error: JobError) {
        guard var plan = tree, index >= fileIndex else { return }
        let name = given ?? (index < plan.names.count ? plan.names[index] : nil)
        plan.fail(UploadTreePlan.Entry(path: path, name: name, reason: error.code, message: error.message))
        plan.failedWhileUploading += 1
        plan.notUploaded = []
        if listsInStore { plan.failed = Array(plan.failed.prefix(Self.listedInStore)) }
        tree = plan
        guard index == fileIndex else {
            failedAhead = (failedAhead ?? []) + [index]
            return
        }
        fileIndex = index + 1
        passLandedAhead()
        offset = 0
        fileBytesResent = 0
        partFile = nil
        uploadURL = nil
        uploadExpires = nil
        sentThrough = nil
        failingSince = nil
        checksumVerified = nil
        s3Plan = nil
        s3UploadID = nil
        s3PartsSent = nil
        s3CreateStarted = nil
    }
}

extension UploadCheckpoint {
    /// Checks the file in progress against its recorded identity; while it is gone or changed, fails it alone
    /// (`failFile`, saved) and checks the next. See `startOrResume(files:in:filesFailAlone:identities:)`.
    /// - Returns: the checkpoint at the first file that is as recorded (or past the last file).
    /// - Throws: what `identities` throws that is not one file's failure (a destination problem).
    @LoopActor
    func checkCurrentFile(
        files: UploadFileList, in job: JobContext,
        discardFile: (@LoopActor (UploadCheckpoint) async throws -> Void)? = nil,
        identities: @escaping UploadCheckpoint.Identities
    ) async throws -> UploadCheckpoint {
        var checkpoint = self
        while checkpoint.fileIndex < files.count {
            let index = checkpoint.fileIndex
            let file = try files.file(index)
            do {
                let now = try await job.runOnPool { try identities(index..<index + 1, [file.path], [file.name]) }
                if let identity = now.first, identity != file.identity {
                    throw PartFile.changed(file.path, expected: file.identity, now: identity)
                }
                return checkpoint
            } catch {
                guard let failure = checkpoint.fileFailure(error) else { throw error }
                try await checkpoint.failAlone(
                    index, name: file.name, path: file.path, failure: failure, in: job, discard: discardFile)
            }
        }
        return checkpoint
    }
}

extension UploadCheckpoint {
    /// Fails file `index` alone with `failure` and moves on: logs it under `name`, lets `discard` remove what of it
    /// is at the destination, lists it in the checkpoint's failures and in the job's file list
    /// (`UploadTreeEntries`), and saves. Every transfer fails a folder's file this one way.
    /// - Throws: what `discard` throws (the file is then not failed yet, and the next attempt tries again);
    ///   `store_write_failed` when the checkpoint cannot be saved.
    @LoopActor
    mutating func failAlone(
        _ index: Int, name: BytePath, path: BytePath, failure: JobError, in job: JobContext,
        discard: (@LoopActor (UploadCheckpoint) async throws -> Void)? = nil
    ) async throws {
        job.log(.warning, "\(name): \(failure.code): \(failure.message); going on with the other files")
        try await discard?(self)
        failFile(index, path: path, name: name, error: failure)
        UploadTreeEntries.failed(index, error: failure, in: job)
        try job.saveCheckpoint(self)
    }
}
