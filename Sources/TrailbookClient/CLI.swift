import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Process exit codes: the values of `ExitStatus` (TrailbookProtocol), the one list with their meanings
/// (docs/reference/errors.md).
public enum ExitCode {
    /// Success.
    public static let success: Int32 = ExitStatus.success.rawValue
    /// The job (with `--wait`) ended `failed` or `cancelled`, or the daemon could not do what was asked.
    public static let jobFailed: Int32 = ExitStatus.jobFailed.rawValue
    /// Usage error: bad arguments or a request the daemon rejected as invalid.
    public static let usage: Int32 = ExitStatus.usage.rawValue
    /// The daemon, or its shared job store, is not reachable.
    public static let daemonUnreachable: Int32 = ExitStatus.daemonUnreachable.rawValue
    /// No such job or photo.
    public static let notFound: Int32 = ExitStatus.notFound.rawValue
}

/// Where the CLI finds the daemon, from the environment and `--socket`.
public struct Endpoint {
    /// The state directory: `$TRAILBOOK_JOBS_HOME`, else `$XDG_STATE_HOME/trailbook-jobs`, else
    /// `~/.local/state/trailbook-jobs`.
    public static func home(environment: [String: String]) -> String {
        homeSource(environment).path
    }

    /// `home(environment:)`, refusing a directory made from a variable whose value is not valid UTF-8: the
    /// environment holds it repaired (U+FFFD), which names another directory, one the daemon would create and
    /// use while the user's stays empty.
    ///
    /// - Parameter notUTF8: the variables that are not valid UTF-8, with their bytes
    ///   (`ProcessEnvironment.valuesNotUTF8()`).
    /// - Throws: `UsageError` naming the variable, its value (bad bytes as `\xHH`) and what to do instead.
    public static func home(environment: [String: String], notUTF8: [String: [UInt8]]) throws(UsageError) -> String {
        let source = homeSource(environment)
        guard let variable = source.variable, let raw = notUTF8[variable] else { return source.path }
        let shown = TerminalText.escape(BytePath(bytes: raw).description)
        let fix = variable == "TRAILBOOK_JOBS_HOME"
            ? "give a UTF-8 path (a symbolic link with a UTF-8 name to that directory works)"
            : "set TRAILBOOK_JOBS_HOME to a UTF-8 path"
        throw UsageError("\(variable) is '\(shown)', which is not valid UTF-8, and the state directory is made from it; \(fix)")
    }

    /// The state directory and the variable it comes from (`nil` for the last resort, `/tmp`).
    private static func homeSource(_ environment: [String: String]) -> (path: String, variable: String?) {
        if let home = environment["TRAILBOOK_JOBS_HOME"], !home.isEmpty { return (home, "TRAILBOOK_JOBS_HOME") }
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty { return (state + "/trailbook-jobs", "XDG_STATE_HOME") }
        if let home = environment["HOME"] { return (home + "/.local/state/trailbook-jobs", "HOME") }
        return ("/tmp/.local/state/trailbook-jobs", nil)
    }
}

/// The `trailbook-jobs` command line: parses arguments, talks to the daemon, prints results.
///
/// Two binaries run it. `trailbook-jobs` links only this module (no libuv, SQLite, libcurl, libheif or libpq), so
/// the client commands start in a few milliseconds; a command whose work needs those libraries (`daemon`, the photo
/// library's reads) is handed to `trailbook-jobsd` beside it, which runs every command (`LibraryCommands`).
public enum CLI {
    /// Runs the command in `arguments` (without the program name) and returns the exit code; a command that needs
    /// the daemon's libraries replaces this process with `trailbook-jobsd` and the same arguments (`HandOff`).
    ///
    /// `rawArguments`, when given, are the same arguments as the bytes the process received: Swift decodes
    /// `argv` as UTF-8 and repairs what is not, so a file name such as Latin-1 `caf\xe9.jpg` is read from here.
    public static func run(_ arguments: [String], rawArguments: [[UInt8]]? = nil) -> Int32 {
        run(arguments, rawArguments: rawArguments, library: nil)
    }

    /// Runs the command in `arguments` with `library`'s handlers for the commands this module cannot run; without
    /// them (`nil`), such a command is handed to `trailbook-jobsd`.
    package static func run(_ arguments: [String], rawArguments: [[UInt8]]?, library: LibraryCommands?) -> Int32 {
        let status = runCommand(arguments, rawArguments: rawArguments, library: library)
        // What was printed must have reached its destination (a full disk, a closed descriptor): else the command
        // did not do what it says, whatever it returned.
        if fflush(stdout) != 0 || ferror(stdout) != 0 {
            printError("cannot write to standard output: \(String(cString: strerror(errno)))")
            return status == ExitCode.success ? ExitCode.jobFailed : status
        }
        return status
    }

