import TrailbookEngine
import TrailbookLoop

/// What identifies the version of a source file that an upload started copying: if any of it differs on a later
/// attempt, the bytes already at the destination may belong to another version, and the job fails with
/// `source_changed` rather than finish a silently corrupt copy.
///
/// JSON: `{"size": 123, "mtime_ns": "1732888620123456789", "inode": "1234", "device": "2049"}`. The last three
/// are decimal strings because job JSON numbers are doubles, exact only up to 2^53, and nanosecond timestamps
/// (≈ 1.7e18), 64-bit inode numbers and device numbers can exceed that.
public struct SourceIdentity: Codable, Sendable, Equatable, CustomStringConvertible {
    /// Size in bytes.
    public var size: Int64
    /// Last modification time, in nanoseconds since the Unix epoch.
    public var modifiedNanoseconds: Int64
    /// Inode number.
    public var inode: UInt64
    /// Device number (`st_dev`).
    public var device: UInt64
    /// Last status change time (`st_ctim`), in nanoseconds since the Unix epoch. Unlike the mtime it cannot be set
    /// back (`touch -r`), so an in-place rewrite that restores the mtime is still noticed. `nil` in checkpoints
    /// written before it was recorded; then it is not compared.
    public var changedNanoseconds: Int64?

    public init(size: Int64, modifiedNanoseconds: Int64, inode: UInt64, device: UInt64, changedNanoseconds: Int64? = nil) {
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
        self.inode = inode
        self.device = device
        self.changedNanoseconds = changedNanoseconds
    }

    /// Same file, same content as far as `stat` can tell: size, mtime, inode, device, and ctime when both know it.
    public static func == (lhs: SourceIdentity, rhs: SourceIdentity) -> Bool {
        lhs.size == rhs.size && lhs.modifiedNanoseconds == rhs.modifiedNanoseconds && lhs.inode == rhs.inode
            && lhs.device == rhs.device
            && (lhs.changedNanoseconds == nil || rhs.changedNanoseconds == nil
                || lhs.changedNanoseconds == rhs.changedNanoseconds)
    }

    enum CodingKeys: String, CodingKey {
        case size
        case modifiedNanoseconds = "mtime_ns"
        case inode, device
        case changedNanoseconds = "ctime_ns"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        size = try container.decode(Int64.self, forKey: .size)
        func integer<T: FixedWidthInteger>(_ key: CodingKeys, _: T.Type) throws -> T {
            let text = try container.decode(String.self, forKey: key)
            guard let value = T(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container, debugDescription: "expected a decimal integer, got '\(text)'")
            }
            return value
        }
        modifiedNanoseconds = try integer(.modifiedNanoseconds, Int64.self)
        inode = try integer(.inode, UInt64.self)
        device = try integer(.device, UInt64.self)
        changedNanoseconds = container.contains(.changedNanoseconds) ? try integer(.changedNanoseconds, Int64.self) : nil
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(size, forKey: .size)
        try container.encode(String(modifiedNanoseconds), forKey: .modifiedNanoseconds)
        try container.encode(String(inode), forKey: .inode)
        try container.encode(String(device), forKey: .device)
        try container.encodeIfPresent(changedNanoseconds.map { String($0) }, forKey: .changedNanoseconds)
    }

    /// "123 bytes, mtime …ns, inode …, device …", for error messages.
    public var description: String {
        "\(size) bytes, mtime \(modifiedNanoseconds) ns, inode \(inode), device \(device)"
    }

    /// The fields that differ from `now`, each with both values, for `source_changed` messages: for example
    /// "ctime was 2025-12-01T00:52:30.123456789Z, now 2025-12-01T00:52:31.000000001Z". Times are ISO 8601 in UTC
    /// (RFC 3339 §5.6) with all nine digits of nanoseconds, so people can read them and two values never print
    /// the same. Empty when nothing differs.
    public func changes(to now: SourceIdentity) -> String {
        func time(_ nanoseconds: Int64) -> String {
            // Floor division, so a time before 1970 keeps a fraction in 0..<1 s.
            let seconds = nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds + 1) / 1_000_000_000 - 1
            let fraction = String(nanoseconds - seconds * 1_000_000_000)
            let whole = Timestamp.iso8601(unixSeconds: Double(seconds))
            return whole.dropLast() + "." + String(repeating: "0", count: 9 - fraction.count) + fraction + "Z"
        }
        var changed: [String] = []
        if size != now.size { changed.append("size was \(size) bytes, now \(now.size)") }
        if modifiedNanoseconds != now.modifiedNanoseconds {
            changed.append("mtime was \(time(modifiedNanoseconds)), now \(time(now.modifiedNanoseconds))")
        }
        if let was = changedNanoseconds, let is_ = now.changedNanoseconds, was != is_ {
            changed.append("ctime was \(time(was)), now \(time(is_))")
        }
        if inode != now.inode { changed.append("inode was \(inode), now \(now.inode)") }
        if device != now.device { changed.append("device was \(device), now \(now.device)") }
        return changed.joined(separator: "; ")
    }
}

