#if canImport(Glibc)
    import Glibc
#endif

/// The process's environment variables.
public enum ProcessEnvironment {
    /// Every variable of this process (`environ`), by name; a later duplicate wins. A value that is not valid
    /// UTF-8 is decoded with each bad byte repaired to U+FFFD (see `valuesNotUTF8()`).
    public static func current() -> [String: String] {
        var result: [String: String] = [:]
        for (name, value) in entries() { result[name] = String(decoding: value, as: UTF8.self) }
        return result
    }

    /// The variables of this process whose values are not valid UTF-8, by name, with their bytes: `current()`
    /// holds them repaired, which would name another directory or spell another password.
    public static func valuesNotUTF8() -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        // A later duplicate wins, as in `current()`: a valid one clears an earlier bad one.
        for (name, value) in entries() { result[name] = String(validating: value, as: UTF8.self) == nil ? value : nil }
        return result
    }

    /// `environ`'s `NAME=VALUE` entries in order, the value as its bytes.
    private static func entries() -> [(name: String, value: [UInt8])] {
        var entries: [(name: String, value: [UInt8])] = []
        var pointer = environ
        while let entry = pointer.pointee {
            let bytes = UnsafeBufferPointer(start: entry, count: strlen(entry)).map { UInt8(bitPattern: $0) }
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                entries.append((String(decoding: bytes[..<equals], as: UTF8.self), Array(bytes[(equals + 1)...])))
            }
            pointer += 1
        }
        return entries
    }
}
