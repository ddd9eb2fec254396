import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The daemon's feed as an `AsyncSequence` of typed events, read on a thread of its own.
///
/// When the connection breaks (a daemon restart), it reconnects with `since` set to the last event it delivered,
/// so nothing is lost or repeated while the daemon still keeps those events; when it no longer does, the daemon's
/// `gap` event comes through (`FeedEvent.Payload.gap`): read the jobs again. It gives up, throwing
/// `JobClientError.unreachable`, after `reconnectForSeconds` without a connection. Ending the iteration (leaving
/// the `for try await` loop, or cancelling its task) closes the connection.
public struct JobFeed: AsyncSequence, Sendable {
    /// A feed event.
    public typealias Element = FeedEvent

    let socketPath: String
    let since: Int64?
    let jobs: [String]
    let kinds: [String]
    let reconnectForSeconds: Double

    /// The iterator: the events as they come.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<FeedEvent, any Error>.AsyncIterator

        /// The next event; `nil` never (the feed does not end by itself).
        /// - Throws: `JobClientError` once the daemon stayed unreachable for the reconnect window, or sent a line
        ///   that is not an event.
        public mutating func next() async throws -> FeedEvent? { try await base.next() }
    }

    /// Starts reading the feed (connects on a thread of its own).
    public func makeAsyncIterator() -> AsyncIterator {
        let reader = FeedReader(feed: self)
        let stream = AsyncThrowingStream<FeedEvent, any Error>(bufferingPolicy: .unbounded) { continuation in
            continuation.onTermination = { _ in reader.stop() }
            reader.start(continuation)
        }
        return AsyncIterator(base: stream.makeAsyncIterator())
    }
}
