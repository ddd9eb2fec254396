import TrailbookProtocol

/// The photo library's commands as the command line knows them (their specs), and `photos import`, which only
/// submits a job. The others read the library (`PhotoCommands` in TrailbookCLI).
extension Commands {
    /// `--ids`, `--ids-file`, `--all`: which photos of the library a tag or autotag job takes.
    static let photoSelection: [OptionSpec] = [
        OptionSpec("ids", .value(placeholder: "ID,…"), help: "stable IDs of the photos, comma separated"),
        OptionSpec("ids-file", .value(placeholder: "FILE"), takesPath: true, help: "a file with one stable ID a line"),
        OptionSpec("all", help: "every photo in the library"),
    ]

    /// `--xmp`, `--no-xmp`, `--xmp-naming` of `submit tag` and `submit autotag`.
    static let photoSidecar: [OptionSpec] = [
        OptionSpec("xmp", help: "also write the keywords to each photo's XMP sidecar (merged; default: the daemon's --xmp)"),
        OptionSpec("no-xmp", help: "write no XMP sidecars, whatever the daemon's default"),
        OptionSpec("xmp-naming", .value(placeholder: "NAMING"), completion: .choices(["darktable", "lightroom"]), help: "darktable (IMG_0001.jpg.xmp, also digiKam; default) or lightroom (IMG_0001.xmp)"),
    ]

    /// The specs of `photos import|list|show`, `submit tag`, `submit autotag` and the hidden `worker`.
    static let photoSpecs: [CommandSpec] = [
        CommandSpec(
            path: ["photos", "import"],
            summary: "import the photos (JPEG, HEIF/HEIC, AVIF) under DIR into the photo library (a job; progress in files)",
            positionals: [PositionalSpec(name: "DIR", completion: .directory, help: "directory to walk")],
            options: submitCommon,
            details: "Unchanged files (same size, mtime and inode) are skipped.\n" + exitCodes),
        CommandSpec(
            path: ["photos", "list"], summary: "list the photos in the library, in import order",
            options: [
                OptionSpec("limit", .value(placeholder: "N"), help: "at most N photos (default 1000)"),
                OptionSpec("tag", .value(placeholder: "TAG"), help: "only photos with TAG"),
                json,
            ],
            details: "Reads $TRAILBOOK_JOBS_HOME/photos.sqlite3 directly (no daemon needed)."),
        CommandSpec(
            path: ["photos", "show"], summary: "show one photo",
            positionals: [PositionalSpec(name: "ID", help: "stable ID or a unique prefix of it")],
            options: [json],
            details: "Exit 4 when no photo matches (or the prefix matches several)."),
        CommandSpec(
            path: ["submit", "tag"], summary: "add or remove a keyword of photos by stable ID (in batches, exactly once)",
            options: [
                OptionSpec("tag", .value(placeholder: "WORD"), required: true, help: "the keyword"),
                OptionSpec("remove", help: "take the keyword off instead"),
                OptionSpec("max-rate", .value(placeholder: "N"), help: "at most N photos a second (paces the job)"),
                OptionSpec("load-records", help: "(benchmark) load each photo's full record before tagging it"),
            ] + photoSelection + photoSidecar + submitCommon,
            details: "Give one of --ids, --ids-file, --all. A cancel keeps the tags already written.\n"
                + exitCodes),
        CommandSpec(
            path: ["submit", "autotag"], summary: "analyse photos (EXIF, pixels, places, duplicates) and write tags",
            options: photoSelection + [
                OptionSpec("retry", .value(placeholder: "JOB"), completion: .jobID, help: "the photos an earlier autotag JOB could not read for a reason that may pass (its retryable list)"),
                OptionSpec("places", .value(placeholder: "FILE"), takesPath: true, help: "CSV name,lat,lon of your own places"),
            ] + photoSidecar + submitCommon,
            details: "Give one of --ids, --ids-file, --all, --retry. --retry uses JOB's --places unless given.\n"
                + exitCodes),
        CommandSpec(
            path: ["worker"], summary: "(internal) a worker process: answers NDJSON task requests on stdin",
            options: [
                OptionSpec("memory-limit", .value(placeholder: "SIZE"), help: "RLIMIT_AS (default 1GiB)"),
                OptionSpec("cpu-limit", .value(placeholder: "N"), help: "RLIMIT_CPU in seconds (default 3600)"),
                OptionSpec("parent", .value(placeholder: "PID"), help: "die when this process (the daemon) dies"),
                OptionSpec("max-pixels", .value(placeholder: "N"), help: "refuse to decode images over N pixels (default 100000000)"),
            ]),
    ]

    static func importDirectory(_ context: CommandContext) throws -> Int32 {
        // The folder's exact bytes (its name need not be UTF-8), as `submit upload` sends its files.
        let dir = absolutePath(try context.positionalPaths[0])
        return try submit(kind: "import", params: ["dir": dir.json], context)
    }
}
