import Foundation
import Testing
import TrailbookEngine

/// The stat cache of "send only what changed" (issue 35, `TreeSyncMemory`): a folder uploaded again reads none of
/// its unchanged files, through the real daemon, counted by what the daemon says it read and by the server's
/// requests. A file whose mtime moved (same bytes) is read, found the same and not sent; a file edited in place
/// with its size and mtime put back is caught by its ctime and sent; the cache survives a daemon restart, in the
/// SQLite store and in a shared PostgreSQL store.
@Suite(.serialized)
struct FolderSyncStatCacheEndToEndTests {
    /// How long a test waits after writing sources before uploading them, in microseconds: a source's `stat` is
    /// remembered only once its ctime is `TreeSyncMemory.settleSeconds` (2 s) older than the upload's start.
    static let settle: useconds_t = 2_300_000

    /// A folder of files of known sizes.
    final class Folder {
        let work = TemporaryDirectory("tbj-statcache")
        var root: String { work.file("trip") }
        static let files = [
            "day1/a.jpg": 3_000, "day1/b.jpg": 4_000, "day2/c.jpg": 5_000, "day2/deep/d.jpg": 1 << 20, "e.bin": 10,
        ]

        init() throws {
            for (name, size) in Self.files { try write(name, bytes: size) }
        }

        func path(_ name: String) -> String { root + "/" + name }

        /// Writes `bytes` random bytes at `name`, creating its folders.
        func write(_ name: String, bytes: Int) throws {
            let path = path(name)
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(try UploadEndToEndTests.randomBytes(bytes)).write(to: URL(fileURLWithPath: path))
        }

        /// Rewrites `name`'s bytes in place (same size, other bytes), then sets its mtime back to what it was, as
        /// `touch -d` would: only the ctime tells.
        func editKeepingSizeAndMtime(_ name: String) throws {
            let path = path(name)
            var before = stat()
            guard stat(path, &before) == 0 else { throw HarnessError("cannot stat \(name)") }
            let fd = open(path, O_WRONLY)
            guard fd >= 0 else { throw HarnessError("cannot open \(name)") }
            let bytes = try UploadEndToEndTests.randomBytes(Int(before.st_size))
            _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            close(fd)
            var times = [before.st_atim, before.st_mtim]
            guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw HarnessError("cannot set times of \(name)") }
            var after = stat()
            guard stat(path, &after) == 0, after.st_size == before.st_size,
                after.st_mtim.tv_sec == before.st_mtim.tv_sec, after.st_mtim.tv_nsec == before.st_mtim.tv_nsec
            else { throw HarnessError("\(name) did not keep its size and mtime") }
        }

        /// Moves `name`'s mtime to now without changing its bytes (`touch`).
        func touch(_ name: String) throws {
            guard utimensat(AT_FDCWD, path(name), nil, 0) == 0 else { throw HarnessError("cannot touch \(name)") }
        }

