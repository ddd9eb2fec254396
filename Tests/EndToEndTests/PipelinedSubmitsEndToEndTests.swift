import Foundation
import Testing
import TrailbookCLI
import TrailbookEngine

/// Submits pipelined on one control connection (issue 40): each used to be checked only once the one before it
/// was committed and answered, so on the shared store every single submit cost a transaction of its own. Now the
/// next submit is checked while the earlier ones wait for their commit, and they share group commits; replies
/// still come in request order, and any other request still sees every earlier one answered.
@Suite(.serialized)
struct PipelinedSubmitsEndToEndTests {
    private func psql(_ server: PostgresServer, _ sql: String) throws -> String {
        let result = try DaemonHarness.run(server.psqlPath, [server.socketConnectionString, "-At", "-c", sql])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func submitsPipelinedOnOneConnectionShareCommitsAndAreAnsweredInOrder() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let daemon = try DaemonHarness(arguments: ["--store", server.socketConnectionString])
        let count = 64
        var bytes: [UInt8] = []
        for index in 0..<count {
            // A queue this daemon does not serve: the jobs stay as their submit wrote them (one transaction id,
            // `xmin`, per group commit that inserted them).
            let request: JSONValue = [
                "op": "submit", "kind": "sleep", "params": ["units": .number(Double(index)), "unit_ms": 1],
                "options": ["queue": "elsewhere"],
            ]
            bytes += JSONCoding.encode(request) + [0x0A]
        }
        // After them, a `list`: handled only once every submit before it is answered, so it sees them all.
        bytes += JSONCoding.encode(["op": "list", "limit": 500] as JSONValue) + [0x0A]
        let replies = try daemon.rawReplies(bytes, count: count + 1, replyTimeout: 30)
        try #require(replies.count == count + 1, "\(replies.count) replies: \(daemon.log().suffix(2_000))")
        var ids: [String] = []
        for (index, reply) in replies.prefix(count).enumerated() {
            #expect(reply["ok"]?.boolValue == true, "\(reply)")
            // In request order: reply i is the job of request i.
            #expect(reply["job"]?["params"]?["units"]?.intValue == Int64(index), "reply \(index): \(reply)")
            ids.append(reply["job"]?["id"]?.stringValue ?? "")
        }
        let listed = Set((replies[count]["jobs"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue })
        #expect(listed.isSuperset(of: ids), "the list pipelined after the submits misses some of them")
        // Every answered job is in the store, and they took fewer commits than submits (at most half as many: one
        // each before).
        let stored = try psql(
            server, "SELECT count(*) || ' ' || count(DISTINCT xmin::text) FROM trailbook_jobs WHERE queue = 'elsewhere'")
        let figures = stored.split(separator: " ").compactMap { Int($0) }
        try #require(figures.count == 2, "\(stored)")
        #expect(figures[0] == count)
        #expect(figures[1] <= count / 2, "\(figures[1]) transactions for \(count) pipelined submits")
    }

    /// Pipelined batches share groups only up to `GroupCommit.maxGroupJobs` new jobs: three batches of 1 500 are
    /// three transactions. One group of everything a client pipelined (hundreds of batches) outlasted the store's
    /// request timeout under load, and each of its submits was then tried alone, holding the loop.
    @Test func pipelinedBatchesShareGroupsOnlyUpToTheCap() throws {
        let server = try PostgresServer()
        defer { server.stop() }
        let daemon = try DaemonHarness(arguments: ["--store", server.socketConnectionString])
        let entry: JSONValue = ["kind": "sleep", "params": ["units": 1, "unit_ms": 1], "options": ["queue": "elsewhere"]]
        let batch: JSONValue = ["op": "submit_batch", "jobs": .array(Array(repeating: entry, count: 1_500))]
        let line: [UInt8] = JSONCoding.encode(batch) + [0x0A]
        let bytes = line + line + line
        let replies = try daemon.rawReplies(bytes, count: 3, replyTimeout: 60)
        try #require(replies.count == 3, "\(replies.count) replies: \(daemon.log().suffix(2_000))")
        for reply in replies { #expect(reply["ok"]?.boolValue == true, "\(reply)") }
        let stored = try psql(
            server, "SELECT count(*) || ' ' || count(DISTINCT xmin::text) FROM trailbook_jobs WHERE queue = 'elsewhere'")
        #expect(stored == "4500 3", "jobs and transactions: \(stored)")
    }
}
