import Foundation
import Testing
import TrailbookEngine

@testable import UploadJob

/// Folder uploads without a daemon: the `--include`/`--exclude` patterns and what a walk of a real folder lists.
struct UploadTreeTests {
    static func matches(_ pattern: String, _ path: String) throws -> Bool {
        try UploadGlob(pattern).matches(BytePath(path))
    }

    @Test func globsFollowRcloneSyntax() throws {
        // Unanchored patterns match the end of the path at a `/` boundary.
        #expect(try Self.matches("*.jpg", "a.jpg"))
        #expect(try Self.matches("*.jpg", "day1/a.jpg"))
        #expect(try !Self.matches("*.jpg", "a.jpeg"))
        #expect(try Self.matches("phone/*.jpg", "2026/phone/a.jpg"))
        #expect(try !Self.matches("phone/*.jpg", "2026/myphone/a.jpg"))
        #expect(try Self.matches("a.jpg", "x/a.jpg"))
        #expect(try !Self.matches("a.jpg", "xa.jpg"))
        // `*` stops at `/`, `**` does not; `/` anchors at the folder.
        #expect(try !Self.matches("/*.jpg", "day1/a.jpg"))
        #expect(try Self.matches("/*.jpg", "a.jpg"))
        #expect(try Self.matches("/day1/**", "day1/x/y/z.raw"))
        #expect(try !Self.matches("/day1/*", "day1/x/y.raw"))
        // ?, classes, alternatives, escapes; by character, not byte.
        #expect(try Self.matches("IMG_????.JPG", "IMG_0001.JPG"))
        #expect(try Self.matches("caf?.jpg", "café.jpg"))
        #expect(try Self.matches("[a-c]*.txt", "b1.txt"))
        #expect(try !Self.matches("[!a-c]*.txt", "b1.txt"))
        #expect(try Self.matches("*.{jpg,heic}", "d/x.heic"))
        #expect(try !Self.matches("*.{jpg,heic}", "d/x.png"))
        #expect(try Self.matches("a\\*b", "a*b"))
        #expect(try !Self.matches("a\\*b", "axb"))
        // A pattern ending in `/` matches folders, so every file below one.
        #expect(try Self.matches(".thumbnails/", "day1/.thumbnails/a.jpg"))
        #expect(try !Self.matches(".thumbnails/", ".thumbnails"))
        // A name that is not UTF-8: its odd byte is one character.
        #expect(try UploadGlob("caf?.jpg").matches(BytePath(bytes: Array("caf".utf8) + [0xE9] + Array(".jpg".utf8))))
        for bad in ["", "[abc", "{a,b", "a}", "x\\"] {
            #expect(throws: JobError.self) { try UploadGlob(bad) }
        }
    }

    @Test func excludesComeFirstAndAnyIncludeLeavesOutTheRest() throws {
        let filter = try UploadFilter(include: ["*.jpg", "*.heic"], exclude: ["/tmp/**", "*.jpg.tmp"])
        #expect(filter.verdict("a.jpg") == .included)
        #expect(filter.verdict("d/b.heic") == .included)
        #expect(filter.verdict("tmp/a.jpg") == .excluded(by: "--exclude '/tmp/**'"))
        #expect(filter.verdict("notes.txt") == .excluded(by: "no --include pattern"))
        #expect(try UploadFilter(include: [], exclude: []).verdict(".hidden") == .included)
    }

