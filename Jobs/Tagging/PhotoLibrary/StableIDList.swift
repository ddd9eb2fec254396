#if canImport(Glibc)
    import Glibc
#endif

/// A list of stable IDs as a user gave them (`--ids`, or an ID file of 100 000s of lines), kept compactly: each
/// entry is its canonical text (36 lowercase ASCII bytes) in one contiguous buffer, so 1 000 000 IDs take 36 MB
/// and no allocation per ID, where an array of `String`s takes about 100 MB and one allocation each.
///
/// Entries keep their input order and positions (a bulk job's cursor is an index into the list). An entry that
/// is not a stable ID at all stays in place, marked invalid; the bulk jobs report it as unknown. Only the text of
/// the first `listedUnknownIDs` invalid entries is kept (for the "first few unknown IDs" of a job's result), so
/// a file of garbage cannot grow the daemon's memory beyond the list itself.
public struct StableIDList: Sendable, Equatable {
    /// Canonical ID bytes, `StableIDList.width` per entry; an invalid entry is all zero bytes.
    private var bytes: [UInt8] = []
    /// Original text of the first invalid entries, by position.
    private var invalidTexts: [Int: String] = [:]
    /// How many entries are not stable IDs.
    private(set) var invalidCount = 0

    /// Bytes per entry: the 8-4-4-4-12 text form.
    static let width = 36
    /// How many unknown IDs a bulk job's result names (`unknown_first`); the rest are only counted. Also how
    /// many invalid entries keep their text here.
    public static let listedUnknownIDs = 20

    /// Entries in the list, valid or not.
    public var count: Int { bytes.count / Self.width }

    /// An empty list.
    init() {}

    /// The IDs in `texts`, in order; either case is accepted, surrounding spaces are not trimmed.
    public init<S: Sequence>(_ texts: S) where S.Element: StringProtocol {
        for text in texts { append(text.utf8) }
    }

    /// The IDs in an ID file's contents: one a line (LF or CRLF); spaces and tabs around an ID are trimmed; blank
    /// lines and lines starting with `#` are skipped.
    public init(fileContents: [UInt8]) {
        bytes.reserveCapacity(fileContents.count / (Self.width + 1) * Self.width + Self.width)
        fileContents.withUnsafeBufferPointer { file in
            guard let base = file.baseAddress else { return }
            var lineStart = 0
            while lineStart < file.count {
                let lineEnd =
                    memchr(base + lineStart, 0x0A, file.count - lineStart).map {
                        base.distance(to: $0.assumingMemoryBound(to: UInt8.self))
                    } ?? file.count
                var first = lineStart
                var last = lineEnd
                while first < last, Self.isSpace(file[first]) { first += 1 }
                while last > first, Self.isSpace(file[last - 1]) || file[last - 1] == 0x0D { last -= 1 }
                if first < last, file[first] != UInt8(ascii: "#") {
                    append(contentsOf: UnsafeBufferPointer(rebasing: file[first..<last]))
                }
                lineStart = lineEnd + 1
            }
        }
    }

    /// Whether entry `index` is a well-formed stable ID.
    func isValid(at index: Int) -> Bool {
        bytes[index * Self.width] != 0
    }

    /// Entry `index` as text: its canonical form, or for an invalid entry the text given (or a placeholder once
    /// more than `listedUnknownIDs` invalid entries came before it).
    public func text(at index: Int) -> String {
        if isValid(at: index) {
            return String(decoding: bytes[index * Self.width..<(index + 1) * Self.width], as: UTF8.self)
        }
        return invalidTexts[index] ?? "(entry \(index + 1): not a stable ID)"
    }

    /// Entry `index` as a `StableID`; `nil` if it is invalid.
    public func stableID(at index: Int) -> StableID? {
        isValid(at: index) ? StableID(text(at: index)) : nil
    }

    /// The valid entries of `range` as a JSON array of strings (UTF-8) in ID order, for binding to one statement,
    /// and the list position of each array element (element `k` is entry `positions[k]`). In ID order, one
    /// statement's probes walk the `stable_id` index forwards instead of jumping around it, which matters once
    /// the index is bigger than SQLite's page cache (about 45 000 photos with the default 2 MiB cache).
    func jsonArray(in range: Range<Int>) -> (json: [UInt8], positions: [Int]) {
        var json: [UInt8] = [UInt8(ascii: "[")]
        json.reserveCapacity(range.count * (Self.width + 3) + 2)
        var positions = range.filter { isValid(at: $0) }
        bytes.withUnsafeBufferPointer { all in
            // Valid entries imply a non-empty buffer, so a base address.
            guard !positions.isEmpty, let base = all.baseAddress else { return }
            positions.sort { memcmp(base + $0 * Self.width, base + $1 * Self.width, Self.width) < 0 }
            for (k, index) in positions.enumerated() {
                if k > 0 { json.append(UInt8(ascii: ",")) }
                json.append(UInt8(ascii: "\""))
                json.append(contentsOf: UnsafeBufferPointer(start: base + index * Self.width, count: Self.width))
                json.append(UInt8(ascii: "\""))
            }
        }
        json.append(UInt8(ascii: "]"))
        return (json, positions)
    }

    /// Appends one entry from its UTF-8 text.
    mutating func append<C: Collection>(_ utf8: C) where C.Element == UInt8 {
        let contiguous: Void? = utf8.withContiguousStorageIfAvailable { append(contentsOf: $0) }
        if contiguous == nil { Array(utf8).withUnsafeBufferPointer { append(contentsOf: $0) } }
    }

    private mutating func append(contentsOf text: UnsafeBufferPointer<UInt8>) {
        var upper = false
        if text.count == Self.width, Self.isWellFormed(text, hasUppercase: &upper) {
            let start = bytes.count
            bytes.append(contentsOf: text)
            if upper {
                for i in start..<bytes.count where bytes[i] >= UInt8(ascii: "A") && bytes[i] <= UInt8(ascii: "F") {
                    bytes[i] += 0x20
                }
            }
            return
        }
        if invalidTexts.count < Self.listedUnknownIDs {
            // Shown to people (`unknown_first`, the CLI's summary): control characters from a binary or hostile
            // file would reach their terminal, so they become U+FFFD.
            let shown = String(decoding: text.prefix(200), as: UTF8.self).unicodeScalars.map { scalar in
                scalar.value < 0x20 || scalar.value == 0x7F ? "\u{FFFD}" : Character(scalar)
            }
            invalidTexts[count] = String(shown)
        }
        invalidCount += 1
        bytes.append(contentsOf: repeatElement(0, count: Self.width))
    }

    /// Whether `text` (36 bytes) is 8-4-4-4-12 hex in either case; sets `hasUppercase` if it holds A-F.
    private static func isWellFormed(_ text: UnsafeBufferPointer<UInt8>, hasUppercase: inout Bool) -> Bool {
        for i in 0..<width {
            let c = text[i]
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if c &- UInt8(ascii: "0") < 10 || c &- UInt8(ascii: "a") < 6 {
                continue
            } else if c &- UInt8(ascii: "A") < 6 {
                hasUppercase = true
            } else {
                return false
            }
        }
        return true
    }

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 }
}
