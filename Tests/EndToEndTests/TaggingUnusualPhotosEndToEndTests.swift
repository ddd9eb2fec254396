import CExif
import Foundation
import PhotoLibrary
import Testing
import TrailbookEngine

/// Unusual photos through the real daemon and its workers: the biggest phone photos are tagged, a 12-bit JPEG is
/// `unsupported_coding` with its size, an unset camera clock is flagged in `photos show`.
@Suite(.serialized)
struct TaggingUnusualPhotosEndToEndTests {
    static func photo(_ daemon: DaemonHarness, _ path: String) throws -> JSONValue? {
        let photos = try daemon.cliJSON(["photos", "list", "--json"]).arrayValue ?? []
        return photos.first { $0["path"]?.stringValue == path }
    }

    static func tags(_ daemon: DaemonHarness, _ path: String) throws -> [String] {
        try photo(daemon, path)?["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    @Test func bigTwelveBitAndUnsetClockPhotosAreToldApart() throws {
        let folder = TemporaryDirectory("tbj-unusual")
        let big = folder.file("phone-200mp.jpg")
        PhotoTestSupport.write(LargeJPEG.flatGrey(), big)
        // 12-bit samples: a camera JPEG whose frame header says SOF1, precision 12.
        var twelve = Fixtures.withEXIF(
            try Fixtures.scene(96, 64).jpegData(), .init(make: "Canon", model: "Canon EOS 40D", dateTimeOriginal: "2024:05:03 18:22:10"))
        let sof = try #require((2..<twelve.count - 9).first { twelve[$0] == 0xFF && twelve[$0 + 1] == 0xC0 })
        twelve[sof + 1] = 0xC1
        twelve[sof + 4] = 12
        PhotoTestSupport.write(twelve, folder.file("twelve-bit.jpg"))
        let unset = folder.file("unset-clock.jpg")
        PhotoTestSupport.write(
            Fixtures.withEXIF(
                try Fixtures.scene(96, 64).jpegData(), .init(make: "Canon", model: "Canon EOS 40D", dateTimeOriginal: "2000:01:01 00:00:00")),
            unset)

        let daemon = try DaemonHarness()
        let imported = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        #expect(imported["result"]?["inserted"]?.intValue == 3, "\(imported)")
        let autotag = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        let result = try #require(autotag["result"])
        let unreadable = (result["unreadable"]?.arrayValue ?? []).map {
            (($0["path"]?.stringValue ?? "") as NSString).lastPathComponent + " " + ($0["code"]?.stringValue ?? "")
        }
        #expect(unreadable == ["twelve-bit.jpg unsupported_coding"], "\(result)")

        // 201 megapixels, decoded at 1/8 (2 048 × 1 536): tagged like any photo.
        let phone = try #require(try Self.photo(daemon, big))
        #expect(phone["width"]?.intValue == 16_384 && phone["height"]?.intValue == 12_288)
        #expect(try Self.tags(daemon, big).contains("aspect:landscape"))
        #expect(!(try Self.tags(daemon, big).contains("unreadable")))

        // Valid, not supported: size and EXIF kept, never `corrupt`.
        let twelveBit = try #require(try Self.photo(daemon, folder.file("twelve-bit.jpg")))
        #expect(twelveBit["width"]?.intValue == 96 && twelveBit["height"]?.intValue == 64)
        #expect(try Self.tags(daemon, folder.file("twelve-bit.jpg")).contains("year:2024"))
        let warnings = twelveBit["warnings"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(warnings.contains { $0.hasPrefix("unreadable (unsupported_coding): a valid JPEG") && $0.contains("12-bit") }, "\(warnings)")

        // The unset clock: flagged, kept as the file says, no date tags.
        let id = try #require(try Self.photo(daemon, unset)?["id"]?.stringValue)
        let shown = try daemon.cliJSON(["photos", "show", id, "--json"])
        #expect(shown["taken_at"]?.stringValue == "2000-01-01T00:00:00")
        #expect(shown["clock_not_set"] == .bool(true))
        let tags = try Self.tags(daemon, unset)
        #expect(!tags.contains { $0.hasPrefix("year:") || $0.hasPrefix("month:") }, "\(tags)")
        #expect(tags.contains("make:Canon"))
        let text = try daemon.cli(["photos", "show", id])
        #expect(text.stdout.contains("taken at  2000-01-01T00:00:00 (camera clock never set)"), "\(text.stdout)")
        #expect(text.stdout.contains("factory default"), "\(text.stdout)")
        #expect(try daemon.cliJSON(["photos", "show", String(try #require(try Self.photo(daemon, big)?["id"]?.stringValue)), "--json"])["clock_not_set"] == .bool(false))
    }
}
