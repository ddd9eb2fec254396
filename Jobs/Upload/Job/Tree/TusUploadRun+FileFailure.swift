import TrailbookEngine
import TrailbookLoop

/// A file of a folder upload to tus that changed while it was sent, or went away before its turn, fails alone
/// (`UploadCheckpoint.fileFailure`): its unfinished upload is deleted on the server, and the job goes on with the
/// next file and ends `failed` with `some_files_failed` once every other file is uploaded.
extension TusUploadRun {
    /// File `checkpoint.fileIndex` failed alone with `failure`: deletes its unfinished upload (`discardFailed`),
    /// lists it in the checkpoint's failures and moves on (saved).
    /// - Throws: what `discardFailed` throws; `store_write_failed`.
    func skipFailed(_ failure: JobError, checkpoint: inout UploadCheckpoint, in job: JobContext) async throws {
        let index = checkpoint.fileIndex
        let file = try files.file(index)
        try await checkpoint.failAlone(index, name: file.name, path: file.path, failure: failure, in: job) {
            try await discardFailed($0, in: job)
        }
    }

    /// Deletes the unfinished upload of the file in progress in `checkpoint` (if it has one) before that file is
    /// failed alone, so no upload is left on the server that nothing will ever finish or delete.
    /// - Throws: `JobError` `unavailable` (retryable) while the server cannot be reached or is busy: the file is
    ///   not failed yet, and the next attempt tries again. A server that refuses the `DELETE` for good leaves the
    ///   upload there, named in the job's log.
    func discardFailed(_ checkpoint: UploadCheckpoint, in job: JobContext) async throws {
        switch await discard(checkpoint, in: job) {
        case .done:
            return
        case .retry(let left):
            throw JobError(
                code: "unavailable", message: "\(left); the upload resumes where it stopped once the server answers",
                retryable: true)
        case .giveUp(let left):
            job.log(.warning, left)
        }
    }
}
