@_exported import TrailbookClient
import TrailbookWeb

#if canImport(Glibc)
    import Glibc
#endif

/// `trailbook-jobsd`'s command line: every command of `trailbook-jobs` (TrailbookClient's `CLI`), and those whose
/// work needs the engine or the photo library, which the thin client hands over to this binary.
public enum FullCLI {
    /// Runs the command in `arguments` (without the program name) and returns the exit code; `rawArguments` as
    /// in `CLI.run`.
    public static func run(_ arguments: [String], rawArguments: [[UInt8]]? = nil) -> Int32 {
        run(arguments, rawArguments: rawArguments, extensions: CommandLineExtensions())
    }

    /// `run` with a program's own kinds and worker tasks (`TrailbookCommandLine`).
    static func run(_ arguments: [String], rawArguments: [[UInt8]]?, extensions: CommandLineExtensions) -> Int32 {
        // Handed over by trailbook-jobs: the marker has done its work, and jobs and workers must not inherit it.
        unsetenv(HandOff.marker)
        return CLI.run(arguments, rawArguments: rawArguments, library: LibraryCommands.all(extensions))
    }
}

extension LibraryCommands {
    /// The handlers of `daemon`, `photos list|show`, `submit tag|autotag`, `worker` and `web`, and the library's
    /// selection of `submit upload`; `daemon` and `worker` with the program's own kinds and tasks too.
    static func all(_ extensions: CommandLineExtensions) -> LibraryCommands {
        LibraryCommands(
            handlers: [
                ["daemon"]: { try DaemonCommand.daemon($0, kinds: extensions.kinds) },
                ["photos", "list"]: PhotoCommands.list,
                ["photos", "show"]: PhotoCommands.show,
                ["submit", "tag"]: PhotoCommands.submitTag,
                ["submit", "autotag"]: PhotoCommands.submitAutotag,
                ["worker"]: { try PhotoCommands.worker($0, extraTasks: extensions.workerTasks) },
                ["web"]: WebCommand.run,
            ],
            uploadSelection: PhotoCommands.uploadSelection)
    }
}
