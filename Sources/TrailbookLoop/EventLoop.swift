import CUV
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One libuv loop (`uv_loop_t`) and the thread that runs it.
///
/// Every handle and request of the loop belongs to the loop thread: create, start and close them there. Other
/// threads hand work in with `execute(_:)`, which queues a closure and wakes the loop with `uv_async_send`
/// (https://docs.libuv.org/en/v1.x/async.html: sends coalesce, so the inbox is drained in a loop).
///
/// The loop is also a `SerialExecutor`, so an actor can be pinned to it (see `LoopActor`): the actor's code then
/// runs on the loop thread and may own handles, as swift-nio does with its event loops.
public final class EventLoop: @unchecked Sendable {
    /// The raw `uv_loop_t`, valid until `run()` returns and the loop is closed.
    public let raw: UnsafeMutablePointer<uv_loop_t>
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    private let inbox = Mutex<[@Sendable () -> Void]>([])
    private let thread = Atomic<UInt>(0)
    private let wakeupClosed = Atomic<Bool>(false)

    /// The loop the daemon runs on its main thread; `LoopActor` is pinned to it.
    public static let main = EventLoop()

    /// This loop as a task executor (SE-0417), for tasks that are to come back here whenever they resume
    /// (`Task.onLoop`).
    public let taskExecutor = LoopTaskExecutor()

    /// Makes a new loop. Run it with `run()` on the thread that is to own it.
    public init() {
        raw = .allocate(capacity: 1)
        precondition(uv_loop_init(raw) == 0, "uv_loop_init failed")
        wakeup = .allocate(capacity: 1)
        uv_async_init(raw, wakeup) { handle in
            let loop = Unmanaged<EventLoop>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            loop.drainInbox()
        }
        // The wakeup handle holds the loop alive (+1) until `stop()` closes it.
        wakeup.pointee.data = Unmanaged.passRetained(self).toOpaque()
        taskExecutor.loop = self
    }

    /// Runs the loop on the calling thread until `stop()` has been called and every handle is closed.
    ///
    /// Afterwards the loop is closed (`uv_loop_close`) and may not be used again.
    public func run() {
        let (exchanged, _) = thread.compareExchange(expected: 0, desired: UInt(pthread_self()), ordering: .acquiringAndReleasing)
        precondition(exchanged, "EventLoop.run() called twice: a loop belongs to one thread")
        drainInbox()
        uv_run(raw, UV_RUN_DEFAULT)
        // Close callbacks of handles closed in the last iteration, and work queued while stopping.
        drainInbox()
        uv_run(raw, UV_RUN_NOWAIT)
        uv_loop_close(raw)
    }

    /// Runs `body` on the loop thread, soon. Callable from any thread, including the loop's own.
    ///
    /// Work queued after `stop()` still runs if the loop has not yet returned from `run()`; work queued after
    /// `run()` has returned never runs.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        // The check and the send happen under the inbox lock, and `stop()` sets the flag under the same lock:
        // otherwise the loop thread could close (and free) the wakeup handle between them.
        inbox.withLock { pending in
            pending.append(body)
            if !wakeupClosed.load(ordering: .acquiring) { uv_async_send(wakeup) }
        }
    }

    /// Lets `run()` return once every other handle is closed: closes the loop's own wakeup handle.
    ///
    /// Call it on the loop thread after closing the handles you own.
    public func stop() {
        assertInLoopThread()
        guard !inbox.withLock({ _ in wakeupClosed.exchange(true, ordering: .acquiringAndReleasing) }) else { return }
        drainInbox()
        uv_close(UVHandle.cast(wakeup)) { handle in
            let loop = Unmanaged<EventLoop>.fromOpaque(handle!.pointee.data)
            loop.takeUnretainedValue().drainInbox()
            loop.release()
            handle!.deallocate()
        }
    }

    /// The loop's handles, one per line (`timer active ref`, `poll closing`, …) and its count of requests in
    /// flight: what keeps `run()` from returning after `stop()`. It reads the loop's handle queue without the loop
    /// thread: call it only while that thread is blocked waiting for I/O (a loop that does not return), when the
    /// queue does not change.
    public func openHandlesDescription() -> String {
        final class Lines { var text: [String] = [] }
        let lines = Lines()
        uv_walk(raw, { handle, context in
            guard let handle, let context else { return }
            let lines = Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue()
            var words = [String(cString: uv_handle_type_name(uv_handle_get_type(handle)))]
            if uv_is_active(handle) != 0 { words.append("active") }
            if uv_has_ref(handle) != 0 { words.append("ref") }
            if uv_is_closing(handle) != 0 { words.append("closing") }
            lines.text.append(words.joined(separator: " "))
        }, Unmanaged.passUnretained(lines).toOpaque())
        return (lines.text + ["requests in flight: \(raw.pointee.active_reqs.count)"]).joined(separator: "\n")
    }

    /// Whether the caller runs on this loop's thread.
    public var inLoopThread: Bool {
        let owner = thread.load(ordering: .acquiring)
        return owner != 0 && pthread_equal(pthread_t(owner), pthread_self()) != 0
    }

    /// Traps (in debug builds) when called off the loop thread.
    public func assertInLoopThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoopThread, "not on the loop thread", file: file, line: line)
    }

    /// The loop's cached time in milliseconds since an arbitrary point (`uv_now`), updated once per iteration.
    public var nowMilliseconds: UInt64 { uv_now(raw) }

    private func drainInbox() {
        while true {
            let batch = inbox.withLock { pending -> [@Sendable () -> Void] in
                let batch = pending
                pending.removeAll(keepingCapacity: true)
                return batch
            }
            if batch.isEmpty { return }
            for body in batch { body() }
        }
    }
}

