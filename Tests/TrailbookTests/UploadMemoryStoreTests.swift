import Foundation
import TestSupport
import Testing
import TrailbookPostgres

@testable import TrailbookEngine

/// The upload memory (`UploadMemoryStoring`, issue 35: what jobs uploaded to tus endpoints, which cannot be
/// listed) in both stores, by the same checks: remembered created then complete, read back by destination and
/// names in batches, names compared byte for byte (NFC ≠ NFD, bytes that are not UTF-8), replaced by a later
/// upload of the name, forgotten, with the stat cache's source (`RememberedSource`) or without, pruned by age
/// (`forgetUploads`), and kept when the job that wrote it is pruned by retention.
struct UploadMemoryStoreTests {
    static let endpoint = "http://127.0.0.1:1080/files/"
    static let nfc = Array("day2/caf\u{E9}.jpg".utf8)
    static let nfd = Array("day2/cafe\u{301}.jpg".utf8)
    static let notUTF8: [UInt8] = [0x64, 0xff, 0x2f, 0x00, 0x41]
    static let recent = Array("recent.jpg".utf8)

    func upload(_ name: [UInt8], _ state: RememberedFile.State, job: String, size: Int64 = 10, url: String = "u")
        -> RememberedFile
    {
        RememberedFile(
            destination: Self.endpoint, name: name, size: size, state: state, location: Self.endpoint + url,
            jobID: job, uploadedAt: 1_700_000_000.25)
    }

