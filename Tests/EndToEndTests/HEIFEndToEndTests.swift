import Foundation
import PhotoLibrary
import Testing
import TrailbookEngine

/// HEIC photos through the real daemon: `photos import` and `autotag` give a HEIC the fields and tags of its JPEG
/// twin, and tell formats apart by content.
@Suite(.serialized)
struct HEIFEndToEndTests {
    static let fixtures: String = {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<2 { root.deleteLastPathComponent() }  // HEIFEndToEndTests.swift, EndToEndTests
        return root.appendingPathComponent("Fixtures/heif").path
    }()

    /// `ph_arrow.heic` (iPhone 8 Plus: stored 4032 × 3024 with a 90° `irot`) and its JPEG twin: the same pixels
    /// stored sideways (decoded upright by `heif-convert`, turned back by 90°) with the HEIC's EXIF copied by
    /// exiftool and Orientation 6. Beside them, files whose names lie about their format.
    @Test func heicImportsAndAutotagsLikeItsJPEGTwin() throws {
        let folder = TemporaryDirectory("tbj-heif")
        let dir = folder.path
        try FileManager.default.copyItem(atPath: Self.fixtures + "/ph_arrow.heic", toPath: dir + "/a-arrow.heic")
        try run("heif-convert", ["--quiet", dir + "/a-arrow.heic", folder.path + "/upright.jpg"])
        var full = DecodeLimits()
        full.targetLongSide = 4032
        let upright = try RGBImage.decodeJPEG(Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/upright.jpg"))), limits: full)
        #expect(upright.image.width == 3024 && upright.image.height == 4032)
        try FileManager.default.removeItem(atPath: dir + "/upright.jpg")
        PhotoTestSupport.write(try upright.image.oriented(8).jpegData(quality: 90), dir + "/b-arrow-twin.jpg")
        try run("exiftool", [
            "-q", "-overwrite_original", "-TagsFromFile", dir + "/a-arrow.heic", "-all:all", "-Orientation#=6",
            dir + "/b-arrow-twin.jpg",
        ])
        // A HEIC named .jpg, a JPEG named .HEIC, a PNG (not a format the library reads), a text file (not an image).
        try FileManager.default.copyItem(atPath: Self.fixtures + "/ph_aux_YCbCr.heic", toPath: dir + "/c-samsung.jpg")
        let scene = Fixtures.withEXIF(
            try Fixtures.scene(120, 80).jpegData(),
            .init(make: "Canon", model: "Canon EOS 40D", dateTimeOriginal: "2024:05:03 18:22:10"))
        PhotoTestSupport.write(scene, dir + "/d-scene.HEIC")
        PhotoTestSupport.write([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13], dir + "/e-drawing.png")
        PhotoTestSupport.write(Array("not a photo\n".utf8), dir + "/notes.txt")

        let daemon = try DaemonHarness()
        let imported = try daemon.cliJSON(["photos", "import", dir, "--wait", "--json"])
        #expect(imported["state"]?.stringValue == "succeeded")
        let result = try #require(imported["result"])
        #expect(result["files"]?.intValue == 5)
        #expect(result["inserted"]?.intValue == 4)
        let failures = result["failures"]?.arrayValue ?? []
        #expect(failures.count == 1)
        #expect(failures.first?["path"]?.stringValue == dir + "/e-drawing.png")
        #expect(failures.first?["code"]?.stringValue == "unsupported_format")
        #expect(failures.first?["message"]?.stringValue == "a PNG image; the library reads JPEG, HEIC/HEIF and AVIF")

        let autotag = try daemon.cliJSON(["submit", "autotag", "--all", "--wait", "--json"])
        #expect(autotag["state"]?.stringValue == "succeeded", "\(autotag)")
        #expect(autotag["result"]?["photos"]?.intValue == 4)
        #expect(autotag["result"]?["unreadable_count"]?.intValue == 0)

        let photos = try daemon.cliJSON(["photos", "list", "--json"]).arrayValue ?? []
        func photo(_ name: String) throws -> JSONValue {
            try #require(photos.first { $0["path"]?.stringValue == dir + "/" + name }, "\(name) in \(photos)")
        }
        let heic = try photo("a-arrow.heic"), twin = try photo("b-arrow-twin.jpg")
        for (p, name) in [(heic, "heic"), (twin, "twin")] {
            #expect(p["width"]?.intValue == 4032 && p["height"]?.intValue == 3024, "\(name)")
            #expect(p["orientation"]?.intValue == 6, "\(name)")
            #expect(p["taken_at"]?.stringValue == "2018-07-31T14:52:07", "\(name)")
            #expect(p["camera"]?["make"]?.stringValue == "Apple" && p["camera"]?["model"]?.stringValue == "iPhone 8 Plus")
            #expect(p["gps"] == .null, "\(name)")
        }
        let heicTags = heic["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let twinTags = twin["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let common = ["aspect:portrait", "camera:Apple iPhone 8 Plus", "color:gray", "make:Apple", "month:2018-07", "year:2018"]
        #expect(heicTags == common)
        // The same picture as displayed: the twin is found a duplicate of the HEIC imported before it.
        let heicID = try #require(heic["id"]?.stringValue)
        #expect(twinTags == (common + ["duplicate-of:" + heicID]).sorted())

        let samsung = try photo("c-samsung.jpg")
        #expect(samsung["width"]?.intValue == 4000 && samsung["camera"]?["make"]?.stringValue == "samsung")
        #expect(samsung["tags"]?.arrayValue?.compactMap(\.stringValue).contains("aspect:panorama") == true)
        let jpegNamedHEIC = try photo("d-scene.HEIC")
        #expect(jpegNamedHEIC["width"]?.intValue == 120 && jpegNamedHEIC["taken_at"]?.stringValue == "2024-05-03T18:22:10")
        #expect(jpegNamedHEIC["tags"]?.arrayValue?.compactMap(\.stringValue).contains("aspect:landscape") == true)
    }

    /// Runs `tool` from `PATH`; throws when it exits non-zero.
    func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw HarnessError("\(tool) \(arguments) exited \(process.terminationStatus)") }
    }
}
