import TrailbookEngine

/// Byte progress of a multi-file upload: the total and each file's done bytes. A file's row (`ProgressItem`) is
/// made only when reported, from its name, so 100 000 files cost their byte counts here, not 100 000 rows.
struct UploadProgress {
    private var doneBytes: [Int64]
    private let sizes: [Int64]
    /// File `index`'s label (its destination name), read from the caller's list of names.
    private let label: (Int) -> String
    private(set) var completed: Int64 = 0
    let total: Int64
    private var current = 0
    /// Bytes of files finished since the checkpoint was last saved (not persisted).
    var unsavedFinishedBytes: Int64 = 0
    /// Files landed at the destination (counted by the transfer as each one lands).
    var filesDone: Int64 = 0

    /// Files landed of files in all, reported beside the bytes (`JobProgress.files`).
    var files: ProgressFileCount { ProgressFileCount(completed: filesDone, total: Int64(sizes.count)) }

    /// Per-file rows sent with each report, at most: a job of 20 000 small files must not copy and publish
    /// 20 000 rows per report (that made it quadratic); the window follows the file in progress.
    static let reportedItemLimit = 64

    /// Progress of files named `names` (labels) of `sizes` bytes.
    init(names: [BytePath], sizes: [Int64]) {
        self.init(sizes: sizes) { names[$0].description }
    }

    /// Progress of files of `sizes` bytes, file `index` labelled `label(index)`.
    init(sizes: [Int64], label: @escaping (Int) -> String) {
        doneBytes = [Int64](repeating: 0, count: sizes.count)
        self.sizes = sizes
        self.label = label
        total = sizes.reduce(0, +)
    }

    /// File `index`'s done bytes.
    func done(_ index: Int) -> Int64 { doneBytes[index] }

    /// Sets file `index`'s done bytes.
    mutating func set(_ index: Int, _ done: Int64) {
        completed += done - doneBytes[index]
        doneBytes[index] = done
        current = index
    }

    /// The per-file rows to report: all of them for a small job, else a window of `reportedItemLimit` starting
    /// at the file in progress (a fresh small array, so reporting never copies the whole list).
    var items: [ProgressItem] {
        let start = sizes.count > Self.reportedItemLimit ? min(current, sizes.count - Self.reportedItemLimit) : 0
        return (start..<min(sizes.count, start + Self.reportedItemLimit)).map {
            ProgressItem(label: label($0), completed: doneBytes[$0], total: sizes[$0])
        }
    }
}
