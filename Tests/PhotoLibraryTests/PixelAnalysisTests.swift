import Foundation
import Testing

@testable import PhotoLibrary

/// Whether this kernel grants file leases (F_SETLEASE).
private let leasesEnabled =
    (try? String(contentsOfFile: "/proc/sys/fs/leases-enable", encoding: .utf8))?.hasPrefix("1") ?? false

struct PixelAnalysisTests {
    @Test func orientationSixTurnsLandscapeIntoPortrait() throws {
        let stored = try Fixtures.scene(300, 200).jpegData()
        #expect(try PixelAnalysis(jpeg: stored).aspect == .landscape)
        let rotated = Fixtures.withEXIF(stored, .init(orientation: 6))
        let m = try PhotoMetadata(jpeg: rotated)
        let a = try PixelAnalysis(jpeg: rotated, orientation: m.orientation ?? 1)
        #expect(a.aspect == .portrait)
        #expect(a.width == 200 && a.height == 300)
    }

    @Test func aspectClasses() {
        #expect(AspectClass(width: 100, height: 104) == .square)
        #expect(AspectClass(width: 100, height: 110) == .portrait)
        #expect(AspectClass(width: 400, height: 200) == .panorama)
        #expect(AspectClass(width: 100, height: 300) == .panorama)
        #expect(AspectClass(width: 4032, height: 3024) == .landscape)
    }

    @Test func orientationMapsCorners() {
        // 2×1: red, blue. Rotated 90° clockwise (6) it is 1×2 with red on top; 8 puts blue on top.
        let image = RGBImage(width: 2, height: 1, pixels: [255, 0, 0, 0, 0, 255])
        #expect(image.oriented(6).pixels == [255, 0, 0, 0, 0, 255])
        #expect(image.oriented(8).pixels == [0, 0, 255, 255, 0, 0])
        #expect(image.oriented(3).pixels == [0, 0, 255, 255, 0, 0])
        #expect(image.oriented(6).width == 1)
    }

    @Test func darkImageIsNight() throws {
        let dark = try Fixtures.image(160, 120) { x, y in
            (x + y) % 37 == 0 ? (250, 220, 120) : (12, 14, 30)  // street lights on a dark sky
        }.jpegData()
        let a = try PixelAnalysis(jpeg: dark)
        #expect(a.isNight)
        #expect(a.meanLuma < PixelAnalysis.nightLumaThreshold)
        #expect(try !PixelAnalysis(jpeg: Fixtures.scene(160, 120).jpegData()).isNight)
    }

    @Test func dominantColour() throws {
        let blue = try PixelAnalysis(jpeg: Fixtures.image(64, 64) { _, _ in (40, 90, 210) }.jpegData())
        #expect(blue.dominantColor == .blue)
        let red = try PixelAnalysis(jpeg: Fixtures.image(64, 64) { _, _ in (200, 30, 30) }.jpegData())
        #expect(red.dominantColor == .red)
        #expect(ColorName(red: 250, green: 250, blue: 250) == .white)
        #expect(ColorName(red: 10, green: 10, blue: 10) == .black)
        #expect(ColorName(red: 120, green: 70, blue: 20) == .brown)
    }

    @Test func nearDuplicatesHaveCloseHashes() throws {
        let original = Fixtures.image(400, 300) { x, y in
            let v = UInt8((x * 255 / 400 + (y / 30) * 20) % 256)
            return (v, UInt8((Int(v) + y) % 256), 255 - v)
        }
        let a = try PixelAnalysis(jpeg: original.jpegData(quality: 92))
        // Recompressed hard, shrunk, and brightened a little: the same photo.
        let variant = original.resized(width: 200, height: 150)
        let brighter = RGBImage(
            width: variant.width, height: variant.height, pixels: variant.pixels.map { UInt8(min(255, Int($0) + 12)) })
        let b = try PixelAnalysis(jpeg: brighter.jpegData(quality: 40))
        let near = a.perceptualHash.distance(to: b.perceptualHash)
        #expect(near <= PerceptualHash.nearDuplicateDistance, "near-duplicate distance \(near)")
        // A different picture.
        let other = try PixelAnalysis(
            jpeg: Fixtures.image(400, 300) { x, y in ((x / 25 + y / 25) % 2 == 0 ? (230, 230, 230) : (20, 40, 20)) }
                .jpegData())
        let far = a.perceptualHash.distance(to: other.perceptualHash)
        #expect(far >= 20, "different-image distance \(far)")
        #expect(PerceptualHash(value: 0).distance(to: PerceptualHash(value: .max)) == 64)
    }

