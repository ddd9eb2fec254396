import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Which photos of the library an upload takes (the `photos` param), instead of files: exactly one of `ids` (stable
/// IDs, in full), `ids_file` (an absolute path: one stable ID a line) or `tags` (every photo that has all of these
/// tags). Resolved to paths when the job first runs, not at submit.
///
/// JSON: `{"ids": ["…", …]}`, `{"ids_file": "/abs/ids.txt"}` or `{"tags": ["trip:Lisbon", "pick"]}`.
public struct UploadPhotoSelection: Codable, Sendable, Equatable {
    /// Stable IDs in full (the CLI expands `--ids` prefixes before it submits).
    public var ids: [String]?
    /// Absolute path of a file with one stable ID a line (blank lines and `#` comments skipped), its exact bytes.
    public var idsFile: BytePath?
    /// Tags a photo must all have (spelled as the library spells tags: trimmed, NFC).
    public var tags: [String]?

    public init(ids: [String]? = nil, idsFile: BytePath? = nil, tags: [String]? = nil) {
        self.ids = ids
        self.idsFile = idsFile
        self.tags = tags
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case ids
        case idsFile = "ids_file"
        case tags
    }

    /// The shape checks that need no library: exactly one member, not empty, an absolute ID file.
    /// - Throws: `JobError` `invalid_params`.
    public func check() throws(JobError) {
        let given = [ids != nil, idsFile != nil, tags != nil].filter { $0 }.count
        guard given == 1 else {
            throw JobError(code: "invalid_params", message: "photos: give exactly one of ids, ids_file or tags")
        }
        if let ids, ids.isEmpty {
            throw JobError(code: "invalid_params", message: "photos: ids is empty; give at least one stable ID")
        }
        if let tags, tags.isEmpty {
            throw JobError(code: "invalid_params", message: "photos: tags is empty; give at least one tag")
        }
        if let idsFile, !idsFile.isAbsolute {
            throw JobError(code: "invalid_params", message: "photos: ids_file '\(idsFile)' is not an absolute path")
        }
    }
}

/// One entry of a selection as the library resolved it when the job ran.
public enum ResolvedUploadPhoto: Sendable, Equatable {
    /// A photo of the library and the path of its file (which may since have been deleted: the job checks).
    case found(id: String, path: BytePath)
    /// An ID that names no photo of the library (removed, never imported, or not a stable ID).
    case notInLibrary(id: String)
}

/// Where a photo was uploaded, as the library remembers it (`UploadPhotoLibrary.remember`).
public struct RememberedUpload: Sendable, Equatable {
    /// The photo's stable ID.
    public var photoID: String
    /// The destination's identity (`UploadJob.destinationIdentity`): never a credential.
    public var destination: String
    /// The job that uploaded it.
    public var job: String
    /// When that job finished the file, in milliseconds since the Unix epoch.
    public var uploadedAtMilliseconds: Int64
    /// Where the file went (`UploadedFile.path`: a path, `s3://BUCKET/KEY`, a tus upload URL).
    public var location: BytePath
    /// Its size in bytes.
    public var bytes: Int64
    /// SHA-256 of the bytes uploaded.
    public var sha256: String

    public init(
        photoID: String, destination: String, job: String, uploadedAtMilliseconds: Int64, location: BytePath,
        bytes: Int64, sha256: String
    ) {
        self.photoID = photoID
        self.destination = destination
        self.job = job
        self.uploadedAtMilliseconds = uploadedAtMilliseconds
        self.location = location
        self.bytes = bytes
        self.sha256 = sha256
    }
}

/// What the upload job needs from a photo library: the seam between the `upload` kind and the library, which the
/// upload job uses and the library implements (`PhotoLibraryService` in TaggingJobs), wired where the daemon
/// registers its kinds (`UploadJob(photos:)`). The upload kind so never links SQLite, libexif or libheif, and the
/// library's SQL stays behind its store.
@LoopActor
public protocol UploadPhotoLibrary: AnyObject, Sendable {
    /// Submit-time checks of a selection that need the library's rules: tag spelling, a readable ID file.
    /// - Throws: `JobError` `invalid_params`, `source_missing`, `source_not_regular`.
    func check(_ selection: UploadPhotoSelection) throws(JobError)

    /// The photos of `selection` now, in selection order (IDs as listed, each once; tags in library order).
    /// - Throws: `JobError` (`photo_store_error` is retryable; `source_missing` for an ID file gone).
    func resolve(_ selection: UploadPhotoSelection, in job: JobContext) async throws -> [ResolvedUploadPhoto]

    /// The uploads remembered of `photoIDs` to `destination`, by photo ID.
    /// - Throws: `JobError` `photo_store_error` (retryable).
    func uploads(of photoIDs: [String], to destination: String) throws(JobError) -> [String: RememberedUpload]

    /// Remembers `uploads` (a photo already remembered for a destination is overwritten).
    /// - Throws: `JobError` `photo_store_error` (retryable).
    func remember(_ uploads: [RememberedUpload]) throws(JobError)

    /// The library's root: the deepest folder holding every photo of the library (`--keep-folders` names each photo
    /// by its path under it); `nil` for a library without photos.
    /// - Throws: `JobError` `photo_store_error` (retryable).
    func root() throws(JobError) -> BytePath?
}

/// A photo of the selection that the job does not upload, and why. JSON: `{"photo_id", "reason", "message"}`
/// plus, for `already_uploaded`, `"job"`, `"uploaded_at"` (ISO 8601) and `"location"`, and `"path"` (the photo's
/// file) when known.
public struct PhotoUploadSkip: Codable, Sendable, Equatable {
    /// The stable ID (or the text given, for `not_in_library`).
    public var photoID: String
    /// `already_uploaded`, `not_in_library`, `file_missing`, `file_unreadable`, `bad_name` or `duplicate_name`.
    public var reason: String
    /// What happened and what to do, in words.
    public var message: String
    /// The photo's file, when the library knows one.
    public var path: BytePath?
    /// `already_uploaded`: the job that uploaded it.
    public var job: String?
    /// `already_uploaded`: when, ISO 8601.
    public var uploadedAt: String?
    /// `already_uploaded`: where it went.
    public var location: BytePath?

    public init(photoID: String, reason: String, message: String, path: BytePath? = nil) {
        self.photoID = photoID
        self.reason = reason
        self.message = message
        self.path = path
    }

    enum CodingKeys: String, CodingKey {
        case photoID = "photo_id"
        case reason, message, path, job
        case uploadedAt = "uploaded_at"
        case location
    }
}

/// A photo upload as resolved on its first run, kept in the checkpoint (`UploadCheckpoint.photos`) so every later
/// attempt uploads the same files, whatever the library says by then.
///
/// JSON: `{"destination", "ids", "files", "selected", "skipped_count", "skipped_by_reason", "skipped"}`, and
/// `"names"` with `keep_folders`.
public struct PhotoUploadPlan: Codable, Sendable, Equatable {
    /// The destination identity the photos are remembered under.
    public var destination: String
    /// Stable IDs of the photos to upload, aligned with `files`.
    public var ids: [String]
    /// Their files, the job's sources.
    public var files: [BytePath]
    /// With `keep_folders` (`--keep-folders`): their names at the destination, aligned with `files`: each file's
    /// path under the library's root (`UploadPhotoLibrary.root`). `nil` without: each file goes under its own
    /// name.
    public var names: [BytePath]?
    /// Entries of the selection (distinct IDs, or photos with the tags).
    public var selected: Int
    /// Photos not uploaded.
    public var skippedCount: Int
    /// `skippedCount` per reason.
    public var skippedByReason: [String: Int]
    /// The first `listedSkips` skipped photos.
    public var skipped: [PhotoUploadSkip]

    /// Most skipped photos listed in the result (all are counted).
    public static let listedSkips = 1000

    enum CodingKeys: String, CodingKey {
        case destination, ids, files, selected, skipped, names
        case skippedCount = "skipped_count"
        case skippedByReason = "skipped_by_reason"
    }

    init(destination: String) {
        self.destination = destination
        ids = []
        files = []
        selected = 0
        skippedCount = 0
        skippedByReason = [:]
        skipped = []
    }

    mutating func skip(_ skip: PhotoUploadSkip) {
        skippedCount += 1
        skippedByReason[skip.reason, default: 0] += 1
        if skipped.count < Self.listedSkips { skipped.append(skip) }
    }

    /// `result` (`UploadJob.result`) with `photo_id` in each file and the selection's account: `"photos":
    /// {"selected", "uploaded", "skipped", "skipped_by_reason"}` and `"skipped": […]`.
    public func annotate(_ result: JSONValue) -> JSONValue {
        guard case .object(var members) = result else { return result }
        if case .array(let files)? = members["files"] {
            members["files"] = .array(
                files.enumerated().map { index, file in
                    guard case .object(var fields) = file, index < ids.count else { return file }
                    fields["photo_id"] = .string(ids[index])
                    return .object(fields)
                })
        }
        members["photos"] = [
            "selected": .number(Double(selected)),
            "uploaded": .number(Double(ids.count)),
            "skipped": .number(Double(skippedCount)),
            "skipped_by_reason": .object(skippedByReason.mapValues { .number(Double($0)) }),
        ]
        members["skipped"] = JSONCoding.value(of: skipped)
        return .object(members)
    }
}

extension UploadJob {
    /// The identity of a destination for the photo library's memory of uploads: the same place however it is
    /// spelled, and never a secret.
    ///
    /// - `file://`: `file://` + where the directory leads in the daemon's file system
    ///   (`BytePath.resolvedByFileSystem`: percent-decoded, `..`, `.`, `//` and symbolic links resolved, no trailing
    ///   `/`), so `/srv/photos`, `file:///srv/photos/`, `file://localhost/srv/x/../photos` and a link to it are one.
    /// - `s3://`: `s3://BUCKET` + `/PREFIX` without trailing slashes (`s3://b/p/` and `s3://b/p` are one), plus
    ///   ` at ENDPOINT` (lower-case, no trailing `/`) when the job names an endpoint: the same bucket name on
    ///   another server is another place. The caller passes the job's endpoint or, without one, the daemon's
    ///   `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (`S3Options.identityEndpoint`).
    /// - tus: the endpoint with its scheme and host in lower case (RFC 3986 §3.1, §3.2.2), without user info
    ///   (`user:password@`), the scheme's default port (`:80`, `:443`; §6.2.3), query, fragment or trailing slashes.
    /// - Throws: `JobError` `bad_destination` for a URL `UploadDestination` refuses.
    nonisolated public static func destinationIdentity(of url: String, s3Endpoint: String? = nil) throws(JobError) -> String {
        func trimmed(_ text: Substring) -> Substring {
            var text = text
            while text.hasSuffix("/") { text = text.dropLast() }
            return text
        }
        if url.lowercased().hasPrefix("s3://") {
            // Textual, so a prefix without its trailing slash names the same place.
            let rest = url.dropFirst(5)
            let endpoint = s3Endpoint.map { " at " + String(trimmed(Substring($0.lowercased()))) } ?? ""
            return "s3://" + String(trimmed(rest)) + endpoint
        }
        switch try UploadDestination(parsing: url) {
        case .directory(let path):
            let resolved = path.resolvedByFileSystem
            return "file://" + (resolved == "/" ? "" : resolved.key)
        case .s3(let bucket, let prefix): return "s3://" + String(trimmed(Substring(bucket + "/" + prefix)))
        case .tus(let endpoint):
            let colon = endpoint.firstIndex(of: ":")!
            let scheme = endpoint[..<colon].lowercased()
            let afterSlashes = endpoint[endpoint.index(colon, offsetBy: 3)...]
            let authority = afterSlashes.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            var host = (authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority)
                .lowercased()
            if let port = ["http": ":80", "https": ":443"][scheme], host.hasSuffix(port) { host.removeLast(port.count) }
            let path = afterSlashes.dropFirst(authority.count).prefix { $0 != "?" && $0 != "#" }
            return scheme + "://" + host + String(trimmed(path))
        }
    }

    /// Resolves a photo upload on its first run (or takes the plan its checkpoint saved): the library's photos
    /// now, less those already uploaded to this destination (unless `again`), whose file is gone or unreadable, or
    /// whose name the destination cannot take. Saves a checkpoint with the plan and the sources' identities, so a
    /// resume uploads exactly these files.
    /// - Throws: `JobError` from the library, `bad_destination`, `bad_checkpoint`.
    @LoopActor
    static func photoPlan(
        _ params: Params, selection: UploadPhotoSelection, library: any UploadPhotoLibrary, in job: JobContext
    ) async throws -> PhotoUploadPlan {
        if let saved = try job.loadCheckpoint(as: UploadCheckpoint.self) {
            guard let plan = saved.photos else {
                throw JobError(
                    code: "bad_checkpoint", message: "the saved upload state lists no photos; cancel the job and submit again")
            }
            return plan
        }
        let destination = try UploadDestination(parsing: params.to)
        var plan = PhotoUploadPlan(destination: try destinationIdentity(
            of: params.to, s3Endpoint: S3Options.identityEndpoint(params.s3, environment: ProcessEnvironment.current())))
        let resolved = try await library.resolve(selection, in: job)
        var seen = Set<String>()
        var found: [(id: String, path: BytePath)] = []
        for entry in resolved {
            switch entry {
            case .notInLibrary(let id):
                guard seen.insert(id).inserted else { continue }
                plan.selected += 1
                plan.skip(
                    PhotoUploadSkip(
                        photoID: id, reason: "not_in_library",
                        message: "no photo with this ID is in the library (removed, or never imported); import it first"))
            case .found(let id, let path):
                guard seen.insert(id).inserted else { continue }
                plan.selected += 1
                found.append((id, path))
            }
        }
        let remembered = params.again ? [:] : try library.uploads(of: found.map(\.id), to: plan.destination)
        let root = params.keepFolders ? try library.root() : nil
        if params.keepFolders { plan.names = [] }
        let candidates = found.filter { remembered[$0.id] == nil }
        let paths = candidates.map(\.path)
        // One pool call stats every candidate; a failure is that photo's, not the job's.
        let statuses = try await job.runOnPool { () -> [Result<SourceIdentity, JobError>] in
            paths.indices.map { index in
                Result { () throws(JobError) in try DirectoryIO.sourceIdentities(files: paths, indices: index..<index + 1)[0] }
            }
        }
        var identities: [SourceIdentity] = []
        var names: [BytePath: String] = [:]
        var statusIndex = 0
        for (id, path) in found {
            if let earlier = remembered[id] {
                var skip = PhotoUploadSkip(
                    photoID: id, reason: "already_uploaded",
                    message: "job \(earlier.job) uploaded it to \(plan.destination) already; submit with --again to upload it again",
                    path: path)
                skip.job = earlier.job
                skip.uploadedAt = Timestamp.iso8601(unixSeconds: Double(earlier.uploadedAtMilliseconds) / 1000)
                skip.location = earlier.location
                plan.skip(skip)
                continue
            }
            let status = statuses[statusIndex]
            statusIndex += 1
            let identity: SourceIdentity
            switch status {
            case .success(let value): identity = value
            case .failure(let error):
                let missing = error.code == "source_missing"
                plan.skip(
                    PhotoUploadSkip(
                        photoID: id, reason: missing ? "file_missing" : "file_unreadable",
                        message: missing
                            ? "its file \(path) is gone (deleted or moved since it was imported); import its folder again"
                            : error.message,
                        path: path))
                continue
            }
            let kept = root.flatMap { Self.name(of: path, under: $0) }
            do throws(JobError) {
                let name: BytePath?
                if let kept {
                    name = try Self.nameKey(kept: kept, destination: destination)
                } else {
                    name = try nameKey(of: path, destination: destination)
                }
                if let name, let other = names[name] {
                    throw JobError(
                        code: "duplicate_name",
                        message: "photo \(other) has a file of the same name, '\(name)', in this upload; upload this one "
                            + "in another job (another folder or prefix)")
                }
                if let name { names[name] = id }
            } catch {
                plan.skip(PhotoUploadSkip(photoID: id, reason: error.code, message: error.message, path: path))
                continue
            }
            plan.ids.append(id)
            plan.files.append(path)
            if params.keepFolders { plan.names?.append(kept ?? path.lastComponent) }
            identities.append(identity)
        }
        var checkpoint = UploadCheckpoint(sources: identities)
        checkpoint.photos = plan
        try job.saveCheckpoint(checkpoint)
        if plan.skippedCount > 0 {
            let reasons = plan.skippedByReason.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            job.log(.info, "\(plan.files.count) of \(plan.selected) photos to upload; skipped: " + reasons.joined(separator: ", "))
        }
        return plan
    }

    /// The name a file takes at `destination` as a key for telling two apart (`nil` for tus, where each file gets
    /// its own upload and names may repeat).
    /// - Throws: `JobError` `bad_name` when the destination cannot take the name.
    nonisolated static func nameKey(of path: BytePath, destination: UploadDestination) throws(JobError) -> BytePath? {
        switch destination {
        case .directory: return try UploadNames.names(ofSources: [path])[0]
        case .s3(_, let prefix): return BytePath(try S3UploadRun.names(of: [path], prefix: prefix)[0])
        case .tus:
            _ = try UploadNames.name(ofSource: path)
            return nil
        }
    }

    /// `path` relative to the folder `root` (`/`-separated), or `nil` when it is not under it.
    nonisolated static func name(of path: BytePath, under root: BytePath) -> BytePath? {
        let folder = root.bytes.last == UInt8(ascii: "/") ? root.bytes : root.bytes + [UInt8(ascii: "/")]
        guard path.bytes.count > folder.count, path.bytes.starts(with: folder) else { return nil }
        return BytePath(bytes: Array(path.bytes[folder.count...]))
    }

    /// `nameKey(of:destination:)` of a photo kept under its folders (`--keep-folders`) as `name`.
    /// - Throws: `JobError` `bad_name` when the destination cannot take the name (`UploadTreePlan.nameProblem`).
    nonisolated static func nameKey(kept name: BytePath, destination: UploadDestination) throws(JobError) -> BytePath? {
        if let problem = UploadTreePlan.nameProblem(name, destination: destination) {
            throw JobError(code: "bad_name", message: problem)
        }
        if case .tus = destination { return nil }
        return name
    }

    /// Remembers every file the job has finished (its checkpoint's `finished`) as uploaded, in one transaction.
    /// Files the `landed` hook already recorded are written again (the same row).
    /// - Throws: `JobError` `photo_store_error` (retryable: the next attempt finds every file done and tries
    ///   again).
    @LoopActor
    static func rememberFinished(_ plan: PhotoUploadPlan, library: any UploadPhotoLibrary, in job: JobContext) throws {
        guard let checkpoint = try job.loadCheckpoint(as: UploadCheckpoint.self) else { return }
        let now = Int64(Timestamp.now() * 1000)
        let uploads = zip(plan.ids, checkpoint.finished).map { id, file in
            RememberedUpload(
                photoID: id, destination: plan.destination, job: job.id, uploadedAtMilliseconds: now, location: file.path,
                bytes: file.bytes, sha256: file.sha256)
        }
        try library.remember(uploads)
    }
}
