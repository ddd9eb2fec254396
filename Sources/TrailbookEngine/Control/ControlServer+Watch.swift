import TrailbookLoop

// `watch`: the connection subscribes to the progress feed.
extension ControlServer {
    /// `watch`: writes a header (`seq`, `oldest`), then the feed's events after `since` (of `jobs` and `kinds`
    /// if given; with `local`, only this daemon's own) and every later one, on `connection`, which from then on
    /// only watches. The replay (up to 4 MiB) waits its turn at `heavyGate`. On a shared store, a watcher of
    /// other daemons' events is answered once the relay follows them (`FeedRelay.follow`).
    /// - Returns: `.null`: the header is the reply, already written.
    /// - Throws: `JobError` `bad_request` for a `since`, `jobs`, `kinds` or `local` of the wrong type or an unknown
    ///   kind.
    func watch(_ request: JSONValue, on connection: Connection) async throws -> JSONValue {
        let since = try wholeNumber(request, "since")
        let jobs = Set(try strings(request, "jobs") ?? [])
        let kinds = Set(try strings(request, "kinds") ?? [])
        let local = try bool(request, "local") ?? false
        try checkKinds(kinds)
        // The replay (up to 4 MiB) is heavy work too: a crowd of watchers subscribing from 0 waits its turns.
        await heavyGate.enter()
        let relay = local ? nil : scheduler.feed.relay
        if let relay { await relay.follow() }
        let building = Timestamp.monotonic()
        defer { heavyGate.leave(pause: Timestamp.monotonic() - building) }
        guard !connection.pipe.isClosing else {
            relay?.watchersChanged()
            return .null
        }
        connection.watching = true
        let header: JSONValue = [
            "ok": true, "watching": true, "seq": .number(Double(scheduler.feed.lastSeq)),
            "oldest": scheduler.feed.oldestSeq.map { .number(Double($0)) } ?? .null,
        ]
        reply(connection.pipe, JSONCoding.encode(header) + [0x0A])
        let replay = scheduler.feed.subscribe(connection.pipe, since: since, jobs: jobs, kinds: kinds, local: local)
        if case .incomplete(let message) = replay { connection.pipe.write(ProgressFeed.gapLine(message)) }
        if connection.pipe.pendingWriteBytes > 0 { unreadLimit.check() }
        return .null
    }
}
