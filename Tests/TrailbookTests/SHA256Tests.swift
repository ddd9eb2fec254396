import Foundation
import Testing

@testable import TrailbookEngine

struct SHA256Tests {
    @Test func knownVectors() {
        #expect(SHA256.hexDigest(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexDigest(of: [UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            SHA256.hexDigest(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func incrementalEqualsOneShotAndFinalizeIsStable() {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let hash = SHA256()
        var start = 0
        for step in [1, 63, 64, 65, 4096, 12345] {
            let end = min(bytes.count, start + step)
            bytes[start..<end].withUnsafeBytes { hash.update($0) }
            start = end
        }
        bytes[start...].withUnsafeBytes { hash.update($0) }
        let digest = hash.finalize()
        #expect(digest.count == 32)
        #expect(hash.finalize() == digest)
        #expect(hash.hexDigest == SHA256.hexDigest(of: bytes))
        #expect(SHA256.hex([0x00, 0x0f, 0xf0, 0xff]) == "000ff0ff")
    }

    @Test func oneMebibyteFileMatchesSha256sum() throws {
        let path = NSTemporaryDirectory() + "sha256-test-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        var bytes = [UInt8](repeating: 0, count: 1 << 20)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for index in bytes.indices {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes[index] = UInt8(truncatingIfNeeded: state >> 33)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let expected = String(output.prefix(64))

        let hash = SHA256()
        for start in stride(from: 0, to: bytes.count, by: 100_000) {
            bytes[start..<min(bytes.count, start + 100_000)].withUnsafeBytes { hash.update($0) }
        }
        #expect(expected.count == 64)
        #expect(hash.hexDigest == expected)
    }
}
