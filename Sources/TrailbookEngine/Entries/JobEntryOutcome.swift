/// What became of one entry of a job's list (`JobEntry`): still to do, or how it ended.
///
/// Stored as a state name (`pending`, `done`, `already_there`, `failed`, `passed_over`) with a code and a
/// message; `JobEntryState` names the states alone, for paging by state.
public enum JobEntryOutcome: Sendable, Equatable {
    /// Not worked on yet, or under way.
    case pending
    /// Done; `detail` is what the kind records of the result (an upload: the SHA-256 of the bytes sent), or `nil`;
    /// `location` where the result is, when the kind says (an upload: the destination path, object or tus URL).
    case done(detail: String?, location: String? = nil)
    /// Not needed: the destination already held the same bytes.
    case alreadyThere
    /// Failed alone (the rest of the list goes on): `code` is a stable error code (`ErrorCodes.all`), `message`
    /// what happened and what to do.
    case failed(code: String, message: String)
    /// Left out on purpose: `reason` is a short machine name (`symlink`, `not_regular`, …), `message` says why.
    case passedOver(reason: String, message: String)

    /// The state alone.
    public var state: JobEntryState {
        switch self {
        case .pending: .pending
        case .done: .done
        case .alreadyThere: .alreadyThere
        case .failed: .failed
        case .passedOver: .passedOver
        }
    }

    /// The stored `code` column: the detail, error code or reason; `nil` for the others.
    var code: String? {
        switch self {
        case .pending, .alreadyThere: nil
        case .done(let detail, _): detail
        case .failed(let code, _): code
        case .passedOver(let reason, _): reason
        }
    }

    /// The stored `message` column: a done entry's location, a failed or passed-over one's message; else `nil`.
    var message: String? {
        switch self {
        case .done(_, let location): location
        case .pending, .alreadyThere: nil
        case .failed(_, let message), .passedOver(_, let message): message
        }
    }

    /// The outcome stored as `state`, `code` and `message`; `nil` for an unknown state name (a newer program's).
    init?(state: String, code: String?, message: String?) {
        switch JobEntryState(rawValue: state) {
        case .pending?: self = .pending
        case .done?: self = .done(detail: code, location: message)
        case .alreadyThere?: self = .alreadyThere
        case .failed?: self = .failed(code: code ?? "unknown", message: message ?? "")
        case .passedOver?: self = .passedOver(reason: code ?? "unknown", message: message ?? "")
        case nil: return nil
        }
    }
}

/// The state of a `JobEntryOutcome` without its details: what `show ID --files --state S` pages by.
public enum JobEntryState: String, Sendable, CaseIterable, Codable {
    case pending
    case done
    case alreadyThere = "already_there"
    case failed
    case passedOver = "passed_over"
}
