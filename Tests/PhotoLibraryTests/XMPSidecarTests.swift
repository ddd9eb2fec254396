import Foundation
import Glibc
import Testing
import TestSupport
import TrailbookLoop

@testable import PhotoLibrary

/// XMP sidecars as another tool sees them: every check of what was written reads the file back with exiftool
/// (`-XMP:Subject`, `-XMP:HierarchicalSubject`, ratings, labels, another app's namespace).
@Suite(.serialized)
struct XMPSidecarTests {
    static let foreign = XMPFixtures.foreignSidecar

    static func exiftool(_ arguments: [String]) throws -> String { try XMPFixtures.exiftool(arguments) }

    static func seen(_ tag: String, _ file: String) throws -> String { try XMPFixtures.seen(tag, file) }

    @Test func namingsAndHierarchies() {
        #expect(XMPSidecarNaming.darktable.sidecarPath(for: "/p/IMG_0001.jpg") == "/p/IMG_0001.jpg.xmp")
        #expect(XMPSidecarNaming.lightroom.sidecarPath(for: "/p/IMG_0001.jpg") == "/p/IMG_0001.xmp")
        #expect(XMPSidecarNaming.lightroom.sidecarPath(for: "/p.d/IMG") == "/p.d/IMG.xmp")
        #expect(XMPKeywords.hierarchy(of: "year:2015") == "year|2015")
        #expect(XMPKeywords.hierarchy(of: "camera:Canon EOS 40D") == "camera|Canon EOS 40D")
        #expect(XMPKeywords.hierarchy(of: "trip") == nil)
        #expect(XMPKeywords.hierarchy(of: ":x") == nil)
        #expect(XMPKeywords.hierarchy(of: "x:") == nil)
    }

