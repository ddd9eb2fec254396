import CUV

/// The base of every libuv handle wrapper: owns the handle's memory and its lifetime.
///
/// libuv's rule (https://docs.libuv.org/en/v1.x/handle.html#c.uv_close): a handle's memory may be freed only in
/// its close callback. So the handle's `data` field holds a retained reference to its wrapper from `init` until
/// the close callback, which releases it and frees the memory; the wrapper therefore lives as long as libuv may
/// call it, whether or not Swift code still refers to it. Callbacks are dropped on `close()` so that closures
/// capturing their owner do not keep it alive.
///
/// Once `close()` is called the wrapper never touches the handle's memory again (libuv frees it in the close
/// callback, and a new handle may soon live at the same address), so every method checks `isClosing`, a Swift-side
/// flag, before using it.
///
/// Handles are not `Sendable`: use them on their loop's thread only.
public class LoopHandle {
    /// The handle, as the generic `uv_handle_t*`.
    public let handle: UnsafeMutablePointer<uv_handle_t>
    /// The loop this handle belongs to.
    public let loop: EventLoop
    private var closeCallback: (() -> Void)?
    /// Set by `close()`; from then on `handle` may point to freed memory.
    public private(set) var isClosing = false

    init(loop: EventLoop, type: uv_handle_type) {
        self.loop = loop
        let memory = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(type), alignment: 16)
        handle = memory.bindMemory(to: uv_handle_t.self, capacity: 1)
    }

    /// Call right after the `uv_*_init` succeeded: hands libuv its +1 reference.
    func adopt() {
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// The wrapper whose handle libuv passes to a callback.
    static func owner<T>(of raw: UnsafeMutablePointer<T>?) -> Self {
        let handle = UnsafeMutableRawPointer(raw!).assumingMemoryBound(to: uv_handle_t.self)
        return unsafeDowncast(Unmanaged<LoopHandle>.fromOpaque(handle.pointee.data).takeUnretainedValue(), to: self)
    }

    /// Stops the handle and releases it once libuv is done with it. Safe to call more than once.
    ///
    /// - Parameter completion: runs on the loop thread after libuv's close callback.
    public func close(_ completion: (() -> Void)? = nil) {
        guard !isClosing else { return }
        isClosing = true
        closeCallback = completion
        dropCallbacks()
        uv_close(handle) { raw in
            let owner = Unmanaged<LoopHandle>.fromOpaque(raw!.pointee.data)
            let callback = owner.takeUnretainedValue().closeCallback
            owner.takeUnretainedValue().closeCallback = nil
            owner.release()
            UnsafeMutableRawPointer(raw!).deallocate()
            callback?()
        }
    }

    /// Overridden to drop stored callbacks when the handle closes.
    func dropCallbacks() {}

    /// Whether the handle keeps the loop running (`uv_ref`) or not (`uv_unref`).
    public var keepsLoopAlive: Bool {
        get { !isClosing && uv_has_ref(handle) != 0 }
        set {
            guard !isClosing else { return }
            newValue ? uv_ref(handle) : uv_unref(handle)
        }
    }
}

/// A one-shot or repeating timer (`uv_timer_t`, https://docs.libuv.org/en/v1.x/timer.html).
public final class LoopTimer: LoopHandle {
    private var onFire: (() -> Void)?

    /// Makes a stopped timer on `loop`. Call on the loop thread.
    public init(loop: EventLoop) {
        super.init(loop: loop, type: UV_TIMER)
        precondition(uv_timer_init(loop.raw, UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_timer_t.self)) == 0)
        adopt()
    }

    private var timer: UnsafeMutablePointer<uv_timer_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_timer_t.self)
    }

    /// Starts (or restarts) the timer.
    ///
    /// - Parameters:
    ///   - milliseconds: delay before the first firing, in milliseconds from the loop's current time.
    ///   - repeatMilliseconds: interval of later firings in milliseconds; 0 fires once.
    ///   - body: runs on the loop thread each time the timer fires.
    public func start(milliseconds: UInt64, repeatMilliseconds: UInt64 = 0, _ body: @escaping () -> Void) {
        guard !isClosing else { return }
        onFire = body
        uv_timer_start(timer, { raw in LoopTimer.owner(of: raw).onFire?() }, milliseconds, repeatMilliseconds)
    }

    /// Starts (or restarts) a one-shot timer `seconds` from now, rounded up to the millisecond.
    ///
    /// Any `Double` is safe: negative or NaN fires at once, and a huge value is capped at about 285 000 years
    /// (2^53 ms), instead of trapping in the conversion to `UInt64`.
    public func start(seconds: Double, _ body: @escaping () -> Void) {
        start(milliseconds: Self.milliseconds(seconds), body)
    }

    /// `seconds` as whole milliseconds for libuv, rounded up and clamped to 0…2^53.
    public static func milliseconds(_ seconds: Double) -> UInt64 {
        guard seconds.isFinite || seconds == .infinity, seconds > 0 else { return 0 }
        return UInt64(min((seconds * 1000).rounded(.up), 9_007_199_254_740_992))
    }

    /// Stops the timer; it can be started again.
    public func stop() {
        guard !isClosing else { return }
        uv_timer_stop(timer)
        onFire = nil
    }

    /// Whether the timer is started and has not yet fired (for a one-shot timer).
    public var isActive: Bool { !isClosing && uv_is_active(handle) != 0 }

    override func dropCallbacks() { onFire = nil }
}