/// One uploaded file, as the job's result lists it and its checkpoint remembers it.
///
/// JSON: `{"name", "path", "bytes", "sha256", "bytes_resent"}`.
public struct UploadedFile: Codable, Sendable, Equatable {
    /// The destination name (the source's last path component).
    public var name: BytePath
    /// Where it was written: the destination path (`DIR/NAME`) for a directory upload.
    public var path: BytePath
    /// Its size in bytes.
    public var bytes: Int64
    /// SHA-256 of the bytes written, 64 lower-case hex digits.
    public var sha256: String
    /// Bytes of this file that were written more than once, over all attempts (work lost to crashes or stops
    /// between checkpoints).
    public var bytesResent: Int64
    /// The upload URL on a tus server; `nil` (absent from the JSON) for a directory upload.
    public var url: String?
    /// tus: whether the server was shown to verify `Upload-Checksum` (it refused a deliberately wrong one), so
    /// the stored bytes are the ones hashed here; `nil` (absent) for a directory upload.
    public var checksumVerified: Bool?
    /// S3: the object's ETag as the server answered the upload (unquoted), what later proves the object unchanged
    /// (`LandedFilesMemory`); `nil` (absent) elsewhere or when not known.
    public var etag: String?

    public init(
        name: BytePath, path: BytePath, bytes: Int64, sha256: String, bytesResent: Int64, url: String? = nil,
        etag: String? = nil
    ) {
        self.name = name
        self.path = path
        self.bytes = bytes
        self.sha256 = sha256
        self.bytesResent = bytesResent
        self.url = url
        self.etag = etag
    }

    enum CodingKeys: String, CodingKey {
        case name, path, bytes, sha256, url, etag
        case bytesResent = "bytes_resent"
        case checksumVerified = "checksum_verified"
    }
}

/// A file's inode and device: which file it is, whatever its name. JSON `{"inode": "…", "device": "…"}` (decimal
/// strings, as in `SourceIdentity`: 64-bit numbers do not fit a JSON double).
public struct FileNode: Codable, Sendable, Equatable {
    /// `st_ino`.
    public var inode: UInt64
    /// `st_dev`.
    public var device: UInt64

    public init(inode: UInt64, device: UInt64) {
        self.inode = inode
        self.device = device
    }

    enum CodingKeys: String, CodingKey { case inode, device }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func number(_ key: CodingKeys) throws -> UInt64 {
            let text = try container.decode(String.self, forKey: key)
            guard let value = UInt64(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container, debugDescription: "expected a decimal integer, got '\(text)'")
            }
            return value
        }
        inode = try number(.inode)
        device = try number(.device)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(String(inode), forKey: .inode)
        try container.encode(String(device), forKey: .device)
    }
}

