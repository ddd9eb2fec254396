import Foundation
import Glibc
import PhotoLibrary
import Testing
import TestSupport
import TrailbookEngine
import TrailbookSQLite

/// XMP sidecars through the real CLI and daemon, checked as another tool sees them (exiftool).
@Suite(.serialized)
struct XMPSidecarEndToEndTests {
    static let foreign = XMPFixtures.foreignSidecar

    static func exiftool(_ tag: String, _ file: String) throws -> String { try XMPFixtures.seen(tag, file) }

    /// A synthetic library of `count` photos whose paths are `folder/N.jpg` (no image files: `tag` never reads them).
    static func library(_ home: TemporaryDirectory, count: Int, in folder: String) throws -> [String] {
        let path = home.path + "/photos.sqlite3"
        let ids = try PhotoTestSupport.syntheticLibrary(at: path, count: count)
        try Database(path: path).query("UPDATE photos SET path = ? || '/' || id || '.jpg'", [.text(folder)])
        return ids
    }

    @Test func tagAndRemoveWriteSidecarsOtherToolsReadAndKeepForeignContent() throws {
        let home = TemporaryDirectory()
        let folder = TemporaryDirectory("tbj-xmp")
        _ = try Self.library(home, count: 3, in: folder.path)
        // Photo 3's folder is gone: its sidecar cannot be written, which is reported and is not the job's failure.
        try Database(path: home.path + "/photos.sqlite3").query(
            "UPDATE photos SET path = ? WHERE id = 3", [.text(folder.path + "/gone/3.jpg")])
        try Self.foreign.write(toFile: folder.file("1.jpg.xmp"), atomically: true, encoding: .utf8)
        let daemon = try DaemonHarness(home: home)

        let tagged = try daemon.cliJSON(["submit", "tag", "--tag", "year:2015", "--all", "--xmp", "--wait", "--json"])
        #expect(tagged["state"]?.stringValue == "succeeded")
        let xmp = try #require(tagged["result"]?["xmp"])
        #expect(xmp["naming"]?.stringValue == "darktable")
        #expect(xmp["sidecars"]?.intValue == 2)
        #expect(xmp["failed"]?.intValue == 1)
        #expect(xmp["failures"]?.arrayValue?.first?["code"]?.stringValue == "xmp_write_failed")
        #expect(xmp["failures"]?.arrayValue?.first?["sidecar"]?.stringValue == folder.path + "/gone/3.jpg.xmp")
        #expect(tagged["result"]?["tagged"]?.intValue == 3, "the tags are written whatever the sidecars")

        let one = folder.file("1.jpg.xmp")
        #expect(try Self.exiftool("XMP:Subject", one) == "beach;year:2015")
        // The other app's `beach` joins the hierarchical namespaces too (darktable would hide it otherwise).
        #expect(try Self.exiftool("XMP:HierarchicalSubject", one) == "year|2015;beach")
        #expect(try Self.exiftool("XMP-digiKam:TagsList", one) == "year/2015;beach")
        #expect(try Self.exiftool("XMP-microsoft:LastKeywordXMP", one) == "year/2015;beach")
        #expect(try Self.exiftool("XMP:Rating", one) == "4")
        #expect(try Self.exiftool("XMP:Label", one) == "Red")
        #expect(try Self.exiftool("XMP-darktable:History_end", one) == "3")
        #expect(try Self.exiftool("XMP:Subject", folder.file("2.jpg.xmp")) == "year:2015")

        // Without --xmp (and no daemon default) no sidecar changes.
        _ = try daemon.cliJSON(["submit", "tag", "--tag", "other", "--all", "--wait", "--json"])
        #expect(try Self.exiftool("XMP:Subject", one) == "beach;year:2015")

        let removed = try daemon.cliJSON(["submit", "tag", "--tag", "year:2015", "--all", "--remove", "--xmp", "--wait", "--json"])
        // Photo 3 has no sidecar, so it already holds no year:2015: nothing to write, none created.
        #expect(removed["result"]?["xmp"]?["sidecars"]?.intValue == 3)
        #expect(removed["result"]?["xmp"]?["unchanged"]?.intValue == 1)
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/gone"))
        #expect(try Self.exiftool("XMP:Subject", one) == "beach")
        #expect(try Self.exiftool("XMP:HierarchicalSubject", one) == "beach")
        #expect(try Self.exiftool("XMP-digiKam:TagsList", one) == "beach")
        #expect(try Self.exiftool("XMP-microsoft:LastKeywordXMP", one) == "beach")
        #expect(try Self.exiftool("XMP:Rating", one) == "4")
        #expect(try Self.exiftool("XMP-darktable:History_end", one) == "3")
        #expect(try Self.exiftool("XMP:Subject", folder.file("2.jpg.xmp")) == "")

        let bad = try daemon.cli(["submit", "tag", "--tag", "x", "--all", "--xmp-naming", "picasa"])
        #expect(bad.status == 2 && bad.stderr.contains("--xmp-naming must be darktable"), "\(bad.stderr)")
    }

