import TrailbookEngine

/// The `upload` job kind: copies files to a destination in chunks, resumably, and records the SHA-256 of what
/// was written.
///
/// Destinations: `file:///abs/dir` (a local directory; see `DirectoryUpload`). `http(s)://` tus endpoints are
/// parsed (`UploadDestination.tus`) but refused with `unsupported_destination` until the tus client lands.
///
/// Progress counts bytes of all files together; `current` is the file being uploaded and `items` has one row per
/// file. Stopping with `user_stop` deletes the current file's partial output; `timeout` and `resource_reclaim`
/// keep it, and the next attempt resumes from the last checkpoint (at most one chunk is written again).
///
/// Error codes: `invalid_params`, `bad_destination`, `unsupported_destination`, `bad_name`, `duplicate_name`,
/// `source_missing`, `source_not_regular`, `source_unreadable`, `source_changed`, `destination_missing`,
/// `destination_not_directory`, `destination_not_writable`, `write_failed` (retryable for a full disk or an I/O
/// error), `bad_checkpoint`.
///
/// Result: `{"bytes", "bytes_resent", "sha256" (the file's when exactly one, else null), "files": [{"name",
/// "path", "bytes", "sha256", "bytes_resent"}], "destination"}`.
public struct UploadJob: JobKind {
    /// Parameters as submitted (JSON, snake_case keys).
    public struct Params: Codable, Sendable, Equatable {
        /// Absolute paths of the files to upload, in order. Each is stored under its last path component.
        public var files: [String]
        /// Destination URL: `file:///abs/dir` (or, later, an `http(s)://` tus endpoint).
        public var to: String
        /// Bytes between checkpoints (each ends with an fsync): 4 KiB…1 GiB, default 8 MiB. A resume writes at
        /// most this many bytes again.
        public var chunkSize: Int64
        /// Bandwidth limit in bytes per second (at least 1 KiB/s); `nil` for none.
        public var maxRate: Int64?

        /// Default `chunkSize`: 8 MiB.
        public static let defaultChunkSize: Int64 = 8 << 20
        /// Smallest `chunkSize`: 4 KiB.
        public static let minimumChunkSize: Int64 = 4 << 10
        /// Largest `chunkSize`: 1 GiB.
        public static let maximumChunkSize: Int64 = 1 << 30
        /// Smallest `maxRate`: 1 KiB/s.
        public static let minimumRate: Int64 = 1 << 10

        public init(files: [String], to: String, chunkSize: Int64 = Params.defaultChunkSize, maxRate: Int64? = nil) {
            self.files = files
            self.to = to
            self.chunkSize = chunkSize
            self.maxRate = maxRate
        }

        enum CodingKeys: String, CodingKey {
            case files, to
            case chunkSize = "chunk_size"
            case maxRate = "max_rate"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            files = try container.decode([String].self, forKey: .files)
            to = try container.decode(String.self, forKey: .to)
            chunkSize = try container.decodeIfPresent(Int64.self, forKey: .chunkSize) ?? Self.defaultChunkSize
            maxRate = try container.decodeIfPresent(Int64.self, forKey: .maxRate)
        }

        /// Checks what needs no file system: at least one file, absolute paths, chunk size and rate limits.
        /// - Throws: `JobError` `invalid_params`.
        public func checkLimits() throws(JobError) {
            guard !files.isEmpty else {
                throw JobError(code: "invalid_params", message: "no files to upload; give at least one file")
            }
            for file in files where !file.hasPrefix("/") || file.contains("\0") {
                throw JobError(
                    code: "invalid_params", message: "source '\(file)' is not an absolute path; give absolute paths")
            }
            guard (Self.minimumChunkSize...Self.maximumChunkSize).contains(chunkSize) else {
                throw JobError(
                    code: "invalid_params",
                    message: "chunk_size \(chunkSize) is out of range; give between 4KiB and 1GiB (default 8MiB)")
            }
            if let maxRate, maxRate < Self.minimumRate {
                throw JobError(
                    code: "invalid_params",
                    message: "max_rate \(maxRate) bytes/s is too low; give at least 1KiB (1024 bytes per second)")
            }
        }
    }

    /// `"upload"`.
    public static let name = "upload"
    /// Bytes; long-running (1 h default deadline); runs on the loop and its blocking I/O on the thread pool.
    public static let traits = JobKindTraits(unit: .bytes, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool])

    public init() {}

    /// Refuses a bad upload at submit time: see `Params.checkLimits()`, `UploadDestination(parsing:)`,
    /// `UploadNames.names(ofSources:)` and, for a directory, `DirectoryUpload.validate`.
    /// - Throws: `JobError` with one of the kind's codes and a message saying what to do.
    public func validate(_ params: Params) async throws(JobError) {
        try params.checkLimits()
        let destination = try UploadDestination(parsing: params.to)
        let names = try UploadNames.names(ofSources: params.files)
        switch destination {
        case .directory(let path):
            try await DirectoryUpload.validate(files: params.files, names: names, directory: path)
        case .tus(let endpoint):
            throw UploadDestination.tusNotSupportedYet(endpoint)
        }
    }

    /// Uploads every file, resuming from the checkpoint if there is one.
    /// - Returns: the result JSON (see the type's documentation).
    /// - Throws: `JobError` (the codes above), or `JobStopped` when stopped.
    public func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        try params.checkLimits()
        let destination = try UploadDestination(parsing: params.to)
        let names = try UploadNames.names(ofSources: params.files)
        switch destination {
        case .directory(let path):
            let upload = DirectoryUpload(params: params, names: names, directory: path)
            return try await upload.run(in: job)
        case .tus(let endpoint):
            throw UploadDestination.tusNotSupportedYet(endpoint)
        }
    }

    /// On `user_stop`, deletes the current file's partial output (files already complete stay); on `timeout` and
    /// `resource_reclaim` keeps it for the next attempt.
    public func onCancel(_ reason: CancellationReason, params: Params, in job: JobContext) async {
        guard reason == .userStop, let destination = try? UploadDestination(parsing: params.to),
            let names = try? UploadNames.names(ofSources: params.files)
        else { return }
        switch destination {
        case .directory(let path):
            await DirectoryUpload(params: params, names: names, directory: path).removePartial(in: job)
        case .tus:
            break
        }
    }

    /// The result JSON of an upload to `destination` that wrote `files`.
    nonisolated public static func result(files: [UploadedFile], bytesResent: Int64, destination: String) -> JSONValue {
        [
            "bytes": .number(files.reduce(Int64(0)) { $0 + $1.bytes }),
            "bytes_resent": .number(bytesResent),
            "sha256": files.count == 1 ? .string(files[0].sha256) : .null,
            "files": JSONCoding.value(of: files),
            "destination": .string(destination),
        ]
    }
}