    @Test func newSidecarIsReadByExiftool() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let photo = dir + "/IMG_0001.jpg"
        let outcomes = XMPSidecarWriter.apply(
            [XMPSidecarChange(path: photo, add: ["year:2015", "trip", "C\u{E3}o"], remove: [])], naming: .darktable)
        #expect(outcomes == [.written])
        #expect(try Self.seen("XMP:Subject", photo + ".xmp") == "year:2015;trip;C\u{E3}o")
        // Every keyword in the namespaces darktable and digiKam prefer (XMPKeywordNamespaceTests has the rest).
        #expect(try Self.seen("XMP:HierarchicalSubject", photo + ".xmp") == "year|2015;trip;C\u{E3}o")
        #expect(access(dir + "/IMG_0001.xmp", F_OK) != 0, "darktable naming writes only IMG_0001.jpg.xmp")
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["IMG_0001.jpg.xmp"])
    }

    /// A photo whose name is not UTF-8 (`caf\xe9.jpg`) gets the sidecar named by its exact bytes (darktable:
    /// the name + `.xmp`; Lightroom: `.jpg` replaced), exiftool finds it by that name, and an import reads it back.
    @Test func sidecarOfANameThatIsNotUTF8HasItsExactBytes() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let photo = BytePath(bytes: Array((dir + "/caf").utf8) + [0xE9] + Array(".jpg".utf8))
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: ["trip"], remove: [])], naming: .darktable) == [.written])
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: ["beach"], remove: [])], naming: .lightroom) == [.written])
        let darktable = photo.bytes + Array(".xmp".utf8)
        let lightroom = Array((dir + "/caf").utf8) + [0xE9] + Array(".xmp".utf8)
        #expect(try XMPFixtures.seen("XMP:Subject", bytes: darktable) == "trip")
        #expect(try XMPFixtures.seen("XMP:Subject", bytes: lightroom) == "beach")
        // Exactly those two names in the folder (no U+FFFD spelling, no temporary file left).
        var names: [[UInt8]] = []
        let listing = opendir(dir)!
        while let entry = readdir(listing) {
            let name = DirectoryEntry.name(entry)
            if name != [0x2E], name != [0x2E, 0x2E] { names.append(name) }
        }
        closedir(listing)
        #expect(Set(names) == [Array("caf".utf8) + [0xE9] + Array(".jpg.xmp".utf8), Array("caf".utf8) + [0xE9] + Array(".xmp".utf8)])
        #expect(XMPKeywords.keywords(ofPhoto: photo, bytes: []) == ["trip", "beach"])
    }

    /// A sidecar name near `NAME_MAX` (255 bytes) still gets a temporary name the file system takes.
    @Test func temporaryNameOfALongSidecarFitsNameMax() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        // 251 bytes + ".jpg": the longest photo name; its Lightroom sidecar has 255 bytes, `.NAME.trailbook.tmp` 270.
        let stem = String(repeating: "\u{3042}", count: 83) + "ab"  // 83 × 3 + 2 = 251 bytes
        let photo = BytePath(dir + "/" + stem + ".jpg")
        #expect(photo.lastComponent.bytes.count == 255)
        let temporary = XMPSidecarWriter.temporaryPath(for: XMPSidecarNaming.lightroom.sidecarPath(for: photo))
        #expect(temporary.lastComponent.bytes.count <= 255)
        #expect(temporary == XMPSidecarWriter.temporaryPath(for: XMPSidecarNaming.lightroom.sidecarPath(for: photo)))
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: ["trip"], remove: [])], naming: .lightroom) == [.written])
        #expect(try Self.seen("XMP:Subject", dir + "/" + stem + ".xmp") == "trip")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [stem + ".xmp"])
        // The darktable sidecar would be 259 bytes: no file system takes it, and the change says so.
        let outcome = XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: ["trip"], remove: [])], naming: .darktable)
        guard case .failed(let code, let message) = outcome.first else { Issue.record("\(outcome)"); return }
        #expect(code == "xmp_write_failed")
        #expect(message.contains("File name too long"), "\(message)")
    }

    @Test func foreignContentStaysAndOnlyTheChangeMoves() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let photo = dir + "/IMG_0002.jpg"
        let sidecar = dir + "/IMG_0002.xmp"
        Fixtures.write(Array(Self.foreign.utf8), to: sidecar)
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: ["year:2015"], remove: [])], naming: .lightroom) == [.written])
        #expect(try Self.seen("XMP:Subject", sidecar) == "beach;year:2015")
        // The other app's `beach` joins the hierarchical namespace once there is one (darktable would hide it).
        #expect(try Self.seen("XMP:HierarchicalSubject", sidecar) == "year|2015;beach")
        #expect(try Self.seen("XMP:Rating", sidecar) == "4")
        #expect(try Self.seen("XMP:Label", sidecar) == "Red")
        #expect(try Self.seen("XMP-darktable:History_end", sidecar) == "3")

        // Removing takes off only that keyword (and its hierarchy); the other app's keyword stays.
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: [], remove: ["year:2015", "absent"])], naming: .lightroom) == [.written])
        #expect(try Self.seen("XMP:Subject", sidecar) == "beach")
        #expect(try Self.seen("XMP:HierarchicalSubject", sidecar) == "beach")
        #expect(try Self.seen("XMP:Rating", sidecar) == "4")
        #expect(try Self.seen("XMP-darktable:History_end", sidecar) == "3")
    }

    @Test func applyingTwiceHoldsEachKeywordOnce() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let photo = dir + "/a.jpg"
        let change = XMPSidecarChange(path: photo, add: ["trip", "year:2015", "trip"], remove: [])
        #expect(XMPSidecarWriter.apply([change], naming: .darktable) == [.written])
        let first = try String(contentsOfFile: photo + ".xmp", encoding: .utf8)
        #expect(XMPSidecarWriter.apply([change], naming: .darktable) == [.unchanged], "a redo after a crash changes nothing")
        #expect(try String(contentsOfFile: photo + ".xmp", encoding: .utf8) == first)
        #expect(try Self.seen("XMP:Subject", photo + ".xmp") == "trip;year:2015")
        // A sidecar another tool left with the keyword twice ends with it once.
        Fixtures.write(Array(Self.foreign.replacingOccurrences(of: "<rdf:li>beach</rdf:li>", with: "<rdf:li>trip</rdf:li><rdf:li>trip</rdf:li>").utf8), to: dir + "/b.jpg.xmp")
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: dir + "/b.jpg", add: ["trip"], remove: [])], naming: .darktable) == [.written])
        #expect(try Self.seen("XMP:Subject", dir + "/b.jpg.xmp") == "trip")
    }

    @Test func badSidecarsAreReportedPerPhotoAndNeverClobbered() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let garbage = Array("<x:xmpmeta this is not XML".utf8)
        Fixtures.write(garbage, to: dir + "/bad.jpg.xmp")
        mkdir(dir + "/isdir.jpg.xmp", 0o755)
        let outcomes = XMPSidecarWriter.apply(
            [
                XMPSidecarChange(path: dir + "/bad.jpg", add: ["trip"], remove: []),
                XMPSidecarChange(path: dir + "/gone/c.jpg", add: ["trip"], remove: []),
                XMPSidecarChange(path: dir + "/isdir.jpg", add: ["trip"], remove: []),
                XMPSidecarChange(path: dir + "/good.jpg", add: ["trip"], remove: []),
            ], naming: .darktable)
        guard outcomes.count == 4 else { Issue.record("\(outcomes)"); return }
        guard case .failed(let badCode, let badMessage) = outcomes[0] else { Issue.record("\(outcomes[0])"); return }
        #expect(badCode == "xmp_unreadable")
        #expect(badMessage.contains(dir + "/bad.jpg.xmp"))
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/bad.jpg.xmp"))) == garbage, "left as it was")
        guard case .failed(let goneCode, let goneMessage) = outcomes[1] else { Issue.record("\(outcomes[1])"); return }
        #expect(goneCode == "xmp_write_failed")
        #expect(goneMessage.contains("No such file or directory"))
        guard case .failed(let dirCode, _) = outcomes[2] else { Issue.record("\(outcomes[2])"); return }
        #expect(dirCode == "xmp_unreadable", "a directory where the sidecar should be is not XMP")
        #expect(outcomes[3] == .written, "one bad sidecar does not stop the others")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["bad.jpg.xmp", "good.jpg.xmp", "isdir.jpg.xmp"])
    }

    /// A batch larger than the writer's threads, over three folders, mixing new, foreign, already-done and bad
    /// sidecars: each outcome is the one of its own change, in order, each file holds what its change says, the
    /// other app's content stays, and no temporary file is left.
    @Test func bigBatchOnManyThreadsKeepsEveryOutcomeInOrder() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        for folder in ["a", "b", "c"] { mkdir(dir + "/" + folder, 0o755) }
        var changes: [XMPSidecarChange] = []
        var expected: [XMPSidecarOutcome] = []
        for n in 0..<300 {
            let photo = dir + "/" + ["a", "b", "c"][n % 3] + "/IMG_\(n).jpg"
            switch n % 5 {
            case 0: expected.append(.written)  // no sidecar yet
            case 1:
                Fixtures.write(Array(Self.foreign.utf8), to: photo + ".xmp")
                expected.append(.written)
            case 2:
                // Holds the keyword in every keyword namespace already.
                let all = Self.foreign.replacingOccurrences(of: "beach", with: "k\(n)").replacingOccurrences(
                    of: "</dc:subject>",
                    with: "</dc:subject><lr:hierarchicalSubject xmlns:lr=\"http://ns.adobe.com/lightroom/1.0/\"><rdf:Bag>"
                        + "<rdf:li>k\(n)</rdf:li></rdf:Bag></lr:hierarchicalSubject>"
                        + "<digiKam:TagsList xmlns:digiKam=\"http://www.digikam.org/ns/1.0/\"><rdf:Seq><rdf:li>k\(n)</rdf:li>"
                        + "</rdf:Seq></digiKam:TagsList><MicrosoftPhoto:LastKeywordXMP "
                        + "xmlns:MicrosoftPhoto=\"http://ns.microsoft.com/photo/1.0/\"><rdf:Bag><rdf:li>k\(n)</rdf:li>"
                        + "</rdf:Bag></MicrosoftPhoto:LastKeywordXMP>")
                Fixtures.write(Array(all.utf8), to: photo + ".xmp")
                expected.append(.unchanged)
            case 3:
                Fixtures.write(Array("not xmp \(n)".utf8), to: photo + ".xmp")
                expected.append(.failed(code: "xmp_unreadable", message: ""))
            default: expected.append(.written)
            }
            changes.append(XMPSidecarChange(path: photo, add: n % 5 == 2 ? ["k\(n)"] : ["trip", "n:\(n)"], remove: []))
        }
        let outcomes = XMPSidecarWriter.apply(changes, naming: .darktable)
        #expect(outcomes.count == 300)
        for (n, (outcome, want)) in zip(outcomes, expected).enumerated() {
            switch (outcome, want) {
            case (.failed(let code, let message), .failed(let wantCode, _)):
                #expect(code == wantCode && message.contains("/IMG_\(n).jpg.xmp"), "\(n)")
            default: #expect(outcome == want, "\(n)")
            }
        }
        // What exiftool reads back, for the whole tree in one run.
        let json = try Self.exiftool(["-j", "-r", "-ext", "xmp", "-XMP:Subject", "-XMP:Rating", dir])
        let items = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        var checked = 0
        for item in items {
            let file = try #require(item["SourceFile"] as? String)
            let n = try #require(Int(file.split(separator: "_").last!.split(separator: ".").first!))
            let subject = (item["Subject"] as? [Any])?.map { "\($0)" } ?? (item["Subject"]).map { ["\($0)"] } ?? []
            switch n % 5 {
            case 0, 4: #expect(subject == ["trip", "n:\(n)"], "\(n)")
            case 1: #expect(subject == ["beach", "trip", "n:\(n)"] && item["Rating"] as? Int == 4, "\(n)")
            case 2: #expect(subject == ["k\(n)"] && item["Rating"] as? Int == 4, "\(n)")
            default: continue
            }
            checked += 1
        }
        #expect(checked == 240)
        for n in stride(from: 3, to: 300, by: 5) {
            let file = dir + "/" + ["a", "b", "c"][n % 3] + "/IMG_\(n).jpg.xmp"
            #expect(try String(contentsOfFile: file, encoding: .utf8) == "not xmp \(n)", "left as it was")
        }
        for folder in ["a", "b", "c"] {
            let names = try FileManager.default.contentsOfDirectory(atPath: dir + "/" + folder)
            #expect(names.count == 100 && names.allSatisfy { $0.hasPrefix("IMG_") && $0.hasSuffix(".jpg.xmp") }, "\(folder)")
        }
    }

    @Test func importReadsEmbeddedAndSidecarKeywords() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let photo = dir + "/IMG_0003.jpg"
        Fixtures.write(try Fixtures.scene(64, 48).jpegData(), to: photo)
        _ = try Self.exiftool(["-q", "-overwrite_original", "-XMP-dc:Subject=embedded", "-XMP-dc:Subject=C\u{E3}o", photo])
        #expect(try Self.seen("XMP:Subject", photo) == "embedded;C\u{E3}o", "exiftool embedded the keywords")
        Fixtures.write(Array(Self.foreign.utf8), to: dir + "/IMG_0003.xmp")
        Fixtures.write(Array(Self.foreign.replacingOccurrences(of: "beach", with: "embedded").utf8), to: dir + "/IMG_0003.jpg.xmp")
        let inspection = try PhotoInspection(path: photo, analysePixels: false, readKeywords: true)
        #expect(inspection.keywords == ["embedded", "C\u{E3}o", "beach"])
        #expect(try PhotoInspection(path: photo, analysePixels: false).keywords == nil)
    }

    /// HEIC keeps its XMP as a plain item: heif-enc carries the JPEG's packet over, and import finds it by content.
    @Test func importReadsKeywordsEmbeddedInHEIC() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let jpeg = dir + "/source.jpg"
        Fixtures.write(try Fixtures.scene(64, 48).jpegData(), to: jpeg)
        _ = try Self.exiftool(["-q", "-overwrite_original", "-XMP-dc:Subject=heic-word", jpeg])
        let heic = dir + "/IMG_0004.HEIC"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["heif-enc", "-q", "50", jpeg, "-o", heic]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(try Self.seen("XMP:Subject", heic) == "heic-word", "heif-enc carried the packet over")
        let inspection = try PhotoInspection(path: heic, analysePixels: false, readKeywords: true)
        #expect(inspection.keywords == ["heic-word"])
    }
}