    /// A real folder: nested, hidden, empty and special entries; links passed over or followed, loops found.
    @Test func aWalkListsFilesAndEveryEntryPassedOver() throws {
        let root = NSTemporaryDirectory() + "tbj-tree-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fm = FileManager.default
        for folder in ["day1/phone", "day2", "empty"] {
            try fm.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
        for (file, size) in [("day1/a.jpg", 3), ("day1/phone/b b.jpg", 0), ("day2/.hidden", 1), ("top.txt", 5)] {
            #expect(fm.createFile(atPath: root + "/" + file, contents: Data(repeating: 7, count: size)))
        }
        try fm.createSymbolicLink(atPath: root + "/link-to-a.jpg", withDestinationPath: root + "/day1/a.jpg")
        try fm.createSymbolicLink(atPath: root + "/day2/loop", withDestinationPath: root + "/day2")
        try fm.createSymbolicLink(atPath: root + "/self", withDestinationPath: root + "/self")
        #expect(mkfifo(root + "/pipe", 0o644) == 0)

        let destination = UploadDestination.directory(path: "/srv")
        let plain = try UploadTreePlan.list(
            [BytePath(root)], destination: destination, filter: UploadFilter(include: [], exclude: []),
            followLinks: false)
        #expect(plain.plan.names == ["day1/a.jpg", "day1/phone/b b.jpg", "day2/.hidden", "top.txt"])
        #expect(plain.plan.files.first == BytePath(root + "/day1/a.jpg"))
        #expect(plain.identities.map(\.size) == [3, 0, 1, 5])
        #expect(plain.plan.skippedByReason == ["symlink": 3, "not_regular": 1])
        #expect(
            plain.plan.skipped.map(\.path.description).sorted()
                == [root + "/day2/loop", root + "/link-to-a.jpg", root + "/pipe", root + "/self"])
        #expect(plain.plan.failedCount == 0)

        let followed = try UploadTreePlan.list(
            [BytePath(root)], destination: destination, filter: UploadFilter(include: [], exclude: ["top.txt"]),
            followLinks: true)
        #expect(followed.plan.names == ["day1/a.jpg", "day1/phone/b b.jpg", "day2/.hidden", "link-to-a.jpg"])
        #expect(followed.plan.skippedByReason == ["symlink_loop": 2, "not_regular": 1, "excluded": 1])
    }

    /// Names a destination cannot take are that file's failure, and two files of one name are caught.
    @Test func namesTheDestinationCannotTakeFailThatFileOnly() throws {
        let root = NSTemporaryDirectory() + "tbj-tree-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fm = FileManager.default
        try fm.createDirectory(
            atPath: root + "/a/" + String(repeating: "d", count: 200), withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/b", withIntermediateDirectories: true)
        let long = "a/" + String(repeating: "d", count: 200) + "/" + String(repeating: "f", count: 200)
        #expect(fm.createFile(atPath: root + "/" + long, contents: Data()))
        #expect(fm.createFile(atPath: root + "/a/ok.jpg", contents: Data()))
        #expect(fm.createFile(atPath: root + "/b/ok.jpg", contents: Data()))
        let none = try UploadFilter(include: [], exclude: [])
        let s3 = try UploadTreePlan.list(
            [BytePath(root + "/a")], destination: .s3(bucket: "b", prefix: String(repeating: "p", count: 700) + "/"),
            filter: none, followLinks: false)
        #expect(s3.plan.names == ["ok.jpg"])
        #expect(s3.plan.failedByCode == ["bad_name": 1])
        #expect(s3.plan.failure(destination: "s3://b/")?.code == "some_files_failed")
        // Two folders whose files land on one name.
        let both = try UploadTreePlan.list(
            [BytePath(root + "/a"), BytePath(root + "/b")], destination: .directory(path: "/srv"), filter: none,
            followLinks: false)
        #expect(both.plan.failed.map(\.reason) == ["duplicate_name"])
        #expect(both.plan.failed.first?.message.contains(root + "/a/ok.jpg") == true)
        // tus gives every file its own upload: no clash there.
        let tus = try UploadTreePlan.list(
            [BytePath(root + "/a"), BytePath(root + "/b")], destination: .tus(endpoint: "http://h/files/"),
            filter: none,
            followLinks: false)
        #expect(tus.plan.failedCount == 0 && tus.plan.files.count == 3)
    }

    /// Two jobs uploading folders of one name to one place are no clash (the folder's name is not kept there);
    /// the same folder twice still is (by where it leads).
    @Test func aFolderIsKeyedByWhereItLeadsNotByItsName() throws {
        let root = NSTemporaryDirectory() + "tbj-tree-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/Lisbon", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: root + "/a.jpg", contents: Data()))
        let folder = UploadJob.duplicateKeys(
            UploadJob.Params(files: [BytePath(root + "/Lisbon")], to: "s3://bucket/p/"), environment: [:])
        #expect(folder.count == 1 && folder[0].hasPrefix("upload of /"))
        let file = UploadJob.duplicateKeys(UploadJob.Params(files: [BytePath(root + "/a.jpg")], to: "s3://bucket/p/"), environment: [:])
        #expect(file.contains("upload of a file named a.jpg to s3://bucket/p"))
    }
}