    /// A photo path that now names a FIFO, a device or a directory is refused at once (a FIFO used to block the
    /// reader until a writer came).
    @Test func onlyRegularFilesAreRead() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let fifo = dir + "/photo.jpg"
        #expect(mkfifo(fifo, 0o600) == 0)
        for path in [fifo, "/dev/zero", dir] {
            do {
                _ = try PhotoFile.read(path: path)
                Issue.record("\(path) was read")
            } catch {
                #expect(error.code == .io && error.message.contains("not a regular file"), "\(path): \(error)")
            }
        }
        let real = dir + "/real.jpg"
        let bytes = try Fixtures.scene(20, 10).jpegData()
        #expect(FileManager.default.createFile(atPath: real, contents: Data(bytes)))
        #expect(try PhotoFile.read(path: real).bytes == bytes)
    }

    /// A photo under another process's write lease (F_SETLEASE, as Samba and NFS servers take) is read once the
    /// holder lets it go, as a blocking open would; a non-blocking open alone fails with EAGAIN.
    @Test(.enabled(if: leasesEnabled, "skipped: file leases are off (/proc/sys/fs/leases-enable)"))
    func aLeasedFileIsReadOnceTheLeaseIsReleased() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/leased.jpg"
        let bytes = try Fixtures.scene(20, 10).jpegData()
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        // The holder takes a write lease, says so, and drops it when the kernel tells it (SIGIO) a reader waits.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = ["-c", """
            import fcntl, os, signal, sys, time
            fd = os.open(sys.argv[1], os.O_RDWR)
            def release(*_):
                fcntl.fcntl(fd, 1024, fcntl.F_UNLCK)
            signal.signal(signal.SIGIO, release)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGIO])  # the test runner's mask is inherited
            fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)
            print("leased", flush=True)
            time.sleep(30)
            """, path]
        let output = Pipe()
        holder.standardOutput = output
        try holder.run()
        defer { holder.terminate() }
        #expect(output.fileHandleForReading.availableData.starts(with: Array("leased".utf8)))
        let started = Date()
        #expect(try PhotoFile.read(path: path).bytes == bytes)
        #expect(Date().timeIntervalSince(started) < 10, "waited for the release, not the 45 s lease-break timeout")
    }

    @Test func badFilesAreErrorsNotCrashes() throws {
        let good = try Fixtures.scene(200, 150).jpegData()
        func code(_ bytes: [UInt8]) -> PhotoLibraryError.Code? {
            do {
                _ = try PixelAnalysis(jpeg: bytes)
                return nil
            } catch { return error.code }
        }
        #expect(code([]) == .empty)
        #expect(code(Array("hello, not a JPEG".utf8)) == .notJPEG)
        #expect(code([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) == .notJPEG)
        #expect(code(Array(good.prefix(good.count / 2))) == .truncated)
        #expect(code(Array(good.prefix(40))) == .truncated)
        #expect(throws: PhotoLibraryError.self) { try PhotoMetadata(jpeg: []) }
        #expect(try PhotoMetadata(jpeg: Array(good.prefix(good.count / 2))).width == 200)

        // A decompression bomb: a valid small JPEG whose SOF0 frame header claims 20 000 × 20 000 pixels. What is
        // decoded is bounded (1/8: 2 500 × 2 500, 19 MB), and the data that is not there decodes as flat grey,
        // with the decoder's warnings about corrupt data.
        var bomb = good
        let sof = try #require((0..<bomb.count - 9).first { bomb[$0] == 0xFF && bomb[$0 + 1] == 0xC0 })
        bomb[sof + 5] = UInt8(20_000 >> 8); bomb[sof + 6] = UInt8(20_000 & 0xFF)
        bomb[sof + 7] = UInt8(20_000 >> 8); bomb[sof + 8] = UInt8(20_000 & 0xFF)
        let decoded = try RGBImage.decodeJPEG(bomb)
        #expect(decoded.sourceWidth == 20_000 && decoded.image.width == 256 && decoded.warnings > 0)
        var bounded = DecodeLimits()
        bounded.maxPixels = 6_000_000
        #expect(throws: PhotoLibraryError.self) { try PixelAnalysis(jpeg: bomb, limits: bounded) }
        #expect(try JPEGHeader(jpeg: bomb).width == 20_000)
        var tight = DecodeLimits()
        tight.maxPixels = 1_000
        #expect(throws: PhotoLibraryError.self) { try PixelAnalysis(jpeg: good, limits: tight) }
    }

    @Test func reducedScaleDecode() throws {
        let big = try Fixtures.scene(1600, 900).jpegData(quality: 70)
        let decoded = try RGBImage.decodeJPEG(big)
        #expect(max(decoded.image.width, decoded.image.height) <= 256)
        #expect(decoded.sourceWidth == 1600)
    }
}

/// A hash with too little structure is no evidence of a duplicate: every flat picture hashes to 0 whatever its
/// colour or size, and a plain gradient to all ones or all zeros.
struct HashDetailTests {
    static func analysis(_ image: RGBImage) throws -> PixelAnalysis { try PixelAnalysis(jpeg: image.jpegData()) }

    @Test func flatGradientAndNearFlatPicturesAreNoEvidence() throws {
        var pictures: [(String, RGBImage)] = [
            ("1x1 black", Fixtures.image(1, 1) { _, _ in (0, 0, 0) }),
            ("grey 403x201", Fixtures.image(403, 201) { _, _ in (128, 128, 128) }),
            ("blue rising", Fixtures.image(128, 96) { x, _ in (0, 0, UInt8(x * 2)) }),
            ("blue falling", Fixtures.image(128, 96) { x, _ in (0, 0, UInt8(255 - x * 2)) }),
            ("blue down", Fixtures.image(128, 96) { _, y in (0, 0, UInt8(y * 2)) }),
            ("diagonal", Fixtures.image(128, 96) { x, y in (UInt8(x), UInt8(y), 200) }),
            ("dot", Fixtures.image(64, 48) { x, y in x == 30 && y == 20 ? (0, 0, 0) : (200, 200, 200) }),
            // Sky over grass with fine texture that averages out at 9 × 8: no left-right structure at all.
            ("two-tone scene", Fixtures.scene(160, 120)),
        ]
        for n in 0..<20 {
            pictures.append(("solid \(n)", Fixtures.image(40, 30) { _, _ in (UInt8(n * 13), UInt8(255 - n * 11), 90) }))
        }
        var state: UInt32 = 1
        pictures.append(("noise ±2", Fixtures.image(64, 48) { _, _ in
            state = state &* 1_103_515_245 &+ 12345
            let v = UInt8(126 + Int(state >> 16) % 5)
            return (v, v, v)
        }))
        for (name, image) in pictures {
            let a = try Self.analysis(image)
            #expect(!a.hashIsEvidence, "\(name): detail \(a.hashDetail), hash \(a.perceptualHash)")
            #expect(a.warnings.contains("too little detail to look for duplicates (a flat picture or a plain gradient)"))
        }
        // What made them "duplicates" before: equal hashes.
        #expect(try Self.analysis(pictures[0].1).perceptualHash == Self.analysis(pictures[1].1).perceptualHash)
    }

    /// A worker sends its hash as JSON, where a number keeps only 53 bits: it goes as hex text, all 64 kept.
    @Test func theHashTravelsAsHexText() throws {
        for value: UInt64 in [.max, 0x8000_0000_0000_0001, 0x0123_4567_89ab_cdef, 0] {
            let json = try JSONEncoder().encode([PerceptualHash(value: value)])
            #expect(String(decoding: json, as: UTF8.self) == "[\"\(PerceptualHash(value: value))\"]")
            #expect(try JSONDecoder().decode([PerceptualHash].self, from: json) == [PerceptualHash(value: value)])
        }
    }

    @Test func texturedPicturesAreEvidence() throws {
        // Blocks of random greys, 8 × 6 of them: structure at the hash's own scale.
        for seed in 0..<5 {
            var state = UInt32(seed + 1)
            var cells = [UInt8]()
            for _ in 0..<48 {
                state = state &* 1_103_515_245 &+ 12345
                cells.append(UInt8(state >> 24))
            }
            let a = try Self.analysis(Fixtures.image(160, 120) { x, y in
                let v = cells[(y / 20) * 8 + x / 20]
                return (v, v / 2, 255 - v)
            })
            #expect(a.hashIsEvidence, "blocks \(seed): detail \(a.hashDetail)")
        }
        let waves = Fixtures.image(160, 90) { x, y in
            let v = 128 + 100 * sin(Double(x) / 17) * cos(Double(y) / 11)
            return (UInt8(v), UInt8(255 - v), 90)
        }
        let a = try Self.analysis(waves)
        #expect(a.hashIsEvidence && a.warnings.isEmpty, "detail \(a.hashDetail)")
    }
}
