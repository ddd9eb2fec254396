import TrailbookClient
import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// `trailbook-jobs web [--port N] [--prefix PATH] [--read-only] [--debug]`: serves the live page of the jobs on
/// 127.0.0.1 until Ctrl-C or SIGTERM (exit 130 or 143).
///
/// A companion process, not part of the daemon: it talks to the daemon's control socket like the CLI does, so a
/// fault in a browser's request can never wedge the daemon's loop. It prints the page's URL once, on stdout, with
/// the token that opening it trades for the session cookie (`WebAccess`).
public enum WebCommand {
    /// Runs the command; the exit code.
    /// - Throws: `UsageError` for a bad `--port` or `--prefix`, or when the port cannot be bound.
    package static func run(_ context: CommandContext) throws -> Int32 {
        let port = try context.arguments.integer("port", range: 0...65_535) ?? 0
        let prefix = try prefix(context.arguments.value("prefix") ?? "")
        let socketPath = try context.socketPath
        let readOnly = context.arguments.flag("read-only")
        let debug = context.arguments.flag("debug")

        // The signals are taken by `sigwait` below: blocked here, before the server's threads start and inherit the
        // mask, so none of them is interrupted. SIGPIPE is ignored: a closed tab is seen as a failed write.
        signal(SIGPIPE, SIG_IGN)
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let server: WebServer
        do {
            server = try WebServer(port: port)
        } catch {
            throw UsageError(error.message)
        }
        let access = WebAccess(port: server.port)
        let app = WebApp(
            prefix: prefix, access: access, api: JobAPI(socketPath: socketPath, readOnly: readOnly),
            socketPath: socketPath)
        server.handler = { app.respond($0) }
        if debug {
            server.onAnswered = { method, path, status in
                fputs("trailbook-jobs web: \(method) \(TerminalText.escape(path)) \(status)\n", stderr)
            }
        }
        do {
            try server.start()
        } catch {
            throw UsageError(error.message)
        }
        if (try? DaemonClient(socketPath: socketPath)) == nil {
            CLI.printError(
                "the daemon is not running at \(socketPath) yet: the page says so and catches up when it starts "
                    + "(trailbook-jobs daemon)")
        }
        print("trailbook-jobs web: open http://127.0.0.1:\(server.port)\(prefix)/?token=\(access.token)")
        print("(the link works in one browser at a time only through its cookie; Ctrl-C stops the server)")
        fflush(stdout)

        var received: Int32 = 0
        sigwait(&signals, &received)
        // The event streams' threads hold connections to the daemon; they end with the process.
        return received == SIGINT ? 130 : 143
    }

    /// `--prefix` checked: empty, or `/` and path segments of URL-safe characters, without a trailing slash.
    /// - Throws: `UsageError` saying what a prefix may hold.
    static func prefix(_ given: String) throws(UsageError) -> String {
        var text = given
        while text.hasSuffix("/") { text.removeLast() }
        if text.isEmpty { return "" }
        let segments = text.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let safe = text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x2d || byte == 0x2e || byte == 0x5f || byte == 0x7e || byte == 0x2f
        }
        guard text.hasPrefix("/"), safe, segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
            throw UsageError(
                "--prefix must be a path like /jobs or /tools/jobs (letters, digits, '-', '.', '_', '~'), not '\(TerminalText.escape(given))'"
            )
        }
        return text
    }
}
