import TrailbookEngine

/// The `upload` job kind: copies files to a destination in chunks, resumably, and records the SHA-256 of what
/// was written.
///
/// Destinations: `file:///abs/dir` (a local directory; see `DirectoryUpload`), `http(s)://` tus 1.0 creation
/// endpoints (see `TusUploadRun`) and `s3://BUCKET/PREFIX/` (S3 and compatible servers; see `S3UploadRun`).
///
/// Progress counts bytes of all files together; `current` is the file being uploaded and `items` has one row per
/// file. A job that ends `failed` or `cancelled` has its partial output removed by `cleanUp` (retried until done,
/// across restarts); `timeout` and `resource_reclaim` keep it, and the next attempt resumes from the last
/// checkpoint (at most one chunk is written again).
///
/// Error codes: `invalid_params`, `bad_destination`, `bad_name`, `duplicate_name`,
/// `source_missing`, `source_not_regular`, `source_unreadable`, `source_changed`, `destination_missing`,
/// `destination_not_directory`, `destination_not_writable`, `write_failed` (retryable for a full disk or an I/O
/// error), `bad_checkpoint`; for tus also `too_large`, `unauthorized`, `gone`, `checksum_mismatch`,
/// `offset_mismatch`, `protocol_error` (see `TusUploadRun`); for s3 the `S3Error.Code`s, `too_large` and
/// `size_mismatch` (see `S3UploadRun`); `duplicate_upload` at submit (see `duplicateKeys`); for folders
/// `some_files_failed`, once every other file is uploaded, when files failed alone (listed `bad_name` or
/// `duplicate_name`; also removed or changed while the job ran: `UploadCheckpoint.fileFailure`).
///
/// Result: `{"bytes", "bytes_resent", "sha256" (the file's when exactly one, else null), "files": [{"name",
/// "path", "bytes", "sha256", "bytes_resent"}], "destination"}`; a tus upload adds `"url"` per file and at the top
/// (the file's when exactly one, else null).
///
/// Photos of the library instead of files (`Params.photos`, through the `UploadPhotoLibrary` seam): resolved on the
/// first run (`photoPlan`), skipped with a reason when they cannot or need not go (`already_uploaded` unless
/// `again`, `not_in_library`, `file_missing`, `file_unreadable`, `bad_name`, `duplicate_name`), remembered by the
/// library as each file lands; the result adds `photo_id` per file, `photos` and `skipped`
/// (`PhotoUploadPlan.annotate`).
public struct UploadJob: JobKind {
    /// The members of the params, `s3` and `photos`: any other is refused at submit (`invalid_params`).
    public static var paramsMembers: [String: [String]]? {
        [
            "": Params.CodingKeys.allCases.map(\.rawValue), "s3": S3Options.CodingKeys.allCases.map(\.rawValue),
            "photos": UploadPhotoSelection.CodingKeys.allCases.map(\.rawValue),
        ]
    }
    /// Parameters as submitted (JSON, snake_case keys).
    public struct Params: Codable, Sendable, Equatable {
        /// Absolute paths of the files to upload, in order. Each is stored under its last path component. Empty
        /// when `photos` is given.
        public var files: [BytePath]
        /// Photos of the library to upload instead of files (`--ids`, `--ids-file`, `--tag`), resolved to their
        /// files when the job first runs; `nil` for an upload of `files`.
        public var photos: UploadPhotoSelection?
        /// With `photos`: upload also the photos the library remembers as uploaded to this destination already
        /// (`--again`); by default they are skipped (`already_uploaded`). With folders (to `file://` or S3): send
        /// also the files the destination already holds with the same bytes (by default left out, `already_there`;
        /// see `UploadTreeSync`).
        public var again: Bool
        /// Destination URL: `file:///abs/dir` (or, later, an `http(s)://` tus endpoint).
        public var to: String
        /// Bytes between checkpoints (each ends with an fsync): 4 KiB…1 GiB, default 8 MiB. A resume writes at
        /// most this many bytes again. Without it (`chunkSizeGiven` false) a `file://` upload checkpoints by
        /// bytes and time instead (`DirectoryUpload.defaultSyncBytes`, `defaultSyncSeconds`).
        public var chunkSize: Int64
        /// Whether the submit gave `chunk_size` (else `chunkSize` is the default).
        public var chunkSizeGiven: Bool
        /// Bandwidth limit in bytes per second (at least 1 KiB/s); `nil` for none.
        public var maxRate: Int64?
        /// tus only: extra HTTP header lines sent with every request, `"Name: value"` (for example
        /// `"Authorization: Bearer …"`). Their values never appear in `show`, `list` or logs (see
        /// `JobRecord.redacted`).
        public var headers: [String]
        /// tus only: a PEM file of CA certificates to verify an `https` server with; `nil` for the system's.
        public var caBundle: String?
        /// Photos (`photos`): name each photo at the destination by its path under the library's root, keeping its
        /// folders (`--keep-folders`); by default each goes under its file name.
        public var keepFolders: Bool
        /// Folders: follow symbolic links inside them (`--follow-links`), with loop detection; by default links are
        /// passed over (`symlink`). See `UploadTreeWalk`.
        public var followLinks: Bool
        /// Folders: patterns of files to take (`--include`; `UploadFilter`); empty for all.
        public var include: [String]
        /// Folders: patterns of files to leave out (`--exclude`; `UploadFilter`).
        public var exclude: [String]
        /// s3 only: overrides of the endpoint, region, addressing and profile, and the multipart limits; `nil`
        /// for the defaults (see `S3Options`). Never holds a secret: credentials are read by the daemon.
        public var s3: S3Options?

