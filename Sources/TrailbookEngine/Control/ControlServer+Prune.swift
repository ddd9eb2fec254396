import TrailbookLoop

// `prune`: ended jobs deleted now rather than at retention's next pass.
extension ControlServer {
    /// `prune`: deletes every ended job older than `older_than_s` seconds, or, without it, each state's retention
    /// (`daemon --keep-*`).
    /// - Returns: retention's report (`PruneReport.json`) with `ok`.
    /// - Throws: `JobError` `bad_request` for an `older_than_s` that is not a number of seconds, 0 or more;
    ///   `invalid_state` while another daemon sharing the store prunes; `store_write_failed` when the store refused
    ///   a write part-way (what was pruned stays pruned).
    func prune(_ request: JSONValue) async throws -> JSONValue {
        // `older_than_s`: every ended job older than that; absent, each state's retention (`daemon --keep-*`).
        let olderThan = try member(request, "older_than_s", "a number of seconds, 0 or more") { value -> Double? in
            value.doubleValue.flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
        }
        let report = await retention.prune(olderThan: olderThan)
        if report.busy {
            throw JobError(
                code: "invalid_state",
                message: "another daemon sharing the job store is pruning now; try again once it is done")
        }
        if let error = report.error {
            throw JobError(
                code: "store_write_failed",
                message: "pruned \(report.total) jobs, then the job store refused a write (\(error)); run prune again later")
        }
        guard case .object(var members) = report.json else { return report.json }
        // A success has no `error` member at all, as every other reply (the report's own is null here).
        members["error"] = nil
        members["ok"] = true
        return .object(members)
    }
}
