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
        // Handed over by trailbook-jobs: the marker has done its work, and jobs and workers must not inherit it.
        unsetenv(HandOff.marker)
        return CLI.run(arguments, rawArguments: rawArguments, library: LibraryCommands.all)
    }
}

extension LibraryCommands {
    /// The handlers of `daemon`, `photos list|show`, `submit tag|autotag`, `worker` and `web`, and the library's
    /// selection of `submit upload`.
    static var all: LibraryCommands {
        LibraryCommands(
            handlers: [
                ["daemon"]: DaemonCommand.daemon,
                ["photos", "list"]: PhotoCommands.list,
                ["photos", "show"]: PhotoCommands.show,
                ["submit", "tag"]: PhotoCommands.submitTag,
                ["submit", "autotag"]: PhotoCommands.submitAutotag,
                ["worker"]: PhotoCommands.worker,
                ["web"]: WebCommand.run,
            ],
            uploadSelection: PhotoCommands.uploadSelection)
    }
}
