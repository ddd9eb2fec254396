/// One job to submit: a `submit` request, or one entry of a `submit_batch`.
public struct SubmitRequest: Sendable, Equatable {
    /// The job kind's name.
    public var kind: String
    /// The kind's params.
    public var params: JSONValue
    /// Overrides of the daemon's defaults.
    public var options: SubmitOptions
    /// Skip the duplicate check (`options.allow_duplicate`).
    public var allowDuplicate: Bool
    /// The idempotency key: a submit with a key already stored returns that key's job instead of a new one.
    public var key: String?
    /// The queue to put it in (`options.queue`); `nil` for `JobRecord.defaultQueue`. Only daemons of a shared
    /// store started with it claim it; the SQLite store has only the default queue.
    public var queue: String?
    /// Its paths are shared by every host (`options.any_host`): not pinned to the submitting host even if its
    /// kind reads that host's files (`JobKindTraits.readsHostFiles`).
    public var anyHost: Bool

    /// A request; see the members.
    public init(
        kind: String, params: JSONValue, options: SubmitOptions = SubmitOptions(), allowDuplicate: Bool = false,
        key: String? = nil, queue: String? = nil, anyHost: Bool = false
    ) {
        self.kind = kind
        self.params = params
        self.options = options
        self.allowDuplicate = allowDuplicate
        self.key = key
        self.queue = queue
        self.anyHost = anyHost
    }

    /// SHA-256 (hex) of the request's kind, params and options as canonical JSON (sorted keys): what a retry with
    /// the same key must repeat. `allow_duplicate` is left out (it does not describe the job).
    public var digest: String {
        var canonical: [String: JSONValue] = [
            "kind": .string(kind), "params": params, "options": JSONCoding.value(of: options),
        ]
        // Only when given, so that the digests of keys stored before queues existed still match.
        if let queue { canonical["queue"] = .string(queue) }
        if anyHost { canonical["any_host"] = true }
        return SHA256.hexDigest(of: JSONCoding.encode(JSONValue.object(canonical)))
    }
}
