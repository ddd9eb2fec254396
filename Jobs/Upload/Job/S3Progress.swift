import S3Client
import TrailbookEngine
import TrailbookHTTP
import TrailbookLoop
import TusClient

/// Byte progress of an S3 upload: the acknowledged bytes of each file (parts, or single `PUT`s, several files at
/// once) plus the bytes of the requests in flight.
@LoopActor
final class S3Progress {
    let job: JobContext
    var upload: UploadProgress
    private let files: UploadFileList
    private let sizes: [Int64]
    /// Acknowledged bytes of each file under way, by index.
    private var acknowledgedBytes: [Int: Int64] = [:]
    /// Bytes sent so far of each request in flight.
    private var inFlight: [Request: Int64] = [:]
    private var lastReport = 0.0

    /// A request in flight: part `part` of file `file` (a single `PUT` is part 1).
    private struct Request: Hashable {
        let file: Int
        let part: Int
    }

    /// Progress of `files` (their names label the rows) of `sizes` bytes.
    init(job: JobContext, files: UploadFileList, sizes: [Int64]) {
        self.job = job
        self.files = files
        self.sizes = sizes
        upload = UploadProgress(sizes: sizes) { files.label($0) }
    }

    /// File `index` starts (or starts again) at 0 acknowledged bytes.
    func startFile(_ index: Int) {
        acknowledgedBytes[index] = 0
        upload.set(index, 0)
        update(index, force: false)
    }

    /// File `index` landed: it no longer counts as under way, and the numbers are reported (before its
    /// checkpoint is saved, which stores them too).
    func finishFile(_ index: Int) {
        upload.set(index, sizes[index])
        upload.filesDone += 1
        acknowledgedBytes[index] = nil
        inFlight = inFlight.filter { $0.key.file != index }
        report(current: acknowledgedBytes.keys.min().map { files.label($0) })
    }

    /// Part `part` of file `file`, of `bytes` bytes, is on the server.
    func acknowledged(file: Int, part: Int, bytes: Int64) {
        inFlight[Request(file: file, part: part)] = nil
        acknowledgedBytes[file, default: 0] += bytes
        update(file, force: true)
    }

    /// Part `part` of file `file` has sent `sent` bytes so far.
    func sending(file: Int, part: Int, sent: Int64) {
        inFlight[Request(file: file, part: part)] = sent
        update(file, force: false)
    }

    /// Counts file `file`'s acknowledged bytes always (`force`), and reports at most every
    /// `TusUploadRun.progressInterval` seconds. `completed` is the bytes the server acknowledged (it never goes
    /// back); the bytes of the requests under way are reported as `in_flight`, as for tus.
    private func update(_ file: Int, force: Bool) {
        let now = Timestamp.monotonic()
        let due = now - lastReport >= TusUploadRun.progressInterval
        guard force || due else { return }
        upload.set(file, max(upload.done(file), min(acknowledgedBytes[file] ?? 0, sizes[file])))
        if due { report(current: acknowledgedBytes.keys.min().map { files.label($0) }) }
    }

    /// Reports the current numbers; `current` names the first file under way.
    func report(current: String?) {
        lastReport = Timestamp.monotonic()
        job.reportProgress(
            completed: upload.completed, total: upload.total, current: current, items: upload.items,
            inFlight: inFlight.values.reduce(0, +), files: upload.files)
    }
}
