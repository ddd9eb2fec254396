import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// A folder upload as listed on its first run, kept in the checkpoint (`UploadCheckpoint.tree`) so every later
/// attempt uploads the same files: files added to the folders after that are not part of the job.
///
/// The layout rule is rclone's `copy` (and `aws s3 sync`'s): the *contents* of each folder given go under the
/// destination, the folder's own name is not kept (`upload ~/Lisbon --to s3://b/trips/` stores
/// `~/Lisbon/day1/a.jpg` as `trips/day1/a.jpg`). A file given by itself goes under its own name, as before. The
/// destination name (file path under the directory, the key after the S3 prefix, the tus `filename`) is the
/// relative path with `/` separators.
///
/// JSON: `{"files", "names", "skipped_count", "skipped_by_reason", "skipped", "failed_count", "failed_by_code",
/// "failed", "failed_while_uploading", "already_there", "already_there_bytes"}`; each listed entry `{"path",
/// "reason", "message"}` (and `"name"` for a failed file).
public struct UploadTreePlan: Codable, Sendable, Equatable {
    /// The files to upload, absolute, in upload order: the job's sources.
    public var files: [BytePath]
    /// Their names at the destination, aligned with `files`.
    public var names: [BytePath]
    /// Entries passed over (see `UploadTreeWalk`).
    public var skippedCount: Int
    /// `skippedCount` per reason.
    public var skippedByReason: [String: Int]
    /// The first `listed` entries passed over.
    public var skipped: [Entry]
    /// Files the destination cannot take (`bad_name`) or that would land on another file's name
    /// (`duplicate_name`): not uploaded, and the job ends `failed` with `some_files_failed` once the others are.
    public var failedCount: Int
    /// `failedCount` per error code.
    public var failedByCode: [String: Int]
    /// The first `listed` failed files.
    public var failed: [Entry]
    /// Of `failedCount`, the files listed in `files` that failed while the job ran (`source_missing`,
    /// `source_changed`, …: see `UploadCheckpoint.failFile`); the others were never in `files`.
    public var failedWhileUploading: Int

    /// Files left out because the destination already holds the same bytes (`DirectoryTreeSync`); not listed.
    public var unchangedCount: Int
    /// Their bytes.
    public var unchangedBytes: Int64

    /// Most entries listed per list (all are counted).
    public static let listed = 1000

    /// On the first run only (not saved): every entry of this plan (a page of the listing) passed over, failed at
    /// listing or already there, uncapped, in the order met, for the job's file list in the store
    /// (`UploadTreeListing`).
    var notUploaded: [NotUploaded] = []

    /// An entry of `notUploaded`: what it is and why it is not uploaded.
    struct NotUploaded: Sendable, Equatable {
        /// The entry.
        var entry: Entry
        /// Its size in bytes, when known (files already there), else 0.
        var size: Int64
        /// Why: passed over (`Entry.reason` a skip reason), failed (`Entry.reason` an error code) or already there.
        var outcome: JobEntryOutcome
    }

    /// A file or entry that is not uploaded, and why.
    public struct Entry: Codable, Sendable, Equatable {
        /// Its absolute path.
        public var path: BytePath
        /// Its destination name, for a failed file.
        public var name: BytePath?
        /// A skip reason (`symlink`, `not_regular`, …) or a failed file's error code (`bad_name`, …).
        public var reason: String
        /// What happened, in words.
        public var message: String
    }

    enum CodingKeys: String, CodingKey {
        case files, names, skipped, failed
        case skippedCount = "skipped_count"
        case skippedByReason = "skipped_by_reason"
        case failedCount = "failed_count"
        case failedByCode = "failed_by_code"
        case unchangedCount = "already_there"
        case unchangedBytes = "already_there_bytes"
        case failedWhileUploading = "failed_while_uploading"
    }

    init() {
        files = []
        names = []
        skippedCount = 0
        skippedByReason = [:]
        skipped = []
        failedCount = 0
        failedByCode = [:]
        failed = []
        failedWhileUploading = 0
        unchangedCount = 0
        unchangedBytes = 0
    }

    mutating func skip(_ entry: Entry) {
        notUploaded.append(
            NotUploaded(entry: entry, size: 0, outcome: .passedOver(reason: entry.reason, message: entry.message)))
        skippedCount += 1
        skippedByReason[entry.reason, default: 0] += 1
        if skipped.count < Self.listed { skipped.append(entry) }
    }

    mutating func fail(_ entry: Entry) {
        notUploaded.append(NotUploaded(entry: entry, size: 0, outcome: .failed(code: entry.reason, message: entry.message)))
        failedCount += 1
        failedByCode[entry.reason, default: 0] += 1
        if failed.count < Self.listed { failed.append(entry) }
    }

