import TrailbookEngine
// For `@LoopActor` and `Task.onLoop`.
import TrailbookLoop

/// The next small files of a `file://` upload, copied on the thread pool while the loop waits for the current one
/// (or for a batch's landing): more pool threads at work than one, so a folder of small files (or of photos) uses
/// both cores of a two-core machine, and copying goes on while a batch is flushed. At most `depth` files ahead: a
/// `SmallFileCopy` holds its two files open and two 1 MiB buffers until it joins the batch, so the memory this
/// costs is bounded by `depth` more such copies.
///
/// A copy ahead changes nothing the job promises: it writes only the file's own `.part` (never its final path),
/// its result (or its failure, e.g. `source_changed`) is taken at the file's turn, in order, and a file counts as
/// landed only when its batch lands (`DirectoryLandingBatch`). Every way out of the upload waits for them first
/// (`settle`), so no copy outlives the job's run: a user stop's clean-up (`DirectoryUpload.discardPartial`) then
/// finds their `.part` files, and a pause or a kill leaves at most those, which the next attempt cuts and copies
/// again (counted in `bytes_resent`).
@LoopActor
struct SmallFileCopyAhead {
    /// Files copied ahead at most, besides the one whose turn it is.
    nonisolated static let depth = 2

    /// The copies running ahead, in file order (consecutive indices): each file's index and the pool call copying
    /// it.
    private var pending: [(index: Int, task: Task<SmallFileCopy, any Error>)] = []

    /// The index of the next file to copy ahead after those running (`after` when none runs), or `nil` when
    /// `depth` copies run already.
    func nextToStart(after index: Int) -> Int? {
        guard pending.count < Self.depth else { return nil }
        return (pending.last?.index ?? index) + 1
    }

    /// Starts copying file `index` (the one `nextToStart` named) on the thread pool with `copy` (a
    /// `SmallFileCopy.copy` call), unless the job is being stopped.
    mutating func start(
        _ index: Int, in job: JobContext, _ copy: @escaping @Sendable () throws -> SmallFileCopy
    ) {
        guard pending.count < Self.depth, pending.last.map({ $0.index + 1 == index }) ?? true, job.stopReason == nil
        else { return }
        pending.append((index, Task.onLoop { try await job.runOnPool(copy) }))
    }

    /// The copy of file `index` if it was started ahead (the first running), for the caller to wait for (its
    /// value is the copy, or the file's own failure, raised at its turn); `nil` when none copies that file. The
    /// caller must wait for the task it takes before leaving the upload.
    mutating func take(_ index: Int) -> Task<SmallFileCopy, any Error>? {
        guard let first = pending.first, first.index == index else { return nil }
        pending.removeFirst()
        return first.task
    }

    /// Waits for every copy ahead and hands back those that copied their file, in order (a failed one is left
    /// out, with the ones after it). Call on every way out of the upload, so no pool call of the job outlives its
    /// run.
    mutating func settle() async -> [(index: Int, copied: SmallFileCopy)] {
        let running = pending
        pending = []
        var copied: [(index: Int, copied: SmallFileCopy)] = []
        var failed = false
        for (index, task) in running {
            let result = try? await task.value
            if let result, !failed { copied.append((index, result)) } else { failed = true }
        }
        return copied
    }
}
