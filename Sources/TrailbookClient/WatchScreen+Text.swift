import TrailbookProtocol

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The words, numbers and text fitting the screen is made of: reasons, labels, amounts, clocks, bars, padding.
extension WatchScreen {
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