        /// Default `chunkSize`: 8 MiB.
        public static let defaultChunkSize: Int64 = 8 << 20
        /// Smallest `chunkSize`: 4 KiB.
        public static let minimumChunkSize: Int64 = 4 << 10
        /// Largest `chunkSize`: 1 GiB.
        public static let maximumChunkSize: Int64 = 1 << 30
        /// Smallest `maxRate`: 1 KiB/s.
        public static let minimumRate: Int64 = 1 << 10

        public init(
            files: [BytePath], to: String, chunkSize: Int64? = nil, maxRate: Int64? = nil,
            headers: [String] = [], caBundle: String? = nil, s3: S3Options? = nil, photos: UploadPhotoSelection? = nil,
            again: Bool = false, followLinks: Bool = false, include: [String] = [], exclude: [String] = [],
            keepFolders: Bool = false
        ) {
            self.files = files
            self.keepFolders = keepFolders
            self.followLinks = followLinks
            self.include = include
            self.exclude = exclude
            self.photos = photos
            self.again = again
            self.to = to
            self.chunkSize = chunkSize ?? Self.defaultChunkSize
            chunkSizeGiven = chunkSize != nil
            self.maxRate = maxRate
            self.headers = headers
            self.caBundle = caBundle
            self.s3 = s3
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case files, to, headers, s3, photos, again
            case chunkSize = "chunk_size"
            case maxRate = "max_rate"
            case caBundle = "ca_bundle"
            case include, exclude
            case followLinks = "follow_links"
            case keepFolders = "keep_folders"
        }

        /// Encodes the params as JSON; `chunk_size`, `headers`, `ca_bundle`, `photos` and `again` only when given.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(files, forKey: .files)
            try container.encode(to, forKey: .to)
            if chunkSizeGiven { try container.encode(chunkSize, forKey: .chunkSize) }
            try container.encodeIfPresent(maxRate, forKey: .maxRate)
            if !headers.isEmpty { try container.encode(headers, forKey: .headers) }
            try container.encodeIfPresent(caBundle, forKey: .caBundle)
            try container.encodeIfPresent(s3, forKey: .s3)
            try container.encodeIfPresent(photos, forKey: .photos)
            if again { try container.encode(again, forKey: .again) }
            if followLinks { try container.encode(followLinks, forKey: .followLinks) }
            if !include.isEmpty { try container.encode(include, forKey: .include) }
            if !exclude.isEmpty { try container.encode(exclude, forKey: .exclude) }
            if keepFolders { try container.encode(keepFolders, forKey: .keepFolders) }
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            photos = try container.decodeIfPresent(UploadPhotoSelection.self, forKey: .photos)
            // A photo upload names no files; an upload of files must.
            files = try photos == nil ? container.decode([BytePath].self, forKey: .files)
                : container.decodeIfPresent([BytePath].self, forKey: .files) ?? []
            again = try container.decodeIfPresent(Bool.self, forKey: .again) ?? false
            to = try container.decode(String.self, forKey: .to)
            let given = try container.decodeIfPresent(Int64.self, forKey: .chunkSize)
            chunkSize = given ?? Self.defaultChunkSize
            chunkSizeGiven = given != nil
            maxRate = try container.decodeIfPresent(Int64.self, forKey: .maxRate)
            headers = try container.decodeIfPresent([String].self, forKey: .headers) ?? []
            caBundle = try container.decodeIfPresent(String.self, forKey: .caBundle)
            s3 = try container.decodeIfPresent(S3Options.self, forKey: .s3)
            followLinks = try container.decodeIfPresent(Bool.self, forKey: .followLinks) ?? false
            include = try container.decodeIfPresent([String].self, forKey: .include) ?? []
            exclude = try container.decodeIfPresent([String].self, forKey: .exclude) ?? []
            keepFolders = try container.decodeIfPresent(Bool.self, forKey: .keepFolders) ?? false
        }

