import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The handlers of the commands whose work needs the daemon's libraries (the engine, SQLite, the photo library):
/// `trailbook-jobsd` runs the command line with them (TrailbookCLI's `LibraryCommands.all`); the thin
/// `trailbook-jobs` has none and hands such commands over (`HandOff`).
package struct LibraryCommands {
    /// The handlers by command path (`["daemon"]`, `["photos", "list"]`, …).
    package var handlers: [[String]: (CommandContext) throws -> Int32]
    /// Resolves `submit upload`'s `--ids`, `--ids-file` or `--tag` to its `photos` param, `nil` when none is given.
    package var uploadSelection: (CommandContext) throws -> JSONValue?

    /// The table of `handlers` and the `uploadSelection` resolver.
    package init(
        handlers: [[String]: (CommandContext) throws -> Int32], uploadSelection: @escaping (CommandContext) throws -> JSONValue?
    ) {
        self.handlers = handlers
        self.uploadSelection = uploadSelection
    }
}

/// A command the thin `trailbook-jobs` cannot run itself: `CLI.run` catches it and replaces the process with
/// `trailbook-jobsd` and the same arguments.
///
/// `exec`, not a child: the pid stays the same, so a supervisor or script that started `trailbook-jobs daemon`
/// holds the daemon's pid, signals reach it, and socket activation's `LISTEN_PID` still matches.
package struct HandOff: Error {
    /// The name of the binary that runs every command.
    static let fullBinaryName = "trailbook-jobsd"

    /// `trailbook-jobsd`'s path: beside this binary (the directory of `/proc/self/exe`); `nil` when this binary's
    /// own path cannot be read (never a name looked up in the working directory).
    static func fullBinaryPath() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let own = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = own.lastIndex(of: "/") else { return nil }
        return own[...slash] + fullBinaryName
    }

    /// Set in the environment of the process handed over, so that a `trailbook-jobsd` that is in fact this thin
    /// binary (a copy or a link under the wrong name) says so instead of handing the command to itself forever.
    /// `trailbook-jobsd` removes it at start (`FullCLI`), so the daemon's jobs and workers never see it.
    package static let marker = "TRAILBOOK_JOBS_HANDED_OFF"

    /// Replaces this process with `trailbook-jobsd` running `arguments` (their received bytes when known);
    /// `command` is the command's path as typed (`photos list`), for the message. Returns only when that fails:
    /// then it says why and returns exit status 1.
    static func exec(_ arguments: [String], rawArguments: [[UInt8]]?, command: String) -> Int32 {
        guard let path = fullBinaryPath() else {
            CLI.printError("'\(command)' runs in \(fullBinaryName), but this binary's own path (/proc/self/exe) cannot be read")
            return ExitCode.jobFailed
        }
        if let from = getenv(marker).map({ String(cString: $0) }) {
            CLI.printError(
                "'\(command)' was handed to \(from), which is not the full binary (it handed the command back); install "
                    + "the \(fullBinaryName) of this build beside trailbook-jobs (README, \"Install\")")
            return ExitCode.jobFailed
        }
        let words: [[UInt8]] = [Array(path.utf8)] + (rawArguments ?? arguments.map { Array($0.utf8) })
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { word in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: word.count + 1)
            for (index, byte) in word.enumerated() { copy[index] = CChar(bitPattern: byte) }
            copy[word.count] = 0
            return copy
        } + [nil]
        fflush(stdout)
        setenv(marker, path, 1)
        execv(path, argv)
        let failure = errno
        unsetenv(marker)
        for word in argv { word?.deallocate() }
        let advice = failure == ENOENT ? "install both binaries together (README, \"Install\")" : "check that it is the \(fullBinaryName) of this build and executable"
        CLI.printError(
            "'\(command)' runs in \(fullBinaryName), which should be beside this binary at \(path): "
                + "\(String(cString: strerror(failure))); \(advice)")
        return ExitCode.jobFailed
    }
}
