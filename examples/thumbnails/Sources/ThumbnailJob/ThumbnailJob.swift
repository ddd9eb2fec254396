import PhotoLibrary
import TrailbookEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Makes a JPEG thumbnail of every `.jpg`/`.jpeg` file of a folder: a long-running, cancellable job kind of its
/// own, with progress in thumbnails, a checkpoint after each one, and clean-up after a cancel.
///
/// Params: `folder` (absolute path of the photos), `output` (absolute path of the folder the thumbnails go to,
/// created if missing), `long_side` (pixels, default 160), `max_rate` (thumbnails a second, optional). A thumbnail
/// is written as `NAME.part`, fsynced and renamed to `NAME`, then the checkpoint moves past it, so a resumed job
/// never redoes or skips one. `user_stop` removes the thumbnails made (`cleanUp`); `timeout` and
/// `resource_reclaim` keep them for the next attempt.
public struct ThumbnailJob: JobKind {
    /// The params of a `thumbnails` job (JSON keys in snake case).
    public struct Params: Codable, Sendable, Equatable {
        /// The folder of the photos (absolute).
        public var folder: String
        /// The folder the thumbnails go to (absolute).
        public var output: String
        /// The thumbnails' long side in pixels, 16 to 1 024 (default 160).
        public var longSide: Int?
        /// At most this many thumbnails a second (none when `nil`).
        public var maxRate: Double?

        /// The params of a job making thumbnails of `folder` in `output`.
        public init(folder: String, output: String, longSide: Int? = nil, maxRate: Double? = nil) {
            self.folder = folder
            self.output = output
            self.longSide = longSide
            self.maxRate = maxRate
        }

        enum CodingKeys: String, CodingKey {
            case folder, output
            case longSide = "long_side"
            case maxRate = "max_rate"
        }
    }

    /// What a finished job reports (`show`'s `result`).
    public struct Output: Codable, Sendable, Equatable {
        /// Thumbnails in the output folder.
        public var thumbnails: Int
        /// Thumbnails earlier attempts had made, so this one resumed after them.
        public var resumedFrom: Int
        /// The attempt that finished.
        public var attempt: Int

        /// A result; see the members.
        public init(thumbnails: Int, resumedFrom: Int, attempt: Int) {
            self.thumbnails = thumbnails
            self.resumedFrom = resumedFrom
            self.attempt = attempt
        }

        enum CodingKeys: String, CodingKey {
            case thumbnails
            case resumedFrom = "resumed_from"
            case attempt
        }
    }

    /// How far a job got: the photos done, by sorted name.
    public struct Checkpoint: Codable, Sendable, Equatable {
        /// Photos whose thumbnail is written and synced.
        public var done: Int
    }

    /// `thumbnails`.
    public nonisolated static let name = "thumbnails"
    /// Counted in thumbnails; long-running; decoding on the thread pool; cleans up after a cancel; reads the
    /// submitting host's files.
    public static let traits = JobKindTraits(
        unit: ProgressUnit("thumbnails"), isLongRunning: true, executionTargets: [.threadPool], cleansUpAfterEnd: true,
        readsHostFiles: true)
    /// The members `params` may have: any other is refused at submit (`invalid_params`).
    public static let paramsMembers: [String: [String]]? = ["": ["folder", "output", "long_side", "max_rate"]]

    /// The kind (stateless); callable off the loop.
    public nonisolated init() {}

    /// Refuses relative paths, a missing photo folder and sizes out of range.
    public func validate(_ params: Params) async throws(JobError) {
        guard params.folder.hasPrefix("/"), params.output.hasPrefix("/") else {
            throw JobError(code: "invalid_params", message: "folder and output must be absolute paths")
        }
        guard (16...1_024).contains(params.longSide ?? 160) else {
            throw JobError(code: "invalid_params", message: "long_side must be 16 to 1024 pixels")
        }
        guard (params.maxRate ?? 1) > 0 else {
            throw JobError(code: "invalid_params", message: "max_rate must be above 0 thumbnails a second")
        }
        var status = stat()
        guard stat(params.folder, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw JobError(code: "source_missing", message: "\(params.folder) is not a folder: give a folder of photos")
        }
    }

    /// Makes the thumbnails not yet made, one at a time, reporting each.
    public func run(_ params: Params, in job: JobContext) async throws -> Output {
        let photos = try await job.runOnPool { try ThumbnailFiles.photos(in: params.folder) }
        try await job.runOnPool { try ThumbnailFiles.makeFolder(params.output) }
        let start = try job.loadCheckpoint(as: Checkpoint.self)?.done ?? 0
        if start > 0 { job.log(.info, "resuming after \(start) of \(photos.count) thumbnails") }
        var done = start
        job.reportProgress(completed: Int64(done), total: Int64(photos.count))
        let longSide = params.longSide ?? 160
        while done < photos.count {
            try Task.checkCancellation()
            let name = photos[done]
            let began = ContinuousClock.now
            try await job.runOnPool {
                try ThumbnailFiles.makeThumbnail(of: params.folder + "/" + name, at: params.output + "/" + name, longSide: longSide)
            }
            done += 1
            try job.saveCheckpoint(Checkpoint(done: done))
            job.reportProgress(completed: Int64(done), total: Int64(photos.count), current: name)
            if let rate = params.maxRate {
                let left = 1 / rate - (ContinuousClock.now - began).seconds
                if left > 0 { try await job.sleep(seconds: left) }
            }
        }
        return Output(thumbnails: done, resumedFrom: start, attempt: job.attempt)
    }

    /// After any stop, the thumbnail being written (`.part`) goes; the finished ones stay until `cleanUp`.
    public func onCancel(_ reason: CancellationReason, params: Params, in job: JobContext) async {
        let removed = (try? await job.runOnPool { ThumbnailFiles.removeParts(in: params.output) }) ?? 0
        job.log(.info, "stopped (\(reason.rawValue)); removed \(removed) partial thumbnail(s)")
    }

    /// After a cancel or a failure, removes the thumbnails this job made (the names of its photos in `output`).
    public func cleanUp(after state: JobState, params: Params, in job: JobContext) async -> CleanUpOutcome {
        do {
            let removed = try await job.runOnPool { try ThumbnailFiles.removeThumbnails(of: params.folder, in: params.output) }
            job.log(.info, "clean-up after \(state.rawValue): removed \(removed) thumbnail(s)")
            return .done
        } catch {
            return .retry("could not remove the thumbnails in \(params.output): \(error)")
        }
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
