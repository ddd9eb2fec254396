import TrailbookProtocol

/// Where an upload goes, parsed from the `to` parameter.
///
/// This is the seam between the parts of the upload job that do not care where bytes go (params, source
/// identity, checkpoint, progress, rate limiting, hashing) and the transfer itself. Each case has its own
/// transfer: `.directory` is `DirectoryUpload`, `.tus` is `TusUploadRun`, `.s3` is `S3UploadRun`.
public enum UploadDestination: Sendable, Equatable {
    /// A local directory (`file:///abs/dir`): an absolute path, percent-decoded to its bytes (which need not be
    /// UTF-8: `%E9` is the Latin-1 `é`), without trailing slashes (except `/` itself).
    case directory(path: BytePath)
    /// A tus 1.0 creation endpoint (`http://…` or `https://…`), as given.
    case tus(endpoint: String)
    /// An S3 bucket and key prefix (`s3://BUCKET/PREFIX/`): each file is stored as the object PREFIX + its name.
    /// The prefix is empty or ends with `/`.
    case s3(bucket: String, prefix: String)

    /// Parses a destination URL.
    ///
    /// Accepts `file:///abs/dir` (also `file://localhost/abs/dir`; `%XX` escapes are decoded) and
    /// `http(s)://host/…` (a tus endpoint) and `s3://BUCKET/PREFIX/` (S3 or an S3-compatible server).
    /// - Throws: `JobError` `bad_destination` when `url` is not one of those forms (a relative path, a
    ///   `file://host/` URL, a query or fragment, another scheme, a NUL byte, a bucket name S3 does not allow, a
    ///   prefix that does not end with `/`).
    public init(parsing url: String) throws(JobError) {
        func bad(_ why: String) -> JobError {
            JobError(
                code: "bad_destination",
                message: "destination '\(URLRedaction.url(url))' \(why); give file:///absolute/dir, an http(s):// tus endpoint or s3://BUCKET/PREFIX/")
        }
        guard let colon = url.firstIndex(of: ":") else { throw bad("is not a URL") }
        let scheme = url[..<colon].lowercased()
        let rest = url[url.index(after: colon)...]
        switch scheme {
        case "http", "https":
            guard rest.hasPrefix("//"), rest.count > 2 else { throw bad("has no host") }
            guard !url.unicodeScalars.contains(where: { $0.value <= 32 || $0.value == 127 }) else {
                throw bad("contains spaces or control characters")
            }
            let authority = rest.dropFirst(2).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            if let why = Self.authorityProblem(authority) { throw bad(why) }
            guard !url.contains("#") else { throw bad("has a fragment") }
            guard Self.percentDecode(rest) != nil else { throw bad("has a bad %-escape (% must start %XX, two hex digits)") }
            self = .tus(endpoint: url)
        case "file":
            guard rest.hasPrefix("//") else { throw bad("needs three slashes after 'file:'") }
            let afterSlashes = rest.dropFirst(2)
            guard let pathStart = afterSlashes.firstIndex(of: "/") else { throw bad("has no absolute path") }
            let host = afterSlashes[..<pathStart]
            guard host.isEmpty || host.lowercased() == "localhost" else {
                throw bad("names host '\(host)'; only local directories are supported (file:///dir)")
            }
            let encoded = afterSlashes[pathStart...]
            guard !encoded.contains("?"), !encoded.contains("#") else { throw bad("has a query or fragment") }
            guard let decoded = Self.percentDecode(encoded) else { throw bad("has a bad %-escape") }
            guard !decoded.contains(0) else { throw bad("contains a NUL byte") }
            self = .directory(path: Self.trimmingTrailingSlashes(BytePath(bytes: decoded)))
        case "s3":
            guard rest.hasPrefix("//") else { throw bad("needs two slashes after 's3:'") }
            let afterSlashes = rest.dropFirst(2)
            let bucket = String(afterSlashes.prefix { $0 != "/" })
            let prefix = String(afterSlashes.dropFirst(bucket.count + 1))
            try Self.checkBucket(bucket, url: url)
            guard prefix.isEmpty || prefix.hasSuffix("/") else {
                throw bad("has a key prefix '\(prefix)' that does not end with '/'; objects are named PREFIX + file name")
            }
            guard !prefix.hasPrefix("/"), !prefix.contains("//") else { throw bad("has an empty path segment in the prefix") }
            // S3 servers and HTTP stacks resolve `.` and `..` segments in a request path, so the object would land
            // under another key than the one recorded (or the request fail): refused, not rewritten.
            guard !prefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else {
                throw bad("has a '.' or '..' segment in its key prefix; the object would be stored under another key; "
                    + "give the prefix without them")
            }
            guard !prefix.unicodeScalars.contains(where: { $0.value < 32 || $0.value == 127 }) else {
                throw bad("contains control characters")
            }
            guard !prefix.contains("?"), !prefix.contains("#") else { throw bad("has a query or fragment") }
            guard prefix.utf8.count <= 900 else { throw bad("has a prefix longer than 900 bytes (keys hold 1024)") }
            self = .s3(bucket: bucket, prefix: prefix)
        default:
            throw bad("has unsupported scheme '\(scheme)'")
        }
    }

