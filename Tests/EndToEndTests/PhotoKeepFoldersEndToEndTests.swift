import Foundation
import PhotoLibrary
import Testing
import TrailbookEngine

/// `submit upload --ids/--tag … --keep-folders`: each photo is named at the destination by its path under the
/// library's root (the folder holding every photo), so two `IMG_0001.jpg` of two folders both arrive.
@Suite(.serialized)
struct PhotoKeepFoldersEndToEndTests {
    @Test func photosKeepTheirFoldersUnderTheLibraryRoot() throws {
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let library = TemporaryDirectory("tbj-library")
        let jpeg = try Fixtures.scene(64, 48).jpegData()
        var sha: [String: String] = [:]
        // Two photos of one name in two folders, and one deeper: distinct bytes each (random padding).
        for name in ["Lisbon/day1/IMG_0001.jpg", "Lisbon/day2/IMG_0001.jpg", "Porto/phone/deep/IMG_0002.jpg"] {
            try FileManager.default.createDirectory(
                atPath: library.file((name as NSString).deletingLastPathComponent), withIntermediateDirectories: true)
            let padding = try UploadEndToEndTests.randomBytes(4096)
            PhotoTestSupport.write(jpeg + [UInt8](padding), library.file(name))
            sha[name] = try UploadEndToEndTests.sha256(ofFile: library.file(name))
        }
        let imported = try daemon.cliJSON(["photos", "import", library.path, "--wait", "--json"])
        #expect(imported["result"]?["inserted"]?.intValue == 3, "\(imported)")
        var ids: [String] = []
        for photo in try daemon.cliJSON(["photos", "list", "--json"]).arrayValue ?? [] {
            if let id = photo["id"]?.stringValue { ids.append(id) }
        }
        #expect(ids.count == 3)

        // Without --keep-folders the two IMG_0001.jpg would land on one name: one is skipped (duplicate_name).
        let flat = try daemon.cliJSON([
            "submit", "upload", "--ids", ids.joined(separator: ","), "--to", "s3://photos/flat/", "--wait", "--json",
        ])
        #expect(flat["result"]?["photos"]?["skipped_by_reason"]?["duplicate_name"]?.intValue == 1, "\(flat)")

        let kept = try daemon.cliJSON([
            "submit", "upload", "--ids", ids.joined(separator: ","), "--keep-folders", "--to", "s3://photos/kept/",
            "--wait", "--json",
        ])
        #expect(kept["state"]?.stringValue == "succeeded", "\(kept)")
        let names = Set(kept["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        #expect(names == Set(sha.keys))
        for (name, digest) in sha {
            #expect(try server.object("kept/" + name)?.sha256 == digest, "kept/\(name)")
        }

        // Files given one by one (or folders) take no --keep-folders.
        let refused = try daemon.cli([
            "submit", "upload", library.file("Porto/phone/deep/IMG_0002.jpg"), "--keep-folders", "--to", "s3://photos/x/",
        ])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("keep_folders (--keep-folders) applies to photos"), "\(refused.stderr)")
    }
}
