import TrailbookLoop

// Submits: `submit` and `submit_batch`, answered once their jobs are written with the turn's group commit.
extension ControlServer {
    /// `submit`: one job; `whenQueued` runs once it waits for the group commit.
    /// - Returns: `ok`, the `job`, and `existing` (its key was known: the job it made before, a retried submit).
    /// - Throws: `JobError`: the request's (`bad_request`, `unknown_kind`, `invalid_options`, …) or the submit's.
    func submit(_ request: JSONValue, whenQueued: (@LoopActor () -> Void)?) async throws -> JSONValue {
        let submit = try submitRequest(request, op: "submit")
        let submitted: Submitted
        do {
            submitted = try await scheduler.submit([submit], whenQueued: whenQueued)[0]
        } catch {
            throw error.error
        }
        // `existing`: the key was known, and this is the job it made before (a retried submit).
        return ["ok": true, "job": submitted.job.json, "existing": .bool(submitted.existing)]
    }

    /// `submit_batch`: every job of `jobs` or none; `whenQueued` runs once they wait for the group commit.
    /// - Returns: `ok`, the `ids` in order, and `existing` for each.
    /// - Throws: `JobError` `bad_request` for a missing or empty `jobs`; `BatchError` naming the first refused job.
    func submitBatch(_ request: JSONValue, whenQueued: (@LoopActor () -> Void)?) async throws -> JSONValue {
        guard let entries = try member(request, "jobs", "an array of objects", \.arrayValue) else {
            throw JobError(code: "bad_request", message: "submit_batch needs \"jobs\": an array of submit objects")
        }
        guard !entries.isEmpty else {
            throw JobError(code: "bad_request", message: "submit_batch needs at least one job in \"jobs\"")
        }
        var requests: [SubmitRequest] = []
        requests.reserveCapacity(entries.count)
        // In slices, as the scheduler checks them: a batch of thousands lets other clients in between.
        var slice = Scheduler.LoopSlice()
        for (index, entry) in entries.enumerated() {
            _ = await slice.pause()
            do {
                requests.append(try submitRequest(entry, op: "a submit_batch job"))
            } catch {
                throw Self.batchError(SubmitRefusal(index: index, error: error))
            }
        }
        let submitted: [Submitted]
        do {
            submitted = try await scheduler.submit(requests, whenQueued: whenQueued)
        } catch {
            throw Self.batchError(error)
        }
        return [
            "ok": true, "ids": .array(submitted.map { .string($0.job.id) }),
            "existing": .array(submitted.map { .bool($0.existing) }),
        ]
    }
}
