/// A job's lifecycle state (docs/explanation/design.md, "Job states").
///
/// `queued → running → succeeded | failed | cancelled | needs_retry | queued`, plus `paused`.
/// `succeeded`, `failed` and `cancelled` are terminal.
public enum JobState: String, Codable, Sendable, CaseIterable {
    case queued
    case running
    case paused
    case needsRetry = "needs_retry"
    case succeeded
    case failed
    case cancelled

    /// Whether the job can never run again.
    public var isTerminal: Bool {
        switch self {
        case .succeeded, .failed, .cancelled: return true
        case .queued, .running, .paused, .needsRetry: return false
        }
    }
}

extension JobState {
    /// The states a job ends in, in the order reports list them.
    public static let ended: [JobState] = [.succeeded, .failed, .cancelled]
}

/// Why a running job is told to stop (docs/explanation/design.md, "Every stop has a reason").
public enum CancellationReason: String, Codable, Sendable, CaseIterable {
    /// A person asked. Clean up for good; terminal state `cancelled`.
    case userStop = "user_stop"
    /// Past its deadline or stalled. Keep the resumable state; `needs_retry`, then `failed` after the last attempt.
    case timeout
    /// The daemon needs the slot or is shutting down. Checkpoint; back to `queued` (or `paused`).
    case resourceReclaim = "resource_reclaim"
}

/// A recorded stop: the reason, when (ISO 8601, UTC) and a human detail.
public struct Cancellation: Codable, Sendable, Equatable {
    /// Why the job was stopped.
    public var reason: CancellationReason
    /// When, ISO 8601 in UTC.
    public var at: String
    /// What happened, for people ("no progress for 60 s", "paused by user").
    public var detail: String

    public init(reason: CancellationReason, at: String, detail: String) {
        self.reason = reason
        self.at = at
        self.detail = detail
    }

    /// The stop as it may be shown: URLs in its detail without their secrets (`URLRedaction.text`).
    public var redacted: Cancellation {
        var cancellation = self
        cancellation.detail = URLRedaction.text(detail)
        return cancellation
    }
}

/// A job's failure: a stable machine code and a message for people (docs/reference/json.md, "Job").
///
/// Codes are part of the contract; scripts match on them. Job kinds throw these from `run`.
public struct JobError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    /// Stable machine code, e.g. `source_changed`, `source_missing`, `timeout`.
    public var code: String
    /// What went wrong and, where possible, what to do about it.
    public var message: String
    /// Whether another attempt may succeed (transient I/O); the scheduler then retries with backoff.
    public var retryable: Bool
    /// Whether a person must act before the job can go on (credentials refused): the job is `paused` with this
    /// error, keeping its checkpoint and its attempt, until `resume` (which may change its params, e.g. headers).
    public var pausesJob: Bool

    public init(code: String, message: String, retryable: Bool = false, pausesJob: Bool = false) {
        self.code = code
        self.message = message
        self.retryable = retryable
        self.pausesJob = pausesJob
    }

    enum CodingKeys: String, CodingKey { case code, message }

    /// The error as it may be shown: URLs in its message without their secrets (`URLRedaction.text`).
    public var redacted: JobError {
        var error = self
        error.message = URLRedaction.text(message)
        return error
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        code = try container.decode(String.self, forKey: .code)
        message = try container.decode(String.self, forKey: .message)
        retryable = false
        pausesJob = false
    }

    public var description: String { "\(code): \(message)" }
}

