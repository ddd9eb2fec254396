import TrailbookEngine
import TrailbookLoop

/// Small files of a `file://` upload copied ahead of their turn, up to `maxFiles` in one thread-pool call
/// (`SmallFileCopy`), so a folder of 100 KiB files costs one trip from the loop to the pool per `maxFiles` files. Each file's copy (or its failure, which fails that file alone at its turn) waits here until
/// the upload reaches it, in order, so the landing batch and the checkpoint see the files one by one as before.
struct SmallFileCopiesAhead {
    /// Files copied in one call at most. Measured on 2 000 × 100 KiB to a folder (release, loaded, one sample
    /// each): 16 a call 84 MiB peak RSS, 4 a call 74 MiB and 4.6 s, 1 a call 47 MiB and 3.0 s (before this type,
    /// four pool calls a file: 43 MiB and 12.7–14.5 s). The open `.part` files and their buffers cost more than the
    /// hops they save, so one: the gain is the one call a file instead of four.
    static let maxFiles = 1
    /// Bytes copied in one call at most (a single file larger than this is copied alone).
    static let maxBytes: Int64 = 16 << 20

    /// One file of a run to copy: its index, source, `.part`, destination name and recorded identity.
    struct Wanted: Sendable {
        var index: Int
        var sourcePath: BytePath
        var partPath: BytePath
        var name: BytePath
        var expected: SourceIdentity
    }

    /// The copies made and not yet taken, by file index.
    private var copied: [Int: Result<SmallFileCopy, JobError>] = [:]

    /// Takes file `index`'s copy, if it was copied ahead.
    mutating func take(_ index: Int) -> Result<SmallFileCopy, JobError>? { copied.removeValue(forKey: index) }

    /// Whether no copy waits.
    var isEmpty: Bool { copied.isEmpty }

    /// Copies `run` (consecutive files under `directory`) in one call; blocking: call it on the thread pool.
    /// - Returns: each file's copy or failure, by index.
    static func copy(_ run: [Wanted], directory: BytePath) -> [(Int, Result<SmallFileCopy, JobError>)] {
        run.map { wanted in
            do throws(JobError) {
                return (
                    wanted.index,
                    .success(
                        try SmallFileCopy.copy(
                            sourcePath: wanted.sourcePath, partPath: wanted.partPath, name: wanted.name,
                            directory: directory, expected: wanted.expected)))
            } catch {
                return (wanted.index, .failure(error))
            }
        }
    }

    /// Keeps the copies of a run made by `copy`.
    mutating func keep(_ results: [(Int, Result<SmallFileCopy, JobError>)]) {
        for (index, result) in results { copied[index] = result }
    }
}
