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
struct HandOff: Error {
    /// The name of the binary that runs every command.
    static let fullBinaryName = "trailbook-jobsd"

    /// `trailbook-jobsd`'s path: beside this binary (the directory of `/proc/self/exe`).
    static func fullBinaryPath() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return fullBinaryName }
        let own = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = own.lastIndex(of: "/") else { return fullBinaryName }
        return own[...slash] + fullBinaryName
    }

    /// Replaces this process with `trailbook-jobsd` running `arguments` (their received bytes when known).
    /// Returns only when that fails: then it says why and returns exit status 1.
    static func exec(_ arguments: [String], rawArguments: [[UInt8]]?) -> Int32 {
        let path = fullBinaryPath()
        let words: [[UInt8]] = [Array(path.utf8)] + (rawArguments ?? arguments.map { Array($0.utf8) })
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { word in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: word.count + 1)
            for (index, byte) in word.enumerated() { copy[index] = CChar(bitPattern: byte) }
            copy[word.count] = 0
            return copy
        } + [nil]
        fflush(stdout)
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        for word in argv { word?.deallocate() }
        CLI.printError(
            "'\(arguments.first ?? "")' runs in \(fullBinaryName), which should be beside this binary at \(path): "
                + "\(reason); install both binaries together (README, \"Using it\")")
        return ExitCode.jobFailed
    }
}
