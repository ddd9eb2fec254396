import CCrypto

/// An incremental SHA-256 digest (FIPS 180-4), computed by OpenSSL's libcrypto through its EVP interface
/// (`EVP_DigestInit_ex(EVP_sha256())`, `EVP_DigestUpdate`, `EVP_DigestFinal_ex`).
///
/// Feed it bytes with `update(_:)` as they stream by, then call `finalize()` once. It is not thread-safe: use one
/// instance from one thread at a time (handing it from the loop to a pool call and back is fine, as the pool call
/// is awaited before the next one starts); hence `@unchecked Sendable`.
public final class SHA256: @unchecked Sendable {
    /// Length of a digest, in bytes.
    public static let digestLength = 32

    private let context: OpaquePointer
    private var digest: [UInt8]?

    /// Starts an empty digest.
    ///
    /// Traps if libcrypto cannot allocate or initialise a context (out of memory): there is no useful way on.
    public init() {
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed (out of memory)") }
        precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "EVP_DigestInit_ex(sha256) failed")
        self.context = context
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    /// Adds `bytes` to the digest.
    /// - Precondition: `finalize()` has not been called yet.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        precondition(digest == nil, "SHA256.update after finalize")
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        precondition(EVP_DigestUpdate(context, base, bytes.count) == 1, "EVP_DigestUpdate failed")
    }

    /// Adds the bytes of `bytes` (for example `Array("abc".utf8)`) to the digest.
    /// - Precondition: `finalize()` has not been called yet.
    public func update<Bytes: Collection<UInt8>>(_ bytes: Bytes) {
        if let done: Void = bytes.withContiguousStorageIfAvailable({ update(UnsafeRawBufferPointer($0)) }) {
            return done
        }
        Array(bytes).withUnsafeBytes { update($0) }
    }

    /// The 32-byte digest of everything passed to `update`. Later calls return the same digest.
    public func finalize() -> [UInt8] {
        if let digest { return digest }
        var out = [UInt8](repeating: 0, count: Self.digestLength)
        var length: UInt32 = 0
        let rc = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        precondition(rc == 1 && length == UInt32(Self.digestLength), "EVP_DigestFinal_ex failed")
        digest = out
        return out
    }

    /// The digest as 64 lower-case hexadecimal digits (the form `sha256sum` prints). Finalizes the digest.
    public var hexDigest: String {
        Self.hex(finalize())
    }

    /// `bytes` as lower-case hexadecimal digits, two per byte.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The SHA-256 of `bytes`, in hexadecimal.
    public static func hexDigest<Bytes: Collection<UInt8>>(of bytes: Bytes) -> String {
        let hash = SHA256()
        hash.update(bytes)
        return hash.hexDigest
    }
}
