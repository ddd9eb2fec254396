import CUV

/// Holds one `uv_queue_work` request's closures; `@convention(c)` callbacks cannot capture, so they find it
/// through `req.data`.
private final class WorkBox: @unchecked Sendable {
    let work: () -> Void
    let completion: (Int32) -> Void

    init(work: @escaping () -> Void, completion: @escaping (Int32) -> Void) {
        self.work = work
        self.completion = completion
    }
}

/// The outcome of work run on the pool, carried back to the loop thread.
private final class ResultBox<R>: @unchecked Sendable {
    var result: Result<R, any Error>?
}

extension EventLoop {
    /// Runs `work` on libuv's thread pool and returns its result on the loop thread.
    ///
    /// For blocking file I/O and CPU-heavy work (hashing, decoding) that must not stall the loop. libuv's pool
    /// has 4 threads by default (`UV_THREADPOOL_SIZE`, https://docs.libuv.org/en/v1.x/threadpool.html), shared
    /// with its own fs requests. `work` must not touch loop-owned state.
    /// - Parameter isolation: the caller's actor, which must run on this loop (`LoopActor` for `EventLoop.main`);
    ///   filled in by the compiler. Without it a plain `async` function would run on the global executor, off the
    ///   loop thread.
    /// - Precondition: called on the loop thread.
    /// - Throws: whatever `work` throws.
    public func runOnPool<R: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ work: @escaping @Sendable () throws -> R
    ) async throws -> R {
        precondition(inLoopThread, "runOnPool must be called on the loop thread")
        return try await withCheckedThrowingContinuation(isolation: isolation) {
            (continuation: CheckedContinuation<R, any Error>) in
            let outcome = ResultBox<R>()
            let box = WorkBox(
                work: { outcome.result = Result { try work() } },
                completion: { status in
                    if status == UV_ECANCELED.rawValue {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        continuation.resume(with: outcome.result!)
                    }
                })
            let request = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
            request.pointee.data = Unmanaged.passRetained(box).toOpaque()
            let rc = uv_queue_work(
                raw, request,
                { request in
                    Unmanaged<WorkBox>.fromOpaque(request!.pointee.data).takeUnretainedValue().work()
                },
                { request, status in
                    let box = Unmanaged<WorkBox>.fromOpaque(request!.pointee.data).takeRetainedValue()
                    request!.deallocate()
                    box.completion(status)
                })
            if rc < 0 {
                Unmanaged<WorkBox>.fromOpaque(request.pointee.data).release()
                request.deallocate()
                continuation.resume(throwing: UVError(code: rc, operation: "uv_queue_work"))
            }
        }
    }
}