    @Test func daemonDefaultWithLightroomNamingAndNoXmpPerJob() throws {
        let home = TemporaryDirectory()
        let folder = TemporaryDirectory("tbj-xmp")
        _ = try Self.library(home, count: 2, in: folder.path)
        let daemon = try DaemonHarness(arguments: ["--xmp", "--xmp-naming", "lightroom"], home: home)
        let done = try daemon.cliJSON(["submit", "tag", "--tag", "place:Lisbon", "--all", "--wait", "--json"])
        #expect(done["result"]?["xmp"]?["naming"]?.stringValue == "lightroom")
        #expect(try Self.exiftool("XMP:Subject", folder.file("1.xmp")) == "place:Lisbon")
        #expect(try Self.exiftool("XMP:HierarchicalSubject", folder.file("2.xmp")) == "place|Lisbon")
        #expect(!FileManager.default.fileExists(atPath: folder.file("1.jpg.xmp")))

        let off = try daemon.cliJSON(["submit", "tag", "--tag", "quiet", "--all", "--no-xmp", "--wait", "--json"])
        #expect(off["result"]?["xmp"] == nil)
        #expect(try Self.exiftool("XMP:Subject", folder.file("1.xmp")) == "place:Lisbon")
    }

    @Test func importTakesEmbeddedAndSidecarKeywordsAsTags() throws {
        let folder = TemporaryDirectory("tbj-xmp-photos")
        let embedded = folder.file("IMG_0001.jpg")
        PhotoTestSupport.write(try Fixtures.scene(64, 48, seed: 1).jpegData(), embedded)
        let made = try DaemonHarness.run(
            "/usr/bin/env", ["exiftool", "-q", "-overwrite_original", "-XMP-dc:Subject=Lisbon", "-XMP-dc:Subject=C\u{E3}o", embedded])
        #expect(made.status == 0)
        #expect(try Self.exiftool("XMP:Subject", embedded) == "Lisbon;C\u{E3}o")
        let withSidecar = folder.file("IMG_0002.jpg")
        PhotoTestSupport.write(try Fixtures.scene(64, 48, seed: 2).jpegData(), withSidecar)
        try Self.foreign.write(toFile: folder.file("IMG_0002.xmp"), atomically: true, encoding: .utf8)

        let daemon = try DaemonHarness()
        let imported = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        #expect(imported["result"]?["inserted"]?.intValue == 2)
        #expect(imported["result"]?["keywords"]?.intValue == 3)
        let photos = try daemon.cliJSON(["photos", "list", "--json"]).arrayValue ?? []
        let tags = Dictionary(uniqueKeysWithValues: photos.map {
            ($0["path"]?.stringValue ?? "", ($0["tags"]?.arrayValue ?? []).compactMap(\.stringValue))
        })
        #expect(tags[embedded] == ["C\u{E3}o", "Lisbon"].sorted())
        #expect(tags[withSidecar] == ["beach"])
    }