    private static func runCommand(_ arguments: [String], rawArguments: [[UInt8]]?, library: LibraryCommands?) -> Int32 {
        setvbuf(stdout, nil, _IOLBF, 0)
        let environment = Self.environment()
        var resolved: CommandSpec?
        if arguments == ["--version"] {
            print("trailbook-jobs \(Self.version)")
            return ExitCode.success
        }
        if let help = groupHelp(arguments) {
            print(help)
            return ExitCode.success
        }
        do {
            let (spec, rest) = try ArgumentParser.command(for: arguments, in: Commands.all)
            resolved = spec
            let parsed = try ArgumentParser.parse(rest, for: spec)
            if parsed.wantsHelp || spec.path.isEmpty {
                print(spec.path.isEmpty ? Commands.overview : spec.helpText)
                return ExitCode.success
            }
            var context = CommandContext(arguments: parsed, environment: environment, library: library)
            context.environmentNotUTF8 = ProcessEnvironment.valuesNotUTF8()
            if let rawArguments, rawArguments.count == arguments.count {
                let offset = arguments.count - rest.count
                context.rawPositionals = parsed.positionalIndices.map { rawArguments[offset + $0] }
                context.rawValues = parsed.valueSources.mapValues { sources in
                    sources.map { source in source.map { Array(rawArguments[offset + $0.index].dropFirst($0.offset)) } }
                }
                try refuseTextThatIsNotUTF8(context.rawValues, of: spec)
            }
            guard let handler = Commands.handler(for: spec.path) ?? library?.handlers[spec.path] else {
                if library == nil { throw HandOff() }
                throw UsageError("unknown command")
            }
            return try handler(context)
        } catch is HandOff {
            return HandOff.exec(arguments, rawArguments: rawArguments, command: resolved?.path.joined(separator: " ") ?? "")
        } catch let error as UsageError {
            printError(error.message)
            if let spec = resolved, !spec.path.isEmpty {
                printError("Run 'trailbook-jobs \(spec.path.joined(separator: " ")) --help' for its options.")
            } else if !error.message.contains("\n") {
                printError("Run 'trailbook-jobs --help' for the commands.")
            }
            return ExitCode.usage
        } catch let error as ClientError {
            printError(error.message)
            return ExitCode.daemonUnreachable
        } catch let error as DaemonReply {
            printError("\(TerminalText.escape(error.error.message)) [\(error.error.code)]")
            return error.exitCode
        } catch {
            printError("\(error)")
            return ExitCode.jobFailed
        }
    }

    /// Refuses an option value that is not valid UTF-8 unless the option takes a path (`OptionSpec.takesPath`):
    /// Swift's `CommandLine.arguments` hold it repaired (U+FFFD), so a `--tag` would match other photos and a
    /// `--to` name another directory.
    ///
    /// - Throws: `UsageError` naming the option and showing the value with its bad bytes as `\xHH`, unless it may
    ///   hold a secret (`OptionSpec.holdsSecret`).
    static func refuseTextThatIsNotUTF8(_ rawValues: [String: [[UInt8]?]], of spec: CommandSpec) throws(UsageError) {
        for option in spec.options where !option.takesPath {
            for case let raw? in rawValues[option.name] ?? [] where String(validating: raw, as: UTF8.self) == nil {
                let shown = option.holdsSecret
                    ? "its value (not shown: it may hold a secret)" : "'\(TerminalText.escape(BytePath(bytes: raw).description))'"
                throw UsageError("option --\(option.name): \(shown) is not valid UTF-8 text; give it in UTF-8")
            }
        }
    }

    /// This process's arguments (without the program name) as the bytes it received: file names are bytes, and
    /// Swift's `CommandLine.arguments` are decoded (and repaired) UTF-8.
    public static func receivedArguments() -> [[UInt8]] {
        (1..<Int(CommandLine.argc)).map { index in
            CommandLine.unsafeArgv[index].map { Array(UnsafeBufferPointer(start: $0, count: strlen($0))).map { UInt8(bitPattern: $0) } } ?? []
        }
    }

    /// The version `--version` prints and the daemon reports in `ping`.
    public static let version = "0.1.0"

    /// `trailbook-jobs submit --help` and the like: the subcommands of a command group, or `nil`.
    static func groupHelp(_ arguments: [String]) -> String? {
        guard arguments.count == 2, ["--help", "-h"].contains(arguments[1]) else { return nil }
        let group = arguments[0]
        let members = Commands.all.filter { $0.path.count > 1 && $0.path[0] == group && !$0.summary.contains("internal") }
        guard !members.isEmpty else { return nil }
        // A group that is also a command itself (`submit --from`): its own help first.
        let own = Commands.all.first { $0.path == [group] }.map { $0.helpText + "\n" } ?? ""
        return own + "Usage: trailbook-jobs \(group) SUBCOMMAND [options]\n\n" + ArgumentParser.commandList(members)
            + "\nRun 'trailbook-jobs \(group) SUBCOMMAND --help' for a subcommand's options."
    }

    static func environment() -> [String: String] { ProcessEnvironment.current() }

    /// Writes `message` and a newline to stderr, URLs in it without their secrets (`URLRedaction.text`: a
    /// password in a destination or `--store` URL never reaches the terminal).
    public static func printError(_ message: String) {
        fputs("trailbook-jobs: \(URLRedaction.text(message))\n", stderr)
    }
}

