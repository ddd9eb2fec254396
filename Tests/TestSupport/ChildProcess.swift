import Foundation

/// Child processes started with `posix_spawn` rather than Foundation's `Process`.
public enum ChildProcess {
    /// Why a child could not be started or waited for.
    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts `path` with stdin from /dev/null and stdout and stderr to `output`, with every signal unblocked
    /// and at its default (Foundation's `Process` passes on the test runner's blocked signals, so a child would
    /// ignore SIGTERM, SIGINT and SIGWINCH).
    public static func spawn(_ path: String, _ arguments: [String], environment: [String: String], output: String) throws -> pid_t {
        try spawn(path, rawArguments: arguments.map { Array($0.utf8) }, environment: environment, output: output)
    }

    /// `spawn`, with the arguments as bytes: a file name need not be UTF-8 (`caf\xe9.jpg`).
    public static func spawn(_ path: String, rawArguments: [[UInt8]], environment: [String: String], output: String) throws -> pid_t {
        try spawn(path, rawArguments: rawArguments, rawEnvironment: environment.mapValues { Array($0.utf8) }, output: output)
    }

    /// `spawn`, with the arguments and the environment's values as bytes: a directory's name need not be UTF-8.
    public static func spawn(
        _ path: String, rawArguments: [[UInt8]], rawEnvironment: [String: [UInt8]], output: String
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        sigdelset(&all, SIGKILL)
        sigdelset(&all, SIGSTOP)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([Array(path.utf8)] + rawArguments).map { bytes in
            (bytes + [0]).withUnsafeBytes { strdup($0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
        } + [nil]
        let envp = rawEnvironment.map { entry in
            (Array("\(entry.key)=".utf8) + entry.value + [0]).withUnsafeBytes { strdup($0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
        } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw SpawnError(description: "cannot start \(path): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// Waits up to `seconds` for `pid` to end, then kills it (SIGKILL) and waits: its exit status, or `nil` if a
    /// signal ended it. For a command that must stop at once, so that a test fails instead of hanging when it
    /// does not (a daemon that starts).
    public static func exitStatus(of pid: pid_t, within seconds: Double) -> Int32? {
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if waitpid(pid, &status, WNOHANG) == pid { return status & 0x7f == 0 ? (status >> 8) & 0xff : nil }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        return exitStatus(of: pid)
    }

    /// Waits for `pid` to end; its exit status, or `nil` if a signal ended it.
    public static func exitStatus(of pid: pid_t) -> Int32? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS, which Swift does not import (macros).
        return status & 0x7f == 0 ? (status >> 8) & 0xff : nil
    }
}