/// The unit a job's progress counts (docs/explanation/design.md: "Progress is the heartbeat").
///
/// An open set, like App Intents' progress units: the built-in kinds use `bytes`, `photos`, `files` and `items`, and
/// a kind may name its own (`ProgressUnit("thumbnails")`). Clients show counts as "12 thumbnails" and format only
/// `bytes` as sizes.
public struct ProgressUnit: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    /// The unit's name as it appears in the JSON (`"bytes"`): 1 to 32 lowercase ASCII letters, digits or `_`.
    public let rawValue: String

    /// The unit named `rawValue`, or `nil` if the name is empty, longer than 32 characters or has a character
    /// other than a lowercase ASCII letter, a digit or `_`.
    public init?(rawValue: String) {
        let allowed = rawValue.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }
        guard !rawValue.isEmpty, rawValue.utf8.count <= 32, allowed else { return nil }
        self.rawValue = rawValue
    }

    /// A unit a kind names in its traits (`ProgressUnit("thumbnails")`).
    /// - Precondition: `name` is a valid unit name (see `init(rawValue:)`): a programming error otherwise.
    public init(_ name: StaticString) {
        guard let unit = ProgressUnit(rawValue: name.description) else {
            preconditionFailure("not a progress unit name (lowercase letters, digits, _): \(name)")
        }
        self = unit
    }

    /// Bytes: counts are shown as sizes (`1.2 GB`) and rates as `MB/s`.
    public static let bytes = ProgressUnit("bytes")
    /// Photos of the library.
    public static let photos = ProgressUnit("photos")
    /// Files.
    public static let files = ProgressUnit("files")
    /// Anything else counted one by one.
    public static let items = ProgressUnit("items")

    /// The name.
    public var description: String { rawValue }
}

/// One sub-part of a job's progress, e.g. one file of a multi-file upload.
public struct ProgressItem: Codable, Sendable, Equatable {
    /// Short label, e.g. the file name.
    public var label: String
    /// Units done of this part.
    public var completed: Int64
    /// Units in this part.
    public var total: Int64

    public init(label: String, completed: Int64, total: Int64) {
        self.label = label
        self.completed = completed
        self.total = total
    }
}

/// A job's progress as published: `completedUnitCount` of `totalUnitCount` units, with rate and ETA.
public struct JobProgress: Sendable, Equatable {
    /// Units done (`completedUnitCount`).
    public var completed: Int64
    /// Units in all (`totalUnitCount`); 0 while unknown.
    public var total: Int64
    /// What the counts count.
    public var unit: ProgressUnit
    /// Smoothed units per second (exponential moving average), or `nil` before two samples.
    public var ratePerSecond: Double?
    /// Seconds left at the current rate, or `nil` when unknown.
    public var etaSeconds: Double?
    /// Label of the part being worked on now (e.g. the file being uploaded).
    public var current: String?
    /// Per-part progress, for jobs with several parts.
    public var items: [ProgressItem]
    /// Units on their way but not yet confirmed (a tus `PATCH`'s bytes already sent, which the server has not
    /// acknowledged), not counted in `completed`; `nil` for kinds that have no such thing. JSON `in_flight`.
    public var inFlight: Int64?
    /// Files done and files in all, for kinds that count files beside their unit (a folder upload: bytes and
    /// files, "1.2 GiB / 8.4 GiB, 312 / 2 480 files"); `nil` for the others. JSON `files_completed`, `files_total`.
    public var files: ProgressFileCount?
    /// The long step without units the job is in (listing or comparing with a destination), or `nil` (see
    /// `ProgressPhase`). JSON `phase`, absent when `nil`.
    public var phase: ProgressPhase?
    /// Whether the job has succeeded: then `fraction` is 1 even when `total` is 0 (an empty upload).
    public var isFinished = false

    public init(
        completed: Int64 = 0, total: Int64 = 0, unit: ProgressUnit, ratePerSecond: Double? = nil,
        etaSeconds: Double? = nil, current: String? = nil, items: [ProgressItem] = [], inFlight: Int64? = nil,
        files: ProgressFileCount? = nil, phase: ProgressPhase? = nil
    ) {
        self.phase = phase
        self.inFlight = inFlight
        self.files = files
        self.completed = completed
        self.total = total
        self.unit = unit
        self.ratePerSecond = ratePerSecond
        self.etaSeconds = etaSeconds
        self.current = current
        self.items = items
    }

    /// `completed / total`, in 0…1; 0 while the total is unknown, 1 once a job with nothing to do succeeded.
    public var fraction: Double {
        total > 0 ? min(1, max(0, Double(completed) / Double(total))) : isFinished ? 1 : 0
    }

