import TrailbookProtocol

/// Human text for jobs and progress: the table of `list`, the block of `show`, the lines of plain `watch`.
enum JobText {
    /// `count` in the job's unit: bytes in KiB/MiB/GiB, else "N photos".
    static func amount(_ count: Int64, unit: String) -> String {
        unit == ProgressUnit.bytes.rawValue ? ByteCount.format(count) : "\(count) \(unit)"
    }

    /// A duration in seconds as "4s", "2m05s", "1h02m".
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "?" }
        let total = Int(seconds.rounded())
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m" + pad2(total % 60) + "s" }
        return "\(total / 3600)h" + pad2(total / 60 % 60) + "m"
    }

    private static func pad2(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    /// "45.0% 45.0 MiB/100.0 MiB 12.3 MiB/s ETA 4s" from a progress object.
    static func progress(_ progress: JSONValue?) -> String {
        guard let progress, let completed = progress["completed"]?.intValue, let total = progress["total"]?.intValue else {
            return ""
        }
        let unit = progress["unit"]?.stringValue ?? ""
        var parts: [String] = []
        if total > 0 {
            let percent = (progress["fraction"]?.doubleValue ?? 0) * 100
            parts.append(String(Int(percent * 10) / 10) + "." + String(Int(percent * 10) % 10) + "%")
            parts.append(
                unit == ProgressUnit.bytes.rawValue
                    ? amount(completed, unit: unit) + "/" + amount(total, unit: unit) : "\(completed)/\(total) \(unit)")
        } else {
            parts.append(amount(completed, unit: unit))
        }
        if let files = files(progress) { parts[parts.count - 1] += ", " + files }
        if let rate = progress["rate_per_s"]?.doubleValue, rate > 0 {
            parts.append(amount(Int64(rate), unit: unit) + "/s")
        }
        if let eta = progress["eta_s"]?.doubleValue, total > completed { parts.append("ETA " + duration(eta)) }
        if let phase = phase(progress) { parts.append("(" + phase + ")") }
        return parts.joined(separator: " ")
    }

    /// "listing the destination: 41 000 objects" from a progress object with a `phase` (`ProgressPhase`: a long
    /// step that moves none of the job's units); `nil` otherwise.
    static func phase(_ progress: JSONValue) -> String? {
        guard let phase = progress["phase"].flatMap(ProgressPhase.init(json:)) else { return nil }
        let count =
            phase.unit == .bytes ? ByteCount.format(phase.count) : grouped(phase.count) + " " + phase.unit.rawValue
        return phase.label + ": " + count
    }

    /// "312 / 2 480 files" from a progress object that counts files (`files_completed`, `files_total`) of more than
    /// one; `nil` otherwise.
    static func files(_ progress: JSONValue) -> String? {
        guard let total = progress["files_total"]?.intValue, total > 1 else { return nil }
        return grouped(progress["files_completed"]?.intValue ?? 0) + " / " + grouped(total) + " files"
    }

    /// `count` with its digits in groups of three, separated by a space: "2 480", "100 000".
    static func grouped(_ count: Int64) -> String {
        var digits = String(count.magnitude)
        var groups: [Substring] = []
        while digits.count > 3 {
            groups.insert(digits.suffix(3), at: 0)
            digits.removeLast(3)
        }
        groups.insert(Substring(digits), at: 0)
        return (count < 0 ? "-" : "") + groups.joined(separator: " ")
    }

    /// Why a job stopped, in words ("stopped by you", "timed out — will retry").
    ///
    /// The same words as the `watch` screen (`WatchScreen.reason`): "stopped by you", "timed out — will retry in
    /// 30 s", "paused to free a slot — will resume"; a failed job's error message.
    ///
    /// A job `failed`, `paused` or `needs_retry` by an error of its own (credentials refused, a server down) gets
    /// that error's message, which says what to do, and its code: `paused` for `unauthorized` says to `resume ID
    /// --header …`; `needs_retry` adds when it tries again.
    static func reason(_ job: JSONValue, retryInSeconds: Double? = nil) -> String? {
        let state = job["state"]?.stringValue
        if let error = job["error"], !error.isNull, let text = errorText(error, state: state, retryInSeconds: retryInSeconds) {
            return text
        }
        guard let cancellation = job["cancellation"], !cancellation.isNull, state != JobState.running.rawValue,
            state != JobState.succeeded.rawValue
        else { return nil }
        let detail = cancellation["detail"]?.stringValue ?? ""
        switch cancellation["reason"]?.stringValue {
        case "user_stop": return "stopped by you"
        case "timeout":
            guard state == JobState.needsRetry.rawValue else { return "timed out (\(detail))" }
            let when = retryInSeconds.map { " in \(Int($0.rounded(.up))) s" } ?? ""
            return "timed out (\(detail)) — will retry" + when
        case "resource_reclaim":
            if state == JobState.paused.rawValue { return "paused by you — resume to continue" }
            if detail.hasPrefix("paused to free a slot") { return "paused to free a slot — will resume" }
            return "\(detail) — will resume"
        default: return detail
        }
    }

    /// `message [code]` of a job's error when its state is the error's doing: always for `failed`; for `paused` and
    /// `needs_retry` unless the error is the `timeout` of a stop (which the stop's words tell).
    private static func errorText(_ error: JSONValue, state: String?, retryInSeconds: Double?) -> String? {
        let code = error["code"]?.stringValue ?? ""
        let text = "\(error["message"]?.stringValue ?? "") [\(code)]"
        switch state {
        case JobState.failed.rawValue: return text
        case JobState.paused.rawValue where code != "timeout": return text
        case JobState.needsRetry.rawValue where code != "timeout":
            return text + " — will retry" + (retryInSeconds.map { " in \(Int($0.rounded(.up))) s" } ?? "")
        default: return nil
        }
    }

    static let tableHeader = pad("ID", 10) + pad("KIND", 8) + pad("STATE", 12) + pad("PRI", 5) + pad("TRY", 5) + "PROGRESS"

    /// One row of `list` (escaped: `TerminalText.escape`).
    static func tableRow(_ job: JSONValue) -> String {
        let attempt = "\(job["attempt"]?.intValue ?? 0)/\(job["max_attempts"]?.intValue ?? 0)"
        var row = pad(String((job["id"]?.stringValue ?? "").prefix(8)), 10) + pad(job["kind"]?.stringValue ?? "", 8)
            + pad(job["state"]?.stringValue ?? "", 12) + pad(String(job["priority"]?.intValue ?? 0), 5) + pad(attempt, 5)
            + progress(job["progress"])
        if let reason = reason(job) { row += "  (" + reason + ")" }
        return TerminalText.escape(row)
    }

    /// The one-line outcome printed by `cancel`, `pause`, `resume` and `--wait` (escaped).
    static func summary(_ job: JSONValue) -> String {
        var line = "\(job["id"]?.stringValue ?? "") \(job["kind"]?.stringValue ?? "") \(job["state"]?.stringValue ?? "")"
        if let reason = reason(job) { line += ": " + reason }
        if let outcome = outcome(job["result"]) { line += " (" + outcome + ")" }
        return TerminalText.escape(line)
    }

    /// The headline numbers of a result, e.g. "tagged 998, already had 1, 1 unknown ID: 1567995a": unknown IDs
    /// are easy to miss in a job that succeeded.
    static func outcome(_ result: JSONValue?) -> String? {
        guard let result, case .object = result else { return nil }
        var parts: [String] = []
        if let bytes = result["bytes"]?.intValue { parts.append(ByteCount.format(bytes)) }
        if let resent = result["bytes_resent"]?.intValue, resent > 0 { parts.append("\(ByteCount.format(resent)) re-sent") }
        // An upload of library photos: how many went, and what was skipped why (a job that skipped every photo
        // still succeeded).
        if let photos = result["photos"], let uploaded = photos["uploaded"]?.intValue {
            var text = "\(uploaded) photo\(uploaded == 1 ? "" : "s") uploaded"
            if let skipped = photos["skipped"]?.intValue, skipped > 0, case .object(let reasons)? = photos["skipped_by_reason"] {
                text += ", \(skipped) skipped: " + reasons.sorted { $0.key < $1.key }.map { "\($0.value.intValue ?? 0) \($0.key)" }
                    .joined(separator: ", ")
            }
            parts.append(text)
        }
        for (key, words) in [("tagged", "tagged"), ("removed", "removed"), ("already_had", "already had"),
            ("did_not_have", "did not have"), ("inserted", "new"), ("updated", "updated"), ("unchanged", "unchanged")]
        {
            if let count = result[key]?.intValue { parts.append("\(words) \(count)") }
        }
        // What an import skipped: easy to miss in a job that succeeded.
        if let same = result["same_content"]?.intValue, same > 0 { parts.append("\(same) already in the library at another path") }
        if let failed = result["failed"]?.intValue, failed > 0 {
            let first = (result["failures"]?.arrayValue ?? []).prefix(3).compactMap { failure -> String? in
                // A path that is not UTF-8 comes as {"base64", "text"}: its text is for display (BytePath).
                guard let path = failure["path"].flatMap({ $0.stringValue ?? $0["text"]?.stringValue }) else { return nil }
                return "\(path.split(separator: "/").last.map(String.init) ?? path) (\(failure["code"]?.stringValue ?? "?"))"
            }
            parts.append("\(failed) not imported: \(first.joined(separator: ", "))\(failed > 3 ? ", …" : "")")
        }
        // What an import passed over (not a photo name, hidden, a FIFO, …), by reason.
        if let skipped = result["skipped"]?.intValue, skipped > 0, case .object(let reasons)? = result["skipped_by_reason"] {
            let counts = reasons.sorted { $0.key < $1.key }.map { "\($0.value.intValue ?? 0) \($0.key)" }
            parts.append("\(skipped) passed over: \(counts.joined(separator: ", "))")
        }
        if let unknown = result["unknown_count"]?.intValue, unknown > 0 {
            let first = (result["unknown_first"]?.arrayValue ?? []).compactMap(\.stringValue).prefix(3)
            parts.append("\(unknown) unknown ID\(unknown == 1 ? "" : "s"): \(first.joined(separator: ", "))\(unknown > 3 ? ", …" : "")")
        }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// The block printed by `show`, one field a line, each escaped.
    static func details(_ job: JSONValue) -> String {
        var lines = [
            "id:        \(job["id"]?.stringValue ?? "")",
            "kind:      \(job["kind"]?.stringValue ?? "")",
            "state:     \(job["state"]?.stringValue ?? "")" + (reason(job).map { " (\($0))" } ?? ""),
            "priority:  \(job["priority"]?.intValue ?? 0)",
            "attempt:   \(job["attempt"]?.intValue ?? 0) of \(job["max_attempts"]?.intValue ?? 0)",
            "progress:  \(progress(job["progress"]))",
            "created:   \(job["created_at"]?.stringValue ?? "")",
            "updated:   \(job["updated_at"]?.stringValue ?? "")",
        ]
        // Only on a shared store do jobs have another queue or a host.
        if let queue = job["queue"]?.stringValue, queue != "default" { lines.append("queue:     \(queue)") }
        if let host = job["pinned_host"]?.stringValue { lines.append("runs on:   host \(host) (its files are there)") }
        if let retry = job["retry_at"]?.stringValue { lines.append("retry at:  \(retry)") }
        if let result = job["result"], !result.isNull { lines.append("result:    " + String(decoding: JSONCoding.encode(result), as: UTF8.self)) }
        lines.append("params:    " + String(decoding: JSONCoding.encode(job["params"] ?? .null), as: UTF8.self))
        return lines.map(TerminalText.escape).joined(separator: "\n")
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
