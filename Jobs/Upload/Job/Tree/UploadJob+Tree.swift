import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Uploads of folders (`submit upload DIR… --to DEST`): see `UploadTreePlan` for the layout rule and
/// `UploadTreeWalk` for what is in a tree.
extension UploadJob {
    /// Whether any of `files` is a folder (following links, as a source given is followed). Blocking.
    nonisolated static func hasFolders(_ files: [BytePath]) -> Bool {
        files.contains { file in
            guard case .success(let (_, mode)) = DirectoryIO.status(file) else { return false }
            return DirectoryIO.isDirectory(mode)
        }
    }

    /// Submit-time checks of an upload with folders among its sources: with several sources, lists them (off the
    /// loop thread, a page at a time) and refuses two files that would land on one name (`duplicate_name`, naming
    /// both); with one, lists only its first entry (it can be read); then checks the
    /// destination without its files (options, headers; a `file://` directory that exists and is writable, or that
    /// can be created).
    /// Files the destination cannot take are not refused here: they are that file's failure when the job runs.
    /// - Throws: `JobError` `duplicate_name`, `source_missing`, `source_unreadable`, `source_not_regular`,
    ///   `destination_not_directory`, `destination_not_writable`, and the destination's own (see `validate`).
    static func validateTree(_ params: Params, destination: UploadDestination) async throws(JobError) {
        let sources = params.files
        let lister = UploadTreeLister(
            sources, destination: destination, filter: try params.filter(), followLinks: params.followLinks)
        // A page at a time, none kept: a folder of 100 000 files is not held to find the first clash.
        let listed = await Task.detached {
            Result { () throws(JobError) -> UploadTreePlan.Entry? in
                // One source cannot clash with itself: its first entry shows it can be listed, and the rest is
                // listed when the job runs (a submit of one folder of 100 000 files is answered at once).
                guard sources.count > 1 else {
                    _ = try lister.next(limit: 1)
                    return nil
                }
                while let page = try lister.next(limit: UploadTreeListing.pageSizeAtSubmit) {
                    if let clash = page.plan.failed.first(where: { $0.reason == "duplicate_name" }) { return clash }
                }
                return nil
            }
        }.value
        if let clash = try listed.get() {
            throw JobError(code: "duplicate_name", message: clash.message)
        }
        var empty = params
        empty.files = []
        switch destination {
        case .directory(let path):
            let checked = await Task.detached {
                Result { () throws(JobError) in
                    try DirectoryIO.checkCreatable(path)
                    try checkOutside(path, of: sources)
                }
            }.value
            try checked.get()
        case .tus:
            try await TusUploadRun.validate(empty)
        case .s3(_, let prefix):
            try await S3UploadRun.validate(empty, prefix: prefix)
        }
    }

    /// Refuses a `file://` destination that is one of the folders uploaded or inside one (as `rclone copy`
    /// refuses overlapping source and destination): its files would be copied onto themselves, and every later
    /// upload of the folder would take in the copies of the one before. Compared where they lead in the file
    /// system, so a link or `..` cannot hide it; a destination not made yet is compared by its nearest existing
    /// ancestor plus the rest. Blocking.
    /// - Throws: `JobError` `bad_destination`.
    nonisolated static func checkOutside(_ destination: BytePath, of sources: [BytePath]) throws(JobError) {
        let target = destination.resolvedByFileSystem
        for source in sources {
            guard case .success(let (_, mode)) = DirectoryIO.status(source), DirectoryIO.isDirectory(mode) else {
                continue
            }
            let folder = source.resolvedByFileSystem
            let inside = target == folder || target.bytes.starts(with: BytePath.join(folder, "").bytes)
            guard !inside else {
                throw JobError(
                    code: "bad_destination",
                    message:
                        "destination \(destination) is inside the folder \(source) being uploaded; its files would be "
                        + "copied onto themselves; upload into a directory outside the folder")
            }
        }
    }

    /// The folder upload's plan and files: the checkpoint's on a later attempt; on the first, when a source is a
    /// folder, the files listed now a page at a time into the job's file list (`UploadTreeListing`) and fixed by a
    /// version-2 checkpoint so every attempt uploads the same ones. The plan holds counts only (its `files` and `names` empty but for a
    /// version-1 checkpoint's); the files are read through the list (`UploadFileList`), a page at a time. `nil`
    /// for an upload of files only. A `file://` destination directory is created if missing (`mkdir -p`).
    /// - Throws: `JobError` from listing (`source_missing`, `source_unreadable`, `source_not_regular`),
    ///   `bad_destination`, `write_failed` / `destination_not_writable` (the directory cannot be made),
    ///   `store_error`.
    /// - Parameter attemptStart: when this attempt started (Unix seconds), the stat cache's bound (`TreeSyncMemory`).
    static func treePlan(
        _ params: Params, attemptStart: Double, in job: JobContext
    ) async throws -> (plan: UploadTreePlan, files: UploadFileList)? {
        let destination = try UploadDestination(parsing: params.to)
        let plan: UploadTreePlan
        let files: UploadFileList
        if let saved = try UploadCheckpoint.load(in: job) {
            guard let tree = saved.tree else { return nil }
            plan = tree
            files = saved.files(in: job) ?? UploadFileList(paths: tree.files, names: tree.names)
        } else {
            let sources = params.files
            guard try await job.runOnPool({ hasFolders(sources) }) else { return nil }
            // The list is taken a page at a time into the job store (`UploadTreeListing`) before the checkpoint
            // that fixes the plan: a crash in between lists again from scratch. The checkpoint (version 2) keeps
            // only counts; every attempt, this one too, reads the files from the list a page at a time.
            let (listed, count) = try await UploadTreeListing.take(
                params, destination: destination, attemptStart: attemptStart, in: job)
            let checkpoint = UploadCheckpoint.listing(listed, fileCount: count)
            try job.saveCheckpoint(checkpoint)
            plan = checkpoint.tree ?? listed
            files = UploadFileList(entries: job.entries, count: count)
            let skipped = listed.skippedByReason.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            let failed = listed.failedByCode.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            job.log(
                .info,
                "listed \(count) files to upload"
                    + (listed.unchangedCount == 0 ? "" : "; \(listed.unchangedCount) already there")
                    + (skipped.isEmpty ? "" : "; passed over: " + skipped.joined(separator: ", "))
                    + (failed.isEmpty ? "" : "; cannot upload: " + failed.joined(separator: ", ")))
        }
        if case .directory(let path) = destination {
            let sources = params.files
            try await job.runOnPool {
                try checkOutside(path, of: sources)
                try DirectoryIO.makeDirectories(path)
            }
        }
        return (plan, files)
    }
}
