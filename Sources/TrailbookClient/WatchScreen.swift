import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The `watch` screen as a value: job rows built from feed events and job JSON, rendered to lines of text for a
/// given width and height. No I/O and no clock of its own (callers pass `now`, Unix seconds), so tests drive it
/// with hand-written events.
///
/// Finished jobs settle above the live rows, newest last, and stay visible; the live rows keep the order in which
/// the screen first saw them. A summary line (running, queued, done, failed) and a key help line close the screen.
struct WatchScreen {
    /// One job as the screen shows it.
    struct Row {
        var id: String
        var kind: String
        var label: String
        var state: JobState
        var attempt: Int = 0
        var maxAttempts: Int = 0
        var completed: Int64 = 0
        var total: Int64 = 0
        var unit: String = ""
        /// Units per second, smoothed (the daemon's moving average, else our own).
        var rate: Double?
        var eta: Double?
        var current: String?
        var items: [ProgressItem] = []
        /// "312 / 2 480 files" for a job that counts files (`JobText.files`), else `nil`.
        var files: String?
        /// "listing the destination: 41 000 objects" while the job is in a phase without units (`JobText.phase`).
        var phase: String?
        var cancellation: JSONValue = .null
        var error: JSONValue = .null
        /// When a `needs_retry` job is due to be queued again, Unix seconds.
        var retryAt: Double?
        /// When the job was submitted and when it ended, Unix seconds.
        var submittedAt: Double?
        var endedAt: Double?
        /// The last progress sample, for our own rate when the daemon sends none.
        var sample: (at: Double, completed: Int64)?

        var fraction: Double { total > 0 ? min(1, max(0, Double(completed) / Double(total))) : 0 }
    }

    /// What a piece of text looks like; plain terminals ignore it.
    enum Style: Equatable {
        case plain, dim, bold, green, red, yellow, cyan, inverse
    }

    /// A run of text with one style. Its text is escaped (`TerminalText.escape`): whatever a job's params,
    /// messages or progress hold, no control character reaches the terminal.
    struct Span: Equatable {
        var text: String
        var style: Style
        init(_ text: String, _ style: Style = .plain) {
            self.text = TerminalText.escape(text)
            self.style = style
        }
    }

    typealias Line = [Span]

    private(set) var rows: [String: Row] = [:]
    /// Ids of jobs not yet ended, in the order first seen.
    private(set) var live: [String] = []
    /// Ids of ended jobs, in the order they ended.
    private(set) var finished: [String] = []
    /// The selected live job, if any.
    private(set) var selection: String?
    /// Sub-rows under each running job for its files in flight (`--expand`, `FilesInFlight`).
    var expand = false
    /// A line shown above the key help, e.g. "lost the daemon; reconnecting…".
    var notice: String?
    /// The daemon's counts of unfinished jobs by state (the `counts` of a `list` reply), kept current by the feed's
    /// events: the summary's running, queued, paused and retrying figures come from them when known, as the rows
    /// hold only the jobs listed (at most `list`'s limit of a million queued).
    var activeCounts: [JobState: Int]?
    /// A question replacing the key help, e.g. the cancel confirmation.
    var prompt: String?

    init(expand: Bool = false) { self.expand = expand }

    /// Whether the screen already has a row for `id`.
    func knows(_ id: String) -> Bool { rows[id] != nil }

    // MARK: - Input

    /// Adds or refreshes a job from its JSON (docs/reference/json.md, "Job"), e.g. the snapshot taken when watching
    /// starts or the reply of `show` for a job first seen in an event.
    mutating func apply(job: JSONValue, now: Double) {
        guard let id = job["id"]?.stringValue else { return }
        let state = job["state"]?.stringValue.flatMap(JobState.init(rawValue:)) ?? .queued
        var row = rows[id] ?? Row(id: id, kind: job["kind"]?.stringValue ?? "", label: "", state: state)
        row.kind = job["kind"]?.stringValue ?? row.kind
        row.label = Self.label(kind: row.kind, params: job["params"] ?? .null)
        row.attempt = Int(job["attempt"]?.intValue ?? Int64(row.attempt))
        row.maxAttempts = Int(job["max_attempts"]?.intValue ?? Int64(row.maxAttempts))
        row.cancellation = job["cancellation"] ?? .null
        row.error = job["error"] ?? .null
        row.submittedAt = job["created_at"]?.stringValue.flatMap(Self.unixSeconds) ?? row.submittedAt
        row.retryAt = job["retry_at"]?.stringValue.flatMap(Self.unixSeconds)
        if let progress = job["progress"] { Self.update(&row, progress: progress, now: now) }
        if state.isTerminal { row.endedAt = job["updated_at"]?.stringValue.flatMap(Self.unixSeconds) ?? now }
        rows[id] = row
        setState(id, state)
    }

