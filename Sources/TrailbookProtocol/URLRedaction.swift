/// Hides the secrets a URL can carry before it is shown: its user info (`http://user:pw@host/`, `https://TOKEN@host/`)
/// and the values of query parameters whose names look like credentials (`?token=…`, `X-Amz-Signature=…`, `sig=…`,
/// `key=…`, `password=…`, …).
///
/// The one redaction every place that turns a URL or a message that may quote one into text goes through: a job's
/// params and result and error in `show`, `list` and the feed (`JobRecord.json`), log lines (`DaemonLog`, job logs),
/// error replies and the client's own errors. The transfer itself uses the URL as given. What replaces a secret is
/// `JobRecord.redactedValue` (`<redacted>`): `http://<redacted>@host/files/?token=<redacted>&x=1`.
public enum URLRedaction {
    /// `url` with its user info and credential-looking query values replaced by `<redacted>`; any other text is
    /// returned as it is. A URL that cannot be parsed is redacted as far as its shape shows (everything between
    /// `://` and the last `@` of the authority is user info).
    public static func url(_ url: String) -> String {
        guard url.utf8.contains(UInt8(ascii: "@")) || url.utf8.contains(UInt8(ascii: "?")) else { return url }
        return redact(Substring(url))
    }

    /// `text` (a message, a log line) with every URL in it (`scheme://…`, up to white space, a quote or an angle bracket)
    /// redacted as by `url(_:)`. Cheap when the text holds no `://`.
    public static func text(_ text: String) -> String {
        // Most texts (paths, names) have no ':' at all: one byte scan decides.
        guard text.utf8.contains(UInt8(ascii: ":")), text.contains("://") else { return text }
        var out = ""
        var rest = Substring(text)
        while let separator = rest.firstRange(of: "://") {
            // The scheme: letters, digits, `+`, `-`, `.` just before `://`.
            var schemeStart = separator.lowerBound
            while schemeStart > rest.startIndex {
                let before = rest[rest.index(before: schemeStart)]
                guard before.isASCII, before.isLetter || before.isNumber || "+-.".contains(before) else { break }
                schemeStart = rest.index(before: schemeStart)
            }
            let end = rest[separator.upperBound...].firstIndex(where: isURLEnd) ?? rest.endIndex
            out += rest[..<schemeStart]
            out += redact(rest[schemeStart..<end])
            rest = rest[end...]
        }
        return out + rest
    }

    /// `value` with every string in it (members of objects, elements of arrays, at any depth) redacted as by
    /// `text(_:)`: for a job's result and other JSON that may hold URLs.
    public static func json(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let string): return .string(text(string))
        case .array(let elements): return .array(elements.map(json))
        case .object(let members): return .object(members.mapValues(json))
        default: return value
        }
    }

    /// Whether a query parameter named `name` carries a credential: its lower-cased name without `-` and `_`
    /// contains `token`, `sig` (`sig`, `signature`, `X-Amz-Signature`), `key`, `pass`, `pwd`, `secret`, `auth`,
    /// `credential` or `session`. Redacting a harmless one costs nothing; showing a secret cannot be undone.
    public static func isCredentialName(_ name: Substring) -> Bool {
        let folded = String(name.lowercased().filter { $0 != "-" && $0 != "_" })
        return credentialWords.contains { folded.contains($0) }
    }

    private static let credentialWords = ["token", "sig", "key", "pass", "pwd", "secret", "auth", "credential", "session"]

    /// Where a URL quoted in text ends: white space, a quote or an angle bracket. Anything else may be part of a
    /// secret (a `,` or `)` in a token), and redacting a little more than the URL is harmless.
    private static func isURLEnd(_ character: Character) -> Bool {
        character.isWhitespace || "'\"<>`".contains(character)
    }

    /// The redaction of one URL (or URL-shaped text).
    private static func redact(_ url: Substring) -> String {
        var out = ""
        var rest = url
        if let separator = url.firstRange(of: "://") {
            out += url[..<separator.upperBound]
            let afterScheme = url[separator.upperBound...]
            let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
            let authority = afterScheme[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") {
                out += JobRecord.redactedValue + authority[at...]
            } else {
                out += authority
            }
            rest = afterScheme[authorityEnd...]
        }
        guard let question = rest.firstIndex(of: "?") else { return out + rest }
        out += rest[...question]
        let query = rest[rest.index(after: question)...]
        let queryEnd = query.firstIndex(of: "#") ?? query.endIndex
        let pairs = query[..<queryEnd].split(separator: "&", omittingEmptySubsequences: false)
        out += pairs.map { pair -> String in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<equals]
            return isCredentialName(name) ? name + "=" + JobRecord.redactedValue : String(pair)
        }.joined(separator: "&")
        return out + query[queryEnd...]
    }
}
