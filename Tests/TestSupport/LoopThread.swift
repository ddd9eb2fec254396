import Foundation
import TrailbookLoop

/// An actor pinned to a private loop, so tests can drive loop-thread objects (handles, a `WorkerPool`) with `await`.
public actor LoopBound {
    public let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    public init(_ loop: EventLoop) { self.loop = loop }

    /// Runs `body` on the loop thread, isolated to this actor.
    public func run<T: Sendable>(_ body: @Sendable (isolated LoopBound) async throws -> T) async rethrows -> T {
        try await body(self)
    }
}

/// A loop running on its own thread; `finish()` stops it and reports whether `run()` returned (every handle
/// closed) within 5 s.
public final class LoopThread: @unchecked Sendable {
    public let loop = EventLoop()
    private let done = DispatchSemaphore(value: 0)

    public init() {
        let thread = Thread { [loop, done] in
            loop.run()
            done.signal()
        }
        thread.start()
    }

    /// Stops the loop; `true` if `run()` came back within 5 s, which libuv allows only once every handle is closed.
    public func finish() -> Bool {
        loop.execute { [loop] in loop.stop() }
        return done.wait(timeout: .now() + 5) == .success
    }
}

/// Runs `EventLoop.main` (the loop `LoopActor` is pinned to) on a background thread, once per test process.
///
/// Every test target is linked into one test binary, so the loop is started through `EventLoop.runMainInBackground`,
/// as `TrailbookJobsTesting` starts it too: a second `run()` of the same loop is refused by `EventLoop.run`.
public enum MainLoopThread {
    /// Evaluate (`_ = MainLoopThread.started`) before using `LoopActor` in a test.
    public static let started: Void = EventLoop.runMainInBackground()
}
