import TrailbookLoop

// Routing: each request line parsed, dispatched by its op to its family's function, and the reply put in its place
// on the connection.
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

    /// The reply to one request: its members checked against the op's (`knownMembers`), then answered by the op's
    /// family: submits (`ControlServer+Submits.swift`), lookups (`+Lookups`), control of a job (`+JobControl`),
    /// `prune` (`+Prune`) and the feed (`+Watch`).
    /// - Throws: `JobError` (`bad_request`, `unknown_op`, or the op's), or `BatchError` for a refused
    ///   `submit_batch`.
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
        case "ping": return pong()
        case "submit": return try await submit(request, whenQueued: whenQueued)
        case "submit_batch": return try await submitBatch(request, whenQueued: whenQueued)
        case "list": return try await list(request, on: connection)
        case "show": return try await show(request)
        case "files": return try await files(request)
        case "cancel", "pause", "resume": return try await control(request, op: op)
        case "prune": return try await prune(request)
        case "watch": return try await watch(request, on: connection)
        default:
            throw JobError(
                code: "unknown_op",
                message: "unknown op '\(op)'; known: ping, submit, submit_batch, list, show, files, cancel, pause, resume, watch, prune")
        }
    }
}