    /// What is wrong with the authority (`[userinfo@]host[:port]`, RFC 3986 §3.2) of an http(s) URL, or `nil`.
    ///
    /// Checked at submit so that a URL curl can never connect to (`http://[::1`, `http://%zz/`, port 0 or above
    /// 65535) is refused with `bad_destination` instead of failing every attempt later. Used for tus endpoints and
    /// S3 `endpoint` options alike. The message never quotes the user info (it may hold a password).
    public static func authorityProblem(_ authority: Substring) -> String? {
        if let at = authority.lastIndex(of: "@"), percentDecode(authority[..<at]) == nil {
            return "has a bad %-escape in its user info"
        }
        let hostPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        let host: Substring
        let afterHost: Substring
        if hostPort.hasPrefix("[") {
            // An IP literal (IPv6): `[` hex digits, colons, dots (an embedded IPv4), `%25zone` `]`.
            guard let close = hostPort.firstIndex(of: "]") else { return "has an IPv6 address without its closing ']'" }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            // Hex digits, colons and dots; a zone (`%25eth0`) adds letters and `-_~`.
            let literal = host.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ":.%-_~".unicodeScalars.contains($0))
            }
            guard !host.isEmpty, host.contains(":"), literal else { return "has a malformed IPv6 address '[\(host)]'" }
            afterHost = hostPort[hostPort.index(after: close)...]
            guard afterHost.isEmpty || afterHost.hasPrefix(":") else { return "has text after its IPv6 address" }
        } else {
            let colon = hostPort.firstIndex(of: ":") ?? hostPort.endIndex
            host = hostPort[..<colon]
            afterHost = hostPort[colon...]
            guard !host.isEmpty else { return "has no host" }
            guard !host.contains("[") && !host.contains("]") else { return "has a malformed host '\(host)'" }
            // A registered name (RFC 3986 §3.2.2): unreserved characters, sub-delimiters and %XX escapes that
            // decode to a name (no NUL, no control character, no space).
            let plain = host.unicodeScalars.allSatisfy {
                !$0.isASCII || $0.properties.isAlphabetic || ("0"..."9").contains($0) || "-._~!$&'()*+,;=%".unicodeScalars.contains($0)
            }
            guard plain, let decoded = percentDecode(host), !decoded.isEmpty,
                !decoded.contains(where: { $0 <= 32 || $0 == 127 || $0 == UInt8(ascii: "%") })
            else { return "has a malformed host '\(host)'; give a host name or an IP address" }
        }
        guard afterHost.hasPrefix(":") else { return nil }
        let port = afterHost.dropFirst()
        guard !port.isEmpty, port.count <= 5, port.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let number = Int(port),
            (1...65_535).contains(number)
        else { return "has port '\(port)'; a port is a number from 1 to 65535" }
        return nil
    }

    /// Checks an S3 bucket name: 3 to 63 characters, lower-case letters, digits, `.` and `-`, beginning and
    /// ending with a letter or digit, no `..`
    /// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
    /// - Throws: `JobError` `bad_destination`.
    static func checkBucket(_ bucket: String, url: String) throws(JobError) {
        let allowed = bucket.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
        let edges = bucket.first.map { $0.isLetter || $0.isNumber } == true && bucket.last.map { $0.isLetter || $0.isNumber } == true
        guard (3...63).contains(bucket.utf8.count), allowed, edges, !bucket.contains("..") else {
            throw JobError(
                code: "bad_destination",
                message: "destination '\(URLRedaction.url(url))' names bucket '\(bucket)', which is not a valid S3 bucket name; "
                    + "give 3-63 lower-case letters, digits, '.' or '-', starting and ending with a letter or digit")
        }
        // Names S3 reserves or refuses: an IP address, the `xn--`, `sthree-` and `amzn-s3-demo-` prefixes, the
        // `-s3alias`, `--ol-s3`, `.mrap`, `--x-s3` and `--table-s3` suffixes.
        let isIPAddress = bucket.split(separator: ".", omittingEmptySubsequences: false).count == 4
            && bucket.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { part in
                !part.isEmpty && part.count <= 3 && part.utf8.allSatisfy { $0 >= 48 && $0 <= 57 }
            }
        let reservedPrefix = ["xn--", "sthree-", "amzn-s3-demo-"].first { bucket.hasPrefix($0) }
        let reservedSuffix = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"].first { bucket.hasSuffix($0) }
        if isIPAddress || reservedPrefix != nil || reservedSuffix != nil {
            let why =
                isIPAddress
                ? "is formatted as an IP address" : reservedPrefix.map { "starts with '\($0)'" } ?? "ends with '\(reservedSuffix!)'"
            throw JobError(
                code: "bad_destination",
                message: "destination '\(URLRedaction.url(url))' names bucket '\(bucket)', which S3 does not allow: it "
                    + "\(why); give the name of a bucket that exists")
        }
    }

    /// The bytes of `text` with its `%XX` escapes decoded (they need not make UTF-8), or `nil` for a malformed
    /// escape.
    static func percentDecode(_ text: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// The `file://` URL of the absolute directory `path` (RFC 8089), which `init(parsing:)` reads back as exactly
    /// `path`: each byte that a URL would read as something else is percent-encoded (RFC 3986, section 2.1) —
    /// `%`, `?` and `#`, control characters and space, and every byte that is not part of valid UTF-8 (a
    /// Latin-1 `caf\xe9` is `caf%E9`). Valid UTF-8 stays as it is, so that `show` and the feed stay readable.
    public static func fileURL(of path: BytePath) -> String {
        var url = "file://"
        var index = 0
        let bytes = path.bytes
        while index < bytes.count {
            let length = BytePath.validSequenceLength(bytes, at: index)
            let byte = bytes[index]
            if length > 1 {
                url += String(decoding: bytes[index..<(index + length)], as: UTF8.self)
                index += length
                continue
            }
            let plain = length == 1 && byte > 0x20 && byte != 0x7F && !"%?#".utf8.contains(byte)
            url += plain ? String(UnicodeScalar(byte)) : "%" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            index += 1
        }
        return url
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    static func trimmingTrailingSlashes(_ path: BytePath) -> BytePath {
        var bytes = path.bytes[...]
        while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes = bytes.dropLast() }
        return BytePath(bytes: bytes)
    }
}

