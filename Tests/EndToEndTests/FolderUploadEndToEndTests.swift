import Foundation
import Testing
import TrailbookEngine

/// Folder uploads (`submit upload DIR --to DEST`, issue 35) through the real daemon and CLI, to a directory, a
/// tus server (tuspyserver) and S3 (moto): the layout kept, names that need care, what is passed over and why.
@Suite(.serialized)
struct FolderUploadEndToEndTests {
    /// A trip folder: nested folders, names with a space, `+`, `%`, `#`, `é` in NFC and in NFD, a 0-byte, a 1-byte
    /// and a one-part (5 MiB) file, a hidden folder and file; a link to a file, a link loop and a FIFO beside them.
    final class Trip {
        let work = TemporaryDirectory("tbj-trip")
        var root: String { work.file("Lisbon") }
        /// Destination name (UTF-8 bytes) → SHA-256 of every file that must arrive.
        private(set) var expected: [[UInt8]: String] = [:]

        static let nfc = "caf\u{E9}"
        static let nfd = "cafe\u{301}"

        init() throws {
            let fm = FileManager.default
            for folder in ["Lisbon/day1/phone", "Lisbon/day2/deep/deeper", "Lisbon/.hidden", "Lisbon/empty"] {
                try fm.createDirectory(atPath: work.file(folder), withIntermediateDirectories: true)
            }
            try add("day1/IMG 0001.jpg", bytes: 1000)
            try add("day1/a+b%c#d.jpg", bytes: 10)
            try add("day1/phone/IMG 0001.jpg", bytes: 2000)
            try add("day2/\(Self.nfc).jpg", bytes: 20)
            try add("day2/\(Self.nfd).jpg", bytes: 30)
            try add("day2/deep/deeper/zero.bin", bytes: 0)
            try add("one.bin", bytes: 1)
            try add(".hidden/.dot", bytes: 5)
            try add("part.bin", bytes: 5 << 20)
            try fm.createSymbolicLink(atPath: root + "/link.jpg", withDestinationPath: root + "/day1/IMG 0001.jpg")
            try fm.createSymbolicLink(atPath: root + "/day2/loop", withDestinationPath: root)
            guard mkfifo(root + "/pipe", 0o644) == 0 else { throw HarnessError("mkfifo failed") }
        }

        /// Writes a random file at `name` (under the folder) and expects it at the destination under that name.
        func add(_ name: String, bytes: Int) throws {
            let path = BytePath.join(BytePath(root), BytePath(name))
            let fd = path.withCString { open($0, O_CREAT | O_WRONLY | O_TRUNC, 0o644) }
            guard fd >= 0 else { throw HarnessError("cannot create \(name)") }
            let data = try UploadEndToEndTests.randomBytes(bytes)
            data.withUnsafeBytes { _ = write(fd, $0.baseAddress, $0.count) }
            close(fd)
            let digest = SHA256()
            digest.update(data)
            expected[Array(name.utf8)] = digest.hexDigest
        }