    /// The checks both stores must pass; `job` and `other` are job ids.
    func check(_ store: some UploadMemoryStoring, job: String, other: String) throws {
        #expect(try store.rememberedUploads(destination: Self.endpoint, names: [Self.nfc]).isEmpty)
        try store.rememberUploads([upload(Self.nfc, .created, job: job, url: "a")])
        #expect(try store.rememberedUploads(destination: Self.endpoint, names: [Self.nfc]) == [
            upload(Self.nfc, .created, job: job, url: "a")
        ])
        // Complete replaces created; the NFD twin and a name that is not UTF-8 are names of their own.
        let sha = String(repeating: "ab", count: 32)
        try store.rememberUploads([
            upload(Self.nfc, .complete(sha256: sha), job: job, url: "a"),
            upload(Self.nfd, .complete(sha256: sha), job: job, size: 11, url: "b"),
            upload(Self.notUTF8, .created, job: job, url: "c"),
        ])
        let read = try store.rememberedUploads(destination: Self.endpoint, names: [Self.nfc, Self.nfd, Self.notUTF8])
        #expect(Set(read.map(\.name)) == [Self.nfc, Self.nfd, Self.notUTF8])
        #expect(read.first { $0.name == Self.nfc } == upload(Self.nfc, .complete(sha256: sha), job: job, url: "a"))
        #expect(read.first { $0.name == Self.nfd }?.size == 11)
        #expect(read.first { $0.name == Self.notUTF8 }?.state == .created)
        // Another endpoint holds nothing under those names.
        #expect(try store.rememberedUploads(destination: Self.endpoint + "x/", names: [Self.nfc]).isEmpty)
        // A later upload of the name by another job replaces it.
        try store.rememberUploads([upload(Self.nfc, .complete(sha256: sha), job: other, size: 12, url: "d")])
        let replaced = try store.rememberedUploads(destination: Self.endpoint, names: [Self.nfc])
        #expect(replaced.map(\.jobID) == [other])
        #expect(replaced.map(\.location) == [Self.endpoint + "d"])
        try store.forgetUpload(destination: Self.endpoint, name: Self.notUTF8)
        #expect(try store.rememberedUploads(destination: Self.endpoint, names: [Self.notUTF8]).isEmpty)
        // Many names in one read.
        let many = (0..<600).map { Array("many/\($0).jpg".utf8) }
        try store.rememberUploads(many.map { upload($0, .complete(sha256: sha), job: job) })
        #expect(try store.rememberedUploads(destination: Self.endpoint, names: many).count == 600)

        // The stat cache: a row's source with its stat (64-bit numbers past Int64.max and a path that is not
        // UTF-8 kept exactly), and a row without one.
        let source = RememberedSource(
            path: [0x2f, 0x66, 0xff], device: UInt64.max - 3, inode: 1 << 63 + 5, size: 10,
            modifiedNanoseconds: 1_700_000_000_123_456_789, changedNanoseconds: 1_700_000_001_987_654_321)
        var cached = upload(Self.nfd, .complete(sha256: sha), job: job, url: "e")
        cached.source = source
        try store.rememberUploads([cached])
        #expect(try store.rememberedUploads(destination: Self.endpoint, names: [Self.nfd]) == [cached])
        #expect(try store.rememberedUploads(destination: Self.endpoint, names: [Self.nfc]).first?.source == nil)

        // The prune by age forgets what was written before the cutoff, whatever its destination.
        var recent = upload(Self.recent, .complete(sha256: sha), job: job)
        recent.uploadedAt = 1_800_000_000
        recent.destination = "file://"
        try store.rememberUploads([recent])
        #expect(try store.forgetUploads(rememberedBefore: 1_750_000_000) == 602)
        #expect(try store.rememberedUploads(destination: Self.endpoint, names: [Self.nfc, Self.nfd] + many).isEmpty)
        #expect(try store.rememberedUploads(destination: "file://", names: [recent.name]) == [recent])
    }

    @Test func sqliteStoreRemembersUploadsBeyondTheJobsThatMadeThem() throws {
        let path = NSTemporaryDirectory() + "/memory-\(UUID().uuidString).sqlite3"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try JobStore(path: path)
        var record = JobEntryStoreTests().job(1)
        try store.insert(&record)
        try check(store, job: record.id, other: JobEntryStoreTests().job(2).id)

        // Kept when retention prunes the job that wrote it.
        record.state = .succeeded
        try store.update(record, addingCleanUp: false)
        try store.database.query("UPDATE jobs SET updated_at = 1000 WHERE id = ?", [.text(record.id)])
        #expect(try store.pruneEnded(state: .succeeded, endedBefore: 2_000, limit: 10).map(\.id) == [record.id])
        #expect(try store.rememberedUploads(destination: "file://", names: [Self.recent]).map(\.jobID) == [record.id])
    }

    @Test func sharedStoreRemembersUploadsForEveryDaemon() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let connection = try PostgresConnectionString(server.socketConnectionString)
        let store = try PostgresJobStore(connectionString: connection, options: SharedStoreOptions())
        var jobs = [JobEntryStoreTests().job(1, .queued)]
        try store.insert(&jobs, digests: [nil], duplicateKeys: [[]])
        try check(store, job: jobs[0].id, other: JobEntryStoreTests().job(2).id)

        // Another daemon of the store reads the same memory.
        let second = try PostgresJobStore(connectionString: connection, options: SharedStoreOptions())
        #expect(try second.rememberedUploads(destination: "file://", names: [Self.recent]).map(\.size) == [10])

        // Kept when retention prunes the job that wrote it.
        var ended = jobs[0]
        ended.state = .succeeded
        try store.update(ended, addingCleanUp: false)
        #expect(
            try store.pruneEnded(state: .succeeded, endedBefore: Timestamp.now() + 1, limit: 10).map(\.id)
                == [ended.id])
        #expect(try store.rememberedUploads(destination: "file://", names: [Self.recent]).map(\.jobID) == [ended.id])
    }
}

/// The store key of a name: hex of its bytes, back to the same bytes.
struct RememberedFileKeyTests {
    @Test func keysRoundTripAnyBytes() {
        for name in [[], UploadMemoryStoreTests.nfc, UploadMemoryStoreTests.notUTF8, Array(0...255)] as [[UInt8]] {
            #expect(RememberedFile.name(ofKey: RememberedFile.key(name)) == name)
        }
        #expect(RememberedFile.key([0x00, 0xab, 0x7f]) == "00ab7f")
        #expect(RememberedFile.name(ofKey: "0g") == nil)
        #expect(RememberedFile.name(ofKey: "abc") == nil)
    }
}
