import TrailbookClient
import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// One tab's Server-Sent Events: the daemon's feed, one `watch` connection per tab, turned into SSE messages.
///
/// Each feed event becomes `id: SEQ` and `data: EVENT` (the event's JSON, strings escaped by `WebDisplay`), so a
/// browser that reconnects sends `Last-Event-ID: SEQ` and the stream starts again with `since` SEQ: nothing is
/// missed and nothing comes twice. A `gap` event (the daemon no longer has the events asked for) tells the page to
/// read the list again. A tab that reads slowly holds up this stream's reads from the daemon, which then drops
/// that watcher's progress events, never its state events (docs/reference/protocol.md, "The feed"); past 4 MiB
/// the daemon cuts it off, and the stream comes back with `since` like any reconnection.
///
/// When the feed ends the stream subscribes again at once with `since`. If the daemon is gone, the stream says so
/// (`event: daemon` with `{"up": false, "message"}`), keeps trying every half second, and when it is back says
/// `{"up": true}` and carries on from the last `seq` sent.
///
/// `next` blocks (the server gives each connection its own thread) but never for more than `keepAliveSeconds`:
/// then it returns a comment line, whose write tells the server whether the tab is still there.
final class JobEventStream: @unchecked Sendable {
    /// How long `next` waits for an event before it sends a comment, in seconds.
    static let keepAliveSeconds = 10.0
    /// How often the stream tries to reach a daemon that is gone, in seconds.
    static let reconnectSeconds = 0.5

    private let socketPath: String
    private var client: DaemonClient?
    /// The `seq` of the last event sent (or given in `Last-Event-ID`); `nil` before the first.
    private var lastSeq: Int64?
    /// The daemon was found gone and the tab was told.
    private var announcedDown = false
    private var started = false
    private var pending: [UInt8] = []

    /// A stream of the feed at `socketPath` that starts after `since` (a `Last-Event-ID`), or at the present.
    init(socketPath: String, since: Int64?) {
        self.socketPath = socketPath
        lastSeq = since
    }

    /// Up to `max` bytes of the stream, waiting for them as needed (see the type's notes).
    func read(max: Int) -> [UInt8] {
        while pending.isEmpty { pending = next() }
        // Events already waiting go out in the same write: a batch of 1 000 submits is a few writes, not 1 000.
        while pending.count < max, let client, client.waitReadable(timeoutSeconds: 0) { pending += next() }
        let chunk = Array(pending.prefix(max))
        pending.removeFirst(chunk.count)
        return chunk
    }

    /// The next message or messages of the stream.
    private func next() -> [UInt8] {
        var out: [UInt8] = []
        if !started {
            started = true
            // A reconnecting EventSource waits `retry` milliseconds.
            out += Array("retry: 1000\n\n".utf8)
        }
        guard let client else {
            out += connect()
            return out
        }
        guard client.waitReadable(timeoutSeconds: Self.keepAliveSeconds) else {
            return out + Array(": keep-alive\n\n".utf8)
        }
        let event: JSONValue?
        do {
            event = try client.readLine()
        } catch {
            event = nil
        }
        guard let event else {
            // The daemon stopped, or cut this watcher off for reading too slowly (a tab that does not keep up):
            // subscribe again at once with `since`, and say the daemon is down only if that fails.
            self.client = nil
            return out + connect()
        }
        return out + message(for: event)
    }

    /// One SSE message for a feed event: `id:` its `seq` when it has one.
    private func message(for event: JSONValue) -> [UInt8] {
        var text = ""
        if let seq = event["seq"]?.intValue {
            // A replay may repeat the event `since` named on some stores; the page must see each once.
            if let lastSeq, seq <= lastSeq, event["type"]?.stringValue != "gap" { return [] }
            lastSeq = seq
            text += "id: \(seq)\n"
        }
        let data = JSONCoding.encode(WebDisplay.escaped(event))
        return Array(text.utf8) + Array("data: ".utf8) + data + Array("\n\n".utf8)
    }

    /// Subscribes to the feed, or waits and reports the daemon down.
    private func connect() -> [UInt8] {
        do {
            let fresh = try DaemonClient(socketPath: socketPath)
            var request: [String: JSONValue] = ["op": "watch"]
            if let lastSeq { request["since"] = .number(Double(lastSeq)) }
            let header = try fresh.request(.object(request))
            guard header["ok"]?.boolValue == true else {
                let text = header["error"]?["message"]?.stringValue ?? "the daemon refused to watch"
                usleep(UInt32(Self.reconnectSeconds * 1_000_000))
                return down(text)
            }
            client = fresh
            var out: [UInt8] = []
            if announcedDown {
                announcedDown = false
                out += Array("event: daemon\ndata: {\"up\":true}\n\n".utf8)
            }
            if lastSeq == nil, let seq = header["seq"]?.intValue {
                // The present, as an id: a browser that reconnects before any event still resumes from here.
                lastSeq = seq
                out += Array("id: \(seq)\nevent: hello\ndata: {\"seq\":\(seq)}\n\n".utf8)
            }
            return out
        } catch {
            usleep(UInt32(Self.reconnectSeconds * 1_000_000))
            return down("\(error)")
        }
    }

    /// `event: daemon` saying it is gone, once until it is back; a keep-alive comment after that.
    private func down(_ message: String) -> [UInt8] {
        guard !announcedDown else { return Array(": waiting for the daemon\n\n".utf8) }
        announcedDown = true
        let data = JSONCoding.encode(["up": false, "message": .string(URLRedaction.text(message))] as JSONValue)
        return Array("event: daemon\ndata: ".utf8) + data + Array("\n\n".utf8)
    }
}
