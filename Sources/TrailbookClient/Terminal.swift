#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The controlling terminal for the `watch` screen: raw keys, window size, resize and stop signals, and the
/// alternate screen with a hidden cursor — all restored on every way out (return, `q`, Ctrl-C, SIGTERM, SIGHUP).
///
/// Signals are turned into bytes on a self-pipe (`signalDescriptor`), so the caller's `poll` loop handles them
/// like any other input; the handlers themselves only `write`. If the process dies from a signal we do not
/// catch, `atexit` still restores the terminal on a normal `exit`.
final class Terminal {
    /// A signal as delivered on the self-pipe.
    enum Signal: UInt8 {
        case resize = 1
        case interrupt = 2
        case terminate = 3
    }

    /// Whether `fd` is a terminal.
    static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// Whether colour should be used: a terminal, `TERM` not `dumb`, and `NO_COLOR` unset or empty
    /// (https://no-color.org).
    static func supportsColor(environment: [String: String]) -> Bool {
        if let noColor = environment["NO_COLOR"], !noColor.isEmpty { return false }
        guard let term = environment["TERM"], !term.isEmpty, term != "dumb" else { return false }
        return isTerminal(STDOUT_FILENO)
    }

    /// The read end of the signal self-pipe.
    var signalDescriptor: Int32 { Terminal.signalPipe.0 }

    private var saved = termios()
    private var active = false

    /// Enters raw-ish mode (no echo, no line buffering; Ctrl-C still raises SIGINT) and, when `screen`, the
    /// alternate screen with the cursor hidden. Without `screen` nothing is written to the terminal: that is for
    /// plain lines on a terminal that cannot take escape codes (`TERM=dumb`), which still reads keys.
    init(screen: Bool = true) {
        Terminal.installSignalPipe()
        if tcgetattr(STDIN_FILENO, &saved) == 0 {
            Terminal.savedAttributes = saved
            Terminal.haveSavedAttributes = true
            var raw = saved
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            raw.c_iflag &= ~tcflag_t(IXON | ICRNL)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 0
                cc[Int(VTIME)] = 0
            }
            tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        }
        if screen { Terminal.write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J") }
        Terminal.drawsScreen = screen
        active = true
        Terminal.screenActive = true
        atexit { Terminal.restoreFromAnywhere() }
    }

    deinit { restore() }

    /// Leaves the alternate screen, shows the cursor and restores the terminal's modes. Safe to call twice.
    func restore() {
        guard active else { return }
        active = false
        Terminal.restoreFromAnywhere()
    }

    /// The window size in columns and rows (80×24 if unknown).
    func size() -> (columns: Int, rows: Int) {
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 {
            return (Int(size.ws_col), Int(size.ws_row))
        }
        return (80, 24)
    }

    /// Draws `lines` from the top-left corner, clearing what was there; one `write`. `clearFirst` erases the
    /// whole screen before (after a resize: the terminal may have reflowed the old frame, and its lines keep a
    /// "wrapped" mark that overwriting them does not remove).
    func draw(_ lines: [String], clearFirst: Bool = false) {
        var frame = clearFirst ? "\u{1B}[H\u{1B}[2J" : "\u{1B}[H"
        for (index, line) in lines.enumerated() {
            frame += line + "\u{1B}[K"
            if index < lines.count - 1 { frame += "\r\n" }
        }
        frame += "\u{1B}[J"
        Terminal.write(frame)
    }

    /// Reads the bytes waiting on stdin (without blocking); `nil` at the end of input (stdin from `/dev/null`, a
    /// closed pipe), after which it never has keys again.
    func readKeys() -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 64)
        let n = bytes.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
        if n == 0 { return nil }
        return n > 0 ? Array(bytes[..<n]) : []
    }

    /// Drains the signal self-pipe.
    func pendingSignals() -> [Signal] {
        var bytes = [UInt8](repeating: 0, count: 16)
        let n = bytes.withUnsafeMutableBytes { read(Terminal.signalPipe.0, $0.baseAddress, $0.count) }
        return n > 0 ? bytes[..<n].compactMap(Signal.init(rawValue:)) : []
    }

    // MARK: - Process-wide state (signal handlers cannot capture context)

    nonisolated(unsafe) private static var signalPipe: (Int32, Int32) = (-1, -1)
    nonisolated(unsafe) private static var savedAttributes = termios()
    nonisolated(unsafe) private static var haveSavedAttributes = false
    nonisolated(unsafe) private static var screenActive = false
    nonisolated(unsafe) private static var drawsScreen = true

    private static func installSignalPipe() {
        guard signalPipe.0 < 0 else { return }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        signalPipe = (fds[0], fds[1])
        func install(_ number: Int32, _ handler: @convention(c) (Int32) -> Void) {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = handler
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(number, &action, nil)
        }
        // A parent may have left these blocked (test runners, some process supervisors); we need them.
        var wanted = sigset_t()
        sigemptyset(&wanted)
        for number in [SIGWINCH, SIGINT, SIGTERM, SIGHUP] { sigaddset(&wanted, number) }
        pthread_sigmask(SIG_UNBLOCK, &wanted, nil)
        install(SIGWINCH) { _ in Terminal.notify(.resize) }
        install(SIGINT) { _ in Terminal.notify(.interrupt) }
        install(SIGTERM) { _ in Terminal.notify(.terminate) }
        install(SIGHUP) { _ in Terminal.notify(.terminate) }
    }

    /// Async-signal-safe: one `write` to the self-pipe.
    private static func notify(_ signal: Signal) {
        var byte = signal.rawValue
        let saved = errno
        _ = Glibc.write(signalPipe.1, &byte, 1)
        errno = saved
    }

    private static func restoreFromAnywhere() {
        guard screenActive else { return }
        screenActive = false
        if drawsScreen { write("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l") }
        if haveSavedAttributes { tcsetattr(STDIN_FILENO, TCSANOW, &savedAttributes) }
    }

    private static func write(_ text: String) {
        var bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeMutableBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            sent += n
        }
        _ = bytes.count
    }
}
