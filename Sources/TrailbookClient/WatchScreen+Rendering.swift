import TrailbookProtocol

/// Drawing the screen: the live table, the finished jobs and the summary line, each fitted to the terminal.
extension WatchScreen {
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
}
