import TrailbookEngine
import TrailbookLoop

/// What a folder upload's first run says it is doing while it takes its file list (`UploadTreeListing`), a step
/// that moves no byte: "comparing with the destination: 41 000 files" (or "listing the files" with `--again`),
/// "listing the destination: 12 000 objects" while S3's prefix is listed, "hashing to compare: 1.2 GiB" inside
/// a large file. Each report is the stall timeout's heartbeat (`JobContext.reportPhase`), so a listing of
/// 100 000 files, longer than the stall timeout, is not stopped as stalled; each counts work done (a file
/// compared, a page of objects received, a part hashed), so a request that never answers still times out.
@LoopActor
final class UploadListingPhase {
    /// The count of objects listed at the destination.
    nonisolated static let objects = ProgressUnit("objects")

    /// The phase's words while files are listed and compared.
    let label: String
    /// Files met so far: listed, and compared with the destination unless `--again`.
    private(set) var files: Int64 = 0

    /// The phase of a listing that compares with the destination unless `again`.
    init(again: Bool) {
        label = again ? "listing the files" : "comparing with the destination"
    }

    /// `count` more files were listed and compared; reports the new total.
    func checked(_ count: Int, in job: JobContext) {
        guard count > 0 else { return }
        files += Int64(count)
        job.reportPhase(label, count: files, unit: .files)
    }

    /// Within a page being compared: the first `offset` files of the page after the `files` before it are done
    /// (the page's end then counts it whole with `checked`).
    func reached(_ offset: Int, in job: JobContext) {
        job.reportPhase(label, count: files + Int64(offset), unit: .files)
    }

    /// `count` objects of the destination were listed so far.
    static func listed(objects count: Int, in job: JobContext) {
        job.reportPhase("listing the destination", count: Int64(count), unit: objects)
    }

    /// `bytes` of a file were hashed so far to compare it with the destination's copy.
    static func hashed(bytes: Int64, in job: JobContext) {
        job.reportPhase("hashing to compare", count: bytes, unit: .bytes)
    }
}