/// File names at the destination: each upload keeps its source's last path component.
public enum UploadNames {
    /// Suffix of the temporary file a directory upload writes before renaming it into place.
    public static let partSuffix = ".part"

    /// The destination name of `source`: the bytes after its last `/` (`/a/b/IMG_1.jpg` → `IMG_1.jpg`), UTF-8 or
    /// not.
    ///
    /// - Throws: `JobError` `bad_name` when that name could escape the destination directory or is no name:
    ///   empty (a path ending in `/`), `.`, `..`, or containing a NUL byte.
    public static func name(ofSource source: BytePath) throws(JobError) -> BytePath {
        let name = source.lastComponent
        try check(name, source: source)
        return name
    }

    /// Checks that `name` is one plain path component that stays inside a directory.
    ///
    /// - Throws: `JobError` `bad_name` for an empty name, `.`, `..`, a name with `/` or a NUL byte.
    public static func check(_ name: BytePath, source: BytePath? = nil) throws(JobError) {
        let of = source.map { " (from source '\($0)')" } ?? ""
        func bad(_ why: String) -> JobError {
            JobError(
                code: "bad_name",
                message: "destination name '\(name)'\(of) \(why); upload files by their paths, not directories")
        }
        if name.bytes.isEmpty { throw bad("is empty") }
        if name == "." || name == ".." { throw bad("would escape the destination directory") }
        if name.bytes.contains(UInt8(ascii: "/")) { throw bad("contains '/' and would escape the destination directory") }
        if name.containsNUL { throw bad("contains a NUL byte") }
    }

    /// The destination names of `sources`, in order, for an upload into a directory.
    ///
    /// (Temporary files are named per job, `NAME.<job>.part` — see `DirectoryUpload.partPath` — so a source named
    /// `x.part` beside one named `x` is no clash.)
    /// - Throws: `JobError` `bad_name` (see `name(ofSource:)`, or a name so long that its temporary file's name
    ///   would pass the file system's 255 bytes); `duplicate_name` when two sources have the same name (the same
    ///   bytes: `café` in NFC and in NFD are two names): they would overwrite each other.
    public static func names(ofSources sources: [BytePath]) throws(JobError) -> [BytePath] {
        var names: [BytePath] = []
        var seen: [BytePath: BytePath] = [:]
        for source in sources {
            let name = try name(ofSource: source)
            // NAME.<8 hex digits>.part must fit NAME_MAX (255 bytes on Linux file systems).
            let longest = 255 - (1 + 8 + partSuffix.utf8.count)
            guard name.bytes.count <= longest else {
                throw JobError(
                    code: "bad_name",
                    message: "destination name of '\(source)' is \(name.bytes.count) bytes; at most \(longest) fit "
                        + "beside its temporary .part name; rename the file")
            }
            if let other = seen[name] {
                throw JobError(
                    code: "duplicate_name",
                    message:
                        "'\(source)' and '\(other)' would both be written as '\(name)' in the destination; "
                        + "rename one, or upload them to different destinations (one would replace the other in the same one)")
            }
            seen[name] = source
            names.append(name)
        }
        return names
    }
}