    @Test func autotagWritesItsTagsAndTakesOffOnlyTheManagedOnesItReplaced() throws {
        let folder = TemporaryDirectory("tbj-xmp-photos")
        let photo = folder.file("IMG_0001.jpg")
        PhotoTestSupport.write(
            Fixtures.withEXIF(
                try Fixtures.scene(64, 48).jpegData(),
                .init(make: "Canon", model: "Canon EOS 40D", dateTimeOriginal: "2015:06:01 12:00:00")),
            photo)
        let daemon = try DaemonHarness()
        _ = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        // A managed tag from an earlier run (autotag replaces it) and a person's own keyword (it stays).
        _ = try daemon.cliJSON(["submit", "tag", "--tag", "place:Home", "--all", "--xmp", "--wait", "--json"])
        _ = try daemon.cliJSON(["submit", "tag", "--tag", "favourite", "--all", "--xmp", "--wait", "--json"])
        let sidecar = photo + ".xmp"
        #expect(try Self.exiftool("XMP:Subject", sidecar) == "place:Home;favourite")

        let done = try daemon.cliJSON(["submit", "autotag", "--all", "--xmp", "--wait", "--json"])
        #expect(done["result"]?["xmp"]?["sidecars"]?.intValue == 1)
        let subjects = try Self.exiftool("XMP:Subject", sidecar).split(separator: ";").map(String.init)
        #expect(subjects.first == "favourite", "the person's keyword stays; place:Home is gone: \(subjects)")
        #expect(!subjects.contains("place:Home"))
        for tag in ["year:2015", "month:2015-06", "make:Canon", "camera:Canon EOS 40D", "aspect:landscape"] {
            #expect(subjects.contains(tag), "\(tag) in \(subjects)")
        }
        let hierarchies = try Self.exiftool("XMP:HierarchicalSubject", sidecar).split(separator: ";").map(String.init)
        #expect(hierarchies.contains("year|2015") && hierarchies.contains("make|Canon") && !hierarchies.contains("place|Home"))
    }

