import CCrypto

/// A checksum algorithm of the tus checksum extension (`Upload-Checksum: <algorithm> <base64 digest>`).
public enum TusChecksumAlgorithm: String, Sendable, CaseIterable {
    case sha256, sha512, sha1, md5

    /// The algorithm to use among those a server offers (`Tus-Checksum-Algorithm`), or `nil` if none is known.
    ///
    /// Preference: sha256 (collision-resistant, hardware-accelerated on current x86 and ARM), sha512, sha1 (the
    /// one every checksum-capable server must support), md5.
    public static func best(of offered: [String]) -> TusChecksumAlgorithm? {
        let names = Set(offered.map { $0.lowercased() })
        return allCases.first { names.contains($0.rawValue) }
    }

    /// The digest of `bytes`, computed with OpenSSL's EVP interface. CPU-bound: call it on the thread pool for
    /// chunks of more than a few KiB.
    public func digest(_ bytes: [UInt8]) -> [UInt8] {
        let md: OpaquePointer? =
            switch self {
            case .sha256: EVP_sha256()
            case .sha512: EVP_sha512()
            case .sha1: EVP_sha1()
            case .md5: EVP_md5()
            }
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, md, nil)
            }
        }
        precondition(ok == 1, "EVP_Digest failed")
        return Array(out.prefix(Int(length)))
    }

    /// The value of an `Upload-Checksum` header for `bytes`: the algorithm's name, a space, the base64 digest.
    public func headerValue(for bytes: [UInt8]) -> String {
        "\(rawValue) \(Base64.encode(digest(bytes)))"
    }
}

/// Standard base64 (RFC 4648 §4, with padding), as tus uses for metadata values and checksums.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `bytes` in base64.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let a = iterator.next() {
            let b = iterator.next()
            let c = iterator.next()
            let n = UInt32(a) << 16 | UInt32(b ?? 0) << 8 | UInt32(c ?? 0)
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(b == nil ? UInt8(ascii: "=") : alphabet[Int(n >> 6 & 63)])
            out.append(c == nil ? UInt8(ascii: "=") : alphabet[Int(n & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