        func sha256(_ path: String) throws -> String {
            let digest = SHA256()
            digest.update(try Data(contentsOf: URL(fileURLWithPath: path)))
            return digest.hexDigest
        }
    }

    /// The counts of job `id`'s "already at the destination" log line (`watch` replays it): files known without
    /// reading, files read and hashed; `nil` when it logged none.
    static func compared(_ daemon: DaemonHarness, _ id: String) throws -> (known: Int, read: Int)? {
        let messages = try S3FaultEndToEndTests.logMessages(daemon, id)
        guard let line = messages.last(where: { $0.contains("already at the destination:") }) else { return nil }
        let numbers = line.split(separator: ":").last?.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        guard let numbers, numbers.count >= 2 else { return nil }
        return (numbers[0], numbers[1])
    }

    /// One upload of `folder` to `destination` through `daemon`, with what it says it compared.
    static func upload(_ folder: Folder, to destination: String, daemon: DaemonHarness, extra: [String] = [])
        throws -> (done: JSONValue, compared: (known: Int, read: Int)?)
    {
        let id = try daemon.submitUpload([folder.root, "--to", destination] + extra)
        let done = try daemon.waitForFolder(id, "succeeded", timeout: 120)
        return (done, try compared(daemon, id))
    }

    /// The checks to a directory, on `daemon` (restarted once on the way).
    static func checkDirectory(_ daemon: DaemonHarness) throws {
        let folder = try Folder()
        let out = folder.work.file("out")
        let destination = "file://" + out
        let count = Folder.files.count
        usleep(settle)

        let first = try upload(folder, to: destination, daemon: daemon)
        #expect(first.done["result"]?["tree"]?["uploaded"]?.intValue == Int64(count))

        // Nothing changed: every file known from the memory, none read.
        let second = try upload(folder, to: destination, daemon: daemon)
        #expect(second.done["result"]?["tree"]?["already_there"]?.intValue == Int64(count))
        #expect(second.compared?.known == count)
        #expect(second.compared?.read == 0)

        // Touched (mtime moved, same bytes): read once, found the same, not sent; the next upload knows it again.
        try folder.touch("day1/a.jpg")
        usleep(settle)
        let third = try upload(folder, to: destination, daemon: daemon)
        #expect(third.done["result"]?["tree"]?["already_there"]?.intValue == Int64(count))
        #expect(third.compared?.known == count - 1)
        #expect(third.compared?.read == 1)
        let fourth = try upload(folder, to: destination, daemon: daemon)
        #expect(fourth.compared?.known == count)
        #expect(fourth.compared?.read == 0)

        // Edited in place with its size and mtime put back: the ctime moved, so it is read and sent.
        try folder.editKeepingSizeAndMtime("day1/b.jpg")
        usleep(settle)
        let fifth = try upload(folder, to: destination, daemon: daemon)
        #expect(fifth.done["result"]?["tree"]?["uploaded"]?.intValue == 1)
        #expect(fifth.done["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["day1/b.jpg"])
        #expect(try folder.sha256(out + "/day1/b.jpg") == folder.sha256(folder.path("day1/b.jpg")))

        // After a restart the memory is still there: nothing read.
        _ = try daemon.stop()
        try daemon.start()
        let sixth = try upload(folder, to: destination, daemon: daemon)
        #expect(sixth.done["result"]?["tree"]?["already_there"]?.intValue == Int64(count))
        #expect(sixth.compared?.known == count)
        #expect(sixth.compared?.read == 0)

        // A destination file changed behind the daemon's back is not taken for what it wrote.
        try Data(try UploadEndToEndTests.randomBytes(5_000)).write(to: URL(fileURLWithPath: out + "/day2/c.jpg"))
        let seventh = try upload(folder, to: destination, daemon: daemon)
        #expect(seventh.done["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["day2/c.jpg"])
        #expect(try folder.sha256(out + "/day2/c.jpg") == folder.sha256(folder.path("day2/c.jpg")))

        let again = try upload(folder, to: destination, daemon: daemon, extra: ["--again"])
        #expect(again.done["result"]?["tree"]?["uploaded"]?.intValue == Int64(count))
    }

    @Test func aDirectoryUploadedAgainReadsOnlyFilesWhoseStatChanged() throws {
        try Self.checkDirectory(try DaemonHarness())
    }

    @Test func theStatCacheIsKeptInASharedPostgresStore() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        try Self.checkDirectory(try DaemonHarness(arguments: ["--store", server.socketConnectionString]))
    }

    @Test func s3UploadedAgainIsOneListingAndNoReadNorRequestPerFile() throws {
        let folder = try Folder()
        // A multipart object too (three parts of 5 MiB): its composite ETag is remembered as the server gave it.
        try folder.write("day2/video.bin", bytes: 11 << 20)
        let count = Folder.files.count + 1
        let server = try S3Server()
        let daemon = try DaemonHarness(environment: server.environment())
        let destination = "s3://photos/trips/statcache/"
        usleep(Self.settle)

        let first = try Self.upload(folder, to: destination, daemon: daemon, extra: ["--chunk-size", "5MiB"])
        #expect(first.done["result"]?["tree"]?["uploaded"]?.intValue == Int64(count))
        let before = try server.requests().count

        let second = try Self.upload(folder, to: destination, daemon: daemon, extra: ["--chunk-size", "5MiB"])
        let requests = try server.requests()[before...]
        #expect(second.done["result"]?["tree"]?["already_there"]?.intValue == Int64(count))
        #expect(second.compared?.known == count)
        #expect(second.compared?.read == 0)
        #expect(Set(requests.map(\.action)) == ["ListObjectsV2"], "\(requests.map(\.action))")

        // Edited in place with size and mtime put back: caught by the ctime, sent.
        try folder.editKeepingSizeAndMtime("day1/b.jpg")
        let third = try Self.upload(folder, to: destination, daemon: daemon, extra: ["--chunk-size", "5MiB"])
        #expect(third.done["result"]?["files"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["day1/b.jpg"])
        #expect(
            try server.object("trips/statcache/day1/b.jpg")?.sha256 == folder.sha256(folder.path("day1/b.jpg")))
    }
}
