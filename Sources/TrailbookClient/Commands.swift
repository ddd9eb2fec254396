import TrailbookProtocol
import UploadParams

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The command table: every command's spec and its handler.
package enum Commands {
    static let json = OptionSpec("json", help: "print JSON instead of text")
    static let socket = OptionSpec("socket", .value(placeholder: "PATH"), completion: .file, help: "the daemon's socket (default $TRAILBOOK_JOBS_HOME/daemon.sock)")
    static let key = OptionSpec(
        "key", .value(placeholder: "KEY"),
        help: "idempotency key: submitting again with it returns the job it made instead of a new one (default: a new key per run, reused when the reply is lost)")
    static let submitCommon: [OptionSpec] = [
        OptionSpec("priority", .value(placeholder: "N"), help: "higher runs first; may preempt lower (default 0)"),
        OptionSpec("timeout", .value(placeholder: "DUR"), help: "deadline of one attempt, e.g. 30m (default 1h: uploads and tagging are long-running)"),
        OptionSpec("stall-timeout", .value(placeholder: "DUR"), help: "stop with reason timeout after no progress for DUR (default 60s)"),
        OptionSpec("max-attempts", .value(placeholder: "N"), help: "attempts before failing (default 5)"),
        OptionSpec("give-up-after", .value(placeholder: "DUR"), help: "uploads: wait out a server's outage (5xx, 429, no connection) this long before failing (default 24h)"),
        OptionSpec("allow-duplicate", help: "queue it even if an unfinished job already does the same (an upload: the same file to the same place; tagging: the same photos and keyword)"),
        OptionSpec("queue", .value(placeholder: "NAME"), help: "with a PostgreSQL store: the queue to put it in; only daemons started with --queues NAME run it (default: default)"),
        OptionSpec("any-host", help: "with a PostgreSQL store: its files are on a disk every host shares, so any host's daemon may run it (uploads, import, tag and autotag run on the submitting host by default)"),
        key,
        OptionSpec("wait", help: "block until the job ends; exit 0 if it succeeded, 1 otherwise"),
        OptionSpec("watch", help: "show the job's progress until it ends; exit like --wait"),
        OptionSpec("expand", help: "with --watch: the files in flight under the job, one line each (at most 8)"),
        json, socket,
    ]
    static let exitCodes = ExitStatus.summaryLine
    /// The job kinds a daemon runs, for `--kind` and its completion.
    static let jobKinds = ["upload", "import", "tag", "autotag"]
    /// `job id or unique prefix`, completed from the daemon's jobs.
    static let jobID = PositionalSpec(name: "ID", completion: .jobID, help: "job id or unique prefix")

    static let all: [CommandSpec] = [
        CommandSpec(path: [], summary: "trailbook-jobs: long, cancellable jobs (uploads, tagging) run by a daemon"),
        CommandSpec(
            path: ["daemon"], summary: "run the daemon in the foreground (logs to stderr; SIGTERM, SIGHUP or Ctrl-C stop it cleanly)",
            options: [
                socket,
                OptionSpec("concurrency", .value(placeholder: "N"), help: "jobs running at once (default 4)"),
                OptionSpec("store", .value(placeholder: "URL"), holdsSecret: true, help: "where jobs are kept: 'sqlite' (default, in $TRAILBOOK_JOBS_HOME) or a PostgreSQL database several daemons share (postgres://… or 'host=… dbname=…'; default $TRAILBOOK_JOBS_STORE)"),
                OptionSpec("lease", .value(placeholder: "DUR"), help: "with PostgreSQL: how long a running job's lease lasts unless renewed; a dead daemon's jobs are rescued after it (default 30s)"),
                OptionSpec("host", .value(placeholder: "NAME"), help: "with PostgreSQL: this daemon's host name, which its leases carry and its submitted uploads and photo jobs are pinned to (default: the machine's host name)"),
                OptionSpec("queues", .value(placeholder: "NAME,…"), help: "with PostgreSQL: the queues this daemon runs jobs from, comma-separated (default: default)"),
                OptionSpec("store-timeout", .value(placeholder: "DUR"), help: "with PostgreSQL: how long the database may stay silent before a call fails store_unavailable, or a connection (or an attempt to make one) is given up and made again (default 10s)"),
                OptionSpec("timeout", .value(placeholder: "DUR"), help: "default deadline of one attempt (default 1h long-running, 30s others)"),
                OptionSpec("stall-timeout", .value(placeholder: "DUR"), help: "default stall timeout (default 60s)"),
                OptionSpec("max-attempts", .value(placeholder: "N"), help: "default attempts (default 5)"),
                OptionSpec("give-up-after", .value(placeholder: "DUR"), help: "default time to wait out a server's outage before failing (default 24h)"),
                OptionSpec("retry-base", .value(placeholder: "DUR"), help: "first retry backoff, doubling up to 5m (default 1s)"),
                OptionSpec("cleanup-budget", .value(placeholder: "DUR"), help: "how long a failed or cancelled job's clean-up (a tus DELETE) is retried (default 168h)"),
                OptionSpec("keep-succeeded", .value(placeholder: "DUR"), help: "delete succeeded jobs this long after they end, or 'forever' (default 7d)"),
                OptionSpec("keep-failed", .value(placeholder: "DUR"), help: "delete failed jobs this long after they end, or 'forever' (default 30d)"),
                OptionSpec("keep-cancelled", .value(placeholder: "DUR"), help: "delete cancelled jobs this long after they end, or 'forever' (default 7d)"),
                OptionSpec("workers", .value(placeholder: "N"), help: "worker processes for decoding photos (default 2)"),
                OptionSpec("worker-timeout", .value(placeholder: "DUR"), help: "time limit of one worker request (default 30s)"),
                OptionSpec("max-megapixels", .value(placeholder: "N"), help: "refuse decodes of over N megapixels as decoded (JPEG scaled, HEIF thumbnail), too_large (default 100)"),
                OptionSpec("xmp", help: "tag and autotag jobs write XMP sidecars unless a job says --no-xmp"),
                OptionSpec("xmp-naming", .value(placeholder: "NAMING"), completion: .choices(["darktable", "lightroom"]), help: "default sidecar naming: darktable (IMG_0001.jpg.xmp; default) or lightroom (IMG_0001.xmp)"),
            ],
            details: "State lives in $TRAILBOOK_JOBS_HOME (default $XDG_STATE_HOME/trailbook-jobs or ~/.local/state/trailbook-jobs)."),
        CommandSpec(
            path: ["submit", "upload"], summary: "upload files, folders, or photos of the library, in resumable chunks",
            positionals: [PositionalSpec(name: "FILE", min: 0, max: nil, help: "files or folders to upload (or give --ids, --ids-file or --tag); a folder's contents go under DEST, keeping their layout")],
            options: [
                OptionSpec("ids", .value(placeholder: "ID,…"), help: "photos of the library by stable ID (or unique prefix), comma-separated"),
                OptionSpec("ids-file", .value(placeholder: "FILE"), takesPath: true, help: "photos of the library listed in FILE, one stable ID a line"),
                OptionSpec("tag", .value(placeholder: "TAG"), repeatable: true, help: "photos of the library with TAG; given several times, photos with every TAG"),
                OptionSpec("again", help: "photos: upload also those already uploaded to this destination; folders to file:// or s3://: send also files already there with the same bytes (both skipped by default)"),
                OptionSpec("to", .value(placeholder: "DEST"), required: true, takesPath: true, completion: .directory, help: "file:///dir (or a directory path), an http(s):// tus endpoint, or s3://BUCKET/PREFIX/"),
                OptionSpec("chunk-size", .value(placeholder: "SIZE"), help: "bytes between checkpoints, and per PATCH for tus (default 8MiB; file://: every 64MiB or 1s)"),
                OptionSpec("max-rate", .value(placeholder: "RATE"), help: "bandwidth limit in bytes/s, e.g. 20MiB"),
                OptionSpec("header", .value(placeholder: "'NAME: VALUE'"), repeatable: true, holdsSecret: true, help: "tus: an HTTP header sent with every request, e.g. 'Authorization: Bearer …'; its value is never shown"),
                OptionSpec("ca-bundle", .value(placeholder: "FILE"), takesPath: true, help: "tus over https: PEM file of CA certificates to trust"),
                OptionSpec("endpoint", .value(placeholder: "URL"), help: "s3: endpoint of an S3-compatible server (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile, AWS)"),
                OptionSpec("region", .value(placeholder: "REGION"), help: "s3: signing region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile, us-east-1)"),
                OptionSpec("profile", .value(placeholder: "NAME"), help: "s3: profile in ~/.aws/credentials and ~/.aws/config of the daemon's user (default: AWS_PROFILE, default)"),
                OptionSpec("path-style", help: "s3: bucket in the path (ENDPOINT/BUCKET/KEY); the default with a custom endpoint"),
                OptionSpec("virtual-hosted", help: "s3: bucket in the host name (BUCKET.ENDPOINT); the default for AWS"),
                OptionSpec("max-parts", .value(placeholder: "N"), help: "s3: most parts the provider allows per upload (default 10000)"),
                OptionSpec("min-part-size", .value(placeholder: "SIZE"), help: "s3: smallest part the provider accepts (default 5MiB)"),
                OptionSpec("parts-in-flight", .value(placeholder: "N"), help: "s3: parts sent at once (default 4; memory about N x part size)"),
                OptionSpec("checksum", .value(placeholder: "sha256|md5"), completion: .choices(["sha256", "md5"]), help: "s3: the digest the server verifies: sha256 (default: x-amz-checksum-sha256) or md5 (Content-MD5, for providers without S3's additional checksums)"),
                OptionSpec("keep-folders", help: "photos (--ids, --ids-file, --tag): name each by its path under the library's root (the folder holding every photo), keeping its folders"),
                OptionSpec("follow-links", help: "folders: follow symbolic links inside them (loops are detected); by default links are passed over"),
                OptionSpec("include", .value(placeholder: "GLOB"), repeatable: true, help: "folders: upload only files whose path inside the folder matches GLOB (rclone syntax: *, **, ?, [a-z], {a,b}; /GLOB anchors at the folder)"),
                OptionSpec("exclude", .value(placeholder: "GLOB"), repeatable: true, help: "folders: leave out files whose path inside the folder matches GLOB (tried before --include; DIR/ leaves out a whole folder)"),
                OptionSpec("each", help: "one job per FILE, submitted as one batch (all queued or none); prints their IDs in order"),
            ] + submitCommon,
            details: "Example: trailbook-jobs submit upload ~/Pictures/Lisbon --to s3://my-bucket/trips/lisbon/ --exclude '*.tmp'\n"
                + "         trailbook-jobs submit upload IMG_0001.jpg IMG_0002.jpg --to file:///srv/photos --watch\n"
                + "         trailbook-jobs submit upload big.mov --to https://tus.example.com/files/ --header \"Authorization: Bearer $TOKEN\"\n"
                + "         trailbook-jobs submit upload big.mov --to s3://my-bucket/photos/ --chunk-size 16MiB\n"
                + "         trailbook-jobs submit upload a.jpg b.jpg c.jpg --to file:///srv/photos --each\n"
                + "         trailbook-jobs submit upload --tag pick --to s3://my-bucket/picks/\n"
                + "Give files, or photos of the library (one of --ids, --ids-file, --tag): a photo already uploaded to the\n"
                + "same destination is skipped (already_uploaded) unless --again.\n"
                + "A folder is one job: its files go under DEST by their paths inside it, the folder's own name not kept\n"
                + "(as rclone copy); a missing destination directory is created. Symbolic links (unless --follow-links),\n"
                + "FIFOs, sockets and devices are passed over and listed with their reason in the result.\n"
                + "S3 credentials are read by the daemon (its environment, ~/.aws), never passed on the command line.\n"
                + exitCodes),
        CommandSpec(
            path: ["submit"], summary: "submit many jobs at once from a file of submit objects (--from)",
            options: [
                OptionSpec("from", .value(placeholder: "FILE"), required: true, takesPath: true, help: "NDJSON: one submit object per line ({\"kind\", \"params\", \"options\", \"key\"}); - reads standard input"),
            ] + submitCommon.filter { !["wait", "watch", "expand"].contains($0.name) },
            details: "The jobs go in one batch: all are queued, or none (the first bad line is named). Prints their IDs in order.\n"
                + "A line without a key gets KEY/INDEX (--key, or this run's own key; INDEX counts the jobs from 0); options\n"
                + "given here fill in those a line does not set.\n"
                + "Example: printf '%s\\n' '{\"kind\": \"upload\", \"params\": {\"files\": [\"/p/a.jpg\"], \"to\": \"file:///srv\"}, \"key\": \"a-1\"}' | trailbook-jobs submit --from -\n"
                + exitCodes),
        CommandSpec(
            path: ["list"], summary: "list jobs, oldest first",
            options: [
                OptionSpec(
                    "state", .value(placeholder: "STATE"), repeatable: true, completion: .choices(JobState.allCases.map(\.rawValue)),
                    help: "only jobs in STATE (" + JobState.allCases.map(\.rawValue).joined(separator: ", ") + ")"),
                OptionSpec("kind", .value(placeholder: "KIND"), completion: .choices(jobKinds), help: "only jobs of KIND"),
                OptionSpec("limit", .value(placeholder: "N"), help: "the newest N jobs (default 1000)"),
                OptionSpec("quiet", short: "q", help: "print only the jobs' IDs, one a line (for scripts and shell completion)"),
                json, socket,
            ]),
        CommandSpec(
            path: ["show"], summary: "show one job", positionals: [jobID],
            options: [
                OptionSpec("files", help: "list the job's files (a folder upload) with what became of each, a page at a time"),
                OptionSpec(
                    "state", .value(placeholder: "STATE"), completion: .choices(ShowFiles.states),
                    help: "with --files: only files in STATE (" + ShowFiles.states.joined(separator: ", ") + ")"),
                OptionSpec("after", .value(placeholder: "N"), help: "with --files: the files after position N (the line 'more:' gives it)"),
                OptionSpec("limit", .value(placeholder: "N"), help: "with --files: at most N files (default 100, at most 10000)"),
                json, socket,
            ]),
        CommandSpec(path: ["cancel"], summary: "cancel a job (reason user_stop): it stops and removes its partial output", positionals: [jobID], options: [json, socket]),
        CommandSpec(path: ["pause"], summary: "pause a job; it keeps its checkpoint", positionals: [jobID], options: [json, socket]),
        CommandSpec(
            path: ["resume"], summary: "put a paused job back in the queue", positionals: [jobID],
            options: [
                OptionSpec("header", .value(placeholder: "'NAME: VALUE'"), repeatable: true, holdsSecret: true, help: "tus upload: new header (e.g. a fresh 'Authorization: Bearer …'), replacing the job's headers of that name; never shown"),
                json, socket,
            ],
            details: "Example: trailbook-jobs resume 9b2f --header \"Authorization: Bearer $NEW_TOKEN\""),
        CommandSpec(
            path: ["watch"], summary: "follow job progress live (plain lines when not on a terminal)",
            positionals: [PositionalSpec(name: "ID", min: 0, max: nil, completion: .jobID, help: "only these jobs (id or unique prefix)")],
            options: [
                OptionSpec("kind", .value(placeholder: "KIND"), repeatable: true, completion: .choices(jobKinds), help: "only jobs of KIND"),
                OptionSpec("since", .value(placeholder: "SEQ"), help: "replay events after sequence number SEQ first"),
                OptionSpec("expand", help: "under each running job, its files in flight: one line each with bar and percent (at most 8)"),
                OptionSpec("json", help: "print the raw feed events, one JSON object per line"), socket,
            ],
            details: """
                On a terminal: one row per job redrawn in place; keys: ↑/↓ select, c cancel (asks y/n), p pause/resume,
                q quit. Colour unless NO_COLOR is set. Not a terminal: plain lines, at most one per job per second plus
                every state change. --json: the raw feed events, one per line.
                """),
        CommandSpec(
            path: ["prune"], summary: "delete ended jobs past their retention now, and free their space",
            options: [
                OptionSpec("older-than", .value(placeholder: "DUR"), help: "every ended job that ended more than DUR ago (default: the daemon's --keep-succeeded/--keep-failed/--keep-cancelled)"),
                json, socket,
            ],
            details: "Jobs whose clean-up (a tus DELETE, an S3 abort) is not done yet are kept until it is.\n"
                + "Example: trailbook-jobs prune --older-than 1d"),
        CommandSpec(
            path: ["web"], summary: "serve a live page of the jobs on 127.0.0.1 (a client of the daemon; Ctrl-C stops it)",
            options: [
                OptionSpec("port", .value(placeholder: "N"), help: "the TCP port on 127.0.0.1 (default 0: any free port; the URL printed says which)"),
                OptionSpec("prefix", .value(placeholder: "PATH"), help: "serve the page under PATH, e.g. /jobs (default: at /)"),
                OptionSpec("read-only", help: "show the jobs but refuse cancel, pause and resume"),
                OptionSpec("debug", help: "log one line per request to stderr (method, path, status; never the token)"),
                socket,
            ],
            details: "Prints the page's URL once, with a token that opening it trades for a cookie; only that browser may use the page.\n"
                + "Example: trailbook-jobs web --port 8470"),
    ] + photoSpecs + ReferenceCommands.specs

    static var overview: String {
        """
        trailbook-jobs: long, cancellable jobs (uploads, tagging) run by a daemon.

        Usage: trailbook-jobs COMMAND [options]

        \(ArgumentParser.commandList(all.filter { !$0.path.isEmpty && !$0.isInternal }))

        Run 'trailbook-jobs COMMAND --help' for a command's options.
        \(exitCodes)
        """
    }

    /// The handler of the command at `path`, or `nil` for a command whose work needs the daemon's libraries
    /// (`daemon`, the photo library's commands): `LibraryCommands` has those.
    static func handler(for path: [String]) -> ((CommandContext) throws -> Int32)? {
        switch path {
        case ["submit", "upload"]: return submitUpload
        case ["submit"]: return { try BatchSubmit.submit(try BatchSubmit.entries(fromFile: $0.valuePath("from")!), $0) }
        case ["list"]: return list
        case ["show"]: return show
        case ["cancel"], ["pause"], ["resume"]: return { try control(path[0], $0) }
        case ["watch"]: return Watch.run
        case ["prune"]: return prune
        case ["help"]: return ReferenceCommands.help
        case ["completions"]: return ReferenceCommands.completions
        case ["photos", "import"]: return importDirectory
        default: return nil
        }
    }

    // MARK: - Handlers

    /// A timeout from the command line: more than 0 and at most a year (`ControlProtocol.longestTimeoutSeconds`).
    package static func positive(_ value: Double, _ name: String) throws(UsageError) -> Double {
        guard value > 0, value <= ControlProtocol.longestTimeoutSeconds else {
            throw UsageError("option --\(name) must be more than 0 and at most a year (8760h)")
        }
        return value
    }

    static func prune(_ context: CommandContext) throws -> Int32 {
        var request: [String: JSONValue] = ["op": "prune"]
        if let value = try context.arguments.duration("older-than") { request["older_than_s"] = .number(value) }
        let reply = try context.call(.object(request))
        if context.json {
            var members: [String: JSONValue] = [:]
            for key in ["pruned", "total", "kept_for_cleanup", "store_bytes_before", "store_bytes_after"] {
                members[key] = reply[key] ?? .null
            }
            print(JSONCoding.encodePretty(JSONValue.object(members)))
            return ExitCode.success
        }
        let counts = JobState.ended.map { "\(reply["pruned"]?[$0.rawValue]?.intValue ?? 0) \($0.rawValue)" }
        print("pruned \(reply["total"]?.intValue ?? 0) jobs (\(counts.joined(separator: ", ")))")
        if let kept = reply["kept_for_cleanup"]?.intValue, kept > 0 {
            print("kept \(kept) whose clean-up (a tus DELETE, an S3 abort) is not done yet")
        }
        let before = ByteCount.format(reply["store_bytes_before"]?.intValue ?? 0)
        let after = ByteCount.format(reply["store_bytes_after"]?.intValue ?? 0)
        print("store \(before) -> \(after)")
        return ExitCode.success
    }

    static func submitOptions(_ arguments: ParsedArguments) throws -> JSONValue {
        var options: [String: JSONValue] = [:]
        if let value = try arguments.integer("priority", range: -1_000_000...1_000_000) { options["priority"] = .number(Double(value)) }
        if let value = try arguments.duration("timeout") { options["timeout_s"] = .number(try positive(value, "timeout")) }
        if let value = try arguments.duration("stall-timeout") { options["stall_timeout_s"] = .number(try positive(value, "stall-timeout")) }
        if let value = try arguments.integer("max-attempts", range: 1...1_000) { options["max_attempts"] = .number(Double(value)) }
        if let value = try arguments.duration("give-up-after") { options["give_up_after_s"] = .number(try positive(value, "give-up-after")) }
        if arguments.flag("allow-duplicate") { options["allow_duplicate"] = true }
        if let queue = arguments.value("queue") {
            if let problem = ControlProtocol.queueNameProblem(queue) { throw UsageError("--queue: \(problem)") }
            options["queue"] = .string(queue)
        }
        if arguments.flag("any-host") { options["any_host"] = true }
        return .object(options)
    }

    static func submitUpload(_ context: CommandContext) throws -> Int32 {
        let arguments = context.arguments
        guard arguments.value("to") != "" else { throw UsageError("option --to needs a destination (file:///dir or a tus URL)") }
        // Paths as bytes: a name that is not UTF-8 travels as {"base64": …} (see BytePath).
        let files = try context.positionalPaths.map { absolutePath($0) }
        var params: [String: JSONValue] = [
            "files": .array(files.map(\.json)),
            "to": .string(try destinationURL(context.valuePath("to")!)),
        ]
        if let photos = try context.uploadSelection() {
            guard try context.positionalPaths.isEmpty else {
                throw UsageError("give files or photos (--ids, --ids-file, --tag), not both")
            }
            guard !arguments.flag("each") else {
                throw UsageError("--each makes one job per FILE; an upload of photos of the library is one job")
            }
            params["files"] = nil
            params["photos"] = photos
            if arguments.flag("again") { params["again"] = true }
        } else if try context.positionalPaths.isEmpty {
            throw UsageError("give the files to upload (FILE…), or photos of the library with --ids, --ids-file or --tag")
        } else if arguments.flag("again") {
            guard files.contains(where: isDirectory) else {
                throw UsageError("--again applies to photos of the library (--ids, --ids-file, --tag) and to folders")
            }
            params["again"] = true
        }
        if arguments.flag("follow-links") { params["follow_links"] = true }
        if arguments.flag("keep-folders") { params["keep_folders"] = true }
        if !arguments.values("include").isEmpty { params["include"] = .array(arguments.values("include").map { .string($0) }) }
        if !arguments.values("exclude").isEmpty { params["exclude"] = .array(arguments.values("exclude").map { .string($0) }) }
        if let size = try arguments.size("chunk-size") { params["chunk_size"] = .number(Double(size)) }
        if let rate = try arguments.size("max-rate") { params["max_rate"] = .number(Double(rate)) }
        let headers = arguments.values("header")
        let isTus = params["to"]?.stringValue.map { $0.lowercased().hasPrefix("http://") || $0.lowercased().hasPrefix("https://") } ?? false
        if !headers.isEmpty {
            guard isTus else { throw UsageError("--header applies only to http(s):// (tus) destinations") }
            for header in headers where !header.contains(":") {
                throw UsageError("--header needs 'Name: value' (a colon after the name)")
            }
            params["headers"] = .array(headers.map { .string($0) })
        }
        if let bundle = try context.valuePath("ca-bundle") {
            guard isTus else { throw UsageError("--ca-bundle applies only to http(s):// (tus) destinations") }
            // Made absolute by the bytes of the working directory, which need not be UTF-8; the job keeps text.
            let path = absolutePath(bundle)
            guard let text = path.text else {
                throw UsageError(
                    "--ca-bundle: '\(TerminalText.escape(path.description))' is not valid UTF-8; give the bundle a path in UTF-8 (a symbolic link works)")
            }
            params["ca_bundle"] = .string(text)
        }
        if let s3 = try s3Options(arguments) {
            guard params["to"]?.stringValue?.lowercased().hasPrefix("s3://") == true else {
                throw UsageError("--endpoint, --region, --profile, --path-style, --virtual-hosted, --max-parts, --min-part-size, --parts-in-flight and --checksum apply only to s3:// destinations")
            }
            params["s3"] = s3
        }
        if arguments.flag("each") {
            try refuseSharedNames(files, to: params["to"]?.stringValue)
            // The label is the argument as typed, byte for byte (`caf\xe9.jpg`, not a repaired `caf\u{FFFD}.jpg`).
            let entries = zip(files, try context.positionalPaths).map { file, typed in
                var one = params
                one["files"] = [file.json]
                return BatchSubmit.Entry(request: ["kind": "upload", "params": .object(one)], label: typed.description)
            }
            return try BatchSubmit.submit(entries, context)
        }
        return try submit(kind: "upload", params: .object(params), context)
    }

    /// Whether `path` is a directory here (following links): a folder to upload.
    static func isDirectory(_ path: BytePath) -> Bool {
        var info = stat()
        return path.withCString { stat($0, &info) } == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// `--each` of files that share a name into a directory or an S3 prefix: each job would write `DEST/NAME`, the
    /// last one replacing the others' copies, which one job refuses (`duplicate_name`); so the batch is refused too.
    /// A tus endpoint gives every upload its own URL, so same names are fine there.
    /// - Throws: `DaemonReply` `duplicate_name` (exit 2), before anything is sent.
    static func refuseSharedNames(_ files: [BytePath], to: String?) throws {
        guard let to, let destination = try? UploadDestination(parsing: to) else { return }
        if case .tus = destination { return }
        var seen: [BytePath: BytePath] = [:]
        for file in files {
            guard let name = try? UploadNames.name(ofSource: file) else { continue }  // the daemon names that one
            if let other = seen[name] {
                throw DaemonReply(
                    error: JobError(
                        code: "duplicate_name",
                        message: "'\(file)' and '\(other)' would both be written as '\(name)' in \(to), one job "
                            + "replacing the other's copy; rename one or upload them to different destinations; "
                            + "nothing was queued"))
            }
            seen[name] = file
        }
    }

    /// The `s3` params member from the s3 options, or `nil` when none is given.
    static func s3Options(_ arguments: ParsedArguments) throws -> JSONValue? {
        var s3: [String: JSONValue] = [:]
        for (option, key) in [("endpoint", "endpoint"), ("region", "region"), ("profile", "profile")] {
            if let value = arguments.value(option) { s3[key] = .string(value) }
        }
        if arguments.flag("path-style") && arguments.flag("virtual-hosted") {
            throw UsageError("give --path-style or --virtual-hosted, not both")
        }
        if arguments.flag("path-style") { s3["path_style"] = .bool(true) }
        if arguments.flag("virtual-hosted") { s3["path_style"] = .bool(false) }
        if let value = try arguments.integer("max-parts", range: 1...10_000) { s3["max_parts"] = .number(Double(value)) }
        if let value = try arguments.size("min-part-size") { s3["min_part_size"] = .number(Double(value)) }
        if let value = try arguments.integer("parts-in-flight", range: 1...32) { s3["parts_in_flight"] = .number(Double(value)) }
        if let value = arguments.value("checksum") {
            guard S3Checksum(rawValue: value) != nil else {
                throw UsageError("--checksum takes sha256 or md5, not '\(value)'")
            }
            s3["checksum"] = .string(value)
        }
        return s3.isEmpty ? nil : .object(s3)
    }

    /// Submits a job; with `--wait`/`--watch` follows it to the end and exits with its outcome.
    package static func submit(kind: String, params: JSONValue, _ context: CommandContext) throws -> Int32 {
        let follow = context.arguments.flag("wait") || context.arguments.flag("watch")
        // Subscribe before submitting, so no event of the new job can be missed.
        let watcher = follow ? try Watch.subscribe(context, jobs: [], kinds: [kind], since: nil) : nil
        let key = BatchSubmit.key(context.arguments)
        let request: JSONValue = [
            "op": "submit", "kind": .string(kind), "params": params, "options": try submitOptions(context.arguments),
            "key": .string(key),
        ]
        let reply = try BatchSubmit.send(request, key: key, context)
        try CommandContext.check(reply)
        var job = reply["job"] ?? .null
        let id = job["id"]?.stringValue ?? ""
        let existing = reply["existing"]?.boolValue == true
        if existing { CLI.printError("job \(id) had been submitted before with key \(key); nothing new was queued") }
        if case .object(var members) = job {
            // Marked for scripts: `existing` is true when the key found the job a previous run made.
            members["existing"] = .bool(existing)
            job = .object(members)
        }
        if context.arguments.flag("watch"), let watcher, Watch.usesScreen(context) {
            return try LiveWatch.run(
                context, scope: LiveWatch.Scope(follow: id), subscription: watcher, expand: context.arguments.flag("expand"))
        }
        switch (context.json, follow) {
        case (true, false): print(JSONCoding.encodePretty(job))
        case (true, true): break  // --wait --json prints the final job only; --watch --json the events
        case (false, _): print(id)
        }
        guard let watcher else { return ExitCode.success }
        let end = try Watch.follow(
            watcher, job: id, printing: context.arguments.flag("watch"), json: context.json,
            expand: context.arguments.flag("expand"))
        guard case .ended(let final) = end else {
            if case .quit(let code) = end { return code }
            return ExitCode.success
        }
        if context.arguments.flag("wait") && !context.arguments.flag("watch") {
            print(context.json ? JSONCoding.encodePretty(final) : JobText.summary(final))
        }
        return final["state"]?.stringValue == JobState.succeeded.rawValue ? ExitCode.success : ExitCode.jobFailed
    }

    static func list(_ context: CommandContext) throws -> Int32 {
        var request: [String: JSONValue] = ["op": "list"]
        let states = context.arguments.values("state")
        for state in states where JobState(rawValue: state) == nil {
            throw UsageError("unknown state '\(state)'; states: \(JobState.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if !states.isEmpty { request["states"] = .array(states.map { .string($0) }) }
        if let kind = context.arguments.value("kind") { request["kind"] = .string(kind) }
        if let limit = try context.arguments.integer("limit", range: 1...100_000) { request["limit"] = .number(Double(limit)) }
        let jobs = try context.call(.object(request))["jobs"]?.arrayValue ?? []
        if context.arguments.flag("quiet") {
            for job in jobs { if let id = job["id"]?.stringValue { print(TerminalText.escape(id)) } }
        } else if context.json {
            print(JSONCoding.encodePretty(JSONValue.array(jobs)))
        } else if jobs.isEmpty {
            print("no jobs")
        } else {
            print(JobText.tableHeader)
            for job in jobs { print(JobText.tableRow(job)) }
        }
        return ExitCode.success
    }

    static func show(_ context: CommandContext) throws -> Int32 {
        if context.arguments.flag("files") { return try ShowFiles.run(context) }
        if let paging = ShowFiles.pagingOptions.first(where: { context.arguments.value($0) != nil }) {
            throw UsageError("--\(paging) pages the file list; give it with --files")
        }
        let job = try context.call(["op": "show", "job": .string(context.arguments.positionals[0])])["job"] ?? .null
        print(context.json ? JSONCoding.encodePretty(job) : JobText.details(job))
        return ExitCode.success
    }

    static func control(_ op: String, _ context: CommandContext) throws -> Int32 {
        var request: [String: JSONValue] = ["op": .string(op), "job": .string(context.arguments.positionals[0])]
        if op == "resume" {
            let headers = context.arguments.values("header")
            for header in headers where !header.contains(":") {
                throw UsageError("--header needs 'Name: value' (a colon after the name)")
            }
            if !headers.isEmpty { request["headers"] = .array(headers.map { .string($0) }) }
        }
        let job = try context.call(.object(request))["job"] ?? .null
        print(context.json ? JSONCoding.encodePretty(job) : JobText.summary(job))
        return ExitCode.success
    }

    // MARK: - Paths

    /// An absolute, lexically normalised `path` whose part up to its last `..` component is replaced by where
    /// `realpath(3)` finds it (`$HOME/trip/../dest` → `$HOME/dest`), the rest kept as typed (a final
    /// symbolic link stays a link). Why: the daemon tells two jobs doing the same upload apart by their paths
    /// (`duplicate_upload`), and `../dest` spelled `$HOME/trip/../dest` let a second job upload the same file to
    /// the same place. Resolved by the file system, as the kernel would when opening it, not lexically
    /// (`link/..` is the link target's parent). Unchanged when there is no `..` or the part does not resolve (the
    /// daemon then says what is missing).
    static func resolvingParentReferences(_ path: BytePath) -> BytePath {
        let slash = UInt8(ascii: "/")
        let components = path.bytes.split(separator: slash, omittingEmptySubsequences: true)
        guard path.isAbsolute, let last = components.lastIndex(where: { $0.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) })
        else { return path }
        let prefix = BytePath(bytes: [slash] + components[...last].joined(separator: [slash]))
        guard let pointer = prefix.withCString({ realpath($0, nil) }) else { return path }
        defer { free(pointer) }
        var resolved = BytePath(bytes: UnsafeBufferPointer(start: pointer, count: strlen(pointer)).map { UInt8(bitPattern: $0) })
        for component in components[(last + 1)...] { resolved = BytePath.join(resolved, BytePath(bytes: component)) }
        return resolved
    }

    /// `path` made absolute against the working directory, byte for byte (either may be a name that is not UTF-8),
    /// without `.` components, repeated slashes or (where they resolve) `..` components: `photos import .` records `$HOME/trip/a.jpg`, not
    /// `$HOME/trip/./a.jpg`, so the same file is one path however it was typed.
    package static func absolutePath(_ path: BytePath) -> BytePath {
        guard !path.isAbsolute else { return resolvingParentReferences(path.lexicallyNormalized) }
        guard let cwd = getcwd(nil, 0) else { return resolvingParentReferences(BytePath.join("/", path).lexicallyNormalized) }
        defer { free(cwd) }
        let directory = BytePath(bytes: UnsafeBufferPointer(start: cwd, count: strlen(cwd)).map { UInt8(bitPattern: $0) })
        return resolvingParentReferences(BytePath.join(directory, path).lexicallyNormalized)
    }

    /// `file://`, `http(s)://` and `s3://` URLs pass through as text; a plain path becomes the `file://` URL of
    /// its absolute form (`absolutePath`, by its bytes), with every byte a URL would read as something else
    /// percent-encoded (`UploadDestination.fileURL`): `--to 'a%20b'` is the directory `a%20b`, not `a b`.
    /// - Throws: `UsageError` for a URL that is not valid UTF-8.
    static func destinationURL(_ given: BytePath) throws(UsageError) -> String {
        // `s3:` is never a directory name here: a malformed s3 URL goes to the daemon, which says what is wrong.
        // Repaired text is enough to tell a URL by its ASCII marks.
        let shape = String(decoding: given.bytes, as: UTF8.self)
        guard shape.contains("://") || shape.lowercased().hasPrefix("s3:") else {
            return UploadDestination.fileURL(of: absolutePath(given))
        }
        guard let text = given.text else {
            throw UsageError(
                "option --to: '\(TerminalText.escape(given.description))' is not valid UTF-8 text; in a URL, percent-encode such bytes (%E9)")
        }
        return text
    }
}
