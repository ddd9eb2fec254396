import CLibPQ

/// A libpq connection string (`postgres://user:secret@host:5432/db?…` or `host=… dbname=… password=…`,
/// https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-CONNSTRING), validated by libpq's own parser.
///
/// Its passwords never leave it in text form: `description`, `debugDescription`, reflection (`dump`, `Mirror`)
/// and `redact(_:)`-ed messages show `***` instead. Only `PostgresConnection` reads the raw string, to hand it to
/// libpq. Missing parts come from the usual `PG*` environment variables (`PGHOST`, `PGPASSWORD`…), as in `psql`.
public struct PostgresConnectionString: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The string as given; internal so that nothing prints it by accident.
    let raw: String
    /// The secrets in it (passwords, as libpq marks them with display character `*`), for redaction.
    private let secrets: [String]
    /// The string with its secrets replaced by `***`.
    private let redacted: String

    /// Parses `text` with `PQconninfoParse`.
    /// - Throws: `PostgresError` `.invalidConnectionString` with libpq's reason (itself redacted) if libpq rejects it.
    public init(_ text: String) throws(PostgresError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(text, &errorMessage) else {
            let reason = errorMessage.map { String(cString: $0) } ?? "out of memory"
            if let errorMessage { PQfreemem(errorMessage) }
            // The parser may quote the part it stumbled on (a password with a bad %-escape, a word with a space
            // in it) or the whole string: every password found by the string's shape is scrubbed from its reason
            // (as given and decoded), then what still looks like one is masked.
            let secrets = Self.textualSecrets(text)
            throw PostgresError(
                kind: .invalidConnectionString,
                message: "invalid PostgreSQL connection string \(Self.scrub(Self.maskTextually(text), secrets: secrets)): "
                    + Self.scrub(Self.maskTextually(reason.trimmingTrailingNewlines()), secrets: secrets))
        }
        defer { PQconninfoFree(options) }
        var secrets: [String] = []
        var pairs: [(String, String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                let isSecret = option.pointee.dispchar.map { $0.pointee == CChar(UInt8(ascii: "*")) } ?? false
                let text = String(cString: value)
                if isSecret && !text.isEmpty { secrets.append(text) }
                pairs.append((String(cString: keyword), isSecret ? "***" : text))
            }
            option += 1
        }
        raw = text
        self.secrets = secrets
        let isURI = text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
        let shown =
            isURI
            ? Self.maskTextually(text)
            : pairs.map { "\($0.0)=\(Self.quoted($0.1))" }.joined(separator: " ")
        redacted = Self.scrub(shown, secrets: secrets)
    }

    /// The connection string with every password shown as `***`.
    public var description: String { redacted }
    public var debugDescription: String { "PostgresConnectionString(\(redacted))" }
    public var customMirror: Mirror { Mirror(self, children: ["redacted": redacted]) }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.raw == rhs.raw }

    /// `message` with every password of this connection string (as given and percent-encoded) replaced by `***`:
    /// for messages that may quote the string, such as libpq's errors.
    public func redact(_ message: String) -> String { Self.scrub(message, secrets: secrets) }

    private static func scrub(_ text: String, secrets: [String]) -> String {
        var text = text
        // Longest first, so that a secret containing another is replaced whole.
        for secret in secrets.sorted(by: { $0.count > $1.count }) {
            for form in Set([secret, percentEncoded(secret)]) where !form.isEmpty {
                text = text.replacing(form, with: "***")
            }
        }
        return text
    }

    /// The passwords of a string libpq refused, found by its shape alone: a URI's user info after its first `:`,
    /// and every `password=` value (keyword form, or URI query), each as written and, where its `%`-escapes
    /// decode, decoded, and in pieces (split at spaces and quotes, 3 characters or more), since libpq may quote
    /// only the piece it stumbled on.
    static func textualSecrets(_ text: String) -> [String] {
        var found: [Substring] = []
        if let scheme = text.firstRange(of: "://") {
            // Up to the query, not the path: a `/` in a password must not hide it.
            let queryStart = text[scheme.upperBound...].firstIndex(of: "?") ?? text.endIndex
            let beforeQuery = text[scheme.upperBound..<queryStart]
            if let at = beforeQuery.lastIndex(of: "@"), let colon = beforeQuery[..<at].firstIndex(of: ":") {
                found.append(beforeQuery[beforeQuery.index(after: colon)..<at])
            }
        }
        var rest = Substring(text)
        while let match = rest.firstRange(of: "password=") {
            rest = rest[match.upperBound...]
            if rest.first == "'" {
                let body = rest.dropFirst()
                let end = body.firstIndex(of: "'") ?? body.endIndex
                found.append(body[..<end])
            } else {
                found.append(rest.prefix { $0 != " " && $0 != "&" && $0 != "#" })
            }
        }
        var secrets: [String] = []
        for secret in found where !secret.isEmpty {
            secrets.append(String(secret))
            if let decoded = percentDecoded(secret) { secrets.append(decoded) }
            secrets += secret.split(whereSeparator: { $0 == " " || $0 == "'" || $0 == "\"" || $0 == "\\" })
                .filter { $0.count >= 3 }.map(String.init)
        }
        return secrets
    }

    /// `text` with its `%XX` escapes decoded, or `nil` for a malformed escape or bytes that are not UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Masks the password of a URI's user info (`user:secret@`) and every `password=` value (URI query or
    /// keyword form) without parsing: the fallback for strings libpq refused.
    static func maskTextually(_ text: String) -> String {
        var out = text
        if let scheme = out.firstRange(of: "://") {
            let authorityEnd = out[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" } ?? out.endIndex
            let authority = out[scheme.upperBound..<authorityEnd]
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                out.replaceSubrange(out.index(after: colon)..<at, with: "***")
            }
        }
        var result = ""
        var rest = Substring(out)
        while let found = rest.firstRange(of: "password=") {
            result += rest[..<found.upperBound] + "***"
            rest = rest[found.upperBound...]
            if rest.first == "'" {
                // A quoted keyword value runs to the next unescaped quote.
                var index = rest.index(after: rest.startIndex)
                while index < rest.endIndex && rest[index] != "'" {
                    if rest[index] == "\\" { index = rest.index(after: index) }
                    if index < rest.endIndex { index = rest.index(after: index) }
                }
                rest = index < rest.endIndex ? rest[rest.index(after: index)...] : ""
            } else {
                rest = rest.drop { $0 != " " && $0 != "&" && $0 != "#" }
            }
        }
        return result + rest
    }

    private static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            let isUnreserved =
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
            if isUnreserved {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    private static func quoted(_ value: String) -> String {
        guard value.isEmpty || value.contains(where: { $0 == " " || $0 == "'" || $0 == "\\" }) else { return value }
        return "'" + value.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
    }
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var text = Substring(self)
        while text.last == "\n" || text.last == "\r" { text = text.dropLast() }
        return String(text)
    }
}
