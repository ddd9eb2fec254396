import PhotoLibrary
import TaggingJobs
import TrailbookClient
import TrailbookEngine

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The photo-library commands: `photos import|list|show`, `submit tag`, `submit autotag`, and the hidden
/// `worker` subcommand that `WorkerPool` spawns.
enum PhotoCommands {
    /// The sidecar params from `--xmp`, `--no-xmp`, `--xmp-naming`.
    /// - Throws: `UsageError` for both `--xmp` and `--no-xmp`, or an unknown naming.
    static func sidecarParams(_ arguments: ParsedArguments, into params: inout [String: JSONValue]) throws {
        if arguments.flag("xmp"), arguments.flag("no-xmp") { throw UsageError("give --xmp or --no-xmp, not both") }
        if arguments.flag("xmp") { params["xmp"] = true }
        if arguments.flag("no-xmp") { params["xmp"] = false }
        if let naming = try xmpNaming(arguments) { params["xmp_naming"] = .string(naming.rawValue) }
    }

    /// `--xmp-naming`, checked.
    /// - Throws: `UsageError` naming the values allowed.
    static func xmpNaming(_ arguments: ParsedArguments) throws -> XMPSidecarNaming? {
        guard let text = arguments.value("xmp-naming") else { return nil }
        guard let naming = XMPSidecarNaming(rawValue: text) else {
            throw UsageError("--xmp-naming must be darktable (IMG_0001.jpg.xmp) or lightroom (IMG_0001.xmp), not \(text)")
        }
        return naming
    }

    /// The worker tasks the `worker` subcommand knows: the engine's built-ins and the tagging tasks, decoding
    /// within `limits`.
    static func workerTasks(limits: DecodeLimits = DecodeLimits()) -> WorkerTaskTable {
        var table = WorkerTaskTable.builtIn
        TaggingWorkerTasks.register(in: &table, limits: limits)
        return table
    }

    /// `worker`: the built-in tasks and `extraTasks` (a program's own, `TrailbookCommandLine`).
    static func worker(_ context: CommandContext, extraTasks: WorkerTaskTable = WorkerTaskTable()) throws -> Int32 {
        var limits = WorkerLimits()
        if let bytes = try context.arguments.size("memory-limit") { limits.memoryBytes = bytes }
        if let seconds = try context.arguments.integer("cpu-limit", range: 1...1_000_000) {
            limits.cpuSeconds = seconds
        }
        let parent = try context.arguments.integer("parent", range: 1...Int(Int32.max)).map { Int32($0) }
        var decode = DecodeLimits()
        if let pixels = try context.arguments.integer("max-pixels", range: 1...Int(Int64.max)) {
            decode.maxPixels = UInt64(pixels)
        }
        var tasks = workerTasks(limits: decode)
        tasks.merge(extraTasks)
        return WorkerProcess.run(tasks: tasks, limits: limits, parent: parent)
    }