    /// Applies one feed event (docs/reference/protocol.md, "The feed"). Events of unknown jobs make a bare row; callers
    /// usually `apply(job:)` the job's JSON first to get its label and attempts.
    mutating func apply(event: JSONValue, now: Double) {
        guard let id = event["job"]?.stringValue, let type = event["type"]?.stringValue else {
            if event["type"]?.stringValue == "gap" { notice = "some events were missed; rows may be stale" }
            return
        }
        var row = rows[id] ?? Row(id: id, kind: event["kind"]?.stringValue ?? "", label: "", state: .queued)
        if row.submittedAt == nil { row.submittedAt = now }
        var newState: JobState?
        switch type {
        case "submitted":
            newState = event["state"]?.stringValue.flatMap(JobState.init(rawValue:)) ?? .queued
            activeCounts?[.queued, default: 0] += 1
        case "progress":
            if let progress = event["progress"] { Self.update(&row, progress: progress, now: now) }
        case "state":
            guard let to = event["to"]?.stringValue.flatMap(JobState.init(rawValue:)) else { break }
            newState = to
            if let from = event["from"]?.stringValue.flatMap(JobState.init(rawValue:)), from != to,
                var counts = activeCounts
            {
                if !from.isTerminal { counts[from] = max(0, (counts[from] ?? 0) - 1) }
                if !to.isTerminal { counts[to, default: 0] += 1 }
                activeCounts = counts
            }
            if let attempt = event["attempt"]?.intValue { row.attempt = Int(attempt) }
            row.cancellation = event["cancellation"] ?? .null
            row.error = event["error"] ?? .null
            row.retryAt = event["retry_in_s"]?.doubleValue.map { now + $0 }
            if to != .running {
                row.rate = nil
                row.eta = nil
                row.sample = nil
            }
            if to == .succeeded, row.total > 0 { row.completed = row.total }
            row.endedAt = to.isTerminal ? now : nil
        default:
            break
        }
        rows[id] = row
        if let newState { setState(id, newState) }
    }

    private mutating func setState(_ id: String, _ state: JobState) {
        rows[id]?.state = state
        if state.isTerminal {
            live.removeAll { $0 == id }
            if !finished.contains(id) { finished.append(id) }
            if selection == id { selection = nil }
        } else {
            finished.removeAll { $0 == id }
            if !live.contains(id) { live.append(id) }
        }
        if selection == nil { selection = live.first }
    }

    private static func update(_ row: inout Row, progress: JSONValue, now: Double) {
        let completed = progress["completed"]?.intValue ?? row.completed
        row.total = progress["total"]?.intValue ?? row.total
        row.unit = progress["unit"]?.stringValue ?? row.unit
        row.current = progress["current"]?.stringValue
        row.items = progress["items"].flatMap { try? JSONCoding.convert($0, to: [ProgressItem].self) } ?? []
        row.files = JobText.files(progress)
        row.phase = JobText.phase(progress)
        // Our own moving average (3 s time constant, like the daemon's) for when the daemon sends no rate.
        var ownRate: Double?
        if let sample = row.sample, now - sample.at >= 0.2 {
            let instant = Double(completed - sample.completed) / (now - sample.at)
            let alpha = 1 - exp(-(now - sample.at) / 3)
            ownRate = max(0, (row.rate ?? instant) + alpha * (instant - (row.rate ?? instant)))
            row.sample = (now, completed)
        } else if row.sample == nil {
            row.sample = (now, completed)
        }
        row.completed = completed
        if let rate = progress["rate_per_s"]?.doubleValue {
            row.rate = rate
            row.eta = progress["eta_s"]?.doubleValue
        } else if let ownRate {
            row.rate = ownRate
            row.eta = ownRate > 0 && row.total > completed ? Double(row.total - completed) / ownRate : nil
        }
    }

    // MARK: - Selection

    /// The selected job's row.
    var selectedRow: Row? { selection.flatMap { rows[$0] } }

    /// Moves the selection `offset` live rows down (negative: up), stopping at the ends.
    mutating func moveSelection(by offset: Int) {
        guard !live.isEmpty else {
            selection = nil
            return
        }
        let index = selection.flatMap { live.firstIndex(of: $0) } ?? 0
        selection = live[max(0, min(live.count - 1, index + offset))]
    }
}