    /// The docs/reference/json.md "Progress" shape: `{"completed", "total", "unit", "fraction", "rate_per_s", "eta_s"}` plus `current`,
    /// `items` (sub-rows for `watch --expand`), and `in_flight`, `files_completed` / `files_total`, `phase` when
    /// known.
    public var json: JSONValue { .object(Dictionary(uniqueKeysWithValues: jsonMembers)) }

    /// `json` as compact JSON text (the stored form), written member by member in key order, as `jsonMembers`
    /// lists them (one of these per lifecycle write and per insert of a job: its member list was a third of
    /// its cost).
    public var jsonText: String {
        var writer = JSONObjectWriter(capacity: 160)
        writer.member("completed", .number(Double(completed)))
        writer.member("current", .string(current))
        writer.member("eta_s", etaSeconds.map { .number(($0 * 10).rounded() / 10) } ?? .null)
        if let files {
            writer.member("files_completed", .number(Double(files.completed)))
            writer.member("files_total", .number(Double(files.total)))
        }
        writer.member("fraction", .number((fraction * 10_000).rounded() / 10_000))
        if let inFlight { writer.member("in_flight", .number(Double(inFlight))) }
        if !items.isEmpty { writer.member("items", JSONCoding.value(of: items)) }
        if let phase { writer.member("phase", phase.json) }
        writer.member("rate_per_s", ratePerSecond.map { .number(($0 * 10).rounded() / 10) } ?? .null)
        writer.member("total", .number(Double(total)))
        writer.member("unit", string: unit.rawValue)
        guard writer.isValid else { return "null" }
        return String(decoding: writer.finish(), as: UTF8.self)
    }

    /// The members of `json`, in sorted order: the one definition of the shape.
    public var jsonMembers: [(key: String, value: JSONValue)] {
        var members: [(key: String, value: JSONValue)] = [
            ("completed", .number(Double(completed))), ("current", .string(current)),
            ("eta_s", etaSeconds.map { .number(($0 * 10).rounded() / 10) } ?? .null),
        ]
        members.reserveCapacity(12)
        if let files {
            members.append(("files_completed", .number(Double(files.completed))))
            members.append(("files_total", .number(Double(files.total))))
        }
        members.append(("fraction", .number((fraction * 10_000).rounded() / 10_000)))
        if let inFlight { members.append(("in_flight", .number(Double(inFlight)))) }
        if !items.isEmpty { members.append(("items", JSONCoding.value(of: items))) }
        if let phase { members.append(("phase", phase.json)) }
        members.append(("rate_per_s", ratePerSecond.map { .number(($0 * 10).rounded() / 10) } ?? .null))
        members.append(("total", .number(Double(total))))
        members.append(("unit", .string(unit.rawValue)))
        return members
    }

    /// Reads the shape `json` writes.
    public init?(json: JSONValue) {
        guard let completed = json["completed"]?.intValue, let total = json["total"]?.intValue,
            let unit = json["unit"]?.stringValue.flatMap(ProgressUnit.init(rawValue:))
        else { return nil }
        self.init(
            completed: completed, total: total, unit: unit, ratePerSecond: json["rate_per_s"]?.doubleValue,
            etaSeconds: json["eta_s"]?.doubleValue, current: json["current"]?.stringValue,
            items: json["items"].flatMap { try? JSONCoding.convert($0, to: [ProgressItem].self) } ?? [],
            inFlight: json["in_flight"]?.intValue,
            files: json["files_total"]?.intValue.map {
                ProgressFileCount(completed: json["files_completed"]?.intValue ?? 0, total: $0)
            }, phase: json["phase"].flatMap(ProgressPhase.init(json:)))
        isFinished = total == 0 && json["fraction"]?.doubleValue == 1
    }
}

