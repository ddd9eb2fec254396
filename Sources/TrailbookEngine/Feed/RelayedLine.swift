import TrailbookProtocol

/// One event of another daemon's feed as it arrives in a `FeedRelay` payload: a JSON object whose text is checked
/// whole (`JSONParser.members(ofObject:)`: the parser's rules and limits) but of which only the few members the
/// relay reads are decoded (`relay`, `job`, `kind`, `type`, `host`); the rest is copied as text into the line this
/// daemon publishes. A relayed event used to be decoded into a dictionary and encoded again, which was ~40 % of a
/// daemon's CPU when three daemons shared a store (issue 40).
struct RelayedLine {
    /// The line's text (no newline).
    let bytes: ArraySlice<UInt8>
    /// Each member's key and the range of `bytes` its value takes, in the order written.
    private let members: [(key: String, value: Range<Int>)]

    /// The event in `bytes`; `nil` if it is not one strict JSON object within the parser's default limits.
    init?(_ bytes: ArraySlice<UInt8>) {
        guard let members = try? JSONParser.members(ofObject: bytes) else { return nil }
        self.bytes = bytes
        self.members = members
    }

    /// The member `key` if it is a string, decoded.
    func string(_ key: String) -> String? {
        guard let range = range(of: key) else { return nil }
        return Self.string(bytes[range])
    }

    /// A checked value's text (`init` checked it) as a string, if it is one. A string without a backslash is its
    /// text between the quotes as it stands (the check refused invalid UTF-8 and raw control characters), so only
    /// one with escapes is parsed again: the relay reads four strings of every event another daemon sends.
    static func string(_ value: ArraySlice<UInt8>) -> String? {
        guard value.count >= 2, value.first == UInt8(ascii: "\""), value.last == UInt8(ascii: "\"") else { return nil }
        let text = value.dropFirst().dropLast()
        if !text.contains(UInt8(ascii: "\\")) { return String(decoding: text, as: UTF8.self) }
        return (try? JSONParser.parse(value))?.stringValue
    }

    /// Whether the event has the member `key`.
    func has(_ key: String) -> Bool { range(of: key) != nil }

    /// Every member decoded (for the rare event that needs more than copying: `reread`).
    func decoded() -> [String: JSONValue]? {
        guard case .object(let members)? = try? JSONParser.parse(bytes) else { return nil }
        return members
    }

    /// The line this daemon publishes for the event: its members in the order written, without `without` (the
    /// relay's number) and with `seq` set to `seq`, placed before the first key that sorts after it (a sender
    /// writes its keys sorted, as `ProgressFeed` does). Each value is the sender's text of it.
    func published(seq: Int64, without: String) -> [UInt8] {
        var line: [UInt8] = [UInt8(ascii: "{")]
        line.reserveCapacity(bytes.count + 16)
        var seqWritten = false
        func separate() { if line.count > 1 { line.append(UInt8(ascii: ",")) } }
        func writeSeq() {
            separate()
            line += Array("\"seq\":\(seq)".utf8)
            seqWritten = true
        }
        for (key, value) in members where key != without && key != "seq" {
            if !seqWritten, !key.utf8.lexicographicallyPrecedes("seq".utf8) { writeSeq() }
            separate()
            line += JSONCoding.encode(JSONValue.string(key))
            line.append(UInt8(ascii: ":"))
            line += bytes[value]
        }
        if !seqWritten { writeSeq() }
        line.append(UInt8(ascii: "}"))
        return line
    }

    private func range(of key: String) -> Range<Int>? {
        members.first { $0.key == key }?.value
    }
}
