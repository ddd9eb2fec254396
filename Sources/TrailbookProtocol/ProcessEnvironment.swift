#if canImport(Glibc)
    import Glibc
#endif

/// The process's environment variables.
public enum ProcessEnvironment {
    /// Every variable of this process (`environ`), by name; a later duplicate wins.
    public static func current() -> [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }

    /// The variables of this process whose values are not valid UTF-8, by name, with their bytes: `current()`
    /// holds them decoded with each bad byte repaired to U+FFFD, which would name another directory or spell
    /// another password.
    public static func valuesNotUTF8() -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let bytes = Array(UnsafeBufferPointer(start: entry, count: strlen(entry))).map { UInt8(bitPattern: $0) }
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                let name = String(decoding: bytes[..<equals], as: UTF8.self)
                let value = Array(bytes[(equals + 1)...])
                if String(validating: value, as: UTF8.self) == nil {
                    result[name] = value
                } else {
                    result[name] = nil  // a later valid duplicate wins, as in `current()`
                }
            }
            pointer += 1
        }
        return result
    }
}
