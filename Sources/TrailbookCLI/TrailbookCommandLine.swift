import TrailbookClient
import TrailbookEngine
import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The whole `trailbook-jobs` command line (`daemon`, `worker`, `submit`, `watch`, `show`, …) in a program of your
/// own, with the built-in job kinds (uploads, photo tagging) and yours beside them.
///
/// A package that defines its own kinds makes its executable's `main.swift` one line:
///
/// ```swift
/// TrailbookCommandLine.main(kinds: { [ThumbnailJob()] })
/// ```
///
/// Then `my-jobs daemon` runs `ThumbnailJob` jobs beside uploads and tagging, `my-jobs worker` (which the daemon's
/// worker pool starts from the same binary) runs `workerTasks` for kinds that declare `.workerProcess`, and
/// `my-jobs submit --from -` or the typed `JobClient` submits them (docs/how-to/write-a-job-kind.md).
public enum TrailbookCommandLine {
    /// Runs the command in this process's arguments and exits with its status.
    ///
    /// - Parameters:
    ///   - kinds: makes the caller's job kinds, on the daemon's loop when `daemon` starts (only then). A kind whose
    ///     name is taken (by a built-in kind or an earlier one of the list) stops the daemon before it takes
    ///     requests, with the usage exit status (2) and a log line naming it.
    ///   - workerTasks: the caller's worker tasks, beside the built-in ones, for `worker`.
    public static func main(
        kinds: @escaping @Sendable @LoopActor () -> [any JobKind] = { [] }, workerTasks: WorkerTaskTable = WorkerTaskTable()
    ) -> Never {
        exit(run(Array(CommandLine.arguments.dropFirst()), rawArguments: CLI.receivedArguments(), kinds: kinds, workerTasks: workerTasks))
    }

    /// Runs the command in `arguments` (without the program name) and returns its exit status; as `main`, for a
    /// program that does more around it. `rawArguments` as in `CLI.run`.
    public static func run(
        _ arguments: [String], rawArguments: [[UInt8]]? = nil, kinds: @escaping @Sendable @LoopActor () -> [any JobKind] = { [] },
        workerTasks: WorkerTaskTable = WorkerTaskTable()
    ) -> Int32 {
        FullCLI.run(arguments, rawArguments: rawArguments, extensions: CommandLineExtensions(kinds: kinds, workerTasks: workerTasks))
    }
}

/// What a program adds to the command line: its job kinds (for `daemon`) and worker tasks (for `worker`).
struct CommandLineExtensions: Sendable {
    /// Makes the program's kinds, on the loop.
    var kinds: @Sendable @LoopActor () -> [any JobKind] = { [] }
    /// The program's worker tasks.
    var workerTasks = WorkerTaskTable()
}