/// The upload job's resumable state, saved after each chunk is durable and after each file is complete.
///
/// JSON:
/// ```json
/// {"version": 1, "file_index": 0, "offset": 8388608,
///  "sources": [{"size": …, "mtime_ns": "…", "inode": "…", "device": "…"}],
///  "finished": [{"name", "path", "bytes", "sha256", "bytes_resent"}],
///  "bytes_resent": 0, "file_bytes_resent": 0}
/// ```
/// No hash state is stored: on resume the hash of the first `offset` bytes is recomputed from what is at the
/// destination (for a tus upload: from the source). New optional members may be added (older checkpoints decode
/// with them absent).
///
/// A tus upload adds, for the file in progress: `"upload_url"` (the upload's URL on the server, once created),
/// `"upload_expires"` (the server's last `Upload-Expires`, an HTTP date) and `"sent_through"` (the end of the
/// furthest byte range ever sent, saved before each `PATCH`, so bytes lost in flight count as resent after a
/// crash). `offset` is then the offset the server confirmed; a resume asks the server (`HEAD`) anyway.
///
/// A directory upload adds `"part_file"` (`{"inode", "device"}` of the current file's `.part`), so a resume after a
/// crash right after the file was renamed into place recognises it as finished.
///
/// An s3 upload adds, for the file in progress, `"s3_plan": {"size", "part_size", "checksum_sha256"}` (saved before the first
/// request), `"s3_create_started"` (saved before `CreateMultipartUpload`, until its UploadId is saved) and
/// `"s3_upload_id"` (the multipart upload's id, saved as soon as it is created) and `"s3_parts_sent"` (the highest
/// part number handed to the transport, saved before the part is sent); which parts the server has is asked with
/// `ListParts` on resume, never assumed.
///
/// An s3 upload of several files that each fit in one `PUT` sends several at once, so they may land out of order:
/// `"finished_ahead"` holds those that landed past `file_index` (`[{"index", "file": {…as in finished}}]`), until
/// the files before them land too and they move to `finished` in order. A resume does not send them again.
///
/// An upload of library photos adds `"photos"` (`PhotoUploadPlan`): the photos it resolved on its first run, whose
/// files are its sources. An upload of folders adds `"tree"` (`UploadTreePlan`): the counts of what it listed on
/// its first run.
///
/// Version 2 (an upload of folders from this version on): the files, their names and identities live in the job's
/// file list in the store (`UploadTreeEntries`), not here, so the checkpoint stays a few hundred bytes whatever the
/// number of files: `"sources"`, `"finished"` and the tree's `"files"` and `"names"` are empty (never filled in
/// memory either: the transfers read the files through `UploadFileList`, a page at a time), and `"file_count"`,
/// `"finished_count"` and `"finished_bytes"` stand for them (`UploadCheckpoint+FileList.swift`). Version 1 (files,
/// photos, and folder uploads that began before version 2) keeps every file here, as before.
public struct UploadCheckpoint: Codable, Sendable, Equatable {
    /// Format version: 1, or 2 when the files live in the job's file list (see the type's documentation).
    public var version: Int
    /// Index in `files` of the file being uploaded; `files.count` once all are done.
    public var fileIndex: Int
    /// Bytes of that file confirmed durable at the destination.
    public var offset: Int64
    /// The identity of every source, in `files` order, captured when the job first ran.
    public var sources: [SourceIdentity]
    /// Results of the files completed so far, in order.
    public var finished: [UploadedFile]
    /// Bytes written more than once so far, over all files and attempts.
    public var bytesResent: Int64
    /// The part of `bytesResent` that belongs to the current file.
    public var fileBytesResent: Int64
    /// tus: the current file's upload URL, once created; `nil` before (and for directory uploads).
    public var uploadURL: String?
    /// tus: the current upload's `Upload-Expires` as the server last sent it; `nil` if it did not say.
    public var uploadExpires: String?
    /// tus: the end of the furthest byte range of the current file ever sent; `nil` for none.
    public var sentThrough: Int64?
    /// tus: when the current run of retryable failures began (Unix milliseconds), `nil` while requests work; a
    /// resume keeps counting towards `--give-up-after` from there.
    public var failingSince: Int64?
    /// file://: the inode and device of the current file's `.part`, saved with each checkpoint inside the file.
    /// After a crash between the rename that finishes the file and the next checkpoint, a file at `DIR/NAME` with
    /// this inode (a rename keeps it) and the source's size is that finished file, not something to copy again.
    public var partFile: FileNode?
    /// tus: whether every run so far that probed the server found that it verifies checksums (see
    /// `TusUpload.checksumVerified`); `nil` before any probe.
    public var checksumVerified: Bool?
    /// s3: the current file's part plan, fixed before its first request and never changed on resume.
    public var s3Plan: S3PartPlan?
    /// s3: the current file's multipart UploadId, once created.
    public var s3UploadID: String?
    /// s3: the highest part number of the current file handed to the transport so far (over every attempt and
    /// every UploadId of the file), saved before the part is sent; `nil` for none. Parts are sent in order, so a
    /// part at or below it that `ListParts` does not list on resume went out before and is sent again: its bytes
    /// count in `bytesResent`.
    public var s3PartsSent: Int?
    /// A photo upload (`photos` param): the photos resolved on the first run and the files they are, saved with
    /// the first checkpoint so every attempt uploads the same ones; `nil` for an upload of files.
    public var photos: PhotoUploadPlan?
    /// An upload of folders: the files listed on the first run and their destination names, saved with the first
    /// checkpoint so every attempt uploads the same ones; `nil` for an upload of files only.
    public var tree: UploadTreePlan?
    /// s3: when a `CreateMultipartUpload` of the current file was first about to be sent (Unix seconds, the
    /// daemon's clock) and its UploadId is not known yet; saved before the request, cleared with `s3UploadID`'s
    /// save. Set on resume, the server may hold an upload this job created but never heard of (a crash or a lost
    /// answer between the request and the save): the run looks for it before creating another.
    public var s3CreateStarted: Int64?

