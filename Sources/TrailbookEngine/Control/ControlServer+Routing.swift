import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

// Routing: each request line parsed, its op answered, and the reply put in its place on the connection.
extension ControlServer {
    /// Handles one request line, whose reply goes to `place`. Returns once it is answered, or, for a submit, once
    /// its jobs wait for the group commit: the connection's next submit is then checked meanwhile, so submits
    /// pipelined on one connection share a group instead of costing one commit each. Any other request waits
    /// until every earlier one is answered, as if all were handled one at a time.
    func handle(_ line: [UInt8], on connection: Connection, at place: Int) async {
        let request: JSONValue
        do {
            // Our own bounded parser, never Foundation's decoder: see `JSONParser` for why.
            request = try JSONParser.parse(line)
        } catch {
            return connection.replies.fill(place, with: Self.errorLine(Self.refusal(error)))
        }
        let op = request["op"]?.stringValue
        guard op == "submit" || op == "submit_batch" else {
            await connection.replies.answered(leaving: 1)
            return await answer(request, on: connection, at: place, whenQueued: nil)
        }
        // At most `maxQueuedRequests` submits of one connection wait for their commit at once.
        await connection.replies.answered(leaving: Self.maxQueuedRequests)
        let turn = RequestTurn()
        Task.onLoop {
            await self.answer(request, on: connection, at: place, whenQueued: turn.end)
            turn.end()
        }
        await turn.over()
    }

    /// Answers `request` in its `place`; `whenQueued` runs when a submit's jobs wait for the group commit.
    func answer(
        _ request: JSONValue, on connection: Connection, at place: Int, whenQueued: (@LoopActor () -> Void)?
    ) async {
        let line: [UInt8]?
        do {
            let response = try await respond(to: request, on: connection, whenQueued: whenQueued)
            line = response.isNull ? nil : JSONCoding.encode(response) + [0x0A]
        } catch let error as BatchError {
            line = Self.errorLine(error.error, index: error.index)
        } catch let error as JobError {
            line = Self.errorLine(error)
        } catch {
            line = Self.errorLine(JobError(code: "internal", message: "\(error)"))
        }
        connection.replies.fill(place, with: line)
    }