        /// Checks the result's account of a default upload (links not followed): every file uploaded with its
        /// SHA-256 under its name, and the link, the loop and the FIFO passed over with their reasons.
        func checkResult(_ done: JSONValue) throws {
            let files = try #require(done["result"]?["files"]?.arrayValue)
            var got: [[UInt8]: String] = [:]
            for file in files {
                got[Array((file["name"]?.stringValue ?? "").utf8)] = file["sha256"]?.stringValue
            }
            #expect(got == expected)
            let tree = try #require(done["result"]?["tree"])
            #expect(tree["uploaded"]?.intValue == Int64(expected.count))
            #expect(tree["skipped"]?.intValue == 3)
            #expect(tree["skipped_by_reason"]?["symlink"]?.intValue == 2)
            #expect(tree["skipped_by_reason"]?["not_regular"]?.intValue == 1)
            #expect(tree["failed"]?.intValue == 0)
            let skipped = try #require(done["result"]?["skipped"]?.arrayValue)
            let reasons = Dictionary(
                uniqueKeysWithValues: skipped.map { ($0["path"]?.stringValue ?? "", $0["reason"]?.stringValue ?? "") })
            #expect(
                reasons == [
                    root + "/link.jpg": "symlink", root + "/day2/loop": "symlink", root + "/pipe": "not_regular",
                ])
        }
    }

    /// SHA-256 of the file at `path` (bytes of a name that may be NFD: no normalisation on the way).
    static func sha256(of path: BytePath) throws -> String? {
        let fd = path.withCString { open($0, O_RDONLY) }
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let digest = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = read(fd, &buffer, buffer.count)
            guard got > 0 else { break }
            digest.update(Data(buffer[..<got]))
        }
        return digest.hexDigest
    }

    @Test func aFolderGoesToADirectoryWithItsLayoutAndTheDirectoryIsCreated() throws {
        let trip = try Trip()
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        // A destination directory that does not exist yet is created (as rclone copy does).
        let into = destination.file("trips/lisbon")
        let id = try daemon.submitUpload([trip.root, "--to", "file://" + into, "--chunk-size", "5MiB"])
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 60)
        try trip.checkResult(done)
        for (name, sha) in trip.expected {
            #expect(try Self.sha256(of: BytePath.join(BytePath(into), BytePath(bytes: name))) == sha)
        }
        // Only the files: no link, no FIFO, no .part left; the empty folder is not recreated.
        let listed = try FileManager.default.subpathsOfDirectory(atPath: into)
        #expect(
            !listed.contains { $0.hasSuffix(".part") || $0.contains("link") || $0.contains("pipe") || $0 == "empty" })
        #expect(FileManager.default.fileExists(atPath: into + "/.hidden/.dot"))
    }

    @Test func aFolderGoesToS3UnderThePrefixByItsRelativePaths() throws {
        let trip = try Trip()
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let id = try daemon.submitUpload([trip.root, "--to", "s3://photos/trips/lisbon/", "--chunk-size", "5MiB"])
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 120)
        try trip.checkResult(done)
        for (name, sha) in trip.expected {
            let key = "trips/lisbon/" + String(decoding: name, as: UTF8.self)
            #expect(try server.object(key)?.sha256 == sha, "object \(key)")
        }
        let paths = done["result"]?["files"]?.arrayValue?.compactMap { $0["path"]?.stringValue } ?? []
        #expect(paths.contains("s3://photos/trips/lisbon/day1/phone/IMG 0001.jpg"))
        #expect(try server.uploads() == 0)
        // Progress counts files beside bytes: every file landed.
        #expect(done["progress"]?["files_completed"]?.intValue == Int64(trip.expected.count))
        #expect(done["progress"]?["files_total"]?.intValue == Int64(trip.expected.count))
    }

    @Test func aFolderGoesToTusWithRelativePathsAsFilenames() throws {
        let trip = try Trip()
        let tus = try TusServers()
        let daemon = try DaemonHarness()
        let id = try daemon.submitUpload([trip.root, "--to", tus.endpoint, "--chunk-size", "5MiB"])
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 120)
        try trip.checkResult(done)
        let files = try #require(done["result"]?["files"]?.arrayValue)
        for file in files {
            let name = Array((file["name"]?.stringValue ?? "").utf8)
            let url = try #require(file["url"]?.stringValue)
            #expect(try Self.sha256(of: BytePath(tus.storedPath(url))) == trip.expected[name])
        }
        // The `filename` metadata of each creation is the relative path, byte for byte.
        let filenames = try tus.requests().filter { $0["method"]?.stringValue == "POST" }.compactMap {
            request -> [UInt8]? in
            guard let metadata = request["headers"]?["upload-metadata"]?.stringValue else { return nil }
            for pair in metadata.split(separator: ",") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: " ")
                if parts.first == "filename", parts.count == 2, let data = Data(base64Encoded: String(parts[1])) {
                    return Array(data)
                }
            }
            return nil
        }
        #expect(Set(filenames) == Set(trip.expected.keys))
        #expect(done["progress"]?["files_completed"]?.intValue == Int64(trip.expected.count))
        #expect(done["progress"]?["files_total"]?.intValue == Int64(trip.expected.count))
    }

    /// `--follow-links` takes the link to a file as a file and passes over the loop; `--exclude` and `--include`
    /// leave files out, each listed as `excluded`.
    @Test func followLinksAndFiltersChooseTheFiles() throws {
        let trip = try Trip()
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        let id = try daemon.submitUpload([
            trip.root, "--to", "file://" + destination.path, "--follow-links", "--exclude", "*.bin", "--include",
            "*.jpg",
        ])
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 60)
        let names = Set(
            done["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue.map { Array($0.utf8) } } ?? [])
        let jpegs = Set(trip.expected.keys.filter { String(decoding: $0, as: UTF8.self).hasSuffix(".jpg") })
        #expect(names == jpegs.union([Array("link.jpg".utf8)]))
        let tree = try #require(done["result"]?["tree"])
        // zero.bin, one.bin, part.bin by --exclude; .hidden/.dot by no --include.
        #expect(tree["skipped_by_reason"]?["excluded"]?.intValue == 4)
        #expect(tree["skipped_by_reason"]?["symlink_loop"]?.intValue == 1)
        #expect(tree["skipped_by_reason"]?["not_regular"]?.intValue == 1)
        #expect(
            try Self.sha256(of: BytePath(destination.file("link.jpg")))
                == trip.expected[Array("day1/IMG 0001.jpg".utf8)])
    }

    /// Two folders whose files would land on one name are refused at submit, naming both; nothing is queued.
    @Test func twoFoldersThatWouldShareANameAreRefusedAtSubmit() throws {
        let work = TemporaryDirectory("tbj-two")
        for folder in ["camera", "phone"] {
            try FileManager.default.createDirectory(atPath: work.file(folder), withIntermediateDirectories: true)
            _ = try UploadEndToEndTests.randomFile(work.file(folder + "/IMG_0001.JPG"), bytes: 10)
        }
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        let refused = try daemon.cli([
            "submit", "upload", work.file("camera"), work.file("phone"), "--to", "file://" + destination.path,
        ])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("duplicate_name"))
        #expect(
            refused.stderr.contains(work.file("camera/IMG_0001.JPG"))
                && refused.stderr.contains(work.file("phone/IMG_0001.JPG")))
        // A file given by itself still goes under its own name beside a folder's files.
        _ = try UploadEndToEndTests.randomFile(work.file("single.jpg"), bytes: 3)
        let id = try daemon.submitUpload([
            work.file("camera"), work.file("single.jpg"), "--to", "file://" + destination.path,
        ])
        let done = try daemon.waitForFolder(id, "succeeded")
        #expect(
            done["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == [
                "IMG_0001.JPG", "single.jpg",
            ])
    }

    /// A name S3 cannot take (a key over 1 024 bytes) fails that file only: the others are uploaded, then the job
    /// ends `failed` with `some_files_failed` and the counts.
    @Test func aKeyS3CannotTakeFailsThatFileAndTheRestIsUploaded() throws {
        let work = TemporaryDirectory("tbj-long")
        // 5 folders of 250 bytes: a key of over 1 250 bytes.
        let long = ["d", "e", "f", "g", "h"].map { String(repeating: $0, count: 250) }.joined(separator: "/")
        try FileManager.default.createDirectory(atPath: work.file("trip/" + long), withIntermediateDirectories: true)
        _ = try UploadEndToEndTests.randomFile(work.file("trip/" + long + "/x.jpg"), bytes: 10)
        let ok = try UploadEndToEndTests.randomFile(work.file("trip/ok.jpg"), bytes: 10)
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let id = try daemon.submitUpload([work.file("trip"), "--to", "s3://photos/p/"])
        let done = try daemon.waitForFolder(id, "failed", timeout: 60)
        #expect(done["error"]?["code"]?.stringValue == "some_files_failed")
        let message = done["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("1 of 2 files failed (1 bad_name)"))
        #expect(try server.object("p/ok.jpg")?.sha256 == ok)
    }

    /// `kill -9` mid-tree, to a directory and to S3: the next daemon resumes from the checkpoint's file list (the
    /// walk is not taken again), every file arrives once with its bytes, no `.part` or multipart upload is left,
    /// and files acknowledged before the crash are not sent again (beyond the batch whose save the crash lost).
    @Test func kill9MidTreeResumesTheSameList() throws {
        let work = TemporaryDirectory("tbj-crash")
        var expected: [String: String] = [:]
        for index in 0..<240 {
            let folder = "trip/d\(index % 4)/" + (index % 3 == 0 ? "sub/" : "")
            try FileManager.default.createDirectory(atPath: work.file(folder), withIntermediateDirectories: true)
            let name = folder.dropFirst(5) + "f \(index).bin"
            expected[String(name)] = try UploadEndToEndTests.randomFile(work.file("trip/" + name), bytes: 32 << 10)
        }
        let total = Int64(240 * (32 << 10))
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let out = work.file("out")
        let toDirectory = try daemon.submitUpload([
            work.file("trip"), "--to", "file://" + out, "--max-rate", "1MiB", "--chunk-size", "256KiB",
        ])
        let toS3 = try daemon.submitUpload([work.file("trip"), "--to", "s3://photos/crash/", "--max-rate", "1MiB"])
        for id in [toDirectory, toS3] {
            try daemon.waitFor(id, timeout: 30, "a third") {
                ($0["progress"]?["completed"]?.intValue ?? 0) >= total / 3
            }
        }
        // A file added after the list was taken is not part of the job.
        _ = try UploadEndToEndTests.randomFile(work.file("trip/late.bin"), bytes: 10)
        try daemon.crash()
        let before = Set(try FileManager.default.subpathsOfDirectory(atPath: out).filter { !$0.hasSuffix(".part") })
        var inodes: [String: Int] = [:]
        for path in before {
            inodes[path] = try FileManager.default.attributesOfItem(atPath: out + "/" + path)[.systemFileNumber] as? Int
        }
        try daemon.start()
        for id in [toDirectory, toS3] {
            let done = try daemon.waitForFolder(id, "succeeded", timeout: 90)
            let files = done["result"]?["files"]?.arrayValue ?? []
            #expect(files.count == 240)
            for file in files {
                #expect(expected[file["name"]?.stringValue ?? ""] == file["sha256"]?.stringValue)
            }
        }
        let after = try FileManager.default.subpathsOfDirectory(atPath: out)
        #expect(!after.contains { $0.hasSuffix(".part") } && !after.contains("late.bin"))
        for (name, sha) in expected {
            #expect(try Self.sha256(of: BytePath(out + "/" + name)) == sha)
            #expect(try server.object("crash/" + name)?.sha256 == sha)
        }
        #expect(try server.object("crash/late.bin") == nil)
        #expect(try server.uploads() == 0)
        // Files renamed into place before the crash: copied again only if the crash lost the save that named
        // them (at most one chunk's worth: 256 KiB = 8 files, plus the one in progress).
        let files = before.filter { expected[$0] != nil }
        let copiedAgain = try files.filter { path in
            try FileManager.default.attributesOfItem(atPath: out + "/" + path)[.systemFileNumber] as? Int
                != inodes[path]
        }
        #expect(files.count > 40 && copiedAgain.count <= 9, "\(copiedAgain.count) of \(files.count) copied again")
    }

    /// Uploading the same folder to a directory again copies nothing; after adding 5 files and editing 1, exactly
    /// those 6 are copied; `--again` copies all. Files left alone keep their inode (never rewritten), and nothing at
    /// the destination is deleted.
    @Test func aSecondUploadToADirectoryCopiesOnlyWhatChanged() throws {
        let trip = try Trip()
        let daemon = try DaemonHarness()
        let destination = TemporaryDirectory("tbj-dest")
        let into = destination.file("lisbon")
        func upload(_ extra: [String] = []) throws -> JSONValue {
            let id = try daemon.submitUpload([trip.root, "--to", "file://" + into] + extra)
            return try daemon.waitForFolder(id, "succeeded", timeout: 60)
        }
        func inode(_ name: String) throws -> Int? {
            try FileManager.default.attributesOfItem(atPath: into + "/" + name)[.systemFileNumber] as? Int
        }
        let first = try upload()
        #expect(first["result"]?["tree"]?["uploaded"]?.intValue == Int64(trip.expected.count))
        #expect(first["result"]?["tree"]?["already_there"]?.intValue == 0)
        _ = FileManager.default.createFile(atPath: into + "/kept-at-destination.txt", contents: Data([1]))
        let before = try inode("part.bin")

        let second = try upload()
        #expect(second["result"]?["files"]?.arrayValue?.count == 0)
        #expect(second["result"]?["tree"]?["uploaded"]?.intValue == 0)
        #expect(second["result"]?["tree"]?["already_there"]?.intValue == Int64(trip.expected.count))
        #expect(second["result"]?["tree"]?["already_there_bytes"]?.intValue == first["result"]?["bytes"]?.intValue)
        #expect(try inode("part.bin") == before)

        try FileManager.default.createDirectory(atPath: trip.root + "/day3", withIntermediateDirectories: true)
        for index in 0..<5 { try trip.add("day3/new \(index).jpg", bytes: 100 + index) }
        try trip.add("day1/IMG 0001.jpg", bytes: 1000)  // edited in place, same size
        let third = try upload()
        let sent = Set(third["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        #expect(sent == Set((0..<5).map { "day3/new \($0).jpg" } + ["day1/IMG 0001.jpg"]))
        #expect(third["result"]?["tree"]?["already_there"]?.intValue == Int64(trip.expected.count - 6))
        for (name, sha) in trip.expected {
            #expect(try Self.sha256(of: BytePath.join(BytePath(into), BytePath(bytes: name))) == sha)
        }
        #expect(try inode("part.bin") == before)

        let again = try upload(["--again"])
        #expect(again["result"]?["files"]?.arrayValue?.count == trip.expected.count)
        #expect(try inode("part.bin") != before)
        #expect(FileManager.default.fileExists(atPath: into + "/kept-at-destination.txt"))
    }

    /// `cancel` mid-tree (files go in byte order: `0 small.bin` before the folder `b`) removes the job's `.part` file in
    /// a subfolder, keeps the files it completed, and leaves
    /// alone a file that was at the destination before. (`--chunk-size 8MiB`: `big.bin` is then larger than a chunk,
    /// so the small files before it land before it starts; smaller, it would wait in their batch.)
    @Test func cancelMidTreeRemovesOnlyThePartialFileInItsFolder() throws {
        let work = TemporaryDirectory("tbj-cancel")
        try FileManager.default.createDirectory(atPath: work.file("trip/a/b"), withIntermediateDirectories: true)
        let small = try UploadEndToEndTests.randomFile(work.file("trip/a/0 small.bin"), bytes: 64 << 10)
        _ = try UploadEndToEndTests.randomFile(work.file("trip/a/b/big.bin"), bytes: 16 << 20)
        try FileManager.default.createDirectory(atPath: work.file("out/a"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: work.file("out/a/theirs.txt"), contents: Data([1, 2, 3]))
        let daemon = try DaemonHarness()
        let id = try daemon.submitUpload([work.file("trip"), "--to", "file://" + work.file("out"), "--max-rate", "2MiB", "--chunk-size", "8MiB"])
        let part = work.file("out/a/b/big.bin.\(id.prefix(8)).part")
        try daemon.waitFor(id, "into big.bin") { _ in FileManager.default.fileExists(atPath: part) }
        let job = try daemon.job(["op": "cancel", "job": .string(id)])
        #expect(job["state"]?.stringValue == "cancelled")
        try daemon.waitFor(id, "the .part removed") { _ in !FileManager.default.fileExists(atPath: part) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.file("out/a/b")).isEmpty)
        #expect(try Self.sha256(of: BytePath(work.file("out/a/0 small.bin"))) == small)
        #expect(FileManager.default.fileExists(atPath: work.file("out/a/theirs.txt")))
    }
}
