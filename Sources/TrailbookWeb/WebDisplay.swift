import TrailbookClient
import TrailbookProtocol

/// The daemon's JSON made ready for the page: every string with the terminal's visible escapes for C0, C1 and
/// bidirectional controls (`TerminalText.escape`), so a file name can neither hide nor reorder what the page shows.
/// The page then inserts every text as text (`textContent`), never as HTML: `<img …>` in a name stays those
/// characters. Ids, states and kinds are ASCII and come through unchanged.
enum WebDisplay {
    /// `value` with every string (not the object keys, which are the daemon's own) escaped.
    static func escaped(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let text): return .string(TerminalText.escape(text))
        case .array(let values): return .array(values.map(escaped))
        case .object(let members): return .object(members.mapValues(escaped))
        case .null, .bool, .number: return value
        }
    }

    /// A job of `show` or `list` for the page: escaped, with `error.remedy` (what to do, from `ErrorCodes`) when
    /// the job has an error whose code is in the table.
    static func job(_ job: JSONValue) -> JSONValue {
        guard case .object(var members) = escaped(job) else { return job }
        if case .object(var error) = members["error"], let code = error["code"]?.stringValue,
            let entry = ErrorCodes.all.first(where: { $0.code == code })
        {
            error["remedy"] = .string(entry.remedy)
            members["error"] = .object(error)
        }
        return .object(members)
    }
}