    /// The reply to one request.
    /// - Throws: `JobError`, or `BatchError` for a refused `submit_batch`.
    func respond(
        to request: JSONValue, on connection: Connection, whenQueued: (@LoopActor () -> Void)?
    ) async throws -> JSONValue {
        guard case .object = request else {
            throw JobError(code: "bad_request", message: "a request is a JSON object with an \"op\"")
        }
        guard let op = try string(request, "op") else {
            throw JobError(code: "bad_request", message: "request has no \"op\" string")
        }
        if let known = Self.knownMembers[op] { try Self.refuseUnknownMembers(of: request, known: known, in: op) }
        switch op {
        case "ping":
            return [
                "ok": true, "version": .string(version), "pid": .number(Double(getpid())),
                "kinds": .array(scheduler.kindNames.map { .string($0) }), "feed_seq": .number(Double(scheduler.feed.lastSeq)),
            ]
        case "submit":
            let submit = try submitRequest(request, op: "submit")
            let submitted: Submitted
            do {
                submitted = try await scheduler.submit([submit], whenQueued: whenQueued)[0]
            } catch {
                throw error.error
            }
            // `existing`: the key was known, and this is the job it made before (a retried submit).
            return ["ok": true, "job": submitted.job.json, "existing": .bool(submitted.existing)]
        case "submit_batch":
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
        case "list":
            let states = try strings(request, "states")?.map { (name: String) throws(JobError) -> JobState in
                guard let state = JobState(rawValue: name) else {
                    throw JobError(code: "bad_request", message: "unknown state \(Self.shortText(.string(name)))")
                }
                return state
            }
            let kind = try string(request, "kind")
            if let kind { try checkKinds([kind]) }
            let limit = try wholeNumber(request, "limit") ?? 1_000
            // 0 or less asked for nothing that makes sense (it was quietly read as 1); more than 100 000 is capped.
            guard limit >= 1 else {
                throw JobError(code: "bad_request", message: "\"limit\" must be 1 or more (the newest N jobs), not \(limit)")
            }
            // A page's cursor: the `sequence` of the oldest job of the page before (sequences start at 1).
            let before = try wholeNumber(request, "before")
            if let before, before < 1 {
                throw JobError(
                    code: "bad_request",
                    message: "\"before\" must be a job's \"sequence\" (1 or more; the oldest job of the page before), "
                        + "not \(before)")
            }
            // One list (or replay) built at a time, in about half the loop's time at most (`TurnGate`): a crowd
            // asking for big lists never stalls the rest.
            await heavyGate.enter()
            let building = Timestamp.monotonic()
            // Twice the build's time: its reply is encoded and written after it, in the same turn.
            defer { heavyGate.leave(pause: 2 * (Timestamp.monotonic() - building)) }
            // A client dropped while it waited (gone, or holding too much unread) gets nothing built.
            guard !connection.pipe.isClosing else { return .null }
            let (jobs, unfinished) = try await scheduler.fetchList(
                states: states, kind: kind, before: before, limit: Int(min(limit, 100_000)))
            // The counts of unfinished jobs in every state, from the scheduler's counters: a summary (`watch`)
            // needs them without loading a million queued jobs. On a shared store, every daemon's (the store's).
            let counts = unfinished.filter { $0.value > 0 }.map { ($0.key.rawValue, JSONValue.number(Double($0.value))) }
            return ["ok": true, "jobs": .array(jobs.map(\.json)), "counts": .object(Dictionary(uniqueKeysWithValues: counts))]
        case "files":
            // One page of a job's file list (`show ID --files`; Entries/JobFilesRequest.swift).
            let files = try JobFilesRequest(request)
            return try files.answer(id: try await scheduler.fetchJob(files.job).id, store: scheduler.entryStore)
        case "show", "cancel", "pause", "resume":
            guard let id = try string(request, "job") else {
                throw JobError(code: "bad_request", message: "\(op) needs a \"job\" id")
            }
            let job: JobRecord
            switch op {
            case "show": job = try await scheduler.fetchJob(id)
            case "cancel": job = try await scheduler.cancel(id)
            case "pause": job = try await scheduler.pause(id)
            default:
                // `headers` (an upload's new credentials) replace those of the same name; see `JobKind.amend`.
                let headers = try strings(request, "headers")
                job = try await scheduler.resume(id, changes: headers.map { ["headers": .array($0.map { .string($0) })] })
            }
            return ["ok": true, "job": job.json]
        case "prune":
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
        case "watch":
            let since = try wholeNumber(request, "since")
            let jobs = Set(try strings(request, "jobs") ?? [])
            let kinds = Set(try strings(request, "kinds") ?? [])
            try checkKinds(kinds)
            // The replay (up to 4 MiB) is heavy work too: a crowd of watchers subscribing from 0 waits its turns.
            await heavyGate.enter()
            let building = Timestamp.monotonic()
            defer { heavyGate.leave(pause: Timestamp.monotonic() - building) }
            guard !connection.pipe.isClosing else { return .null }
            connection.watching = true
            let header: JSONValue = [
                "ok": true, "watching": true, "seq": .number(Double(scheduler.feed.lastSeq)),
                "oldest": scheduler.feed.oldestSeq.map { .number(Double($0)) } ?? .null,
            ]
            reply(connection.pipe, JSONCoding.encode(header) + [0x0A])
            let replay = scheduler.feed.subscribe(connection.pipe, since: since, jobs: jobs, kinds: kinds)
            if case .incomplete(let message) = replay { connection.pipe.write(ProgressFeed.gapLine(message)) }
            if connection.pipe.pendingWriteBytes > 0 { unreadLimit.check() }
            return .null
        default:
            throw JobError(
                code: "unknown_op",
                message: "unknown op '\(op)'; known: ping, submit, submit_batch, list, show, files, cancel, pause, resume, watch, prune")
        }
    }
}
