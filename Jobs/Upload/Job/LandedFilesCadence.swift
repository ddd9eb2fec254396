/// When an upload saves its checkpoint as files land, shared by the `s3://` and tus destinations.
///
/// Each save writes the whole checkpoint, whose list of landed files grows with the job, so saving after every file
/// costs O(n²) for n files (4 000 small files to s3:// took 234 CPU s, 17× the CPU of 1 000). This saves after every
/// file until 128 have landed, then once the unsaved ones reach 1/64 of those landed or `maxUnsavedBytes`
/// (`UploadCheckpoint.saveIsDue`), which keeps the total O(64·n) entries written. The price: a `kill -9` forgets at
/// most that many landed files, which the resumed job sends again.
///
/// A checkpoint still never claims a file that has not landed: files are counted here only once the destination
/// has them, and a stop (`flushIfUnsaved`) saves what landed.
struct LandedFilesCadence {
    /// Files landed since the last save.
    private(set) var unsavedFiles = 0
    /// Their bytes.
    private(set) var unsavedBytes: Int64 = 0

    /// Counts a file of `bytes` bytes that just landed (and is recorded in the checkpoint in memory, which now
    /// holds `landed` landed files in all).
    /// - Returns: whether the checkpoint should be saved now; the caller then saves it and calls `saved()`.
    mutating func landed(bytes: Int64, landed: Int) -> Bool {
        unsavedFiles += 1
        unsavedBytes += bytes
        return UploadCheckpoint.saveIsDue(unsavedFiles: unsavedFiles, unsavedBytes: unsavedBytes, landed: landed)
    }

    /// The checkpoint was saved (by the cadence or by any other save, which records the landed files too).
    mutating func saved() { (unsavedFiles, unsavedBytes) = (0, 0) }

    /// Whether landed files are not yet saved.
    var hasUnsaved: Bool { unsavedFiles > 0 }
}