    /// s3: files past `fileIndex` that already landed (single `PUT`s sent alongside earlier files), with their
    /// index in `files`; `nil` or empty when none.
    public var finishedAhead: [FinishedAhead]?

    /// A folder upload: files past `fileIndex` that already failed alone (a single `PUT` sent alongside earlier
    /// files whose source changed or went away; listed in `tree`'s failures), by index in `files`; `nil` or empty
    /// when none. `fileIndex` passes them as it reaches them.
    public var failedAhead: [Int]?

    /// Version 2: the number of files the upload lists (`sources` and the tree's files stay empty: the files are
    /// the job's file list's, read through `UploadFileList`); `nil` in version 1.
    public var fileCount: Int?

    /// Version 2: files that landed before `fileIndex` and are not in `finished` (their rows are in the job's
    /// file list); `nil` (none) in version 1.
    public var finishedCount: Int?

    /// Version 2: the bytes of those `finishedCount` files.
    public var finishedBytes: Int64?

    /// A file that landed before the file at `fileIndex` did.
    public struct FinishedAhead: Codable, Sendable, Equatable {
        /// Its index in `files` (greater than `fileIndex`).
        public var index: Int
        /// Its result row.
        public var file: UploadedFile
    }

    public init(
        version: Int = 1, fileIndex: Int = 0, offset: Int64 = 0, sources: [SourceIdentity],
        finished: [UploadedFile] = [], bytesResent: Int64 = 0, fileBytesResent: Int64 = 0
    ) {
        self.version = version
        self.fileIndex = fileIndex
        self.offset = offset
        self.sources = sources
        self.finished = finished
        self.bytesResent = bytesResent
        self.fileBytesResent = fileBytesResent
    }

    enum CodingKeys: String, CodingKey {
        case version
        case fileIndex = "file_index"
        case offset, sources, finished
        case bytesResent = "bytes_resent"
        case fileBytesResent = "file_bytes_resent"
        case uploadURL = "upload_url"
        case uploadExpires = "upload_expires"
        case sentThrough = "sent_through"
        case partFile = "part_file"
        case checksumVerified = "checksum_verified"
        case s3Plan = "s3_plan"
        case s3UploadID = "s3_upload_id"
        case s3PartsSent = "s3_parts_sent"
        case photos, tree
        case s3CreateStarted = "s3_create_started"
        case failingSince = "failing_since_ms"
        case finishedAhead = "finished_ahead"
        case failedAhead = "failed_ahead"
        case fileCount = "file_count"
        case finishedCount = "finished_count"
        case finishedBytes = "finished_bytes"
    }

    /// Files that landed and are recorded here, in order or ahead of an earlier one.
    var landedCount: Int { (finishedCount ?? 0) + finished.count + (finishedAhead?.count ?? 0) }

    /// Whether the files live in the job's file list rather than here (version 2).
    var listsInStore: Bool { version >= 2 }

    /// Records `file` as landed in order (the caller moves `fileIndex`): appended to `finished` in version 1,
    /// counted in `finishedCount` and `finishedBytes` in version 2 (its row is the job's file list's).
    mutating func appendFinished(_ file: UploadedFile) {
        guard listsInStore else {
            finished.append(file)
            return
        }
        finishedCount = (finishedCount ?? 0) + 1
        finishedBytes = (finishedBytes ?? 0) + file.bytes
    }

    /// The files before `fileIndex` that landed, with their bytes, for a resumed transfer's progress: version 1
    /// lists them in `finished`; in version 2 they are the files before `fileIndex` (of `sizes`) but those that
    /// failed alone (read from `files`, a page at a time).
    /// - Throws: `JobError` from reading the file list (`UploadFileList.failed`).
    @LoopActor
    func landedBefore(sizes: [Int64], files: UploadFileList) throws(JobError) -> [(index: Int, bytes: Int64)] {
        guard listsInStore else { return finished.enumerated().map { ($0.offset, $0.element.bytes) } }
        let failed = try files.failed(before: fileIndex)
        return (0..<min(fileIndex, sizes.count)).filter { !failed.contains($0) }.map { ($0, sizes[$0]) }
    }