/// Per-job scheduling options, given at submit time.
public struct JobOptions: Codable, Sendable, Equatable {
    /// Higher runs first; FIFO within a priority. May be negative.
    public var priority: Int
    /// Deadline for one attempt, in seconds from its start.
    public var timeoutSeconds: Double
    /// A running job whose progress does not move for this many seconds is stopped with `timeout`.
    public var stallTimeoutSeconds: Double
    /// Attempts before a job that keeps timing out or failing transiently ends `failed`.
    public var maxAttempts: Int
    /// How long a job keeps waiting out transient failures of a service (a server down, 5xx, 429, resets) inside
    /// one attempt before it gives up, in seconds (issue 11: by elapsed time, not by a count). Default 24 h.
    public var giveUpAfterSeconds: Double

    public init(
        priority: Int, timeoutSeconds: Double, stallTimeoutSeconds: Double, maxAttempts: Int,
        giveUpAfterSeconds: Double = JobOptions.defaultGiveUpAfterSeconds
    ) {
        self.priority = priority
        self.timeoutSeconds = timeoutSeconds
        self.stallTimeoutSeconds = stallTimeoutSeconds
        self.maxAttempts = maxAttempts
        self.giveUpAfterSeconds = giveUpAfterSeconds
    }

    /// The default `giveUpAfterSeconds`: 24 h.
    public static let defaultGiveUpAfterSeconds: Double = 24 * 3600

    /// The JSON keys of the options (`priority`, `timeout_s`, …), also those a submit's `options` may give.
    public enum CodingKeys: String, CodingKey, CaseIterable {
        case priority
        case timeoutSeconds = "timeout_s"
        case stallTimeoutSeconds = "stall_timeout_s"
        case maxAttempts = "max_attempts"
        case giveUpAfterSeconds = "give_up_after_s"
    }
}

/// A job as the store keeps it and as `show --json` prints it.
public struct JobRecord: Sendable, Equatable {
    /// A UUID, lower case.
    public var id: String
    /// The job kind's name (`upload`, `tag`, …).
    public var kind: String
    /// The lifecycle state.
    public var state: JobState
    /// Priority, deadline, stall timeout and attempts.
    public var options: JobOptions
    /// The number of the current or last attempt; 0 before the first start.
    public var attempt: Int
    /// The last progress reported (live for a running job).
    public var progress: JobProgress
    /// The last stop, if the job was ever stopped. Shown as `last_stop` always, and as `cancellation` only while
    /// the job is in the state that stop (or a timeout's last attempt) put it in (see `json`).
    public var cancellation: Cancellation?
    /// Why the job failed (or why its last attempt did).
    public var error: JobError?
    /// ISO 8601 UTC timestamps.
    public var createdAt: String
    public var updatedAt: String
    /// The kind's params, as submitted (header values of tus uploads redacted when shown).
    public var params: JSONValue
    /// The kind's result once it succeeded, else `null`.
    public var result: JSONValue
    /// When a `needs_retry` job becomes `queued` again, in Unix seconds; `nil` otherwise.
    public var retryAt: Double?
    /// Submission order: the FIFO key within a priority.
    public var sequence: Int64
    /// Whether the next start continues the current attempt (the last run was reclaimed, paused or crashed).
    public var resumesAttempt: Bool = false
    /// The idempotency key it was submitted with (`submit --key`, or the one the CLI made), if any: a submit
    /// retried with it returns this job instead of making another.
    public var key: String? = nil
    /// The queue (label) it waits in: on a shared store only daemons started with it claim it (`daemon
    /// --queues`). Always `JobRecord.defaultQueue` on the embedded SQLite store.
    public var queue: String = JobRecord.defaultQueue
    /// The host whose daemons alone may run it (a kind that reads the submitting host's files, see
    /// `JobKindTraits.readsHostFiles`); `nil` when any host may (always on the embedded SQLite store).
    public var pinnedHost: String? = nil

    /// The queue of a job submitted without one, and the one a daemon serves without `--queues`.
    public static let defaultQueue = "default"