    /// Paced to 1500 photos a second (batches of 150), so the job is killed mid-way whatever the machine's speed.
    @Test func kill9MidJobThenResumeLeavesEachKeywordOnceInEverySidecar() throws {
        let home = TemporaryDirectory()
        let folder = TemporaryDirectory("tbj-xmp")
        let count = 3_000
        _ = try Self.library(home, count: count, in: folder.path)
        let daemon = try DaemonHarness(arguments: ["--xmp"], home: home)
        let id = try daemon.submit("tag", ["tag": "year:2015", "all": true, "max_rate": 1500])
        _ = try daemon.waitFor(id, timeout: 60, "some progress") { ($0["progress"]?["completed"]?.intValue ?? 0) >= 450 }
        try daemon.crash()
        let written = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".jpg.xmp") }.count
        #expect(written > 0 && written < count, "killed mid-job: \(written) of \(count) sidecars")

        try daemon.start()
        let final = try daemon.waitForState(id, "succeeded", timeout: 120)
        let result = try #require(final["result"])
        #expect(result["tagged"]?.intValue == Int64(count))
        #expect(result["already_had"]?.intValue == 0)
        #expect(result["xmp"]?["sidecars"]?.intValue == Int64(count))
        #expect(result["xmp"]?["failed"]?.intValue == 0)
        for n in 1...count {
            let subjects = XMPKeywords.subjects(ofSidecar: folder.file("\(n).jpg.xmp"))
            if subjects != ["year:2015"] { Issue.record("\(n).jpg.xmp holds \(String(describing: subjects))") }
        }
        // And as exiftool sees them: every sidecar, one keyword once, one hierarchy once.
        let seen = try DaemonHarness.run(
            "/usr/bin/env", ["exiftool", "-q", "-T", "-XMP:Subject", "-XMP:HierarchicalSubject", "-ext", "xmp", folder.path])
        let lines = seen.stdout.split(separator: "\n")
        #expect(lines.count == count)
        #expect(lines.allSatisfy { $0 == "year:2015\tyear|2015" }, "\(lines.first { $0 != "year:2015\tyear|2015" } ?? "")")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers == [], "a temporary file of the killed batch is written again and renamed by its redo")
    }

    static func photoOf(_ daemon: DaemonHarness, _ path: String) throws -> JSONValue? {
        let photos = try daemon.cliJSON(["photos", "list", "--json"]).arrayValue ?? []
        return photos.first { $0["path"]?.stringValue == path }
    }

    static func tagsOf(_ daemon: DaemonHarness, _ path: String) throws -> [String] {
        try photoOf(daemon, path)?["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// `IMG_1.JPG` and `IMG_1.HEIC` with Lightroom naming: the shared `IMG_1.xmp` (a HEIC-only one, here) gives
    /// its keywords to neither at import, and a tag job does not write it; darktable naming writes each its own
    /// sidecar, with the keyword in every namespace.
    @Test func twoPhotosOneSidecar() throws {
        let folder = TemporaryDirectory("tbj-shared-xmp")
        let jpeg = folder.file("IMG_1.JPG"), heic = folder.file("IMG_1.HEIC")
        PhotoTestSupport.write(try Fixtures.scene(64, 48, seed: 1).jpegData(), jpeg)
        PhotoTestSupport.write(try Fixtures.scene(64, 48, seed: 2).jpegData(), heic)  // the name is what matters
        try XMPFixtures.foreignSidecar.write(toFile: folder.file("IMG_1.xmp"), atomically: true, encoding: .utf8)
        let before = try Data(contentsOf: URL(fileURLWithPath: folder.file("IMG_1.xmp")))

        let daemon = try DaemonHarness()
        let imported = try daemon.cliJSON(["photos", "import", folder.path, "--wait", "--json"])
        #expect(imported["result"]?["inserted"]?.intValue == 2)
        #expect(imported["result"]?["keywords"]?.intValue == 0)
        for path in [jpeg, heic] {
            #expect(try Self.tagsOf(daemon, path) == [], "\(path)")
            let warnings = try Self.photoOf(daemon, path)?["warnings"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(warnings.contains { $0.hasPrefix("xmp_shared_sidecar: ") && $0.contains("IMG_1.xmp") }, "\(warnings)")
        }

        let tagged = try daemon.cliJSON(
            ["submit", "tag", "--tag", "year:2024", "--all", "--xmp", "--xmp-naming", "lightroom", "--wait", "--json"])
        let xmp = try #require(tagged["result"]?["xmp"])
        #expect(xmp["failed"]?.intValue == 2, "\(xmp)")
        #expect(Set((xmp["failures"]?.arrayValue ?? []).compactMap { $0["code"]?.stringValue }) == ["xmp_shared_sidecar"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file("IMG_1.xmp"))) == before, "left as it was")

        let own = try daemon.cliJSON(["submit", "tag", "--tag", "family", "--all", "--xmp", "--wait", "--json"])
        #expect(own["result"]?["xmp"]?["sidecars"]?.intValue == 2, "\(own)")
        for path in [jpeg, heic] {
            let sidecar = path + ".xmp"
            #expect(try XMPFixtures.seen("XMP-dc:Subject", sidecar) == "family")
            #expect(try XMPFixtures.seen("XMP-lr:HierarchicalSubject", sidecar) == "family")
            #expect(try XMPFixtures.seen("XMP-digiKam:TagsList", sidecar) == "family")
            #expect(try XMPFixtures.seen("XMP-microsoft:LastKeywordXMP", sidecar) == "family")
        }
    }
}