/// An error reply from the daemon, carried to the exit code.
package struct DaemonReply: Error {
    package var error: JobError

    /// The reply's error, as the daemon sent it (`code` decides the exit code).
    package init(error: JobError) { self.error = error }

    /// The exit status the error code table gives the reply's code (`ErrorCodes.exitStatus(of:)`).
    var exitCode: Int32 { ErrorCodes.exitStatus(of: error.code).rawValue }
}

/// What a command handler gets: its parsed arguments and the environment.
package struct CommandContext {
    package var arguments: ParsedArguments
    package var environment: [String: String]
    /// The handlers of the commands that need the daemon's libraries: `nil` in the thin `trailbook-jobs`.
    package var library: LibraryCommands?

    /// A context of `arguments` parsed for the command, the process's `environment`, and `library` (see above).
    package init(arguments: ParsedArguments, environment: [String: String], library: LibraryCommands? = nil) {
        self.arguments = arguments
        self.environment = environment
        self.library = library
    }

    /// `submit upload`'s photos of the library (`--ids`, `--ids-file`, `--tag`) as its `photos` param, `nil` when
    /// none is given.
    /// - Throws: `HandOff` in the thin client (the library's store resolves them); what
    ///   `LibraryCommands.uploadSelection` throws.
    func uploadSelection() throws -> JSONValue? {
        let given = arguments.value("ids") != nil || arguments.value("ids-file") != nil || !arguments.values("tag").isEmpty
        guard given else { return nil }
        guard let library else { throw HandOff() }
        return try library.uploadSelection(self)
    }
    /// The positionals' bytes as the process received them, when known.
    var rawPositionals: [[UInt8]]?

    /// The positionals as paths, with their exact bytes (a name need not be UTF-8).
    /// - Throws: `UsageError` for an empty one, which made absolute would be the working directory (`photos
    ///   import ""` imported it).
    package var positionalPaths: [BytePath] {
        get throws(UsageError) {
            let paths = rawPositionals.map { $0.map { BytePath(bytes: $0) } } ?? arguments.positionals.map { BytePath($0) }
            guard !paths.contains(where: \.bytes.isEmpty) else {
                throw UsageError("an empty argument is not a path; give a file name ('.' for this directory)")
            }
            return paths
        }
    }
    /// Each option's values' bytes as the process received them (`nil` where unknown), by long name.
    var rawValues: [String: [[UInt8]?]] = [:]

    /// The (last) value of `--name` as a path, with its exact bytes when known; `nil` when not given.
    /// - Throws: `UsageError` when it is empty (no file has that name).
    package func valuePath(_ name: String) throws(UsageError) -> BytePath? {
        guard let text = arguments.value(name) else { return nil }
        guard !text.isEmpty else { throw UsageError("option --\(name) is empty; give it a path") }
        if let raw = rawValues[name]?.last, let raw { return BytePath(bytes: raw) }
        return BytePath(text)
    }

    /// The variables of `environment` whose values are not valid UTF-8, with their bytes
    /// (`ProcessEnvironment.valuesNotUTF8()`); `home` refuses to be made from one.
    package var environmentNotUTF8: [String: [UInt8]] = [:]

    /// The state directory (`Endpoint.home`).
    /// - Throws: `UsageError` when the variable it comes from is not valid UTF-8.
    package var home: String {
        get throws(UsageError) { try Endpoint.home(environment: environment, notUTF8: environmentNotUTF8) }
    }
    /// `--socket`, else the daemon's socket in `home`.
    /// - Throws: `UsageError` as `home` does, when `--socket` is not given; when it is given empty (a variable
    ///   that expanded to nothing, say: the default socket may be another daemon's).
    package var socketPath: String {
        get throws(UsageError) {
            guard let given = arguments.value("socket") else { return try home + "/daemon.sock" }
            guard !given.isEmpty else {
                throw UsageError("--socket is empty; give the socket's path, or leave --socket out for $TRAILBOOK_JOBS_HOME/daemon.sock")
            }
            return given
        }
    }
    package var json: Bool { arguments.flag("json") }

    /// A connection to the daemon at `socketPath`.
    /// - Throws: `UsageError` as `socketPath` does; `ClientError` when the daemon is not reachable there.
    func connect() throws -> DaemonClient { try DaemonClient(socketPath: socketPath) }

    /// Sends `request` and returns the reply, throwing `DaemonReply` for an error reply.
    package func call(_ request: JSONValue) throws -> JSONValue {
        let reply = try connect().request(request)
        try Self.check(reply)
        return reply
    }

    static func check(_ reply: JSONValue) throws {
        if reply["ok"]?.boolValue != true {
            let error = reply["error"].flatMap { try? JSONCoding.convert($0, to: JobError.self) }
                ?? JobError(code: "bad_reply", message: "unexpected reply from the daemon")
            throw DaemonReply(error: error)
        }
    }
}
