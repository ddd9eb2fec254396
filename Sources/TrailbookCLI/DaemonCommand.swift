import SleepJob
import TaggingJobs
import TrailbookClient
import TrailbookEngine
import TrailbookLoop
import TrailbookPostgres
import UploadJob

#if canImport(Glibc)
    import Glibc
#endif

/// The `daemon` command: its options into a `DaemonConfiguration`, then `Daemon.run` with every job kind.
enum DaemonCommand {
    /// `daemon`: runs the daemon in the foreground with every built-in job kind and those `kinds` makes, until
    /// SIGTERM, SIGINT or SIGHUP.
    static func daemon(_ context: CommandContext, kinds: @escaping @Sendable @LoopActor () -> [any JobKind] = { [] }) throws -> Int32 {
        LargeBufferAllocation.apply(environment: context.environment)
        var configuration = DaemonConfiguration(home: try context.home, socketPath: try context.socketPath)
        configuration.version = CLI.version
        let arguments = context.arguments
        if let value = try arguments.integer("concurrency", range: 1...256) { configuration.scheduler.concurrency = value }
        var shared = SharedStoreOptions(leaseSeconds: try arguments.duration("lease").map { try Commands.positive($0, "lease") } ?? 30)
        if let value = try arguments.duration("store-timeout") { shared.requestTimeoutSeconds = try Commands.positive(value, "store-timeout") }
        if let host = arguments.value("host") {
            guard !host.isEmpty, host.utf8.count <= 255, !host.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw UsageError("--host takes a host name: 1 to 255 characters without spaces")
            }
            shared.host = host
        }
        if let text = arguments.value("queues") {
            let queues = text.split(separator: ",", omittingEmptySubsequences: false).map {
                String($0).trimmingCharacters(in: .whitespaces)
            }
            if let problem = queues.lazy.compactMap(ControlProtocol.queueNameProblem).first {
                throw UsageError("--queues takes queue names separated by commas: \(problem)")
            }
            shared.queues = queues.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
        }
        if arguments.value("store") == nil, context.environmentNotUTF8["TRAILBOOK_JOBS_STORE"] != nil {
            // Repaired, a password would be another one; shown, it would be on the terminal.
            throw UsageError("TRAILBOOK_JOBS_STORE is not valid UTF-8 text (not shown: it may hold a password); give it in UTF-8")
        }
        configuration.store = try storeLocation(
            arguments.value("store") ?? context.environment["TRAILBOOK_JOBS_STORE"], shared: shared)
        if configuration.store == .sqlite, let given = ["host", "queues", "lease", "store-timeout"].first(where: { arguments.value($0) != nil }) {
            throw UsageError("--\(given) is for daemons sharing a PostgreSQL store (--store postgres://…); the SQLite store has one daemon, one host and one queue")
        }
        if let value = try arguments.duration("timeout") { configuration.scheduler.timeoutSeconds = try Commands.positive(value, "timeout") }
        if let value = try arguments.duration("stall-timeout") { configuration.scheduler.stallTimeoutSeconds = try Commands.positive(value, "stall-timeout") }
        if let value = try arguments.integer("max-attempts", range: 1...1_000) { configuration.scheduler.maxAttempts = value }
        if let value = try arguments.duration("give-up-after") { configuration.scheduler.giveUpAfterSeconds = try Commands.positive(value, "give-up-after") }
        if let value = try arguments.duration("retry-base") { configuration.scheduler.backoff.baseSeconds = try Commands.positive(value, "retry-base") }
        if let value = try arguments.duration("cleanup-budget") {
            configuration.scheduler.cleanUpBudgetSeconds = try Commands.positive(value, "cleanup-budget")
        }
        configuration.retention.keepSucceededSeconds = try retention(arguments, "keep-succeeded") ?? configuration.retention.keepSucceededSeconds
        configuration.retention.keepFailedSeconds = try retention(arguments, "keep-failed") ?? configuration.retention.keepFailedSeconds
        configuration.retention.keepCancelledSeconds = try retention(arguments, "keep-cancelled") ?? configuration.retention.keepCancelledSeconds
        if let value = try arguments.integer("workers", range: 1...64) { configuration.workers.workers = value }
        if let value = try arguments.duration("worker-timeout") { configuration.workers.requestTimeoutSeconds = try Commands.positive(value, "worker-timeout") }
        if let value = try arguments.integer("max-megapixels", range: 1...100_000) {
            configuration.workers.arguments += ["--max-pixels", String(UInt64(value) * 1_000_000)]
        }
        let xmpDefaults = XMPSidecarDefaults(
            enabled: arguments.flag("xmp"), naming: try PhotoCommands.xmpNaming(arguments) ?? .darktable)
        let testKinds = context.environment["TRAILBOOK_JOBS_TEST_KINDS"] == "1"
        let home = configuration.home
        // Tests only: exit with this status right after a submit's commit, before its reply (a lost reply).
        if testKinds, let status = context.environment["TRAILBOOK_JOBS_TEST_EXIT_AFTER_SUBMIT"].flatMap({ Int32($0) }) {
            configuration.scheduler.exitAfterSubmitCommitForTests = status
        }
        // Tests only: seconds a shared store's daemon goes on following the others' feed after its last watcher
        // of it left.
        if testKinds, let seconds = context.environment["TRAILBOOK_JOBS_TEST_FEED_LINGER"].flatMap({ Double($0) }) {
            configuration.feedFollowLingerSeconds = seconds
        }
        // Tests only: a folder upload's file list read this many entries at a time.
        let fileListPage = testKinds ? context.environment["TRAILBOOK_JOBS_TEST_FILE_LIST_PAGE"].flatMap({ Int($0) }) : nil
        // Tests only: seconds a folder upload's first run waits after each page of its file list is written.
        let listingPause = testKinds ? context.environment["TRAILBOOK_JOBS_TEST_LISTING_PAUSE"].flatMap({ Double($0) }) : nil
        return Daemon.run(configuration) { scheduler in
            if let fileListPage { UploadJob.setFileListPageForTests(fileListPage) }
            if let listingPause { UploadJob.setListingPauseForTests(listingPause) }
            let library = PhotoLibraryService(path: home + "/photos.sqlite3", xmpDefaults: xmpDefaults)
            library.openIfPresent()
            // The upload kind reaches the library only through its `UploadPhotoLibrary` seam.
            scheduler.register(UploadJob(photos: library))
            scheduler.register(ImportJob(library: library))
            scheduler.register(TagJob(library: library))
            scheduler.register(AutotagJob(library: library))
            if testKinds { scheduler.register(SleepJob()) }
            var names: Set<String> = [UploadJob.name, ImportJob.name, TagJob.name, AutotagJob.name, SleepJob.name]
            for kind in kinds() {
                guard names.insert(type(of: kind).name).inserted else {
                    DaemonLog.write("job kind \(type(of: kind).name) is registered twice (a built-in kind or an earlier one has that name): give it another name")
                    exit(ExitCode.usage)
                }
                scheduler.register(kind)
            }
        }
    }

    /// The job store `text` names (`--store`, `TRAILBOOK_JOBS_STORE`): nothing or `sqlite` for the embedded store,
    /// else a libpq connection string (URI or `key=value` pairs; missing parts from the `PG*` variables).
    /// - Throws: `UsageError` (its message without the password) if it is neither.
    static func storeLocation(_ text: String?, shared: SharedStoreOptions) throws(UsageError) -> JobStoreLocation {
        guard let text, !text.isEmpty, text != "sqlite" else { return .sqlite }
        let looksLikePostgres = text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") || text.contains("=")
        do {
            guard looksLikePostgres else { throw UsageError("") }
            return .postgres(try PostgresConnectionString(text), shared)
        } catch {
            let reason = (error as? PostgresError).map { ": \($0.message)" } ?? ""
            throw UsageError(
                "--store takes 'sqlite' or a PostgreSQL connection string (postgres://user@host/db or 'host=… dbname=…')\(reason)")
        }
    }

    /// A `--keep-*` option: `.some(nil)` for `forever`, `.some(seconds)` for a duration, `nil` when not given.
    static func retention(_ arguments: ParsedArguments, _ name: String) throws(UsageError) -> Double?? {
        guard let text = arguments.value(name) else { return nil }
        if text.lowercased() == "forever" { return .some(nil) }
        return .some(try arguments.duration(name))
    }
}
