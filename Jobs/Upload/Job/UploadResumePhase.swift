import TrailbookEngine
import TrailbookLoop

/// What an upload resuming within a file says while it reads back the bytes the destination already holds, to
/// carry on the file's SHA-256 from them: "hashing what was already sent: 12 GiB" (`JobContext.reportPhase`). A
/// resume deep into a file of many GiB reads for longer than a stall timeout before it sends a byte; each step
/// read is movement, so it is not stopped as stalled, and a read that never returns still is.
@LoopActor
enum UploadResumePhase {
    /// `bytes` of the file's first part were read back and hashed so far.
    static func rehashed(bytes: Int64, in job: JobContext) {
        job.reportPhase("hashing what was already sent", count: bytes, unit: .bytes)
    }
}
