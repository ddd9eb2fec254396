import CExif
import Foundation
import PhotoLibrary
import Testing
import TrailbookEngine

/// Tagging that never guesses, against the real daemon and its workers: a failure that may pass keeps what was
/// known, flat pictures are not duplicates, the reasons reach `photos show`, the decode limit is an option.
@Suite(.serialized)
struct TaggingHonestyTests {
    static let leasesEnabled =
        (try? String(contentsOfFile: "/proc/sys/fs/leases-enable", encoding: .utf8))?.hasPrefix("1") ?? false

    /// A picture with structure at the perceptual hash's scale.
    static func waves(_ width: Int = 160, _ height: Int = 90) -> RGBImage {
        Fixtures.image(width, height) { x, y in
            let v = 128 + 100 * sin(Double(x) / 17) * cos(Double(y) / 11)
            return (UInt8(v), UInt8(255 - v), 90)
        }
    }

    /// A textured photo with EXIF date and camera: autotag gives it year, month, make, camera, aspect and colour.
    static func cameraPhoto() throws -> [UInt8] {
        Fixtures.withEXIF(
            try Fixtures.scene(96, 64).jpegData(),
            .init(make: "Canon", model: "Canon EOS 40D", dateTimeOriginal: "2024:05:03 18:22:10"))
    }

    static func tags(_ daemon: DaemonHarness, _ path: String) throws -> [String] {
        let photos = try daemon.cliJSON(["photos", "list", "--json"]).arrayValue ?? []
        let photo = photos.first { $0["path"]?.stringValue == path }
        return photo?["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    // MARK: a transient failure never destroys knowledge

    /// The photo's file is under another process's write lease for longer than `--worker-timeout 2s`: the read
    /// times out. Before, the photo lost every tag and got `unreadable`; now it keeps them, is listed as
    /// retryable, and `--retry JOB` tags it once the lease is gone.
    @Test(.enabled(if: leasesEnabled, "file leases are off (/proc/sys/fs/leases-enable)"))
    func aReadThatTimesOutKeepsEveryTagAndCanBeRetriedAlone() throws {
        let folder = TemporaryDirectory("tbj-lease")
        let path = folder.file("leased.jpg")
        PhotoTestSupport.write(try Self.cameraPhoto(), path)
        let daemon = try DaemonHarness(arguments: ["--worker-timeout", "2s"])
        _ = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        let first = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        #expect(first["result"]?["tagged"]?.intValue == 1)
        let known = try Self.tags(daemon, path)
        #expect(
            known == [
                "aspect:landscape", "camera:Canon EOS 40D", "color:green", "make:Canon", "month:2024-05", "year:2024",
            ])

        // The holder keeps its lease until the test says (SIGIO, "a reader waits", is ignored).
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = [
            "-c",
            """
            import fcntl, os, signal, sys
            signal.signal(signal.SIGIO, signal.SIG_IGN)
            fd = os.open(sys.argv[1], os.O_RDWR)
            fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)
            print("leased", flush=True)
            sys.stdin.readline()
            fcntl.fcntl(fd, 1024, fcntl.F_UNLCK)
            """, path,
        ]
        let output = Pipe(), input = Pipe()
        holder.standardOutput = output
        holder.standardInput = input
        try holder.run()
        defer { if holder.isRunning { holder.terminate() } }
        #expect(output.fileHandleForReading.availableData.starts(with: Array("leased".utf8)))

        let second = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        let result = try #require(second["result"])
        #expect(second["state"]?.stringValue == "succeeded")
        #expect(result["photos"]?.intValue == 1)
        #expect(result["tagged"]?.intValue == 0, "a photo that could not be read is not counted as tagged")
        #expect(result["unreadable_count"]?.intValue == 0)
        #expect(result["retryable_count"]?.intValue == 1)
        let retryable = try #require(result["retryable"]?.arrayValue?.first)
        #expect(retryable["path"]?.stringValue == path)
        #expect(retryable["code"]?.stringValue == "worker_timeout")
        #expect(
            retryable["message"]?.stringValue
                == "the worker ran past its time limit of 2 s on photo.inspect and was killed with signal 9")
        #expect(try Self.tags(daemon, path) == known, "every tag it had is kept, no unreadable")
        #expect(
            daemon.log().contains("killed with signal 9: task photo.inspect ran past its time limit of 2 s"),
            "the kill is in the daemon's log: \(daemon.log())")

        input.fileHandleForWriting.write(Data("release\n".utf8))
        holder.waitUntilExit()
        let jobID = try #require(second["id"]?.stringValue)
        let retried = try daemon.cliJSON(["submit", "autotag", "--retry", String(jobID.prefix(8)), "--wait", "--json"])
        #expect(retried["state"]?.stringValue == "succeeded")
        #expect(retried["params"]?["ids"]?.arrayValue?.compactMap(\.stringValue) == [retryable["id"]?.stringValue ?? ""])
        #expect(retried["result"]?["tagged"]?.intValue == 1)
        #expect(retried["result"]?["retryable_count"]?.intValue == 0)
        #expect(try Self.tags(daemon, path) == known)

