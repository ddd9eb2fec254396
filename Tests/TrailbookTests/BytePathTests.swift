import Foundation
import Testing
import TrailbookEngine

/// File paths as bytes, and their JSON (issue 10, item 4).
struct BytePathTests {
    static let latin1 = BytePath(bytes: Array("/p/caf".utf8) + [0xE9] + Array(".jpg".utf8))

    @Test func utf8PathsAreStringsInJSON() throws {
        let path = BytePath("/p/東京.jpg")
        #expect(path.json == "/p/東京.jpg")
        #expect(String(decoding: JSONCoding.encode(path), as: UTF8.self) == #""/p/東京.jpg""#)
        #expect(try JSONCoding.decode(BytePath.self, from: Array(#""/p/東京.jpg""#.utf8)) == path)
    }

    @Test func otherPathsAreBase64WithATextForm() throws {
        let path = Self.latin1
        #expect(path.text == nil)
        #expect(path.description == "/p/caf\\xe9.jpg")
        #expect(path.json == ["base64": "L3AvY2Fm6S5qcGc=", "text": "/p/caf\\xe9.jpg"])
        let encoded = JSONCoding.encode(path)
        #expect(try JSONCoding.decode(BytePath.self, from: encoded) == path)
        // The text form is informational: base64 alone decodes.
        #expect(try JSONCoding.decode(BytePath.self, from: Array(#"{"base64": "L3AvY2Fm6S5qcGc="}"#.utf8)) == path)
        #expect(throws: (any Error).self) { try JSONCoding.decode(BytePath.self, from: Array(#"{"base64": "%%"}"#.utf8)) }
        #expect(path.lastComponent.bytes == Array("caf".utf8) + [0xE9] + Array(".jpg".utf8))
        #expect(path.key == "base64:L3AvY2Fm6S5qcGc=")
    }

    /// Valid sequences around a bad byte stay text; overlong forms and surrogates are bytes.
    @Test func descriptionEscapesOnlyTheBytesThatAreNotUTF8() {
        #expect(BytePath(bytes: Array("é".utf8) + [0xFF] + Array("東".utf8)).description == "é\\xff東")
        #expect(BytePath(bytes: [0xC0, 0xAF]).description == "\\xc0\\xaf")  // overlong '/'
        #expect(BytePath(bytes: [0xED, 0xA0, 0x80]).description == "\\xed\\xa0\\x80")  // a surrogate
        #expect(BytePath(bytes: [0x61, 0xE2, 0x82]).description == "a\\xe2\\x82")  // cut short
    }

    /// Equal by bytes: NFC and NFD spellings of one name are two files on Linux.
    @Test func equalityIsByBytes() {
        #expect(BytePath("caf\u{E9}") != BytePath("cafe\u{301}"))
        #expect(Set([BytePath("caf\u{E9}"), BytePath("cafe\u{301}")]).count == 2)
    }

    /// `.` components, repeated and trailing slashes go; `..` and bytes that are not UTF-8 stay as they are.
    @Test func lexicalNormalizationDropsDotsAndRepeatedSlashes() {
        #expect(BytePath("/photos/./trip//").lexicallyNormalized == "/photos/trip")
        #expect(BytePath("/photos/trip/.").lexicallyNormalized == "/photos/trip")
        #expect(BytePath("./a.jpg").lexicallyNormalized == "a.jpg")
        #expect(BytePath("a/../b").lexicallyNormalized == "a/../b")
        #expect(BytePath("/./").lexicallyNormalized == "/")
        #expect(BytePath("//").lexicallyNormalized == "/")
        #expect(BytePath(".").lexicallyNormalized == ".")
        #expect(BytePath("/a/.b/..c/...").lexicallyNormalized == "/a/.b/..c/...")
        #expect(BytePath(bytes: Array("/p/./".utf8) + [0xE9]).lexicallyNormalized == BytePath(bytes: Array("/p/".utf8) + [0xE9]))
    }

    /// The file system's answer to "where does this lead": `..`, `.`, `//` and links resolved; a part that does
    /// not exist yet kept, its own `..` taken lexically.
    @Test func resolvedByFileSystemFollowsLinksAndKeepsWhatDoesNotExist() throws {
        let root = BytePath(NSTemporaryDirectory() + "bytepath-\(UUID().uuidString)").resolvedByFileSystem
        defer { try? FileManager.default.removeItem(atPath: root.description) }
        try FileManager.default.createDirectory(atPath: root.description + "/real/sub", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root.description + "/link", withDestinationPath: "real/sub")
        let sub = BytePath.join(root, "real/sub")
        #expect(BytePath.join(root, "link").resolvedByFileSystem == sub)
        #expect(BytePath.join(root, "link/..").resolvedByFileSystem == BytePath.join(root, "real"), "the link's parent")
        #expect(BytePath.join(root, "./real//sub/").resolvedByFileSystem == sub)
        #expect(BytePath.join(root, "link/new/../x.jpg").resolvedByFileSystem == BytePath.join(sub, "x.jpg"))
        #expect(BytePath.join(root, "nope/./a/../b").resolvedByFileSystem == BytePath.join(root, "nope/b"))
        #expect(BytePath("rel/./x").resolvedByFileSystem == BytePath("rel/x"))
    }
}
