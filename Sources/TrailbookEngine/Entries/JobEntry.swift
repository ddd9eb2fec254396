/// One entry of a job's list (a file of a folder upload), as kept in the job store beside the job rather than in
/// its checkpoint (`JobEntries`).
///
/// `item` is the kind's own description of the entry (an upload: its path, destination name and identity), small
/// JSON the engine stores and hands back without reading it.
public struct JobEntry: Sendable, Equatable {
    /// Its place in the list, from 0: the order the kind works in, and the paging key.
    public var position: Int
    /// Its size in the kind's unit (an upload: bytes), for the list's totals.
    public var size: Int64
    /// The kind's description of the entry.
    public var item: JSONValue
    /// What became of it so far.
    public var outcome: JobEntryOutcome

    /// An entry at `position` of `size` units, described by `item`, with `outcome` (pending by default).
    public init(position: Int, size: Int64, item: JSONValue, outcome: JobEntryOutcome = .pending) {
        self.position = position
        self.size = size
        self.item = item
        self.outcome = outcome
    }

    /// `{"position", "size", "item", "state", "code"?, "message"?}`: the form `show --files` and the control
    /// protocol use.
    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "position": .number(Double(position)), "size": .number(Double(size)), "item": item,
            "state": .string(outcome.state.rawValue),
        ]
        if let code = outcome.code { members["code"] = .string(code) }
        if let message = outcome.message { members["message"] = .string(message) }
        return .object(members)
    }
}

/// How a job's list stands: entries and size per state, and whether the list is complete (`JobEntries.seal`).
public struct JobEntryCounts: Sendable, Equatable {
    /// Whether the list was written whole (sealed); a list not sealed is a walk cut short, to be taken again.
    public var sealed: Bool
    /// Entries per state (states with none are absent).
    public var entries: [JobEntryState: Int]
    /// Their size per state, in the kind's unit.
    public var sizes: [JobEntryState: Int64]

    /// Counts as given.
    public init(sealed: Bool, entries: [JobEntryState: Int], sizes: [JobEntryState: Int64]) {
        self.sealed = sealed
        self.entries = entries
        self.sizes = sizes
    }

    /// Entries in all.
    public var total: Int { entries.values.reduce(0, +) }
    /// Size of all entries.
    public var totalSize: Int64 { sizes.values.reduce(0, +) }
}
