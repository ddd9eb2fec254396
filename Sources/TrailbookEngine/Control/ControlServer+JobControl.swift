import TrailbookLoop

// Control of one job: `cancel`, `pause` and `resume` (also of runs on other daemons sharing the store).
extension ControlServer {
    /// `cancel`, `pause` or `resume` (`op`) of the job whose id is or starts with `job`; `resume` takes
    /// `headers`, an upload's new credentials, which replace those of the same name (`JobKind.amend`).
    /// - Returns: `ok` and the `job` as it is afterwards.
    /// - Throws: `JobError` `bad_request` without a `job`, and what `Scheduler.cancel`, `pause` and `resume` throw.
    func control(_ request: JSONValue, op: String) async throws -> JSONValue {
        let id = try jobID(request, op: op)
        let job: JobRecord
        switch op {
        case "cancel": job = try await scheduler.cancel(id)
        case "pause": job = try await scheduler.pause(id)
        default:
            let headers = try strings(request, "headers")
            job = try await scheduler.resume(id, changes: headers.map { ["headers": .array($0.map { .string($0) })] })
        }
        return ["ok": true, "job": job.json]
    }
}