        // Nothing to retry is said so, exit 2.
        let nothing = try daemon.cli(["submit", "autotag", "--retry", retried["id"]?.stringValue ?? ""])
        #expect(nothing.status == 2 && nothing.stderr.contains("has no retryable photos"), "\(nothing.stderr)")
    }

    /// The photos' disk is away (here: their folder renamed, as an unmounted card or share looks): `io`, which may
    /// pass. Before, every photo lost its tags and got `unreadable`.
    @Test func photosOnADiskThatIsAwayKeepTheirTags() throws {
        let parent = TemporaryDirectory("tbj-away")
        let folder = parent.file("card")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let path = folder + "/IMG_0001.jpg"
        PhotoTestSupport.write(try Self.cameraPhoto(), path)
        let daemon = try DaemonHarness()
        _ = try daemon.cliJSON(["photos", "import", folder, "--wait", "--json"])
        _ = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        let known = try Self.tags(daemon, path)
        #expect(known.contains("year:2024") && known.contains("make:Canon"))

        try FileManager.default.moveItem(atPath: folder, toPath: parent.file("away"))
        let away = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        #expect(away["result"]?["tagged"]?.intValue == 0)
        #expect(away["result"]?["unreadable_count"]?.intValue == 0)
        #expect(away["result"]?["retryable_count"]?.intValue == 1)
        let retryable = try #require(away["result"]?["retryable"]?.arrayValue?.first)
        #expect(retryable["code"]?.stringValue == "io")
        #expect(retryable["message"]?.stringValue == "cannot open \(path): No such file or directory")
        #expect(try Self.tags(daemon, path) == known)

        try FileManager.default.moveItem(atPath: parent.file("away"), toPath: folder)
        let back = try daemon.cliJSON(["submit", "autotag", "--retry", away["id"]?.stringValue ?? "", "--wait", "--json"])
        #expect(back["result"]?["tagged"]?.intValue == 1)
        #expect(try Self.tags(daemon, path) == known)

        // --retry is one of the selections, of an autotag job only.
        let none = try daemon.cli(["submit", "autotag"])
        #expect(none.status == 2 && none.stderr.contains("give exactly one of --ids, --ids-file, --all, --retry"))
        let both = try daemon.cli(["submit", "autotag", "--all", "--retry", away["id"]?.stringValue ?? ""])
        #expect(both.status == 2 && both.stderr.contains("give exactly one of"), "\(both.stderr)")
        let imports = try daemon.cliJSON(["list", "--kind", "import", "--json"]).arrayValue ?? []
        let notAutotag = try daemon.cli(["submit", "autotag", "--retry", imports.first?["id"]?.stringValue ?? ""])
        #expect(notAutotag.status == 2 && notAutotag.stderr.contains("is not an autotag job"), "\(notAutotag.stderr)")
        #expect(try daemon.cli(["submit", "autotag", "--retry", "ffffffff"]).status == 4, "no such job")
    }

    // MARK: flat pictures are not duplicates

    @Test func flatAndGradientPicturesAreNotDuplicatesButRotatedCopiesAre() throws {
        let folder = TemporaryDirectory("tbj-flat")
        // 100 different solid colours.
        for n in 0..<100 {
            let colour = (UInt8(n * 53 % 256), UInt8(n * 97 % 256), UInt8(n * 151 % 256))
            let image = Fixtures.image(32 + n % 7, 24 + n % 5) { _, _ in colour }
            PhotoTestSupport.write(try image.jpegData(), folder.file(String(format: "solid-%03d.jpg", n)))
        }
        // A 1×1 black picture and a flat grey 4032×2012 photo.
        PhotoTestSupport.write(try Fixtures.image(1, 1) { _, _ in (0, 0, 0) }.jpegData(), folder.file("tiny-black.jpg"))
        PhotoTestSupport.write(
            try Fixtures.image(4032, 2012) { _, _ in (128, 128, 128) }.jpegData(), folder.file("big-grey.jpg"))
        // Gradients: along x both ways, along y, diagonal, in blue and red.
        let gradients: [(String, (Int, Int) -> (UInt8, UInt8, UInt8))] = [
            ("blue-rising", { x, _ in (0, 0, UInt8(x * 255 / 127)) }),
            ("blue-falling", { x, _ in (0, 0, UInt8(255 - x * 255 / 127)) }),
            ("blue-down", { _, y in (0, 0, UInt8(y * 255 / 95)) }),
            ("blue-diagonal", { x, y in (0, 0, UInt8((x + y) * 255 / 222)) }),
            ("red-rising", { x, _ in (UInt8(x * 255 / 127), 0, 0) }),
            ("grey-rising", { x, _ in (UInt8(x * 2), UInt8(x * 2), UInt8(x * 2)) }),
        ]
        for (name, colour) in gradients {
            PhotoTestSupport.write(try Fixtures.image(128, 96, colour).jpegData(), folder.file("gradient-\(name).jpg"))
        }
        // Near-flat: noise of ±2, a small dot, a faint vignette.
        var state: UInt32 = 7
        let noisy = Fixtures.image(64, 48) { _, _ in
            state = state &* 1_103_515_245 &+ 12345
            let v = UInt8(126 + Int(state >> 16) % 5)
            return (v, v, v)
        }
        PhotoTestSupport.write(try noisy.jpegData(), folder.file("near-noise.jpg"))
        let dot = Fixtures.image(64, 48) { x, y in (30...31).contains(x) && (20...21).contains(y) ? (20, 20, 20) : (200, 200, 200) }
        PhotoTestSupport.write(try dot.jpegData(), folder.file("near-dot.jpg"))
        let vignette = Fixtures.image(64, 48) { x, y in
            let d = abs(x - 32) + abs(y - 24)
            let v = UInt8(130 - d / 7)
            return (v, v, v)
        }
        PhotoTestSupport.write(try vignette.jpegData(), folder.file("near-vignette.jpg"))
        // A real picture, a recompressed copy, and a copy stored turned 90° counter-clockwise with EXIF
        // orientation 6 (display: turn 90° clockwise), so it looks the same.
        func picture(_ x: Int, _ y: Int) -> (UInt8, UInt8, UInt8) {
            let v = 128 + 100 * sin(Double(x) / 17) * cos(Double(y) / 11)
            return (UInt8(v), UInt8(255 - v), 90)
        }
        let (w, h) = (160, 90)
        PhotoTestSupport.write(try Fixtures.image(w, h, picture).jpegData(quality: 92), folder.file("z1-upright.jpg"))
        PhotoTestSupport.write(try Fixtures.image(w, h, picture).jpegData(quality: 60), folder.file("z2-recompressed.jpg"))
        let stored = Fixtures.image(h, w) { sx, sy in picture(w - 1 - sy, sx) }
        PhotoTestSupport.write(
            Fixtures.withEXIF(try stored.jpegData(quality: 92), .init(orientation: 6)), folder.file("z3-rotated.jpg"))

        let daemon = try DaemonHarness()
        let imported = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        #expect(imported["result"]?["inserted"]?.intValue == 114)
        let autotag = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        #expect(autotag["result"]?["tagged"]?.intValue == 114, "\(autotag)")
        #expect(autotag["result"]?["duplicates"]?.intValue == 2, "\(autotag)")

        let photos = try daemon.cliJSON(["photos", "list", "--limit", "1000", "--json"]).arrayValue ?? []
        func photo(_ name: String) -> JSONValue? { photos.first { $0["path"]?.stringValue == folder.file(name) } }
        let upright = try #require(photo("z1-upright.jpg")?["id"]?.stringValue)
        var paired: [String: [String]] = [:]
        for photo in photos {
            let twins = (photo["tags"]?.arrayValue ?? []).compactMap(\.stringValue).filter { $0.hasPrefix("duplicate-of:") }
            if !twins.isEmpty { paired[(photo["path"]?.stringValue ?? "").split(separator: "/").last.map(String.init) ?? ""] = twins }
        }
        #expect(
            paired == ["z2-recompressed.jpg": ["duplicate-of:" + upright], "z3-rotated.jpg": ["duplicate-of:" + upright]])
        #expect(photo("z3-rotated.jpg")?["tags"]?.arrayValue?.contains("aspect:landscape") == true)
        // Why a flat picture was not compared is on the photo.
        let flat = try #require(photo("big-grey.jpg"))
        #expect(
            flat["warnings"]?.arrayValue?.compactMap(\.stringValue)
                == ["too little detail to look for duplicates (a flat picture or a plain gradient)"])
        #expect(photo("z1-upright.jpg")?["warnings"]?.arrayValue == [])
    }

    // MARK: EXIF numbers in every legal format

    /// GPS as SRATIONAL (some phones) was dropped: `gps` null and no `place:` where exiftool reads Lisbon.
    @Test func signedRationalGPSGivesThePlace() throws {
        let folder = TemporaryDirectory("tbj-srational")
        let jpeg = Fixtures.withEXIF(
            try Self.waves().jpegData(),
            .init(entries: [
                .text(EXIF_IFD_GPS, tb_exif_tag_gps_latitude_ref(), "N"),
                .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), EXIF_FORMAT_SRATIONAL, [(38, 1), (41, 1), (2976, 100)]),
                .text(EXIF_IFD_GPS, tb_exif_tag_gps_longitude_ref(), "W"),
                .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_longitude(), EXIF_FORMAT_SRATIONAL, [(9, 1), (12, 1), (5760, 100)]),
                .numbers(EXIF_IFD_0, EXIF_TAG_ORIENTATION, EXIF_FORMAT_LONG, [6]),
            ]))
        PhotoTestSupport.write(jpeg, folder.file("phone.jpg"))
        let daemon = try DaemonHarness()
        _ = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        _ = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        let photo = try #require(daemon.cliJSON(["photos", "list", "--json"]).arrayValue?.first)
        #expect(photo["gps"]?["lat"]?.doubleValue.map { abs($0 - (38 + 41.0 / 60 + 29.76 / 3600)) < 1e-9 } == true)
        #expect(photo["gps"]?["lon"]?.doubleValue.map { abs($0 + (9 + 12.0 / 60 + 57.6 / 3600)) < 1e-9 } == true)
        #expect(photo["orientation"]?.intValue == 6)
        let tags = photo["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(tags.contains("place:Lisbon") && tags.contains("aspect:portrait"), "\(tags)")
        #expect(photo["warnings"]?.arrayValue == [])
    }

    // MARK: reasons reach people

    @Test func warningsAreShownPerPhoto() throws {
        let folder = TemporaryDirectory("tbj-warn")
        let noRef = Fixtures.withEXIF(
            try Self.waves().jpegData(),
            .init(entries: [
                .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_latitude(), EXIF_FORMAT_SRATIONAL, [(38, 1), (41, 1), (0, 1)]),
                .ratios(EXIF_IFD_GPS, tb_exif_tag_gps_longitude(), EXIF_FORMAT_SRATIONAL, [(9, 1), (8, 1), (0, 1)]),
            ]))
        PhotoTestSupport.write(noRef, folder.file("no-ref.jpg"))
        let daemon = try DaemonHarness()
        _ = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        let listed = try #require(daemon.cliJSON(["photos", "list", "--json"]).arrayValue?.first)
        let id = try #require(listed["id"]?.stringValue)
        let expected = "GPSLatitudeRef missing, GPSLongitudeRef missing; position not used"
        let shown = try daemon.cliJSON(["photos", "show", id, "--json"])
        #expect(shown["gps"] == .null)
        #expect(shown["warnings"]?.arrayValue?.compactMap(\.stringValue) == [expected])
        #expect(
            Set(shown.objectKeys)
                == [
                    "id", "local_id", "path", "bytes", "width", "height", "orientation", "taken_at", "clock_not_set", "camera", "gps",
                    "tags", "warnings", "uploads",
                ])
        _ = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        let after = try daemon.cliJSON(["photos", "show", id, "--json"])
        #expect(after["warnings"]?.arrayValue?.compactMap(\.stringValue) == [expected])
        let text = try daemon.cli(["photos", "show", id])
        #expect(text.stdout.contains("warning   \(expected)"), "\(text.stdout)")
    }

    // MARK: the decode limit is an option

    /// The limit bounds what is decoded, not the photo's size: a 1.2 MP JPEG decodes at 1/4 (300 × 250) within
    /// 1 MP; a 201 MP one decodes at 1/8 to 2 048 × 1 536, over it.
    @Test func theDecodeLimitIsADaemonOption() throws {
        let folder = TemporaryDirectory("tbj-limit")
        PhotoTestSupport.write(LargeJPEG.flatGrey(), folder.file("a-201mp.jpg"))
        PhotoTestSupport.write(try Fixtures.scene(1200, 1000).jpegData(), folder.file("b-1.2mp.jpg"))
        let daemon = try DaemonHarness(arguments: ["--max-megapixels", "1"])
        _ = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        let autotag = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        let result = try #require(autotag["result"])
        #expect(result["unreadable_count"]?.intValue == 1)
        let bad = try #require(result["unreadable"]?.arrayValue?.first)
        #expect(bad["path"]?.stringValue == folder.file("a-201mp.jpg"))
        #expect(bad["code"]?.stringValue == "too_large")
        #expect(bad["message"]?.stringValue?.contains("2048x1536 at 1/8 scale") == true, "\(bad)")
        #expect(bad["message"]?.stringValue?.contains("1000000") == true, "\(bad)")
        #expect(try Self.tags(daemon, folder.file("b-1.2mp.jpg")).contains("aspect:landscape"))
        let refused = try DaemonHarness.run(
            Binary.path, ["daemon", "--max-megapixels", "0"], environment: daemon.environment)
        #expect(refused.status == 2, "\(refused.stderr)")
    }
}
