#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The rules of the control protocol (docs/protocol.md) that the daemon enforces and its clients check before they
/// send: one JSON object a line, at most `maxLineBytes` long.
public enum ControlProtocol {
    /// The longest request line the daemon accepts, in bytes: 1 MiB. A longer one is answered `request_too_large`.
    public static let maxLineBytes = 1 << 20

    /// The longest deadline or stall timeout a job may have, in seconds: one year.
    public static let longestTimeoutSeconds: Double = 365 * 24 * 3600

    /// What is wrong with a queue name, or `nil`: 1 to 64 characters of ASCII letters, digits, `.`, `_` and `-`.
    public static func queueNameProblem(_ name: String) -> String? {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x2e || byte == 0x5f || byte == 0x2d
        }
        guard !name.isEmpty, name.utf8.count <= 64, allowed else {
            return "a queue name is 1 to 64 letters, digits, '.', '_' or '-', got '\(name.prefix(80))'"
        }
        return nil
    }

    /// A fresh idempotency key for a submit: a random (version 4) UUID in lower case.
    public static func newKey() -> String { UUID.random() }
}

extension UUID {
    /// A random (version 4, RFC 9562 §5.4) UUID in lower case, for job ids: 122 random bits from the system's
    /// generator (`getrandom`), formatted here. Foundation's `UUID()` opened, read and closed `/dev/urandom` for
    /// every id (five system calls per submitted job).
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & ~0xF000) | 0x4000  // version 4 in bits 48-51
        low = (low & ~(0xC000 << 48)) | (0x8000 << 48)  // variant 10
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var at = 0
            for index in 0..<32 {
                if index == 8 || index == 12 || index == 16 || index == 20 {
                    buffer[at] = 0x2D
                    at += 1
                }
                let word = index < 16 ? high : low
                let shift = UInt64(60 - 4 * (index % 16))
                buffer[at] = digits[Int((word >> shift) & 0xF)]
                at += 1
            }
            return at
        }
    }
}