extension EventLoop: SerialExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(complexEquality: self)
    }

    public func isSameExclusiveExecutionContext(other: EventLoop) -> Bool { other === self }

    public func checkIsolated() {
        precondition(inLoopThread, "expected to run on the event loop thread")
    }
}

/// An event loop as a task executor (SE-0417). A task that prefers it (`Task.onLoop`) has every job that is not
/// bound to an actor run on the loop too: a continuation resumed on the loop (a timer, a pool call's answer, a
/// group commit) hands its task to Swift's generic executor, which for such a task is this one, so the task comes
/// straight back to the loop. Without the preference it went to Swift's global executor first, whose thread
/// handed it back to the loop: two thread wake-ups per `await` (issue 14).
///
/// A separate object from the loop's serial executor on purpose: a job of a task that did not ask for the loop as
/// its task executor must not run as if it had (the runtime would then move that task at every actor-isolated
/// call, and the requests a `PostgresStoreActor` starts in order would reach the server out of it).
public final class LoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    /// The loop; set once by its `init`, before the loop is shared (weak: the loop owns this).
    fileprivate weak var loop: EventLoop?

    fileprivate init() {}

    /// Runs `job` on the loop's thread, after the work already queued there (`EventLoop.execute`), isolated to the
    /// loop's serial executor as well. Traps if the loop has been released (no task can prefer a loop that is gone).
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        guard let loop else { preconditionFailure("a job enqueued on the task executor of a loop that is gone") }
        // On the loop thread, so also isolated to the loop: a `LoopActor` function it calls needs no hop.
        loop.execute { job.runSynchronously(isolatedTo: loop.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor()) }
    }

    /// This executor as the runtime refers to it (`runSynchronously(isolatedTo:taskExecutor:)`).
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}

extension Task where Failure == Never {
    /// Starts `operation` on the daemon's loop (`LoopActor`) with the loop as the task's executor preference, so
    /// each of its resumptions comes straight back to the loop (`LoopTaskExecutor`).
    /// Use it instead of `Task { @LoopActor in … }` for the daemon's own tasks.
    @discardableResult
    public static func onLoop(_ operation: sending @escaping @LoopActor () async -> Success) -> Task<Success, Never> {
        Task(executorPreference: EventLoop.main.taskExecutor, operation: operation)
    }
}

extension Task where Failure == any Error {
    /// `onLoop` for an operation that throws.
    @discardableResult
    public static func onLoop(_ operation: sending @escaping @LoopActor () async throws -> Success) -> Task<Success, any Error> {
        Task(executorPreference: EventLoop.main.taskExecutor, operation: operation)
    }
}

/// The global actor of everything that lives on the daemon's loop (`EventLoop.main`): the scheduler, the
/// stores, the handles, and the code of job kinds. Its executor is the loop thread itself.
@globalActor
public actor LoopActor {
    /// The one instance.
    public static let shared = LoopActor()

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        EventLoop.main.asUnownedSerialExecutor()
    }
}

/// Casts between a concrete libuv handle type and the `uv_handle_t` / `uv_stream_t` it begins with.
public enum UVHandle {
    /// `p` as the generic `uv_handle_t*` that `uv_close` and friends take.
    @inline(__always)
    public static func cast<T>(_ p: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_handle_t> {
        UnsafeMutableRawPointer(p).assumingMemoryBound(to: uv_handle_t.self)
    }

    /// `p` as the `uv_stream_t*` that reads and writes take.
    @inline(__always)
    public static func stream<T>(_ p: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(p).assumingMemoryBound(to: uv_stream_t.self)
    }
}

/// An error from a libuv call: its negative errno-style code and libuv's name and text for it.
public struct UVError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The (negative) libuv error code, for example `UV_ENOENT`.
    public let code: Int32
    /// What was being done, e.g. "bind /run/x.sock".
    public let operation: String

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// libuv's short name for the code, e.g. "ENOENT".
    public var name: String { String(cString: uv_err_name(code)) }

    public var description: String { "\(operation): \(String(cString: uv_strerror(code))) (\(name))" }

    /// Throws a `UVError` when `rc` is negative.
    @inline(__always)
    public static func check(_ rc: Int32, _ operation: @autoclosure () -> String) throws(UVError) {
        if rc < 0 { throw UVError(code: rc, operation: operation()) }
    }
}
