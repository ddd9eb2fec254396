/// HTTP header fields in order, with case-insensitive lookup (RFC 9110 §5.1: field names are case-insensitive).
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields as sent or received, in order; a name may repeat.
    public private(set) var fields: [(name: String, value: String)]

    public init() { fields = [] }

    public init(_ fields: [(name: String, value: String)]) { self.fields = fields }

    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// Appends a field, keeping any other field of the same name.
    public mutating func add(name: String, value: String) { fields.append((name: name, value: value)) }

    /// Replaces every field named `name` (any case) with one field, or removes them when `value` is `nil`.
    public mutating func replaceOrAdd(name: String, value: String?) {
        fields.removeAll { Self.sameName($0.name, name) }
        if let value { fields.append((name: name, value: value)) }
    }

    /// The value of the first field named `name`, compared case-insensitively; `nil` if there is none.
    public subscript(name: String) -> String? {
        fields.first { Self.sameName($0.name, name) }?.value
    }

    /// The values of every field named `name`, in order.
    public func values(of name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8) { lower($0) == lower($1) }
    }

    private static func lower(_ c: UInt8) -> UInt8 { c >= 65 && c <= 90 ? c + 32 : c }
}
