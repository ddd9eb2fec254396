import Foundation
import Testing
import TrailbookJobsTesting

@testable import TrailbookEngine
@testable import UploadJob

/// Long reads that move no byte of a job's unit — hashing a file to compare it with the destination's copy,
/// hashing what a resume kept — report each step as the job's phase (`JobContext.reportPhase`), the stall
/// timeout's heartbeat: without it a file of many GiB is stopped as stalled before it is read.
@Suite struct HashingPhaseTests {
    /// A kind that hashes the file `path` with `SteppedSHA256` in steps of 256 KiB.
    private struct HashInSteps: JobKind {
        struct Params: Codable, Sendable { let path: String }
        static let name = "hash-in-steps"
        static let traits = JobKindTraits(
            unit: .bytes, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool])

        func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
            let digest = try await SteppedSHA256.hexDigest(of: BytePath(params.path), flags: 0, step: 256 << 10, in: job)
            return digest.map { .string($0) } ?? .null
        }
    }

    /// A kind that compares `source` with `target` as a folder upload to `file://` compares a file too large to
    /// read in one pool call (`DirectoryTreeSync.compareInSteps`), with nothing remembered.
    private struct CompareInSteps: JobKind {
        struct Params: Codable, Sendable {
            let source: String
            let target: String
        }
        static let name = "compare-in-steps"
        static let traits = JobKindTraits(
            unit: .bytes, isLongRunning: true, executionTargets: [.daemonLoop, .threadPool])

        func run(_ params: Params, in job: JobContext) async throws -> JSONValue {
            let target = BytePath(params.target)
            guard let identity = DirectoryTreeSync.regularFile(target),
                let signature = DirectoryTreeSync.signature(identity)
            else { return "no destination file" }
            let candidate = DirectoryTreeSync.Candidate(
                source: BytePath(params.source), target: target, size: identity.size, knownSHA256: nil,
                remembered: nil)
            switch try await DirectoryTreeSync.compareInSteps(candidate, signature: signature, in: job) {
            case .same(let sha256, _): return .string(sha256)
            case .differs: return "differs"
            case .sameAsRemembered, .hashInSteps: return "unexpected"
            }
        }
    }

    @Test func aFileHashedInStepsReportsEachStepAsThePhase() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = try scratch.source("big.bin", count: (1 << 20) + 5, seed: 7)
        let harness = JobKindHarness(HashInSteps(), params: .init(path: source.path))
        let attempt = await harness.runAttempt()
        #expect(attempt.error == nil)
        #expect(attempt.output == .string(SHA256.hexDigest(of: source.bytes)))
        let phases = await harness.progressReports.compactMap(\.phase)
        #expect(phases.map(\.count) == [262_144, 524_288, 786_432, 1_048_576, 1_048_581])
        #expect(phases.allSatisfy { $0.label == "hashing to compare" && $0.unit == .bytes })
    }

    @Test func anUnreadableFileHashesToNothing() async throws {
        let harness = JobKindHarness(HashInSteps(), params: .init(path: "/nonexistent/\(UUID().uuidString)"))
        let attempt = await harness.runAttempt()
        #expect(attempt.state == .succeeded)
        #expect(attempt.output == .null)
    }

    /// The same bytes at both ends are proven by reading both, each in steps reported; one byte changed is not.
    @Test func aLargeFileIsComparedInReportedSteps() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = try scratch.source("photo.bin", count: 3 << 20, seed: 11)
        let copy = scratch.dst + "/photo.bin"
        try Data(source.bytes).write(to: URL(fileURLWithPath: copy))
        let same = JobKindHarness(CompareInSteps(), params: .init(source: source.path, target: copy))
        #expect(await same.runAttempt().output == .string(SHA256.hexDigest(of: source.bytes)))
        // Both copies read: the source's steps, then the destination's, each counted from 0.
        let counts = await same.progressReports.compactMap(\.phase).map(\.count)
        #expect(counts.filter { $0 == 3 << 20 }.count == 2, "both copies hashed whole: \(counts)")

        var edited = source.bytes
        edited[edited.count / 2] ^= 0xFF
        try Data(edited).write(to: URL(fileURLWithPath: copy))
        let differs = JobKindHarness(CompareInSteps(), params: .init(source: source.path, target: copy))
        #expect(await differs.runAttempt().output == "differs")
    }

    /// A pool call of comparisons reads at most `bytesPerCall` (both copies counted) and `filesPerCall` files; a
    /// file larger than that goes alone.
    @Test func comparisonsAreCutIntoCallsByFilesAndBytes() {
        let kib: Int64 = 1 << 10
        let mib: Int64 = 1 << 20
        #expect(DirectoryTreeSync.callEnd(from: 0, sizes: Array(repeating: kib, count: 1000), filesPerCall: 256) == 256)
        #expect(DirectoryTreeSync.callEnd(from: 990, sizes: Array(repeating: kib, count: 1000)) == 1000)
        let photos = Array(repeating: 12 * mib, count: 50)
        #expect(DirectoryTreeSync.callEnd(from: 0, sizes: photos, bytesPerCall: 256 * mib) == 10)
        let video = [4 * mib, 1 << 30, 4 * mib]
        #expect(DirectoryTreeSync.callEnd(from: 0, sizes: video, bytesPerCall: 256 * mib) == 1)
        #expect(DirectoryTreeSync.callEnd(from: 1, sizes: video, bytesPerCall: 256 * mib) == 2, "alone")
        #expect(DirectoryTreeSync.callEnd(from: 2, sizes: video, bytesPerCall: 256 * mib) == 3)
    }

    /// A `file://` upload resumed deep into a file reads back what the `.part` holds before it copies on; each step
    /// is reported as the phase "hashing what was already sent", and the phase ends before copying goes on.
    @Test func aResumeWithinAFileReportsItsReadBack() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // 18 MiB (more than a batch takes, so it is copied in chunks and resumed within): one pseudo-random MiB,
        // each copy marked by its first byte (`Scratch.source` would draw 18 Mi bytes one at a time).
        let block = try scratch.source("block.bin", count: 1 << 20, seed: 3).bytes
        var bytes: [UInt8] = []
        for copy in 0..<18 {
            bytes += block
            bytes[copy << 20] = UInt8(copy)
        }
        let source = (path: scratch.src + "/video.bin", bytes: bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: source.path))
        let params = UploadJob.Params(
            files: [BytePath(source.path)], to: "file://" + scratch.dst, chunkSize: 1 << 20)
        let harness = JobKindHarness(UploadJob(), params: params)
        let first = await harness.runAttempt(stoppingAt: .progress(atLeast: 12 << 20), reason: .timeout)
        #expect(first.state == .needsRetry)
        #expect(await harness.progressReports.allSatisfy { $0.phase == nil }, "no read-back in a first run")

        let second = await harness.runAttempt()
        #expect(second.state == .succeeded)
        #expect(try scratch.bytes(scratch.dst + "/video.bin") == source.bytes)
        let readBack = await harness.progressReports.compactMap(\.phase).filter {
            $0.label == "hashing what was already sent"
        }
        #expect(readBack.count >= 2, "read back in steps of 8 MiB: \(readBack.map(\.count))")
        #expect(readBack.map(\.count) == readBack.map(\.count).sorted(), "the count only grows")
        #expect(await harness.progressReports.last?.phase == nil, "the phase ended")
    }
}
