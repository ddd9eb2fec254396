#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A file path or file name as Linux has it: a string of bytes (no NUL), usually but not necessarily UTF-8.
///
/// A Swift `String` cannot hold bytes that are not UTF-8 (`caf\xe9.jpg`, Latin-1): decoding repairs them to U+FFFD
/// and the file is then "missing". Job params, checkpoints and results carry paths as `BytePath`, so every name
/// is opened, written and reported with its exact bytes.
///
/// JSON (the protocol is JSON, which is UTF-8): a path whose bytes are valid UTF-8 is a plain string, as always;
/// any other is an object `{"base64": "Y2Fm6S5qcGc=", "text": "caf\\xe9.jpg"}` — `base64` holds the exact bytes
/// (RFC 4648 standard alphabet, with padding), `text` the `description` for people and is ignored on input.
/// Chosen over a surrogate escape in the string (`\udce9`, Python's surrogateescape) because a lone surrogate is
/// not valid Unicode: Swift, jq and most JSON libraries replace or refuse it, which would lose the byte
/// silently; and over escaping bytes inside the string (`%e9`), which would change the meaning of names that
/// hold the escape character. Every valid-UTF-8 path keeps its old JSON, so stored jobs decode as before.
///
/// Equality and hashing are by bytes (not by Unicode canonical equivalence, as `String`'s are): `café` in NFC and
/// in NFD are two different files.
public struct BytePath: Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The bytes of the path.
    public var bytes: [UInt8]

    /// The path spelled by `text` (its UTF-8 bytes).
    public init(_ text: String) { bytes = Array(text.utf8) }

    /// The path made of `bytes`.
    public init(bytes: some Sequence<UInt8>) { self.bytes = Array(bytes) }

    public init(stringLiteral value: String) { self.init(value) }

    /// The path as text when its bytes are valid UTF-8, else `nil`.
    public var text: String? { String(validating: bytes, as: UTF8.self) }

    /// The path for people: valid UTF-8 as it is, each byte that is not part of valid UTF-8 as `\xHH` (lower-case
    /// hex). Control characters are left for the terminal layer to escape (`TerminalText.escape` in the CLI).
    public var description: String {
        if let text { return text }
        var out = ""
        var index = 0
        while index < bytes.count {
            let length = Self.validSequenceLength(bytes, at: index)
            if length > 0 {
                out += String(decoding: bytes[index..<(index + length)], as: UTF8.self)
                index += length
            } else {
                out += "\\x" + (bytes[index] < 0x10 ? "0" : "") + String(bytes[index], radix: 16)
                index += 1
            }
        }
        return out
    }

    /// The length in bytes (1 to 4) of the valid UTF-8 sequence starting at `bytes[index]`, or 0 if there is none
    /// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
    public static func validSequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let first = bytes[index]
        let (length, low, high): (Int, UInt8, UInt8) =
            switch first {
            case 0x00...0x7F: (1, 0x80, 0xBF)
            case 0xC2...0xDF: (2, 0x80, 0xBF)
            case 0xE0: (3, 0xA0, 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (3, 0x80, 0xBF)
            case 0xED: (3, 0x80, 0x9F)
            case 0xF0: (4, 0x90, 0xBF)
            case 0xF1...0xF3: (4, 0x80, 0xBF)
            case 0xF4: (4, 0x80, 0x8F)
            default: (0, 0, 0)
            }
        guard length > 0, index + length <= bytes.count else { return 0 }
        for offset in 1..<max(1, length) {
            let byte = bytes[index + offset]
            let (min, max) = offset == 1 ? (low, high) : (UInt8(0x80), UInt8(0xBF))
            if byte < min || byte > max { return 0 }
        }
        return length
    }

    /// Whether the path starts with `/`.
    public var isAbsolute: Bool { bytes.first == UInt8(ascii: "/") }

    /// Whether the path holds a NUL byte (which no file system call can take).
    public var containsNUL: Bool { bytes.contains(0) }

    /// The part after the last `/` (all of it when there is none): `/a/b/IMG_1.jpg` → `IMG_1.jpg`.
    public var lastComponent: BytePath {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return self }
        return BytePath(bytes: bytes[(slash + 1)...])
    }

    /// The path without `.` components, repeated `/` and a trailing `/`: `$HOME/./trip//` → `$HOME/trip`,
    /// `./a.jpg` → `a.jpg`. `..` stays: resolving it needs the file system (`a/link/..` is not `a` when `link` is
    /// a symbolic link), and the file system resolves it when the path is opened. An empty result is `/` for an
    /// absolute path and `.` otherwise. Purely lexical (POSIX.1-2017, 4.13 Pathname Resolution: `.` names the
    /// directory it is in, and consecutive slashes count as one), so it never touches the disk.
    public var lexicallyNormalized: BytePath {
        let slash = UInt8(ascii: "/")
        let kept = bytes.split(separator: slash, omittingEmptySubsequences: true).filter { !$0.elementsEqual([UInt8(ascii: ".")]) }
        var out: [UInt8] = isAbsolute ? [slash] : []
        for (index, component) in kept.enumerated() {
            if index > 0 { out.append(slash) }
            out.append(contentsOf: component)
        }
        return BytePath(bytes: out.isEmpty ? [UInt8(ascii: ".")] : out)
    }

    /// `directory/name`, without doubling a `/` at the end of `directory`.
    public static func join(_ directory: BytePath, _ name: BytePath) -> BytePath {
        BytePath(bytes: directory.bytes + (directory.bytes.last == UInt8(ascii: "/") ? [] : [UInt8(ascii: "/")]) + name.bytes)
    }

    /// The path with `suffix` (text) appended: `name + ".part"`.
    public static func + (path: BytePath, suffix: String) -> BytePath { BytePath(bytes: path.bytes + Array(suffix.utf8)) }

    /// Calls `body` with the path as a NUL-terminated C string, for file system calls.
    public func withCString<Result>(_ body: (UnsafePointer<CChar>) throws -> Result) rethrows -> Result {
        try (bytes + [0]).withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    enum CodingKeys: String, CodingKey { case base64, text }

    /// Decodes a JSON string (its UTF-8 bytes) or `{"base64": …}` (the bytes it encodes).
    /// - Throws: `DecodingError` for anything else, `base64` that is not valid base64, or a path holding a NUL
    ///   byte.
    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            self.init(text)
        } else {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let encoded = try container.decode(String.self, forKey: .base64)
            guard let data = Data(base64Encoded: encoded) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .base64, in: container, debugDescription: "not base64 (RFC 4648, with padding)")
            }
            self.init(bytes: data)
        }
        // No file name holds one, and the C calls would read the path only up to it: another file.
        guard !containsNUL else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a path cannot hold a NUL byte (no file name can)"))
        }
    }

    /// Encodes a string when the bytes are UTF-8, else `{"base64", "text"}`.
    public func encode(to encoder: any Encoder) throws {
        if let text {
            var single = encoder.singleValueContainer()
            try single.encode(text)
            return
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Data(bytes).base64EncodedString(), forKey: .base64)
        try container.encode(description, forKey: .text)
    }

    /// A text that tells any two paths apart: the path when it is UTF-8, else `base64:` and its bytes in base64.
    public var key: String { text ?? "base64:" + Data(bytes).base64EncodedString() }

}
