import CUV

extension EventLoop {
    /// Runs `EventLoop.main` (the loop `LoopActor` is pinned to) on a thread of its own, once per process; later
    /// calls do nothing.
    ///
    /// For programs that do not give the loop their main thread, such as a test process running job kinds with
    /// `TrailbookJobsTesting`; the daemon runs the loop on its main thread instead and must not call this. The loop
    /// then runs until the process exits.
    public static func runMainInBackground() {
        _ = mainLoopInBackground
    }
}

/// Started on first use (a global's initialiser runs once, thread-safely).
private let mainLoopInBackground: Void = {
    var thread = uv_thread_t()
    let status = uv_thread_create(&thread, { _ in EventLoop.main.run() }, nil)
    precondition(status == 0, "uv_thread_create failed (\(status)): cannot run the main loop")
}()