/// Watches a POSIX signal on the loop (`uv_signal_t`, https://docs.libuv.org/en/v1.x/signal.html).
public final class SignalWatcher: LoopHandle {
    private var onSignal: ((Int32) -> Void)?

    /// Starts watching `signal` (for example `SIGTERM`); `body` runs on the loop thread on each delivery.
    public init(loop: EventLoop, signal: Int32, _ body: @escaping (Int32) -> Void) {
        super.init(loop: loop, type: UV_SIGNAL)
        let raw = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_signal_t.self)
        precondition(uv_signal_init(loop.raw, raw) == 0)
        adopt()
        onSignal = body
        uv_signal_start(raw, { raw, signum in SignalWatcher.owner(of: raw).onSignal?(signum) }, signal)
    }

    override func dropCallbacks() { onSignal = nil }
}

/// Runs a callback once per loop iteration, right after the loop has polled for I/O (`uv_check_t`,
/// https://docs.libuv.org/en/v1.x/check.html). Used to batch work produced during one iteration — for example,
/// to write all the feed events of an iteration to a watcher in one write — so stop it once that work is done.
///
/// While it is started the loop does not block in its poll (an `IdleHandle` beside it), so its callback comes in
/// this iteration or, when it is started after this iteration's check handles began to run (from another check
/// callback), in the next one at once. libuv runs only the check handles started before the pass began
/// (loop-watcher.c), and a started check handle alone does not shorten the poll: the callback would wait for the
/// next I/O or timer, which on an idle daemon may never come. Node's `setImmediate` pairs the two the same way.
public final class CheckHandle: LoopHandle {
    private var onCheck: (() -> Void)?
    /// Started and stopped with the check handle, closed with it.
    private let wake: IdleHandle

    /// Makes a stopped check handle on `loop`. Call on the loop thread.
    public init(loop: EventLoop) {
        wake = IdleHandle(loop: loop)
        super.init(loop: loop, type: UV_CHECK)
        precondition(uv_check_init(loop.raw, UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_check_t.self)) == 0)
        adopt()
    }

    /// Starts calling `body` once per loop iteration, until `stop()`; the loop does not sleep meanwhile.
    public func start(_ body: @escaping () -> Void) {
        guard !isClosing else { return }
        onCheck = body
        uv_check_start(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_check_t.self)) { raw in
            CheckHandle.owner(of: raw).onCheck?()
        }
        wake.start()
    }

    /// Stops the calls; the loop may sleep again.
    public func stop() {
        guard !isClosing else { return }
        uv_check_stop(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_check_t.self))
        wake.stop()
        onCheck = nil
    }

    override func dropCallbacks() {
        onCheck = nil
        wake.close()
    }
}

/// Calls its callback once per loop iteration, right before the loop polls for I/O (`uv_prepare_t`,
/// https://docs.libuv.org/en/v1.x/prepare.html): the last thing an iteration does before it may sleep, so work
/// collected during the iteration (log lines) can go out in one piece without waiting.
public final class PrepareHandle: LoopHandle {
    private var onPrepare: (() -> Void)?

    /// Makes a stopped prepare handle on `loop`. Call on the loop thread.
    public init(loop: EventLoop) {
        super.init(loop: loop, type: UV_PREPARE)
        precondition(uv_prepare_init(loop.raw, UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_prepare_t.self)) == 0)
        adopt()
    }

    /// Starts calling `body` before every poll, until `stop()` or `close()`.
    public func start(_ body: @escaping () -> Void) {
        guard !isClosing else { return }
        onPrepare = body
        uv_prepare_start(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_prepare_t.self)) { raw in
            PrepareHandle.owner(of: raw).onPrepare?()
        }
    }

    /// Stops the calls.
    public func stop() {
        guard !isClosing else { return }
        uv_prepare_stop(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_prepare_t.self))
        onPrepare = nil
    }

    override func dropCallbacks() { onPrepare = nil }
}

/// Keeps the loop from blocking in its poll for I/O while it is started (`uv_idle_t`,
/// https://docs.libuv.org/en/v1.x/idle.html: "when there are active idle handles the loop will perform a zero
/// timeout poll instead of blocking for I/O"). Every `CheckHandle` has one, so that its next call does not wait
/// for the next I/O or timer.
public final class IdleHandle: LoopHandle {
    /// Makes a stopped idle handle on `loop`. Call on the loop thread.
    public init(loop: EventLoop) {
        super.init(loop: loop, type: UV_IDLE)
        precondition(uv_idle_init(loop.raw, UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_idle_t.self)) == 0)
        adopt()
    }

    /// Starts keeping the loop awake (its callback does nothing: being active is what counts).
    public func start() {
        guard !isClosing else { return }
        uv_idle_start(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_idle_t.self)) { _ in }
    }

    /// Lets the loop block in its poll again.
    public func stop() {
        guard !isClosing else { return }
        uv_idle_stop(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_idle_t.self))
    }
}