    static func selectionParams(_ context: CommandContext) throws -> [String: JSONValue] {
        let arguments = context.arguments
        let given = ["ids", "ids-file"].filter { arguments.value($0) != nil } + (arguments.flag("all") ? ["all"] : [])
        guard given.count == 1 else { throw UsageError("give exactly one of --ids, --ids-file, --all") }
        if let ids = arguments.value("ids") {
            let entries = ids.split(separator: ",").map { entry in
                String(entry.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
            }
            guard entries.contains(where: { !$0.isEmpty }) else {
                throw UsageError("--ids needs at least one stable ID (or a prefix of one), comma-separated")
            }
            // Opened once, and only when some entry is a prefix to look up.
            let store = entries.allSatisfy { StableID($0) != nil } ? nil : try openStore(context)
            return ["ids": .array(try entries.map { .string(try fullStableID($0, in: store)) })]
        }
        // The file's exact bytes (its name need not be UTF-8).
        if let file = try context.valuePath("ids-file") {
            return ["ids_file": Commands.absolutePath(file).json]
        }
        return ["all": true]
    }

    /// The `photos` param of `submit upload` from `--ids`, `--ids-file` or `--tag` (repeatable: every tag), or
    /// `nil` when none is given. Tags are spelled as the store spells them (trimmed, NFC).
    /// - Throws: `UsageError` for more than one kind of selection or a bad tag; what `selectionParams` throws.
    static func uploadSelection(_ context: CommandContext) throws -> JSONValue? {
        let arguments = context.arguments
        let tags = arguments.values("tag")
        let byID = arguments.value("ids") != nil || arguments.value("ids-file") != nil
        guard byID || !tags.isEmpty else { return nil }
        guard !(byID && !tags.isEmpty) else { throw UsageError("give one of --ids, --ids-file, --tag") }
        if byID { return .object(try selectionParams(context)) }
        return [
            "tags": .array(
                try tags.map { tag -> JSONValue in
                    do throws(PhotoLibraryError) {
                        return .string(try TagName.validated(tag))
                    } catch {
                        throw UsageError("bad tag \"\(tag)\": \(error.message)")
                    }
                })
        ]
    }

    /// A full stable ID for `text` (trimmed): itself when it is one (known or not: the job reports unknown IDs),
    /// else the photo whose ID starts with it in `store`, as `photos show` accepts (`--ids 1567995a`).
    /// - Throws: `UsageError` when it is neither; `DaemonReply` `no_such_photo` (exit 4) when no photo or several
    ///   photos match the prefix, `store_error` when the store cannot be read.
    static func fullStableID(_ trimmed: String, in store: PhotoStore?) throws -> String {
        if let id = StableID(trimmed) { return id.text }
        guard StableID.isPrefix(trimmed.lowercased()), !trimmed.isEmpty else {
            throw UsageError("'\(trimmed)' is not a stable ID (a UUID like 0f6b2c1e-…) or a prefix of one")
        }
        guard let store else {
            throw DaemonReply(error: JobError(code: "no_such_photo", message: "the photo library is empty; no photo \(trimmed)"))
        }
        do {
            return try store.photo(matching: trimmed).stableID.text
        } catch where error.code == .notFound || error.code == .ambiguous {
            throw DaemonReply(error: JobError(code: "no_such_photo", message: "\(error.message) (in --ids)"))
        } catch {
            throw DaemonReply(error: JobError(code: "store_error", message: "cannot read the photo store: \(error.message)"))
        }
    }

    static func submitTag(_ context: CommandContext) throws -> Int32 {
        var params = try selectionParams(context)
        params["tag"] = .string(context.arguments.value("tag") ?? "")
        if context.arguments.flag("remove") { params["remove"] = true }
        if context.arguments.flag("load-records") { params["load_records"] = true }
        try sidecarParams(context.arguments, into: &params)
        if let rate = try context.arguments.integer("max-rate", range: 1...Int(Int32.max)) {
            params["max_rate"] = .number(Double(rate))
        }
        return try Commands.submit(kind: "tag", params: .object(params), context)
    }

    static func submitAutotag(_ context: CommandContext) throws -> Int32 {
        var params: [String: JSONValue]
        if let job = context.arguments.value("retry") {
            guard context.arguments.value("ids") == nil, context.arguments.value("ids-file") == nil,
                !context.arguments.flag("all")
            else { throw UsageError("give exactly one of --ids, --ids-file, --all, --retry") }
            params = try retryParams(of: job, context)
        } else {
            let arguments = context.arguments
            guard arguments.value("ids") != nil || arguments.value("ids-file") != nil || arguments.flag("all") else {
                throw UsageError("give exactly one of --ids, --ids-file, --all, --retry")
            }
            params = try selectionParams(context)
        }
        if let places = try context.valuePath("places") {
            params["places"] = Commands.absolutePath(places).json
        }
        try sidecarParams(context.arguments, into: &params)
        return try Commands.submit(kind: "autotag", params: .object(params), context)
    }

    /// The params of an autotag of the photos `job` (an ended autotag) listed as retryable, with its places file.
    /// - Throws: `DaemonReply` `no_such_job` (exit 4), `invalid_params` when the job is not an ended autotag or
    ///   lists no retryable photo.
    static func retryParams(of job: String, _ context: CommandContext) throws -> [String: JSONValue] {
        let record = try context.call(["op": "show", "job": .string(job)])["job"] ?? .null
        let id = record["id"]?.stringValue ?? job
        guard record["kind"]?.stringValue == "autotag" else {
            throw DaemonReply(error: JobError(code: "invalid_params", message: "job \(id) is not an autotag job; --retry takes one"))
        }
        guard let result = record["result"], result != .null else {
            throw DaemonReply(
                error: JobError(code: "invalid_params", message: "job \(id) has no result yet; retry it once it has ended"))
        }
        let listed = (result["retryable"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        guard !listed.isEmpty else {
            throw DaemonReply(error: JobError(code: "invalid_params", message: "job \(id) has no retryable photos"))
        }
        let count = result["retryable_count"]?.intValue ?? Int64(listed.count)
        if count > Int64(listed.count) {
            CLI.printError(
                "job \(id) lists \(listed.count) of its \(count) retryable photos; retrying those "
                    + "(run autotag on the first job's selection again for the rest)")
        }
        var params: [String: JSONValue] = ["ids": .array(listed.map { .string($0) })]
        if let places = record["params"]?["places"], places != .null { params["places"] = places }
        return params
    }

    /// Opens the photo store for reading (never migrating it: the daemon is its only writer), or returns `nil`
    /// when there is none yet.
    static func openStore(_ context: CommandContext) throws -> PhotoStore? {
        let path = try context.home + "/photos.sqlite3"
        guard access(path, F_OK) == 0 else { return nil }
        do {
            return try PhotoStore.openForReading(path: path)
        } catch {
            throw DaemonReply(error: JobError(code: "store_error", message: "cannot open the photo store: \(error.message)"))
        }
    }

    static func list(_ context: CommandContext) throws -> Int32 {
        let limit = try context.arguments.integer("limit", range: 1...10_000_000) ?? 1_000
        var photos: [PhotoRecord] = []
        if let store = try openStore(context) {
            var after: PhotoLocalID = 0
            // Spelled as the store spells tags (trimmed, NFC), so either Unicode spelling of `Cão` finds it.
            let tag = context.arguments.value("tag").map { (try? TagName.validated($0)) ?? $0 }
            // One past the limit, to know whether there are more.
            while photos.count <= limit {
                let page = try store.list(after: after, limit: 500)
                guard let last = page.last else { break }
                after = last.localID
                photos += page.filter { photo in tag.map { tag in photo.tags.contains { $0.utf8.elementsEqual(tag.utf8) } } ?? true }.prefix(limit + 1 - photos.count)
            }
        }
        let more = photos.count > limit
        photos = Array(photos.prefix(limit))
        if more {
            // On stderr, so `--json` output stays one JSON array.
            CLI.printError("showing the first \(limit) photos; there are more (use --limit N)")
        }
        if context.json {
            print("[" + (try photos.map { try $0.json.encodedLine() }).joined(separator: ",\n") + "]")
        } else if photos.isEmpty {
            print("no photos")
        } else {
            for photo in photos {
                // Paths and tags escaped (TerminalText.escape): one photo a line, nothing for the terminal to obey.
                print(
                    TerminalText.escape(
                        "\(photo.stableID.text)  \(photo.takenAt ?? "-")  \(photo.path)  \(Self.tagList(photo.tags))")
                )
            }
        }
        return ExitCode.success
    }

    /// Tags for reading, separated by ", "; a tag that holds a comma (a camera model such as "u1020,S1020", or a
    /// keyword) or a double quote is quoted as in CSV, so every tag can be told apart.
    static func tagList(_ tags: [String]) -> String {
        tags.map { tag in
            tag.contains(",") || tag.contains("\"")
                ? "\"" + tag.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\"" : tag
        }.joined(separator: ", ")
    }

    /// What `photos show` adds after a capture time that is a camera clock's factory default (`CameraClock`).
    static func clockNote(_ photo: PhotoRecord) -> String {
        photo.json.clockNotSet ? " (camera clock never set)" : ""
    }

    /// "Canon EOS 40D" rather than "Canon Canon EOS 40D": the model, after the make only when it does not name it
    /// already; "-" when neither is known.
    static func camera(make: String?, model: String?) -> String {
        switch (make, model) {
        case (nil, nil): return "-"
        case (let make?, nil): return make
        case (nil, let model?): return model
        case (let make?, let model?):
            let brand = make.split(separator: " ").first.map(String.init) ?? make
            return model.lowercased().hasPrefix(brand.lowercased()) ? model : make + " " + model
        }
    }

    static func show(_ context: CommandContext) throws -> Int32 {
        let id = context.arguments.positionals[0]
        guard StableID.isPrefix(id.lowercased()) else {
            throw UsageError("'\(id)' is not a stable ID (a UUID like 0f6b2c1e-…) or a prefix of one")
        }
        guard let store = try openStore(context) else {
            throw DaemonReply(
                error: JobError(code: "no_such_photo", message: "no photo with ID \(id) (the library is empty)"))
        }
        let photo: PhotoRecord
        do {
            photo = try store.photo(matching: id)
        } catch where error.code == .store {
            throw DaemonReply(error: JobError(code: "store_error", message: error.message))
        } catch where error.code == .invalidID {
            throw UsageError(error.message)
        } catch {
            throw DaemonReply(
                error: JobError(code: "no_such_photo", message: error.message + "; see trailbook-jobs photos list"))
        }
        let uploads: [PhotoJSON.Upload]
        do {
            uploads = try store.uploads(of: photo.stableID.text).map { upload in
                PhotoJSON.Upload(
                    destination: upload.destination, job: upload.job,
                    uploadedAt: Timestamp.iso8601(unixSeconds: Double(upload.uploadedAtMilliseconds) / 1000),
                    location: upload.location, bytes: upload.bytes, sha256: upload.sha256)
            }
        } catch {
            throw DaemonReply(error: JobError(code: "store_error", message: error.message))
        }
        if context.json {
            var json = photo.json
            json.uploads = uploads
            print(try json.encodedLine())
        } else {
            print(
                """
                id        \(photo.stableID.text)
                path      \(TerminalText.escape(photo.path.description))
                bytes     \(photo.stamp.bytes)
                size      \(photo.width.map(String.init) ?? "-") x \(photo.height.map(String.init) ?? "-") (orientation \(photo.orientation.map(String.init) ?? "-"))
                taken at  \(TerminalText.escape(photo.takenAt ?? "-"))\(Self.clockNote(photo))
                camera    \(TerminalText.escape(Self.camera(make: photo.cameraMake, model: photo.cameraModel)))
                gps       \(photo.gps.map { "\($0.latitude), \($0.longitude)" } ?? "-")
                tags      \(TerminalText.escape(Self.tagList(photo.tags)))
                """)
            // Warnings quote the file (a Ref, a date text): escaped like the other fields.
            for warning in photo.warnings { print("warning   \(TerminalText.escape(warning))") }
            // Where it went: one line per destination, as the library remembers it (`--again` uploads it anyway).
            for upload in uploads {
                print(
                    "uploaded  \(upload.uploadedAt) to \(TerminalText.escape(upload.destination)) as "
                        + "\(TerminalText.escape(upload.location.description)) (job \(upload.job.prefix(8)))")
            }
        }
        return ExitCode.success
    }
}