    /// Whether a job that has landed `unsavedFiles` files (`unsavedBytes` bytes) since it last saved this checkpoint
    /// should save it now. Each save writes the whole list of landed files, so saving after every file costs
    /// O(n²) for n files (4 000 small files to s3:// took 234 CPU s, 17× the CPU of 1 000). Saving once the unsaved
    /// files reach 1/64 of those landed (at least 1) keeps the total O(64·n), and a `kill -9` then sends again at
    /// most that many finished files (s3: to the same key, so the result is the same; tus: as new uploads, the
    /// earlier ones staying on the server), or `maxUnsavedBytes` bytes of them. Until 128 files have landed a save
    /// is due after every file. `LandedFilesCadence` applies it.
    static func saveIsDue(unsavedFiles: Int, unsavedBytes: Int64, landed: Int) -> Bool {
        unsavedFiles >= max(1, landed / 64) || unsavedBytes >= maxUnsavedBytes
    }

    /// Bytes of landed files a crash may make a job send again (see `saveIsDue`).
    static let maxUnsavedBytes: Int64 = 64 << 20

    /// Whether file `index` (at or past `fileIndex`) already landed out of order (`finishedAhead`).
    func landedAhead(_ index: Int) -> Bool { finishedAhead?.contains { $0.index == index } ?? false }

    /// Records file `index` as landed with result `file`: the next file in order is appended to `finished`, one
    /// further on waits in `finishedAhead`. Then `fileIndex` moves past every landed file, and the per-file state
    /// (offset, plan, UploadId, resent bytes of the file) is cleared whenever it moves.
    mutating func land(_ index: Int, _ file: UploadedFile) {
        precondition(index >= fileIndex, "file \(index) landed twice")
        guard index == fileIndex else {
            finishedAhead = (finishedAhead ?? []) + [FinishedAhead(index: index, file: file)]
            return
        }
        appendFinished(file)
        fileIndex += 1
        passLandedAhead()
        offset = 0
        fileBytesResent = 0
        s3Plan = nil
        s3UploadID = nil
        s3PartsSent = nil
        s3CreateStarted = nil
    }

    /// Moves `fileIndex` past every file that already landed (`finishedAhead`, appended to `finished`) or failed
    /// alone (`failedAhead`) out of order.
    mutating func passLandedAhead() {
        while true {
            if let next = finishedAhead?.firstIndex(where: { $0.index == fileIndex }) {
                appendFinished(finishedAhead!.remove(at: next).file)
            } else if let failed = failedAhead?.firstIndex(of: fileIndex) {
                failedAhead!.remove(at: failed)
            } else {
                break
            }
            fileIndex += 1
        }
        if finishedAhead?.isEmpty == true { finishedAhead = nil }
        if failedAhead?.isEmpty == true { failedAhead = nil }
    }

    /// Files before `fileIndex` that failed alone (a folder upload's): `fileIndex` passed them without a row in
    /// `finished`.
    var failedBehind: Int { (tree?.failedWhileUploading ?? 0) - (failedAhead?.count ?? 0) }

    /// Checks that this checkpoint can belong to a job uploading `files` (version 2: as many files as it counts,
    /// the offset within the file in progress, read from the list).
    /// - Throws: `JobError` `bad_checkpoint` otherwise (not retryable: resubmit the job), `store_error` when the
    ///   list cannot be read.
    @LoopActor
    func check(files: UploadFileList) throws(JobError) {
        try check(fileCount: files.count)
        guard listsInStore, fileIndex < files.count else { return }
        guard offset <= (try files.identity(fileIndex).size) else { throw Self.mismatch }
    }

    /// Checks that this checkpoint can belong to a job uploading `fileCount` files: its count (version 2) or
    /// sources (version 1), its cursor and the files ahead; in version 1 the offset within the file in progress
    /// too (version 2 reads that file's size from the list: `check(files:)`).
    /// - Throws: `JobError` `bad_checkpoint` otherwise (not retryable: resubmit the job).
    func check(fileCount: Int) throws(JobError) {
        let listed = listsInStore ? (self.fileCount ?? -1) : sources.count
        guard version == 1 || version == 2, listed == fileCount, fileIndex >= 0, fileIndex <= fileCount,
            (finishedCount ?? 0) + finished.count + failedBehind == fileIndex, offset >= 0,
            fileIndex == fileCount || listsInStore || offset <= sources[fileIndex].size,
            (finishedAhead ?? []).allSatisfy({ $0.index > fileIndex && $0.index < fileCount }),
            (failedAhead ?? []).allSatisfy({ $0 > fileIndex && $0 < fileCount })
        else { throw Self.mismatch }
    }

    /// `bad_checkpoint`: the checkpoint does not fit the job's files.
    private static var mismatch: JobError {
        JobError(
            code: "bad_checkpoint",
            message: "the saved upload state does not match this job's files; cancel it and submit again")
    }
}
