import Foundation
import Testing
import TrailbookEngine
import TrailbookSQLite

/// A keyword typed precomposed (NFC) or decomposed (NFD) is one tag at every entry point: `submit tag`, `--remove`
/// and `photos list --tag`, through the real CLI and daemon.
@Suite(.serialized)
struct TagSpellingEndToEndTests {
    static let nfc = "C\u{E3}o"
    static let nfd = "Ca\u{303}o"

    /// Stable IDs `photos list --tag TAG --json` prints.
    static func listed(_ daemon: DaemonHarness, tag: String) throws -> [String] {
        let result = try daemon.cli(["photos", "list", "--tag", tag, "--json"])
        guard result.status == 0 else { throw HarnessError("photos list failed: \(result.stderr)") }
        let photos = try JSONCoding.decode(JSONValue.self, from: Array(result.stdout.utf8)).arrayValue ?? []
        return photos.compactMap { $0["id"]?.stringValue }.sorted()
    }

    @Test func bothSpellingsAreOneTagForSubmitRemoveAndList() throws {
        #expect(Array(Self.nfc.utf8) != Array(Self.nfd.utf8))
        let home = TemporaryDirectory()
        let path = home.path + "/photos.sqlite3"
        let ids = try PhotoTestSupport.syntheticLibrary(at: path, count: 3)
        let daemon = try DaemonHarness(home: home)
        for (tag, id) in [(Self.nfc, ids[0]), (Self.nfd, ids[1])] {
            let done = try daemon.cli(["submit", "tag", "--tag", tag, "--ids", id, "--wait"])
            #expect(done.status == 0, "\(done.stderr)")
        }
        let names = try Database(path: path, readOnly: true).query("SELECT name FROM tag_names").map { Array(($0.text(0) ?? "").utf8) }
        #expect(names == [Array(Self.nfc.utf8)], "one tag, stored in NFC")
        #expect(try Self.listed(daemon, tag: Self.nfc) == [ids[0], ids[1]].sorted())
        #expect(try Self.listed(daemon, tag: Self.nfd) == [ids[0], ids[1]].sorted())

        let removed = try daemon.cli(["submit", "tag", "--tag", Self.nfd, "--ids", ids[0], "--remove", "--wait"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try Self.listed(daemon, tag: Self.nfc) == [ids[1]], "removed with the other spelling")
        let removedToo = try daemon.cli(["submit", "tag", "--tag", Self.nfc, "--ids", ids[1], "--remove", "--wait"])
        #expect(removedToo.status == 0, "\(removedToo.stderr)")
        #expect(try Self.listed(daemon, tag: Self.nfd) == [])
    }
}