    /// A record with every member given (see each member's documentation).
    public init(
        id: String, kind: String, state: JobState, options: JobOptions, attempt: Int, progress: JobProgress,
        cancellation: Cancellation? = nil, error: JobError? = nil, createdAt: String, updatedAt: String,
        params: JSONValue, result: JSONValue, retryAt: Double? = nil, sequence: Int64, resumesAttempt: Bool = false,
        key: String? = nil, queue: String = JobRecord.defaultQueue, pinnedHost: String? = nil
    ) {
        self.id = id
        self.kind = kind
        self.state = state
        self.options = options
        self.attempt = attempt
        self.progress = progress
        self.cancellation = cancellation
        self.error = error
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.params = params
        self.result = result
        self.retryAt = retryAt
        self.sequence = sequence
        self.resumesAttempt = resumesAttempt
        self.key = key
        self.queue = queue
        self.pinnedHost = pinnedHost
    }

    /// Whether the job is where it is because it was stopped: `queued`, `paused`, `needs_retry` or `cancelled`
    /// after a stop, or `failed` because its last attempt timed out. Not for `running` and `succeeded` (a job
    /// stopped once and then finished is not a stopped job), nor for a job failed or retrying by its own error.
    public var isStopped: Bool {
        guard cancellation != nil else { return false }
        switch state {
        case .queued, .paused, .cancelled: return true
        case .needsRetry, .failed: return error == nil || error?.code == "timeout"
        case .running, .succeeded: return false
        }
    }

    /// The docs/reference/json.md "Job" shape, plus `last_stop`: `cancellation` is the stop that put the job in its
    /// current state (`null` for a running or succeeded job, so `cancellation != null` means "stopped"), and
    /// `last_stop` the most recent stop whatever the state (`null` if it was never stopped).
    public var json: JSONValue {
        [
            "id": .string(id), "sequence": .number(Double(sequence)), "kind": .string(kind),
            "state": .string(state.rawValue), "priority": .number(Double(options.priority)),
            "attempt": .number(Double(attempt)), "max_attempts": .number(Double(options.maxAttempts)),
            "timeout_s": .number(options.timeoutSeconds), "stall_timeout_s": .number(options.stallTimeoutSeconds),
            "give_up_after_s": .number(options.giveUpAfterSeconds),
            "progress": progress.json,
            "cancellation": isStopped ? cancellation.map { JSONCoding.value(of: $0.redacted) } ?? .null : .null,
            "last_stop": cancellation.map { JSONCoding.value(of: $0.redacted) } ?? .null,
            "error": error.map { JSONCoding.value(of: $0.redacted) } ?? .null,
            "created_at": .string(createdAt), "updated_at": .string(updatedAt),
            "retry_at": retryAt.map { .string(Timestamp.iso8601(unixSeconds: $0)) } ?? .null,
            "params": Self.redacted(params), "result": URLRedaction.json(result), "key": key.map { .string($0) } ?? .null,
            "queue": .string(queue), "pinned_host": pinnedHost.map { .string($0) } ?? .null,
        ]
    }

    /// What replaces a secret in the job JSON.
    public static let redactedValue = "<redacted>"

    /// `params` as the daemon shows it: the values of the HTTP header lines in a top-level `headers` array
    /// (`"Authorization: Bearer …"`) are replaced by `<redacted>`, names kept, and every URL in the other strings
    /// (the destination `to`, an S3 `endpoint`) has its user info and credential-looking query values redacted
    /// (`URLRedaction`). The store keeps them (the job needs them to run after a restart); no reply, feed event or
    /// log line carries them.
    public static func redacted(_ params: JSONValue) -> JSONValue {
        let shown = URLRedaction.json(params)
        guard case .object(var members) = shown, let lines = params["headers"]?.arrayValue else { return shown }
        members["headers"] = .array(
            lines.map { line in
                guard let text = line.stringValue, let colon = text.firstIndex(of: ":") else {
                    return .string(redactedValue)
                }
                return .string(text[..<colon] + ": " + redactedValue)
            })
        return .object(members)
    }
}
