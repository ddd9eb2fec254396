import Synchronization
import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Reads a `JobFeed` on a thread of its own: connects, sends `watch`, hands each line on, reconnects with `since`.
final class FeedReader: Sendable {
    private let feed: JobFeed
    /// The connection's descriptor while connected (for `stop` to shut it down), and whether to stop.
    private let state = Mutex<(fd: Int32?, stopped: Bool)>((nil, false))

    init(feed: JobFeed) { self.feed = feed }

    /// Starts the thread that feeds `continuation`.
    func start(_ continuation: AsyncThrowingStream<FeedEvent, any Error>.Continuation) {
        let body = ThreadBody { [self] in run(continuation) }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(body).toOpaque()
        let status = pthread_create(&thread, nil, { raw in
            Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
        if status != 0 {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            continuation.finish(throwing: JobClientError.unreachable("cannot start the feed's thread (error \(status))"))
            return
        }
        pthread_detach(thread)
    }

    /// Ends the reading: the thread leaves at its next read.
    func stop() {
        state.withLock { state in
            state.stopped = true
            if let fd = state.fd { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private var stopped: Bool { state.withLock { $0.stopped } }

    private func run(_ continuation: AsyncThrowingStream<FeedEvent, any Error>.Continuation) {
        var since = feed.since
        var downSince: Double?
        var delay = 0.05
        while !stopped {
            do {
                let client = try DaemonClient(socketPath: feed.socketPath)
                let connected = state.withLock { state -> Bool in
                    guard !state.stopped else { return false }
                    state.fd = client.fileDescriptor
                    return true
                }
                guard connected else { break }
                defer { state.withLock { $0.fd = nil } }
                var request: [String: JSONValue] = ["op": "watch"]
                if let since { request["since"] = .number(Double(since)) }
                if !feed.jobs.isEmpty { request["jobs"] = .array(feed.jobs.map { .string($0) }) }
                if !feed.kinds.isEmpty { request["kinds"] = .array(feed.kinds.map { .string($0) }) }
                let reply = try client.request(.object(request))
                guard reply["ok"]?.boolValue == true else {
                    let error = JobError(
                        code: reply["error"]?["code"]?.stringValue ?? "internal",
                        message: reply["error"]?["message"]?.stringValue ?? "watch refused")
                    continuation.finish(throwing: JobClientError.refused(error))
                    return
                }
                // With no event seen yet, a reconnect goes on from where this watch began.
                if since == nil { since = reply["seq"]?.intValue }
                downSince = nil
                delay = 0.05
                while let line = try client.readLine() {
                    let event = try FeedEvent(json: line)
                    if let seq = event.seq { since = seq }
                    continuation.yield(event)
                }
            } catch let error as JobClientError {
                continuation.finish(throwing: error)
                return
            } catch {
                // Not reachable, or the connection broke: try again below.
            }
            if stopped { break }
            let now = Timestamp.monotonic()
            if downSince == nil { downSince = now }
            if now - downSince! > feed.reconnectForSeconds {
                continuation.finish(
                    throwing: JobClientError.unreachable(
                        "the daemon at \(feed.socketPath) stayed unreachable for \(Int(feed.reconnectForSeconds)) s"))
                return
            }
            usleep(UInt32(delay * 1_000_000))
            delay = min(delay * 2, 1)
        }
        continuation.finish()
    }
}

/// A closure to run on a new thread, passed through `pthread_create`'s context pointer.
private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}