    /// Lists `sources` for an upload to `destination` whole, in one plan: a folder's files by their relative
    /// paths, a file by its name (`UploadTreeLister`, in one page). Blocking. A job's first run lists a page at a
    /// time instead (`UploadTreeListing`).
    /// - Returns: the plan and the identity of each of its files.
    /// - Throws: `JobError` `source_missing`, `source_unreadable`, `source_not_regular` (a source given that is
    ///   neither a file nor a folder), `bad_name` (a file given by itself that has no name).
    static func list(
        _ sources: [BytePath], destination: UploadDestination, filter: UploadFilter, followLinks: Bool
    ) throws(JobError) -> (plan: UploadTreePlan, identities: [SourceIdentity]) {
        let lister = UploadTreeLister(sources, destination: destination, filter: filter, followLinks: followLinks)
        return try lister.next(limit: .max) ?? (UploadTreePlan(), [])
    }

    /// Adds the counts of `page` (a page of the listing, `UploadTreeLister.next`, after the sync comparison) to
    /// this plan's, and its entries passed over and failed to the first `listed` kept; not its files.
    mutating func count(_ page: UploadTreePlan) {
        skippedCount += page.skippedCount
        skippedByReason.merge(page.skippedByReason, uniquingKeysWith: +)
        skipped += page.skipped.prefix(max(0, Self.listed - skipped.count))
        failedCount += page.failedCount
        failedByCode.merge(page.failedByCode, uniquingKeysWith: +)
        failed += page.failed.prefix(max(0, Self.listed - failed.count))
        unchangedCount += page.unchangedCount
        unchangedBytes += page.unchangedBytes
    }

    /// Whether two files of one name overwrite each other at `destination` (tus gives each its own upload).
    static func namesCollide(at destination: UploadDestination) -> Bool {
        if case .tus = destination { return false }
        return true
    }

    /// Why `destination` cannot take a file named `name` (relative, `/`-separated), or `nil`.
    ///
    /// A directory: each component at most 255 bytes, the last leaving room for its temporary
    /// `NAME.<job>.part` name. S3: the key (prefix + name) in UTF-8 and at most 1 024 bytes, with no empty
    /// segment (`//`) and no trailing `/`. tus: any name (it is only metadata).
    static func nameProblem(_ name: BytePath, destination: UploadDestination) -> String? {
        switch destination {
        case .directory:
            let components = name.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            let longest = 255 - (1 + 8 + UploadNames.partSuffix.utf8.count)
            if components.dropLast().contains(where: { $0.count > 255 }) {
                return "a folder name in '\(name)' is over 255 bytes, more than the file system takes"
            }
            if let last = components.last, last.count > longest {
                return "the name of '\(name)' is \(last.count) bytes; at most \(longest) fit beside its temporary "
                    + ".part name; rename the file"
            }
            return nil
        case .s3(_, let prefix):
            guard let text = name.text else {
                return "'\(name)' is not UTF-8, and S3 keys are; rename the file to upload it to S3"
            }
            let key = prefix + text
            if key.utf8.count > 1024 {
                return "the key '\(key)' is \(key.utf8.count) bytes, over S3's 1024; shorten the path or prefix"
            }
            if key.contains("//") || key.hasSuffix("/") {
                return "the key '\(key)' has an empty path segment; rename the file"
            }
            return nil
        case .tus:
            return nil
        }
    }

    /// `result` (`UploadJob.result`) with the folder's account: `"tree": {"uploaded", "bytes", "already_there",
    /// "already_there_bytes", "skipped", "skipped_by_reason", "failed", "failed_by_code"}`, `"skipped": […]` and
    /// `"failed": […]`.
    func annotate(_ result: JSONValue) -> JSONValue {
        guard case .object(var members) = result else { return result }
        members["tree"] = [
            "uploaded": .number(Double(uploadedCount)),
            "bytes": members["bytes"] ?? .number(0),
            "already_there": .number(Double(unchangedCount)),
            "already_there_bytes": .number(Double(unchangedBytes)),
            "skipped": .number(Double(skippedCount)),
            "skipped_by_reason": .object(skippedByReason.mapValues { .number(Double($0)) }),
            "failed": .number(Double(failedCount)),
            "failed_by_code": .object(failedByCode.mapValues { .number(Double($0)) }),
        ]
        members["skipped"] = JSONCoding.value(of: skipped)
        members["failed"] = JSONCoding.value(of: failed)
        return .object(members)
    }

    /// In memory only: the number of files listed to upload when `files` is not filled in (a version-2
    /// checkpoint's plan: the files are the job's file list's); `nil` when `files` holds them.
    var listedCount: Int?

    /// Files uploaded once the job is done: the ones listed less those that failed while it ran.
    var uploadedCount: Int { (listedCount ?? files.count) - failedWhileUploading }

    /// The error a job ends with when some of its files failed (after every other file was uploaded):
    /// `some_files_failed`, with the counts and the first few files named; `nil` when none failed.
    func failure(destination: String) -> JobError? {
        guard failedCount > 0 else { return nil }
        let codes = failedByCode.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        let named = failed.prefix(3).map { "\($0.path) (\($0.reason): \($0.message))" }.joined(separator: "; ")
        let more = failedCount > 3 ? "; and \(failedCount - 3) more" : ""
        return JobError(
            code: "some_files_failed",
            message: "\(failedCount) of \(failedCount + uploadedCount) files failed (\(codes)); the other "
                + "\(uploadedCount) were uploaded to \(destination): \(named)\(more); fix or rename them and upload the folder again")
    }
}
