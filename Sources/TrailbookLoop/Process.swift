import CUV

#if canImport(Glibc)
    import Glibc
#endif

/// How a child process ended: its exit status, or the signal that killed it.
public struct ProcessExit: Sendable, Equatable, CustomStringConvertible {
    /// The exit status (0…255) when it exited by itself; 0 when a signal ended it.
    public var status: Int64
    /// The signal that ended it (for example `SIGKILL` = 9), or 0 when it exited by itself.
    public var signal: Int32

    /// Makes an exit record.
    public init(status: Int64, signal: Int32) {
        self.status = status
        self.signal = signal
    }

    /// "killed by signal N" or "exited with status N".
    public var description: String { signal != 0 ? "killed by signal \(signal)" : "exited with status \(status)" }
}

/// A child process started with `uv_spawn` (https://docs.libuv.org/en/v1.x/process.html), with pipes to its
/// stdin and from its stdout; its stderr is the parent's.
///
/// Same ownership rules as every `LoopHandle`: the process handle and both pipes are libuv handles whose memory
/// lives until their close callbacks. `close()` closes all three; call it once the exit callback ran (a process
/// handle closed before its child exits leaves the child unreaped until the parent exits). Use on the loop
/// thread only.
public final class ChildProcess: LoopHandle {
    /// Writes go to the child's stdin.
    public let stdin: PipeConnection
    /// Reads come from the child's stdout.
    public let stdout: PipeConnection
    /// The child's process id.
    public private(set) var pid: Int32 = 0
    /// How it ended, once the exit callback ran; `nil` while it runs.
    public private(set) var exit: ProcessExit?
    private var onExit: ((ProcessExit) -> Void)?

    /// Spawns `executable` with `arguments` (not including argv[0], which is set to `executable`).
    ///
    /// - Parameters:
    ///   - loop: the loop whose thread owns the process and its pipes.
    ///   - executable: path of the program (`/proc/self/exe` for this same binary).
    ///   - arguments: its arguments after argv[0].
    ///   - environment: `KEY=value` entries, or `nil` to inherit the parent's environment.
    ///   - onExit: runs on the loop thread once when the child exits or is killed.
    /// - Throws: `UVError` if the spawn fails (`ENOENT` for a missing executable, `EAGAIN`/`ENOMEM` when out of
    ///   processes or memory). The handles are closed then.
    public init(
        loop: EventLoop, executable: String, arguments: [String], environment: [String]? = nil,
        onExit: @escaping (ProcessExit) -> Void
    ) throws(UVError) {
        stdin = PipeConnection(loop: loop)
        stdout = PipeConnection(loop: loop)
        super.init(loop: loop, type: UV_PROCESS)
        self.onExit = onExit
        var options = uv_process_options_t()
        options.exit_cb = { raw, status, signal in
            let process = ChildProcess.owner(of: raw)
            let exit = ProcessExit(status: status, signal: signal)
            process.exit = exit
            let callback = process.onExit
            process.onExit = nil
            callback?(exit)
        }
        let cArguments: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let cEnvironment: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup($0) } + [nil] }
        defer {
            for pointer in cArguments { free(pointer) }
            for pointer in cEnvironment ?? [] { free(pointer) }
        }
        var stdio = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
        stdio[0].flags = uv_stdio_flags(rawValue: UV_CREATE_PIPE.rawValue | UV_READABLE_PIPE.rawValue)
        stdio[0].data.stream = UVHandle.stream(stdin.handle)
        stdio[1].flags = uv_stdio_flags(rawValue: UV_CREATE_PIPE.rawValue | UV_WRITABLE_PIPE.rawValue)
        stdio[1].data.stream = UVHandle.stream(stdout.handle)
        stdio[2].flags = UV_INHERIT_FD
        stdio[2].data.fd = 2
        let process = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_process_t.self)
        let rc: Int32 = executable.withCString { file in
            cArguments.withUnsafeBufferPointer { argv in
                stdio.withUnsafeMutableBufferPointer { containers in
                    options.file = file
                    options.args = UnsafeMutablePointer(mutating: argv.baseAddress)
                    options.stdio = containers.baseAddress
                    options.stdio_count = 3
                    if let cEnvironment {
                        return cEnvironment.withUnsafeBufferPointer { envp in
                            options.env = UnsafeMutablePointer(mutating: envp.baseAddress)
                            return uv_spawn(loop.raw, process, &options)
                        }
                    }
                    return uv_spawn(loop.raw, process, &options)
                }
            }
        }
        // uv_spawn initialises the handle even when it fails, so it is adopted (and later closed) either way.
        adopt()
        if rc < 0 {
            self.onExit = nil
            close()
            throw UVError(code: rc, operation: "spawn \(executable)")
        }
        pid = process.pointee.pid
    }

    /// Sends `signal` (for example `SIGKILL`) to the child. Does nothing once it exited or the handle is closing.
    ///
    /// - Returns: `false` if the signal could not be sent (the child is gone).
    @discardableResult
    public func kill(_ signal: Int32) -> Bool {
        guard !isClosing, exit == nil else { return false }
        return uv_process_kill(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_process_t.self), signal) == 0
    }

    /// Closes the process handle and both pipes. The child is not signalled: kill it first if it must stop.
    public override func close(_ completion: (() -> Void)? = nil) {
        stdin.close()
        stdout.close()
        super.close(completion)
    }

    override func dropCallbacks() { onExit = nil }

    /// For a child: has the kernel kill the calling process (`SIGKILL`) when its parent dies, even by `kill -9`
    /// (Linux `PR_SET_PDEATHSIG`), so a worker busy with a hung decode never outlives its daemon.
    ///
    /// - Parameter parent: the parent pid seen at start (`getppid()`); if the parent already changed, the parent
    ///   died before the call and `false` is returned: exit then.
    /// - Returns: whether the death signal is armed and the parent is still `parent`.
    public static func dieWithParent(_ parent: Int32) -> Bool {
        tb_die_with_parent(parent) == 0
    }
}
