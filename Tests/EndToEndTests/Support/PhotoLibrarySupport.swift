import Foundation
import PhotoLibrary
import Testing
import TrailbookEngine
import TrailbookSQLite

/// Photo-library helpers for the end-to-end tests: a synthetic library made with direct SQL, process lookups.
enum PhotoTestSupport {
    /// Creates the photo store at `path` with `count` synthetic photos (no files behind them), by one SQL
    /// statement, and returns their stable IDs in local-ID order.
    @discardableResult
    static func syntheticLibrary(at path: String, count: Int) throws -> [String] {
        let store = try PhotoStore(path: path)
        _ = try store.database.transaction {
            try store.database.query(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO photos (stable_id, path, bytes, mtime_ns, inode)
                SELECT printf('%08x-0000-4000-8000-%012x', i, i), '/synthetic/' || i || '.jpg', 1000, 0, i FROM n
                """, [.integer(Int64(count))])
        }
        return try store.database.query("SELECT stable_id FROM photos ORDER BY id").compactMap { $0.text(0) }
    }

    /// How many photos hold `tag`, read from the store at `path`.
    static func tagCount(_ tag: String, storeAt path: String) throws -> Int {
        let database = try Database(path: path)
        return Int(try database.query("SELECT count(*) FROM tags WHERE tag = ?", [.text(tag)]).first?.int(0) ?? -1)
    }

    /// Whether the photo store at `path` still holds a checkpoint for job `id`.
    static func hasCheckpoint(job id: String, storeAt path: String) throws -> Bool {
        let database = try Database(path: path)
        return try !database.query("SELECT 1 FROM job_checkpoints WHERE job_id = ?", [.text(id)]).isEmpty
    }

    /// Process ids of the children of `parent` (from /proc/PID/stat).
    static func children(of parent: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { name -> Int32? in
            guard let pid = Int32(name), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 2 && Int32(fields[1]) == parent ? pid : nil
        }
    }

    /// The state letter of `pid` (`R` running, `S` sleeping, `Z` zombie), from /proc/PID/stat.
    static func processState(_ pid: Int32) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ").first?.first
    }

    /// Peak resident set size (`VmHWM`) of `pid`, in kibibytes.
    static func peakRSSKiB(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
        return line.flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true)[1]) }
    }

    /// Writes `bytes` to `path`.
    static func write(_ bytes: [UInt8], _ path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
    }
}

extension DaemonHarness {
    /// Runs the CLI and decodes its stdout as JSON; records the output when it fails.
    func cliJSON(_ arguments: [String]) throws -> JSONValue {
        let result = try cli(arguments)
        guard result.status == 0 else {
            throw HarnessError("\(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
        }
        // `--wait --json` prints the submitted job, then the final one: take the last JSON document.
        let text = result.stdout
        if let whole = try? JSONCoding.decode(JSONValue.self, from: Array(text.utf8)) { return whole }
        if let start = text.range(of: "\n{", options: .backwards) {
            return try JSONCoding.decode(JSONValue.self, from: Array(text[text.index(after: start.lowerBound)...].utf8))
        }
        return try JSONCoding.decode(JSONValue.self, from: Array(text.utf8))
    }

    /// Submits a job through the protocol and returns its id.
    func submit(_ kind: String, _ params: JSONValue, options: JSONValue = [:]) throws -> String {
        try job(["op": "submit", "kind": .string(kind), "params": params, "options": options])["id"]?.stringValue ?? ""
    }
}
