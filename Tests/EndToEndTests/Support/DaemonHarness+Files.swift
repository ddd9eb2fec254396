import Foundation
import TrailbookEngine

extension DaemonHarness {
    /// The files of a folder upload that landed, read from its file list page by page (the `files` request, what
    /// `show ID --files` shows): a folder upload's result holds counts and bytes only. Each row as the result used
    /// to list them: `{"name", "sha256", "path", "url", "source"}` (`path` and `url` are both the file's location:
    /// the destination path, `s3://BUCKET/KEY` or the tus upload URL).
    func landedFiles(_ id: String, state: String = "done") throws -> [JSONValue] {
        var rows: [JSONValue] = []
        var after: JSONValue = .number(-1)
        while true {
            let reply = try request([
                "op": "files", "job": .string(id), "state": .string(state), "after": after, "limit": 10_000,
            ])
            guard reply["ok"]?.boolValue == true, let page = reply["files"]?.arrayValue else {
                throw HarnessError("files failed: \(String(decoding: JSONCoding.encode(reply), as: UTF8.self))")
            }
            for entry in page {
                let location = entry["message"] ?? .null
                rows.append([
                    "name": entry["item"]?["name"] ?? .null, "sha256": entry["code"] ?? .null, "path": location,
                    "url": location, "source": entry["item"]?["path"] ?? .null,
                ])
            }
            guard let next = reply["next_after"], !next.isNull else { return rows }
            after = next
        }
    }
}

extension DaemonHarness {
    /// `waitForState` of a folder upload, with its result's `"files"` (empty in the job's own result, which holds
    /// counts and bytes) filled in from its file list (`landedFiles`), so a test can check every file landed.
    func waitForFolder(_ id: String, _ state: String, timeout: Double = 30) throws -> JSONValue {
        let done = try waitForState(id, state, timeout: timeout)
        guard case .object(var job) = done, case .object(var result)? = job["result"] else { return done }
        guard result["files"]?.arrayValue?.isEmpty != false else {
            throw HarnessError("a folder upload's result lists files: \(result["files"]?.arrayValue?.count ?? 0)")
        }
        result["files"] = .array(try landedFiles(id))
        job["result"] = .object(result)
        return .object(job)
    }
}
