import Foundation
import TrailbookLoop

/// An actor pinned to a private loop, so tests can drive loop-thread objects (a `WorkerPool`) with `await`.
actor LoopBound {
    let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    init(_ loop: EventLoop) { self.loop = loop }

    func run<T: Sendable>(_ body: @Sendable (isolated LoopBound) async throws -> T) async rethrows -> T {
        try await body(self)
    }
}

/// A loop running on its own thread; `finish()` stops it and reports whether `run()` returned (every handle
/// closed) within 5 s.
final class LoopThread: @unchecked Sendable {
    let loop = EventLoop()
    private let done = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [loop, done] in
            loop.run()
            done.signal()
        }
        thread.start()
    }

    func finish() -> Bool {
        loop.execute { [loop] in loop.stop() }
        return done.wait(timeout: .now() + 5) == .success
    }
}
