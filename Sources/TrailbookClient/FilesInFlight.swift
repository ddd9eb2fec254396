import TrailbookProtocol

/// The files of a running job that are on their way now, as `watch --expand` lists them under the job: picked
/// from the per-file rows of the job's progress (`items`, a window of at most 64 files that the daemon sends with
/// each progress event) and cut to `lineLimit` lines.
///
/// A file is in flight when some but not all of its bytes are done, or when it is the file the job names as
/// `current` and is not done. Files not started and files finished are left out: a folder of 2 000 files shows the
/// few being sent, not the window of files around them.
struct FilesInFlight: Equatable {
    /// Lines of files shown per job at most; the rest are summed up in one "+N more in flight" line.
    static let lineLimit = 8

    /// The files shown, in the order the daemon sent them.
    let shown: [ProgressItem]
    /// Files in flight beyond `lineLimit` (among those the progress event carried).
    let more: Int

    /// Picks the files in flight from `items`; `current` is the progress's `current` (the file under way).
    init(items: [ProgressItem], current: String?) {
        let flying = items.filter { item in
            item.completed < item.total && (item.completed > 0 || item.label == current)
        }
        shown = Array(flying.prefix(Self.lineLimit))
        more = flying.count - shown.count
    }

    /// Picks the files in flight from a progress object (docs/reference/json.md, "Progress"); none when it has no
    /// `items`.
    init(progress: JSONValue) {
        let items = progress["items"].flatMap { try? JSONCoding.convert($0, to: [ProgressItem].self) } ?? []
        self.init(items: items, current: progress["current"]?.stringValue)
    }

    /// No file in flight.
    var isEmpty: Bool { shown.isEmpty }

    /// The line that sums up the files not shown, "+3 more in flight", or `nil` when every one is shown.
    var moreText: String? { more > 0 ? "+\(more) more in flight" : nil }

    /// `item`'s share done, in 0…1.
    static func fraction(_ item: ProgressItem) -> Double {
        item.total > 0 ? min(1, max(0, Double(item.completed) / Double(item.total))) : 0
    }

    /// "1.2 MiB/4.0 MiB" for bytes, "3/10 photos" otherwise.
    static func amount(_ item: ProgressItem, unit: String) -> String {
        JobText.amount(item.completed, unit: unit) + "/" + JobText.amount(item.total, unit: unit)
    }

    /// The plain-text lines for `watch --expand` when not on a terminal, one per file shown (and the "+N more"
    /// line), each prefixed with `head` (the job's time, id and kind, as its progress line has them):
    /// `HEAD   └ NAME [#####     ] 45.2% 1.2 MiB/2.5 MiB`. The name is escaped (`TerminalText.escape`), so it
    /// can neither split the line nor reach the terminal as a control sequence.
    func plainLines(head: String, unit: String) -> [String] {
        var lines = shown.map { item in
            let fraction = Self.fraction(item)
            let filled = Int((fraction * 20).rounded(.down))
            let bar = "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: 20 - filled) + "]"
            return TerminalText.escape(
                "\(head)   └ \(item.label) \(bar) \(WatchScreen.percent(fraction)) \(Self.amount(item, unit: unit))")
        }
        if let moreText { lines.append(TerminalText.escape("\(head)   └ \(moreText)")) }
        return lines
    }
}
