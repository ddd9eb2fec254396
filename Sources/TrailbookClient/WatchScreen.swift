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

    // MARK: - Rendering

    /// Counts for the summary line.
    struct Summary: Equatable {
        var running = 0, queued = 0, paused = 0, retrying = 0, done = 0, failed = 0, cancelled = 0
    }

    var summary: Summary {
        var summary = Summary()
        for row in rows.values {
            switch row.state {
            case .running: summary.running += 1
            case .queued: summary.queued += 1
            case .paused: summary.paused += 1
            case .needsRetry: summary.retrying += 1
            case .succeeded: summary.done += 1
            case .failed: summary.failed += 1
            case .cancelled: summary.cancelled += 1
            }
        }
        if let counts = activeCounts {
            summary.running = counts[.running] ?? 0
            summary.queued = counts[.queued] ?? 0
            summary.paused = counts[.paused] ?? 0
            summary.retrying = counts[.needsRetry] ?? 0
        }
        return summary
    }

    /// The whole screen: at most `height` lines, none wider than `width` columns.
    func render(width: Int, height: Int, now: Double) -> [Line] {
        let width = max(1, width)
        let height = max(1, height)
        var liveLines: [(id: String, line: Line)] = []
        let table = LiveTable(rows: live.compactMap { rows[$0] }, width: width, now: now)
        for (index, id) in live.enumerated() {
            liveLines.append((id, table.line(index, selected: id == selection)))
            if expand, let row = rows[id], row.state == .running {
                let flying = FilesInFlight(items: row.items, current: row.current)
                for item in flying.shown { liveLines.append((id, Self.itemLine(item, unit: row.unit, width: width))) }
                if let more = flying.moreText { liveLines.append((id, Self.fit([Span("    └ "), Span(more, .dim)], width))) }
            }
        }
        var footer: [Line] = [summaryLine(width: width)]
        if let notice { footer.insert(Self.fit([Span(notice, .yellow)], width), at: 0) }
        footer.append(Self.fit(prompt.map { [Span($0, .bold)] } ?? Self.keyHelp, width))

        var budget = height - footer.count
        var body: [Line] = []
        if liveLines.count > budget {
            // Keep the selection in view.
            let selected = liveLines.firstIndex { $0.id == selection } ?? 0
            let start = max(0, min(selected - budget / 2, liveLines.count - budget))
            body = liveLines[start..<(start + max(0, budget))].map(\.line)
            budget = 0
        } else {
            budget -= liveLines.count
            let settled = finished.suffix(budget).compactMap { rows[$0] }
            body = settled.map { finishedLine($0, width: width, now: now) } + liveLines.map(\.line)
        }
        return Array((body + footer).suffix(height))
    }

    static let keyHelp: Line = [
        Span("↑/↓", .bold), Span(" select  "), Span("p", .bold), Span(" pause/resume  "), Span("c", .bold),
        Span(" cancel  "), Span("q", .bold), Span(" quit"),
    ]

    func summaryLine(width: Int) -> Line {
        let s = summary
        var spans = [Span("\(s.running) running", s.running > 0 ? .cyan : .plain), Span(" · \(s.queued) queued")]
        if s.paused > 0 { spans.append(Span(" · \(s.paused) paused", .yellow)) }
        if s.retrying > 0 { spans.append(Span(" · \(s.retrying) waiting to retry", .yellow)) }
        spans.append(Span(" · \(s.done) done", s.done > 0 ? .green : .plain))
        spans.append(Span(" · \(s.failed) failed", s.failed > 0 ? .red : .plain))
        if s.cancelled > 0 { spans.append(Span(" · \(s.cancelled) cancelled")) }
        return Self.fit(spans, width)
    }

    func finishedLine(_ row: Row, width: Int, now: Double) -> Line {
        let (mark, style): (String, Style) =
            switch row.state {
            case .succeeded: ("✓", .green)
            case .failed: ("✗", .red)
            default: ("⊘", .yellow)
            }
        var spans = [Span("\(mark) ", style), Span(row.kind + " ", .bold), Span(String(row.id.prefix(8)) + " ", .dim)]
        if !row.label.isEmpty { spans.append(Span(row.label + "  ")) }
        let reason = Self.reason(row, now: now)
        if let reason, reason.hasPrefix(row.state.rawValue) {
            spans.append(Span(reason, style))
        } else {
            spans.append(Span(row.state.rawValue, style))
            if let reason { spans.append(Span(" — " + reason, style)) }
        }
        var facts: [String] = []
        if row.state == .succeeded {
            if row.total > 0 { facts.append(JobText.amount(row.total, unit: row.unit)) }
        } else if row.total > 0 {
            facts.append("at " + Self.percent(row.fraction))
        }
        if let elapsed = Self.elapsed(row, now: now) { facts.append("in " + JobText.duration(elapsed)) }
        if row.attempt > 1 { facts.append("attempt \(row.attempt)") }
        if !facts.isEmpty { spans.append(Span("  " + facts.joined(separator: " · "), .dim)) }
        return Self.fit(spans, width)
    }

    /// A file in flight under its job's row (`--expand`): `    └ NAME  BAR  45.2%  1.2 MiB/2.5 MiB`.
    static func itemLine(_ item: ProgressItem, unit: String, width: Int) -> Line {
        let fraction = FilesInFlight.fraction(item)
        let amount = FilesInFlight.amount(item, unit: unit)
        let label = truncate(item.label, max(4, min(30, width / 3)))
        let barWidth = max(0, min(20, width - TerminalText.columns(label) - TerminalText.columns(amount) - 16))
        var spans = [Span("    └ "), Span(pad(label, max(4, min(30, width / 3))) + " ")]
        if barWidth >= 4 { spans += [Span(bar(fraction, width: barWidth), .cyan), Span(" ")] }
        spans += [Span(pad(percent(fraction), 6, right: true) + "  "), Span(amount, .dim)]
        return fit(spans, width)
    }

    /// The live rows as a table whose columns line up; columns are dropped, least useful first, when the
    /// terminal is too narrow, and the bar takes the room left (between 8 and 40 columns).
    struct LiveTable {
        enum Column: CaseIterable {
            case mark, kind, id, label, bar, percent, amount, rate, eta, elapsed, attempt, status
        }

        var cells: [[Column: Span]] = []
        var fractions: [Double] = []
        /// Rows not running show their status (often a reason in words) right after the amount, over the
        /// rate, ETA, elapsed and attempt columns they have no use for.
        var running: [Bool] = []
        var columns: [Column] = []
        /// Each column's width (its widest cell; for `status`, the widest of running rows), measured once.
        private var widths: [Column: Int] = [:]
        var barWidth = 0
        let width: Int

        init(rows: [Row], width: Int, now: Double) {
            self.width = width
            for row in rows {
                var cell: [Column: Span] = [:]
                cell[.kind] = Span(row.kind, .bold)
                cell[.id] = Span(String(row.id.prefix(8)), .dim)
                cell[.label] = Span(WatchScreen.truncate(Self.label(row), 24))
                cell[.percent] = Span(row.total > 0 ? WatchScreen.percent(row.fraction) : "", .bold)
                cell[.amount] = Span(WatchScreen.amount(row) + (row.files.map { ", " + $0 } ?? ""))
                cell[.rate] = Span(row.rate.map { Self.rate($0, unit: row.unit) } ?? "", .dim)
                cell[.eta] = Span(row.state == .running ? row.eta.map { "ETA " + JobText.duration($0) } ?? "" : "", .dim)
                cell[.elapsed] = Span(WatchScreen.elapsed(row, now: now).map { WatchScreen.clock($0) } ?? "", .dim)
                cell[.attempt] = Span(row.maxAttempts > 0 ? "try \(row.attempt)/\(row.maxAttempts)" : "", .dim)
                let reason = WatchScreen.reason(row, now: now)
                cell[.status] = Span(
                    reason.map {
                        // A reason that already names the state ("paused by you …") stands alone.
                        row.state == .needsRetry || row.state == .queued || $0.hasPrefix(row.state.rawValue)
                            ? $0 : row.state.rawValue + " — " + $0
                    }
                        ?? row.state.rawValue.split(separator: "_").joined(separator: " "),
                    WatchScreen.style(of: row.state))
                cells.append(cell)
                fractions.append(row.fraction)
                running.append(row.state == .running)
            }
            for column in Column.allCases { widths[column] = measuredWidth(column) }
            // Drop columns, least useful first, until the bar gets at least 12 columns; the bar itself goes only
            // when even the essentials leave it less than 6.
            let dropOrder: [Column] = [.elapsed, .id, .attempt, .rate, .eta, .label, .amount, .bar, .kind]
            var chosen = Column.allCases
            for column in [nil] + dropOrder.map(Optional.some) {
                if let column { chosen.removeAll { $0 == column } }
                let fixed = chosen.filter { $0 != .bar && $0 != .status }.reduce(0) { $0 + columnWidth($1) + 1 }
                // Room for the status: the running rows' in full; a waiting row's reason may spill over the
                // columns it skips.
                let skipped = chosen.filter { [.rate, .eta, .elapsed, .attempt].contains($0) }.reduce(0) { $0 + columnWidth($1) + 1 }
                let waiting = cells.indices.filter { !running[$0] }.map { (cells[$0][.status].map { TerminalText.columns($0.text) } ?? 0) - skipped }
                let status = max(columnWidth(.status), min(32, waiting.max() ?? 0))
                let room = width - fixed - status - 1
                let minimum = chosen.contains(.label) ? 12 : 6
                // Without the bar, the kind goes too unless the rest fits: the percent and the state stay.
                if chosen.contains(.bar) ? room >= minimum : room >= -1 || !chosen.contains(.kind) {
                    barWidth = chosen.contains(.bar) ? min(40, room) : 0
                    break
                }
            }
            columns = chosen
        }

        private static func label(_ row: Row) -> String {
            if let current = row.current, !current.isEmpty, row.state == .running { return current }
            return row.label
        }

        private static func rate(_ rate: Double, unit: String) -> String {
            if unit == ProgressUnit.bytes.rawValue { return ByteCount.format(Int64(rate)) + "/s" }
            return (rate >= 10 ? String(Int(rate.rounded())) : String(Int(rate * 10) / 10) + "." + String(Int(rate * 10) % 10))
                + "/s"
        }

        func columnWidth(_ column: Column) -> Int {
            column == .bar ? barWidth : widths[column] ?? 0
        }

        private func measuredWidth(_ column: Column) -> Int {
            switch column {
            case .mark: return 1
            case .bar: return 0
            case .status:
                return cells.indices.filter { running[$0] }.map { cells[$0][.status].map { TerminalText.columns($0.text) } ?? 0 }
                    .max() ?? 0
            default: return cells.map { $0[column].map { TerminalText.columns($0.text) } ?? 0 }.max() ?? 0
            }
        }

        func line(_ index: Int, selected: Bool) -> Line {
            var spans: [Span] = []
            for column in columns {
                if !running[index], [.rate, .eta, .elapsed, .attempt].contains(column) { continue }
                switch column {
                case .mark: spans.append(Span(selected ? "▸" : " ", .bold))
                case .bar: spans.append(Span(WatchScreen.bar(fractions[index], width: barWidth), .cyan))
                case .status: spans.append(cells[index][.status] ?? Span(""))
                default:
                    let cell = cells[index][column] ?? Span("")
                    let rightAligned = [.percent, .amount, .rate].contains(column)
                    let columnWidth = self.columnWidth(column)
                    if columnWidth == 0 { continue }
                    spans.append(Span(WatchScreen.pad(cell.text, columnWidth, right: rightAligned), cell.style))
                }
                if column != .status { spans.append(Span(" ")) }
            }
            var line = WatchScreen.fit(spans, width)
            if selected {
                line = line.map { span in span.style == .cyan ? span : Span(span.text, .inverse) }
            }
            return line
        }
    }

    // MARK: - Words and numbers

    /// Why a job is where it is, in words, or `nil` when its state says it all.
    static func reason(_ row: Row, now: Double) -> String? {
        if row.state == .failed, !row.error.isNull { return row.error["message"]?.stringValue ?? "failed" }
        // Paused or waiting by its own error (credentials refused, a server down): its message says what to do.
        if row.state == .paused || row.state == .needsRetry, !row.error.isNull, row.error["code"]?.stringValue != "timeout" {
            let message = row.error["message"]?.stringValue ?? row.state.rawValue
            guard row.state == .needsRetry else { return message }
            return message + (row.retryAt.map { " — will retry in \(Int(max(0, $0 - now).rounded(.up))) s" } ?? " — will retry")
        }
        guard !row.cancellation.isNull, row.state != .running, row.state != .succeeded else { return nil }
        let detail = row.cancellation["detail"]?.stringValue ?? ""
        switch row.cancellation["reason"]?.stringValue {
        case "user_stop": return "stopped by you"
        case "timeout":
            guard row.state == .needsRetry else { return "timed out" }
            if let retryAt = row.retryAt { return "timed out — will retry in \(Int(max(0, retryAt - now).rounded(.up))) s" }
            return "timed out — will retry"
        case "resource_reclaim":
            if row.state == .paused { return "paused by you — p to resume" }
            if detail.hasPrefix("paused to free a slot") { return "paused to free a slot — will resume" }
            if detail.hasPrefix("daemon shutting down") { return "daemon stopped — will resume" }
            return "paused by the daemon — will resume"
        default: return detail.isEmpty ? nil : detail
        }
    }

    /// A short label from a job's params: the file name for uploads, the tag for tagging, the folder's name for an
    /// import (`trip/`), which photos for a tag or autotag job (`12 photos`, `all photos`, `photos in picks.txt`).
    static func label(kind: String, params: JSONValue) -> String {
        func lastComponent(_ path: JSONValue?) -> String? {
            guard let text = path.flatMap({ $0.stringValue ?? $0["text"]?.stringValue }) else { return nil }
            return text.split(separator: "/").last.map(String.init) ?? text
        }
        // A path that is not UTF-8 comes as {"base64", "text"}: its text is for display (BytePath).
        if let files = params["files"]?.arrayValue, let first = files.first.flatMap({ $0.stringValue ?? $0["text"]?.stringValue }) {
            let name = first.split(separator: "/").last.map(String.init) ?? first
            return files.count > 1 ? "\(name) +\(files.count - 1)" : name
        }
        // An upload of library photos: by tags, or by ID.
        if let photos = params["photos"] {
            if let tags = photos["tags"]?.arrayValue?.compactMap(\.stringValue) { return "photos " + tags.joined(separator: " + ") }
            if let ids = photos["ids"]?.arrayValue { return "\(ids.count) photos" }
            if let file = lastComponent(photos["ids_file"]) { return "photos in " + file }
        }
        if let dir = lastComponent(params["dir"]) { return dir + "/" }
        if let tag = params["tag"]?.stringValue { return "tag \(tag)" }
        if let ids = params["ids"]?.arrayValue { return "\(ids.count) photos" }
        if params["all"]?.boolValue == true { return "all photos" }
        if let file = lastComponent(params["ids_file"]) { return "photos in " + file }
        if let units = params["units"]?.intValue { return "\(units) units" }
        return ""
    }

    /// "45.2%": one decimal, rounded down so 99.96 % never shows as 100.0 %.
    static func percent(_ fraction: Double) -> String {
        let tenths = Int((fraction * 1000).rounded(.down))
        return "\(tenths / 10).\(tenths % 10)%"
    }

    /// "45.0/100.0 MiB" (or "900.0 KiB/1.5 MiB") for bytes, "90/200 photos" for counts.
    static func amount(_ row: Row) -> String {
        if row.unit == ProgressUnit.bytes.rawValue {
            guard row.total > 0 else { return ByteCount.format(row.completed) }
            let done = ByteCount.format(row.completed)
            let total = ByteCount.format(row.total)
            // "45.0/100.0 MiB" when both share a unit.
            if let space = done.lastIndex(of: " "), done[space...] == total[(total.lastIndex(of: " ") ?? total.endIndex)...] {
                return done[..<space] + "/" + total
            }
            return done + "/" + total
        }
        guard !row.unit.isEmpty else { return "" }
        return row.total > 0 ? "\(row.completed)/\(row.total) \(row.unit)" : "\(row.completed) \(row.unit)"
    }

    /// Seconds since the job was submitted, up to its end.
    static func elapsed(_ row: Row, now: Double) -> Double? {
        row.submittedAt.map { max(0, (row.endedAt ?? now) - $0) }
    }

    /// "0:07", "12:34", "1:02:03".
    static func clock(_ seconds: Double) -> String {
        let total = Int(seconds)
        let minutes = total / 60 % 60
        let secs = total % 60
        let pad2 = { (value: Int) in value < 10 ? "0\(value)" : "\(value)" }
        return total >= 3600 ? "\(total / 3600):\(pad2(minutes)):\(pad2(secs))" : "\(total / 60):\(pad2(secs))"
    }

    /// The eighth blocks from empty to full, for sub-character resolution.
    static let eighths: [Character] = [" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉"]

    /// A bar `width` columns wide filled to `fraction`, with eighth-of-a-column resolution.
    static func bar(_ fraction: Double, width: Int) -> String {
        guard width > 0 else { return "" }
        let clamped = fraction.isFinite ? min(1, max(0, fraction)) : 0
        let filled = Int((clamped * Double(width * 8)).rounded(.down))
        let full = filled / 8
        var text = String(repeating: "█", count: full)
        if full < width {
            text.append(eighths[filled % 8])
            text += String(repeating: " ", count: width - full - 1)
        }
        return text
    }

    static func style(of state: JobState) -> Style {
        switch state {
        case .running: return .plain
        case .queued: return .dim
        case .paused, .needsRetry, .cancelled: return .yellow
        case .succeeded: return .green
        case .failed: return .red
        }
    }

    // MARK: - Text fitting

    /// `text` padded with spaces to `width` columns (on the left when `right`).
    static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let gap = String(repeating: " ", count: max(0, width - TerminalText.columns(text)))
        return right ? gap + text : text + gap
    }

    /// `text`, escaped, cut to at most `width` columns, ending with "…" when something was cut. Cuts fall between
    /// grapheme clusters, so an emoji sequence or a wide character is never split (the result may then be a
    /// column short).
    static func truncate(_ text: String, _ width: Int) -> String {
        let text = TerminalText.escape(text)
        guard TerminalText.columns(text) > width else { return text }
        guard width > 1 else { return String(TerminalText.prefix(text, columns: max(0, width)).text) }
        return String(TerminalText.prefix(text, columns: width - 1).text) + "…"
    }

    /// Cuts `spans` to `width` terminal columns, ending with "…" when something was cut; never splits a
    /// grapheme cluster.
    static func fit(_ spans: Line, _ width: Int) -> Line {
        let total = spans.reduce(0) { $0 + TerminalText.columns($1.text) }
        guard total > width else { return spans }
        var left = width - 1
        var result: Line = []
        for span in spans where left > 0 {
            let piece = TerminalText.prefix(span.text, columns: left)
            // A wide character that does not fit ends the line: nothing after it may be drawn in its place.
            if piece.text.endIndex != span.text.endIndex { left = 0 } else { left -= piece.columns }
            result.append(Span(String(piece.text), span.style))
        }
        if width >= 1 { result.append(Span("…", .dim)) }
        return result
    }

    /// The plain text of a line.
    static func text(_ line: Line) -> String { line.map(\.text).joined() }

    /// A line as terminal output: with SGR colour codes when `color`, else plain text.
    static func encode(_ line: Line, color: Bool) -> String {
        guard color else { return text(line) }
        var out = ""
        for span in line {
            let code: String? =
                switch span.style {
                case .plain: nil
                case .dim: "2"
                case .bold: "1"
                case .green: "32"
                case .red: "31"
                case .yellow: "33"
                case .cyan: "36"
                case .inverse: "7"
                }
            if let code { out += "\u{1B}[\(code)m" + span.text + "\u{1B}[0m" } else { out += span.text }
        }
        return out
    }

    /// `2026-11-29T13:57:00Z` as Unix seconds.
    static func unixSeconds(_ text: String) -> Double? {
        let parts = text.split(whereSeparator: { "-T:Z".contains($0) }).compactMap { Int32($0) }
        guard parts.count >= 6 else { return nil }
        var fields = tm()
        fields.tm_year = parts[0] - 1900
        fields.tm_mon = parts[1] - 1
        fields.tm_mday = parts[2]
        fields.tm_hour = parts[3]
        fields.tm_min = parts[4]
        fields.tm_sec = parts[5]
        return Double(timegm(&fields))
    }
}
