import CCrypto

/// Message digests through OpenSSL's EVP interface (libcrypto); nothing here is hand-rolled.
enum Digest {
    /// The digest algorithms this module uses.
    enum Algorithm {
        case sha1, sha256

        var md: OpaquePointer? {
            switch self {
            case .sha1: EVP_sha1()
            case .sha256: EVP_sha256()
            }
        }
    }

    /// A streaming digest context.
    final class Context {
        private let ctx: OpaquePointer

        init(_ algorithm: Algorithm) {
            guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
            self.ctx = ctx
            EVP_DigestInit_ex(ctx, algorithm.md, nil)
        }

        deinit { EVP_MD_CTX_free(ctx) }

        func update(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count > 0 else { return }
            EVP_DigestUpdate(ctx, bytes.baseAddress, bytes.count)
        }

        func finish() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var length: UInt32 = 0
            out.withUnsafeMutableBufferPointer { _ = EVP_DigestFinal_ex(ctx, $0.baseAddress, &length) }
            return Array(out.prefix(Int(length)))
        }
    }

    /// The digest of `bytes` in one call.
    static func hash(_ algorithm: Algorithm, _ bytes: [UInt8]) -> [UInt8] {
        let context = Context(algorithm)
        bytes.withUnsafeBytes { context.update($0) }
        return context.finish()
    }

    /// Lowercase hexadecimal.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
