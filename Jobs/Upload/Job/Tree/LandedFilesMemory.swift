import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Remembers each file a folder upload lands (`FileLanded`) in the upload memory with its source's `stat` (the
/// stat cache, `TreeSyncMemory`), so that uploading the folder again reads none of the files that did not change.
/// What proves the destination still holds it later: S3, the ETag the server answered (`UploadedFile.etag`);
/// `file://`, the written file's `stat` (its ctime no later than the moment it was reported landed, so a later
/// change by anyone else is not taken for it); tus, its upload URL (checked with a `HEAD`).
///
/// Landed files are kept here and written in batches of `batchSize` (one pool call for their `stat`s, one store
/// transaction), and the rest by `flush` at the end of the run: a crash forgets at most one batch, whose files are
/// then read and compared again. A source is remembered only if its ctime is older than the attempt's start by
/// `TreeSyncMemory.settleSeconds`: the bytes the attempt read are then the bytes the file holds at that `stat`.
@LoopActor
final class LandedFilesMemory {
    /// Files per batch written.
    static let batchSize = 256

    private let place: UploadMemoryPlace
    private let isDirectory: Bool
    private let files: UploadFileList
    private let attemptStart: Double
    private var pending: [(index: Int, file: UploadedFile, landedAt: Double)] = []

    /// For a folder upload to `destination` of `files` (the transfer's file list) in an attempt started at
    /// `attemptStart` (Unix seconds).
    init(destination: UploadDestination, params: UploadJob.Params, files: UploadFileList, attemptStart: Double) {
        place = destination.memoryKey(s3Endpoint: UploadJob.s3IdentityEndpoint(params))
        if case .directory = destination { isDirectory = true } else { isDirectory = false }
        self.files = files
        self.attemptStart = attemptStart
    }

    /// `inner` (the file list's hook), then this memory's note of the file.
    func hook(wrapping inner: @escaping FileLanded, in job: JobContext) -> FileLanded {
        { [self] index, file in
            await inner(index, file)
            pending.append((index, file, Timestamp.now()))
            if pending.count >= Self.batchSize { await flush(in: job) }
        }
    }

    /// Writes what landed since the last write. A refused write is logged, never thrown: the memory is a cache.
    func flush(in job: JobContext) async {
        let batch = pending
        pending = []
        guard !batch.isEmpty, job.uploadMemory.isKept else { return }
        // Each file's source from the list (the page of a file just landed is still held); a file whose entry
        // cannot be read is not remembered, and is read and compared again next time.
        let sourced = batch.compactMap { landed in (try? files.path(landed.index)).map { (landed, $0) } }
        let (place, isDirectory) = (place, isDirectory)
        let settled = TreeSyncMemory.settledBefore(attemptStart)
        let rows: [RememberedFile]
        do {
            rows = try await job.runOnPool {
                sourced.map { landed, source in
                    Self.row(
                        landed.file, source: source, place: place, isDirectory: isDirectory,
                        landedAt: landed.landedAt, settledBefore: settled)
                }
            }
        } catch {
            return
        }
        do throws(JobError) {
            try job.uploadMemory.remember(rows)
        } catch {
            job.log(.warning, "the upload memory could not record \(rows.count) landed files: \(error.message)")
        }
    }

    /// The memory's row for `file`, made from `source`. Blocking (`stat`s).
    nonisolated static func row(
        _ file: UploadedFile, source: BytePath, place: UploadMemoryPlace, isDirectory: Bool, landedAt: Double,
        settledBefore: Int64
    ) -> RememberedFile {
        var remembered: RememberedSource?
        if case .success(let (identity, _)) = DirectoryIO.status(source), identity.size == file.bytes,
            let stat = TreeSyncMemory.source(source, identity), stat.changedNanoseconds < settledBefore
        {
            remembered = stat
        }
        let location: String
        if isDirectory {
            location = DirectoryTreeSync.signature(of: file.path, changedBy: Int64(landedAt * 1e9)) ?? ""
        } else {
            location = file.url ?? file.etag ?? ""
        }
        return RememberedFile(
            destination: place.destination, name: place.name(file.name), size: file.bytes,
            state: .complete(sha256: file.sha256), location: location, jobID: "", uploadedAt: 0, source: remembered)
    }
}
