import TrailbookProtocol

/// A typed client of a running daemon's control socket, for Swift programs: submit a kind's typed params, read a
/// job, cancel, pause or resume it, and follow the feed (`feed`).
///
/// Each request opens its own connection (a blocking one-line exchange, `DaemonClient`), so the client is cheap to
/// keep and safe to share between tasks. Run requests off a latency-sensitive thread: they wait for the daemon.
public struct JobClient: Sendable {
    /// The daemon's socket (`$TRAILBOOK_JOBS_HOME/daemon.sock`, see `Endpoint`).
    public let socketPath: String

    /// A client of the daemon listening at `socketPath`. Nothing is connected until a request.
    public init(socketPath: String) {
        self.socketPath = socketPath
    }

    /// Submits a job of `kind` with `params` (encoded as the kind's JSON params).
    ///
    /// - Parameters:
    ///   - key: an idempotency key (1 to 200 printable ASCII characters): a submit whose key is stored queues
    ///     nothing and returns that job with `existing` true.
    /// - Returns: the job, and whether it already existed under `key`.
    /// - Throws: `JobClientError.refused` with the daemon's code (`unknown_kind`, `invalid_params`, `key_reused`,
    ///   …), `.unreachable` or `.badReply`.
    public func submit<Params: Encodable>(
        kind: String, params: Params, key: String? = nil, options: SubmitOptions = SubmitOptions()
    ) throws(JobClientError) -> (job: JobSnapshot, existing: Bool) {
        var request: [String: JSONValue] = [
            "op": "submit", "kind": .string(kind), "params": JSONCoding.value(of: params), "options": options.json,
        ]
        if let key { request["key"] = .string(key) }
        let reply = try send(.object(request))
        guard let job = reply["job"] else { throw .badReply("a submit reply without a job") }
        return (try JobSnapshot(json: job), reply["existing"]?.boolValue ?? false)
    }

    /// The job `id` (or a unique prefix of it).
    /// - Throws: `JobClientError.refused` with `not_found` or `ambiguous_id`, `.unreachable`, `.badReply`.
    public func job(_ id: String) throws(JobClientError) -> JobSnapshot { try jobOp("show", id) }

    /// Cancels job `id` (`user_stop`): a running job stops, cleans up and ends `cancelled`.
    /// - Returns: the job as the daemon answered (a running one may still be stopping).
    /// - Throws: as `job(_:)`; `refused` with `already_ended` for an ended job.
    public func cancel(_ id: String) throws(JobClientError) -> JobSnapshot { try jobOp("cancel", id) }

    /// Pauses job `id`: a running one stops for `resource_reclaim` keeping its checkpoint; it waits `paused`.
    /// - Throws: as `cancel(_:)`.
    public func pause(_ id: String) throws(JobClientError) -> JobSnapshot { try jobOp("pause", id) }

    /// Resumes paused job `id`: it is queued again and resumes from its checkpoint.
    /// - Throws: as `cancel(_:)`; `refused` with `not_paused` for a job that is not paused.
    public func resume(_ id: String) throws(JobClientError) -> JobSnapshot { try jobOp("resume", id) }

    /// The daemon's feed from after event `since` (all it keeps when `nil`), only of `jobs` and `kinds` when given,
    /// as an `AsyncSequence` that reconnects by itself (see `JobFeed`).
    public func feed(since: Int64? = nil, jobs: [String] = [], kinds: [String] = [], reconnectForSeconds: Double = 30) -> JobFeed {
        JobFeed(socketPath: socketPath, since: since, jobs: jobs, kinds: kinds, reconnectForSeconds: reconnectForSeconds)
    }

    private func jobOp(_ op: String, _ id: String) throws(JobClientError) -> JobSnapshot {
        let reply = try send(["op": .string(op), "job": .string(id)])
        guard let job = reply["job"] else { throw .badReply("a \(op) reply without a job") }
        return try JobSnapshot(json: job)
    }

    /// Sends one request on a connection of its own and returns the `ok` reply.
    private func send(_ request: JSONValue) throws(JobClientError) -> JSONValue {
        let reply: JSONValue
        do {
            reply = try DaemonClient(socketPath: socketPath).request(request)
        } catch {
            throw .unreachable(error.message)
        }
        guard reply["ok"]?.boolValue == true else {
            let error = reply["error"]
            throw .refused(
                JobError(
                    code: error?["code"]?.stringValue ?? "internal",
                    message: error?["message"]?.stringValue ?? "the daemon refused without a message"))
        }
        return reply
    }
}
