import S3Client
import TrailbookEngine
import TrailbookLoop

/// A file of a folder upload to S3 that changed while it was sent, or went away before its turn, fails alone
/// (`UploadCheckpoint.fileFailure`): its unfinished multipart upload is aborted, and the job goes on with the next
/// file and ends `failed` with `some_files_failed` once every other file is uploaded. (A single `PUT` that fails
/// so leaves nothing on the server: see `uploadSinglePuts`.)
extension S3UploadRun {
    /// File `index` (the one in progress) failed alone with `failure`: aborts its multipart upload
    /// (`discardFailed`), lists it in the checkpoint's failures and moves on (saved).
    /// - Throws: what `discardFailed` throws; `store_write_failed`.
    func skipFailed(
        _ index: Int, _ failure: JobError, checkpoint: inout UploadCheckpoint, in job: JobContext
    ) async throws {
        let file = try files.file(index)
        try await checkpoint.failAlone(index, name: file.name, path: file.path, failure: failure, in: job) {
            try await discardFailed($0, in: job)
        }
    }

    /// Aborts the multipart upload of the file in progress in `checkpoint` (if it has one, or may have one whose
    /// UploadId was never heard) before that file is failed alone, so no upload is left that nothing will ever
    /// finish or abort.
    /// - Throws: `JobError` `s3_unavailable` (retryable) while the server cannot be reached or is busy: the file
    ///   is not failed yet, and the next attempt tries again. A server that refuses the abort for good leaves the
    ///   upload there, named in the job's log.
    func discardFailed(_ checkpoint: UploadCheckpoint, in job: JobContext) async throws {
        switch await discard(checkpoint, in: job) {
        case .done:
            return
        case .retry(let left):
            throw JobError(
                code: S3Error.Code.unavailable.rawValue,
                message: "\(left); the upload resumes where it stopped once the server answers", retryable: true)
        case .giveUp(let left):
            job.log(.warning, left)
        }
    }
}
