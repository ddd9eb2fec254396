import Foundation
import Glibc
import Testing
import TestSupport

@testable import PhotoLibrary

/// Keywords where darktable, digiKam and Lightroom look for them, read back with exiftool per namespace
/// (`XMP-dc:Subject`, `XMP-lr:HierarchicalSubject`, `XMP-digiKam:TagsList`, `XMP-microsoft:LastKeywordXMP`), and
/// photos that would share one Lightroom-named sidecar.
@Suite(.serialized)
struct XMPKeywordNamespaceTests {
    static func seen(_ tag: String, _ file: String) throws -> String { try XMPFixtures.seen(tag, file) }

    /// What each app's namespace holds, in exiftool's reading.
    static func namespaces(_ file: String) throws -> [String] {
        try ["XMP-dc:Subject", "XMP-lr:HierarchicalSubject", "XMP-digiKam:TagsList", "XMP-microsoft:LastKeywordXMP"]
            .map { try seen($0, file) }
    }

    @Test func everyKeywordGoesToEveryNamespaceAndLeavesThemAllTogether() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let photo = dir + "/IMG_0001.jpg"
        let sidecar = photo + ".xmp"
        try Data(XMPFixtures.foreignSidecar.utf8).write(to: URL(fileURLWithPath: sidecar))
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: ["family"], remove: [])], naming: .darktable) == [.written])
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: ["year:2024", "camera:Canon EOS 40D"], remove: [])], naming: .darktable) == [.written])
        #expect(try Self.namespaces(sidecar) == [
            "beach;family;year:2024;camera:Canon EOS 40D", "family;beach;year|2024;camera|Canon EOS 40D",
            "family;beach;year/2024;camera/Canon EOS 40D", "family;beach;year/2024;camera/Canon EOS 40D",
        ])
        // Removing takes a keyword off all four.
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: [], remove: ["family", "year:2024"])], naming: .darktable) == [.written])
        #expect(try Self.namespaces(sidecar) == [
            "beach;camera:Canon EOS 40D", "beach;camera|Canon EOS 40D", "beach;camera/Canon EOS 40D", "beach;camera/Canon EOS 40D",
        ])
        // Other apps' data stays.
        #expect(try Self.seen("XMP:Rating", sidecar) == "4")
        #expect(try Self.seen("XMP:Label", sidecar) == "Red")
        #expect(try Self.seen("XMP-darktable:History_end", sidecar) == "3")
        // A second apply of the same change leaves the file as it is.
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: photo, add: [], remove: ["family", "year:2024"])], naming: .darktable) == [.unchanged])
    }

    /// A sidecar an older version wrote (`family` in `dc:subject` only, `year|2015` in `lr:hierarchicalSubject`):
    /// darktable reads only the latter, so `family` was hidden; the next write shows it in every namespace.
    @Test func keywordsOnlyInSubjectJoinTheHierarchicalNamespaces() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let sidecar = dir + "/a.jpg.xmp"
        let old = """
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
            <rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/" \
            xmlns:lr="http://ns.adobe.com/lightroom/1.0/">\
            <dc:subject><rdf:Bag><rdf:li>family</rdf:li><rdf:li>year:2015</rdf:li></rdf:Bag></dc:subject>\
            <lr:hierarchicalSubject><rdf:Bag><rdf:li>year|2015</rdf:li></rdf:Bag></lr:hierarchicalSubject>\
            </rdf:Description></rdf:RDF></x:xmpmeta>
            """
        try Data(old.utf8).write(to: URL(fileURLWithPath: sidecar))
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: dir + "/a.jpg", add: ["trip"], remove: [])], naming: .darktable) == [.written])
        #expect(try Self.namespaces(sidecar) == [
            "family;year:2015;trip", "year|2015;trip;family", "trip;family;year/2015", "trip;family;year/2015",
        ])
    }

    /// Lightroom's own keywords (`Places|Lisbon` and its levels in `dc:subject`) join digiKam's namespace as the
    /// hierarchy, not as flat keywords.
    @Test func lightroomHierarchiesJoinAsHierarchies() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let sidecar = dir + "/a.xmp"
        let lightroom = """
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
            <rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/" \
            xmlns:lr="http://ns.adobe.com/lightroom/1.0/">\
            <dc:subject><rdf:Bag><rdf:li>Lisbon</rdf:li><rdf:li>Places</rdf:li></rdf:Bag></dc:subject>\
            <lr:hierarchicalSubject><rdf:Bag><rdf:li>Places|Lisbon</rdf:li></rdf:Bag></lr:hierarchicalSubject>\
            </rdf:Description></rdf:RDF></x:xmpmeta>
            """
        try Data(lightroom.utf8).write(to: URL(fileURLWithPath: sidecar))
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: dir + "/a.jpg", add: ["family"], remove: [])], naming: .lightroom) == [.written])
        #expect(try Self.namespaces(sidecar) == [
            "Lisbon;Places;family", "Places|Lisbon;family", "family;Places/Lisbon", "family;Places/Lisbon",
        ])
    }

    // MARK: two photos, one sidecar

    @Test func aSidecarTwoPhotosWouldShareIsNeitherWrittenNorRead() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let jpeg = dir + "/IMG_1.JPG", heic = dir + "/IMG_1.HEIC", alone = dir + "/IMG_2.jpg"
        for path in [jpeg, heic, alone] { Fixtures.write(try Fixtures.scene(16, 16).jpegData(), to: path) }
        #expect(XMPSidecarSharing.others(sharingSidecarOf: BytePath(jpeg), naming: .lightroom) == [BytePath(heic)])
        #expect(XMPSidecarSharing.others(sharingSidecarOf: BytePath(jpeg), naming: .darktable) == [])
        let outcomes = XMPSidecarWriter.apply(
            [
                XMPSidecarChange(path: jpeg, add: ["jpeg-only"], remove: []),
                XMPSidecarChange(path: heic, add: ["heic-only"], remove: []),
                XMPSidecarChange(path: alone, add: ["trip"], remove: []),
            ], naming: .lightroom)
        guard case .failed(let code, let message) = outcomes[0], case .failed(let other, _) = outcomes[1] else {
            Issue.record("\(outcomes)")
            return
        }
        #expect(code == "xmp_shared_sidecar" && other == "xmp_shared_sidecar")
        #expect(message.contains("IMG_1.HEIC") && message.contains("--xmp-naming darktable"), "\(message)")
        #expect(outcomes[2] == .written)
        #expect(access(dir + "/IMG_1.xmp", F_OK) != 0, "no shared sidecar written")
        // darktable naming gives each its own.
        #expect(XMPSidecarWriter.apply([XMPSidecarChange(path: jpeg, add: ["jpeg-only"], remove: [])], naming: .darktable) == [.written])
        #expect(try Self.seen("XMP-dc:Subject", jpeg + ".xmp") == "jpeg-only")

        // A shared sidecar someone else wrote (a HEIC-only one, say) gives its keywords to neither photo.
        try Data(XMPFixtures.foreignSidecar.utf8).write(to: URL(fileURLWithPath: dir + "/IMG_1.xmp"))
        var warnings: [String] = []
        #expect(XMPKeywords.keywords(ofPhoto: BytePath(jpeg), bytes: [], warnings: &warnings) == ["jpeg-only"])
        #expect(warnings.count == 1 && warnings[0].hasPrefix("xmp_shared_sidecar: "), "\(warnings)")
        warnings = []
        #expect(XMPKeywords.keywords(ofPhoto: BytePath(heic), bytes: [], warnings: &warnings) == [])
        #expect(warnings.count == 1)
        // Alone in its folder again, the sidecar is its photo's.
        unlink(heic)
        warnings = []
        #expect(XMPKeywords.keywords(ofPhoto: BytePath(jpeg), bytes: [], warnings: &warnings) == ["jpeg-only", "beach"])
        #expect(warnings.isEmpty)
    }
}
