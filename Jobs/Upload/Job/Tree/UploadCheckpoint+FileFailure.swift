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
        guard tree != nil, let error = error as? JobError, !error.retryable, Self.fileFailureCodes.contains(error.code)
        else { return nil }
        return error
    }

    /// Records that file `index` (the one in progress, `fileIndex`) failed with `error`: listed in the tree's
    /// failures with its path, name and code, counted in `failedWhileUploading`, and the checkpoint moved to the
    /// next file (offset 0, no `.part`). The caller saves the checkpoint.
    mutating func failFile(_ index: Int, path: BytePath, error: JobError) {
        guard var plan = tree else { return }
        let name = index < plan.names.count ? plan.names[index] : nil
        plan.fail(UploadTreePlan.Entry(path: path, name: name, reason: error.code, message: error.message))
        plan.failedWhileUploading += 1
        tree = plan
        fileIndex = index + 1
        offset = 0
        fileBytesResent = 0
        partFile = nil
    }
}

extension UploadCheckpoint {
    /// Checks the file in progress against its recorded identity; while it is gone or changed, fails it alone
    /// (`failFile`, saved) and checks the next. See `startOrResume(files:in:filesFailAlone:identities:)`.
    /// - Returns: the checkpoint at the first file that is as recorded (or past the last file).
    /// - Throws: what `identities` throws that is not one file's failure (a destination problem).
    @LoopActor
    func checkCurrentFile(
        files: [BytePath], in job: JobContext, identities: @escaping @Sendable (Range<Int>) throws -> [SourceIdentity]
    ) async throws -> UploadCheckpoint {
        var checkpoint = self
        while checkpoint.fileIndex < files.count {
            let index = checkpoint.fileIndex
            do {
                let now = try await job.runOnPool { try identities(index..<index + 1) }
                if let identity = now.first, identity != sources[index] {
                    throw PartFile.changed(files[index], expected: sources[index], now: identity)
                }
                return checkpoint
            } catch {
                guard let failure = checkpoint.fileFailure(error) else { throw error }
                job.log(.warning, "\(files[index]): \(failure.code): \(failure.message)")
                checkpoint.failFile(index, path: files[index], error: failure)
                UploadTreeEntries.failed(index, error: failure, in: job)
                try job.saveCheckpoint(checkpoint)
            }
        }
        return checkpoint
    }
}