        /// The `include` / `exclude` rules, compiled.
        /// - Throws: `JobError` `invalid_params` for a malformed pattern.
        public func filter() throws(JobError) -> UploadFilter {
            try UploadFilter(include: include, exclude: exclude)
        }

        /// `headers` as name/value pairs.
        /// - Throws: `JobError` `invalid_params` for a line without `:`, with an empty or non-token name, or with a
        ///   control character but tab in its value (CR or LF would inject a header). The message names the header,
        ///   never its value.
        public func headerFields() throws(JobError) -> [(name: String, value: String)] {
            try headers.map { line throws(JobError) in
                guard let colon = line.firstIndex(of: ":") else {
                    throw JobError(
                        code: "invalid_params", message: "header without ':'; give --header 'Name: value'")
                }
                let name = String(line[..<colon])
                let value = String(line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" })
                let token = name.utf8.allSatisfy { byte in
                    byte > 32 && byte < 127 && !"()<>@,;:\\\"/[]?={}".utf8.contains(byte)
                }
                guard !name.isEmpty, token else {
                    throw JobError(
                        code: "invalid_params", message: "header name '\(name)' is not a valid HTTP field name")
                }
                // RFC 9110 §5.5: a field value is visible characters, spaces and tabs; a control character (a
                // line break would inject a header, `\x01` is refused by servers) never goes out.
                guard !value.utf8.contains(where: { ($0 < 32 && $0 != 9) || $0 == 127 }) else {
                    throw JobError(
                        code: "invalid_params",
                        message: "header \(name) has a control character (a line break, NUL, \\x01…) in its value; "
                            + "give a value of visible characters, spaces and tabs")
                }
                return (name: name, value: value)
            }
        }

        /// Checks what needs no file system: at least one file (or photos, not both), absolute paths, chunk size
        /// and rate limits.
        /// - Throws: `JobError` `invalid_params`.
        public func checkLimits() throws(JobError) {
            if let photos {
                guard files.isEmpty else {
                    throw JobError(code: "invalid_params", message: "give files or photos (ids, ids_file, tags), not both")
                }
                try photos.check()
            } else if files.isEmpty {
                throw JobError(code: "invalid_params", message: "no files to upload; give at least one file")
            }
            if photos != nil, followLinks || !include.isEmpty || !exclude.isEmpty {
                throw JobError(
                    code: "invalid_params",
                    message: "follow_links, include and exclude apply to folders (--follow-links, --include, --exclude), not photos")
            }
            if keepFolders, photos == nil {
                throw JobError(
                    code: "invalid_params",
                    message: "keep_folders (--keep-folders) applies to photos of the library (--ids, --ids-file, --tag); "
                        + "a folder uploaded keeps its layout anyway")
            }
            _ = try filter()
            for file in files where !file.isAbsolute || file.containsNUL {
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
    /// Its sources (files, or photos of this host's library) are on the submitting host's disks, whatever the
    /// destination: pinned to that host on a shared store unless submitted with `--any-host`.
    public static let traits = JobKindTraits(
        unit: .bytes, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool], cleansUpAfterEnd: true,
        readsHostFiles: true)

    /// The photo library that `photos` params are resolved in and uploads are remembered by; `nil` in a process
    /// without one (such a job is refused at submit).
    let library: (any UploadPhotoLibrary)?

    /// An upload kind; with `photos`, it can upload photos of that library (`photos` params).
    nonisolated public init(photos: (any UploadPhotoLibrary)? = nil) {
        library = photos
    }

    /// Refuses a bad upload at submit time: see `Params.checkLimits()`, `UploadDestination(parsing:)` and, for a
    /// directory, `UploadNames.names(ofSources:)` and `DirectoryUpload.validate` (for tus, `TusUploadRun.validate`).
    /// - Throws: `JobError` with one of the kind's codes and a message saying what to do.
    public func validate(_ params: Params) async throws(JobError) {
        try params.checkLimits()
        if let selection = params.photos {
            guard let library else {
                throw JobError(code: "invalid_params", message: "this daemon has no photo library; upload files instead")
            }
            try await library.check(selection)
        }
        let destination = try UploadDestination(parsing: params.to)
        if case .tus = destination {} else if !params.headers.isEmpty || params.caBundle != nil {
            throw JobError(
                code: "invalid_params",
                message: "headers and ca_bundle apply to http(s):// (tus) destinations only; leave them out for "
                    + (params.to.lowercased().hasPrefix("s3:") ? "s3://" : "file://") + " destinations")
        }
        let files = params.files
        if params.photos == nil, await Task.detached(operation: { Self.hasFolders(files) }).value {
            try await Self.validateTree(params, destination: destination)
        } else {
            if params.again, params.photos == nil {
                // Files given one by one are always sent; a folder's unchanged files are left out unless `again`.
                throw JobError(
                    code: "invalid_params",
                    message: "again (--again) applies to photos of the library (--ids, --ids-file, --tag) and to folders")
            }
            try await Self.validateFiles(params, destination: destination)
        }
        if params.s3 != nil, case .s3 = destination {} else if params.s3 != nil {
            throw JobError(code: "invalid_params", message: "s3 settings apply to s3:// destinations only")
        }
    }

    /// `validate` of an upload of files (no folder among them), each checked.
    private static func validateFiles(_ params: Params, destination: UploadDestination) async throws(JobError) {
        switch destination {
        case .directory(let path):
            let names = try UploadNames.names(ofSources: params.files)
            try await DirectoryUpload.validate(files: params.files, names: names, directory: path)
        case .tus:
            // Each file gets its own upload URL from the server; its name is only metadata, so two sources may
            // share one.
            try await TusUploadRun.validate(params)
        case .s3(_, let prefix):
            try await S3UploadRun.validate(params, prefix: prefix)
        }
    }

    /// Takes `{"headers": ["Name: value", …]}` on `resume` (a tus upload paused with `unauthorized` given a fresh
    /// token): each line replaces the job's headers of the same name (compared case-insensitively), or is added.
    /// - Throws: `JobError` `invalid_params` for other changes, a `file://` destination, or a malformed line
    ///   (see `Params.headerFields()`; the message never contains a value).
    nonisolated public func amend(_ params: Params, with changes: JSONValue) throws(JobError) -> Params {
        guard case .object(let members) = changes, members.keys.allSatisfy({ $0 == "headers" }),
            let lines = members["headers"]?.arrayValue?.compactMap(\.stringValue)
        else {
            throw JobError(code: "invalid_params", message: "an upload takes only new headers on resume")
        }
        guard case .tus? = try? UploadDestination(parsing: params.to) else {
            throw JobError(code: "invalid_params", message: "headers apply only to http(s):// (tus) destinations")
        }
        let given = try Params(files: params.files, to: params.to, headers: lines).headerFields()
        var amended = params
        let replaced = Set(given.map { $0.name.lowercased() })
        amended.headers = params.headers.filter { line in
            let name = line.split(separator: ":", maxSplits: 1).first.map { String($0).lowercased() } ?? ""
            return !replaced.contains(name)
        } + lines
        _ = try amended.headerFields()
        return amended
    }

    /// What the job works on, for refusing a second job that would do the same (`duplicate_upload`): per file,
    /// `"upload of <source> to <place>"`, and for a directory or S3 destination also `"upload of a file named
    /// <name> to <place>"` (another file of the same name would replace this one's copy there) unless the source
    /// is a folder.
    ///
    /// The place is the destination's identity (`destinationIdentity`, as the photo library remembers uploads by:
    /// a directory by where it leads in the file system, a tus endpoint without case or default-port differences,
    /// an S3 prefix with its endpoint: the option, else the daemon's `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`,
    /// `S3Options.identityEndpoint`). A source is keyed by where it leads (`BytePath.resolvedByFileSystem`), so a
    /// file named through a linked folder, with `..` or through a link to it is the same file.
    nonisolated public func duplicateKeys(_ params: Params) -> [String] {
        Self.duplicateKeys(params, environment: ProcessEnvironment.current())
    }

    /// `duplicateKeys(_:)` with the daemon's environment given.
    nonisolated static func duplicateKeys(_ params: Params, environment: [String: String]) -> [String] {
        let endpoint = S3Options.identityEndpoint(params.s3, environment: environment)
        guard let destination = try? UploadDestination(parsing: params.to),
            let place = try? Self.destinationIdentity(of: params.to, s3Endpoint: endpoint)
        else { return [] }
        if let photos = params.photos {
            // The same photos (by ID, ID file or tags) to the same place.
            if let ids = photos.ids { return ids.map { "upload of photo \($0) to \(place)" } }
            if let file = photos.idsFile { return ["upload of the photos listed in \(file) to \(place)"] }
            return ["upload of the photos tagged \((photos.tags ?? []).sorted().joined(separator: " + ")) to \(place)"]
        }
        // Each tus upload gets its own upload URL: files of one name do not collide there.
        let namesCollide = if case .tus = destination { false } else { true }
        return params.files.flatMap { file in
            let source = "upload of \(file.resolvedByFileSystem.key) to \(place)"
            // A folder's own name is not kept at the destination (its files go under it by their relative paths):
            // two folders of one name are no clash.
            let named = namesCollide && !hasFolders([file])
            return named ? [source, "upload of a file named \(file.lastComponent.key) to \(place)"] : [source]
        }
    }

    /// Uploads every file, resuming from the checkpoint if there is one.
    /// - Returns: the result JSON (see the type's documentation).
    /// - Throws: `JobError` (the codes above), or `JobStopped` when stopped.
    public func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
        try params.checkLimits()
        let attemptStart = Timestamp.now()
        var params = params
        var plan: PhotoUploadPlan?
        var landed: FileLanded?
        if let selection = params.photos {
            guard let library else {
                throw JobError(code: "invalid_params", message: "this daemon has no photo library; upload files instead")
            }
            let resolved = try await Self.photoPlan(params, selection: selection, library: library, in: job)
            plan = resolved
            params.files = resolved.files
            if resolved.files.isEmpty {
                return resolved.annotate(Self.result(files: [], bytesResent: 0, destination: params.to))
            }
            landed = { index, file in
                let upload = RememberedUpload(
                    photoID: resolved.ids[index], destination: resolved.destination, job: job.id,
                    uploadedAtMilliseconds: Int64(Timestamp.now() * 1000), location: file.path, bytes: file.bytes,
                    sha256: file.sha256)
                do throws(JobError) {
                    try library.remember([upload])
                } catch {
                    // Written again with every finished file at the end of the job.
                    job.log(.warning, "\(file.name): cannot remember the upload of photo \(upload.photoID) yet: \(error.message)")
                }
            }
        }
        // Folders: the files listed on the first run, named by their paths inside the folders.
        let folders =
            params.photos == nil ? try await Self.treePlan(params, attemptStart: attemptStart, in: job) : nil
        // Each landed file into the upload memory's stat cache too, for the next upload of the folder.
        var memory: LandedFilesMemory?
        if let folders {
            let remembering = LandedFilesMemory(
                destination: try UploadDestination(parsing: params.to), params: params, files: folders.files,
                attemptStart: attemptStart)
            landed = remembering.hook(wrapping: UploadTreeEntries.landed(in: job), in: job)
            memory = remembering
        }
        let transfer = try Self.transfer(for: params, names: plan?.names, files: folders?.files, landed: landed)
        do {
            if var tree = folders?.plan, let files = folders?.files {
                var result: JSONValue
                do {
                    result = try await files.count == 0
                        ? Self.result(files: [], bytesResent: 0, destination: params.to)
                        : job.runCancellingOnStop { try await transfer.run(in: job) }
                    await memory?.flush(in: job)
                } catch {
                    await memory?.flush(in: job)
                    throw error
                }
                try job.entries.writeNoted()
                // With the files that failed while the transfer ran (`UploadCheckpoint.failFile`).
                if let saved = try job.loadCheckpoint(as: UploadCheckpoint.self), var counted = saved.tree {
                    if saved.listsInStore {
                        // Version 2: counts and bytes; the files are the job's file list's.
                        counted.listedCount = files.count
                        if files.count > 0 { result = saved.countedResult(destination: params.to) }
                    }
                    tree = counted
                }
                if let failure = tree.failure(destination: params.to) { throw failure }
                return tree.annotate(result)
            }
            // Its own task, cancelled on any stop, so a stop aborts a request in flight at once.
            let result = try await job.runCancellingOnStop { try await transfer.run(in: job) }
            guard let plan, let library else { return result }
            try Self.rememberFinished(plan, library: library, in: job)
            return plan.annotate(result)
        } catch var error as JobError where error.retryable && job.stopReason == nil && job.attempt >= job.maxAttempts {
            // The last attempt: the job ends `failed` and `cleanUp` removes the partial file, so the message must
            // not promise a resume.
            error.message = error.message.replacing(
                "the upload resumes where it stopped", with: "this was the last attempt; the partial file is removed")
            throw error
        }
    }

    /// After the job ended `failed` or `cancelled` (any reason: `cancel`, a changed source, the last attempt),
    /// deletes the partial output (files already complete stay): the `.part` files of a directory upload, the
    /// unfinished upload on a tus server (`DELETE`, termination; `.retry` until the server answers 204, 404 or
    /// 410). After `timeout` and `resource_reclaim` the engine does not call it: the next attempt resumes.
    public func cleanUp(after state: JobState, params: Params, in job: JobContext) async -> CleanUpOutcome {
        var params = params
        if params.photos != nil {
            // A photo upload's files are the ones its first run resolved; with none, nothing was written.
            guard let plan = try? job.loadCheckpoint(as: UploadCheckpoint.self)?.photos, !plan.files.isEmpty else {
                return .done
            }
            params.files = plan.files
        }
        var names = params.photos == nil ? nil : (try? job.loadCheckpoint(as: UploadCheckpoint.self))?.photos?.names
        var files: UploadFileList?
        if params.photos == nil, let saved = try? UploadCheckpoint.load(in: job), let tree = saved.tree {
            // A folder upload's files: the job's file list (version 2), or the plan's (version 1).
            files = saved.files(in: job)
            params.files = tree.files
            names = tree.names
        }
        guard let transfer = try? Self.transfer(for: params, names: names, files: files) else { return .done }
        return await transfer.discardPartial(in: job)
    }

    /// The transfer for `params.to`.
    /// - Throws: `bad_destination`, `bad_name`, `duplicate_name`.
    /// - Parameters:
    ///   - names: the destination names of `params.files` (a folder upload's relative paths, already checked by
    ///     `UploadTreePlan`); `nil` for each file's last path component.
    ///   - listed: a folder upload's files (`UploadFileList`), which then stand for `params.files` and `names`.
    ///   - landed: told of each file that landed (see `FileLanded`).
    static func transfer(
        for params: Params, names given: [BytePath]? = nil, files listed: UploadFileList? = nil,
        landed: FileLanded? = nil
    ) throws(JobError) -> any UploadTransfer {
        switch try UploadDestination(parsing: params.to) {
        case .directory(let path):
            var files = listed
            if files == nil {
                var names = given ?? []
                if given == nil { names = try UploadNames.names(ofSources: params.files) }
                files = UploadFileList(paths: params.files, names: names)
            }
            return DirectoryUpload(params: params, files: files!, directory: path, landed: landed)
        case .tus(let endpoint):
            // Each file gets its own upload URL from the server; its name is only metadata, so two sources may
            // share one.
            var files = listed
            if files == nil {
                var names = given ?? []
                if given == nil { names = try params.files.map { path throws(JobError) in try UploadNames.name(ofSource: path) } }
                files = UploadFileList(paths: params.files, names: names)
            }
            return TusUploadRun(params: params, files: files!, endpoint: endpoint, landed: landed)
        case .s3(let bucket, let prefix):
            // A folder's names are UTF-8 here: `UploadTreePlan.nameProblem` failed the others.
            var files = listed
            if files == nil {
                var names = given ?? []
                if given == nil { names = try S3UploadRun.names(of: params.files, prefix: prefix).map { BytePath($0) } }
                files = UploadFileList(paths: params.files, names: names)
            }
            return S3UploadRun(params: params, files: files!, bucket: bucket, prefix: prefix, landed: landed)
        }
    }

    /// The result JSON of an upload to `destination` that wrote `files`.
    nonisolated public static func result(files: [UploadedFile], bytesResent: Int64, destination: String) -> JSONValue {
        var result: JSONValue = [
            "bytes": .number(files.reduce(Int64(0)) { $0 + $1.bytes }),
            "bytes_resent": .number(bytesResent),
            "sha256": files.count == 1 ? .string(files[0].sha256) : .null,
            "files": JSONCoding.value(of: files),
            "destination": .string(destination),
        ]
        if case .object(var members) = result, files.contains(where: { $0.url != nil }) {
            members["url"] = files.count == 1 ? files[0].url.map { .string($0) } ?? .null : .null
            members["checksum_verified"] = .bool(files.allSatisfy { $0.checksumVerified == true })
            result = .object(members)
        }
        return result
    }
}
