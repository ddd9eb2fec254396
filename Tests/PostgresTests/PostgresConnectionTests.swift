import Foundation
import Testing
import TestSupport
import TrailbookLoop
import TrailbookPostgres

/// Starts a throwaway server (off the loop: `initdb` and `pg_ctl` block), runs `body` on the loop, stops the
/// server whatever happens.
func withPostgresServer(_ body: @LoopActor (PostgresServer) async throws -> Void) async throws {
    _ = MainLoopThread.started
    let server = try PostgresServer()
    defer { server.stop() }
    try await body(server)
}

/// A connected connection to `server` through its Unix socket.
@LoopActor
func connected(to server: PostgresServer, policy: PostgresReconnectPolicy = PostgresReconnectPolicy()) async throws
    -> PostgresConnection
{
    let connection = PostgresConnection(
        loop: .main, connectionString: try PostgresConnectionString(server.socketConnectionString), reconnectPolicy: policy)
    try await connection.connect()
    return connection
}

/// Waits (polling every 5 ms, on the loop) until `condition` holds or `seconds` pass; returns whether it held.
@LoopActor
func eventually(within seconds: Double, _ condition: @LoopActor () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

@Suite(.serialized)
struct PostgresConnectionStringTests {
    @Test func uriPasswordIsRedactedInEveryPrintedForm() throws {
        // "s3cr:et/x" percent-encoded in the URI; libpq decodes it, so both spellings must be masked.
        let string = try PostgresConnectionString("postgres://alice:s3cr%3Aet%2Fx@db.example:5433/jobs?sslmode=disable")
        #expect(string.description == "postgres://alice:***@db.example:5433/jobs?sslmode=disable")
        #expect(String(reflecting: string) == "PostgresConnectionString(postgres://alice:***@db.example:5433/jobs?sslmode=disable)")
        var dumped = ""
        dump(string, to: &dumped)
        #expect(!dumped.contains("s3cr"))
        #expect(dumped.contains("***"))
        #expect(string.redact("auth failed for s3cr:et/x and s3cr%3Aet%2Fx") == "auth failed for *** and ***")
    }

    @Test func keywordAndQueryPasswordsAreRedacted() throws {
        let keyword = try PostgresConnectionString("host=/run/pg dbname=jobs password='two words' user=bob")
        // In libpq's option order.
        #expect(keyword.description == "user=bob password=*** dbname=jobs host=/run/pg")
        let query = try PostgresConnectionString("postgresql://bob@db/jobs?password=hunter2&application_name=tb")
        #expect(query.description == "postgresql://bob@db/jobs?password=***&application_name=tb")
        #expect(!"\(query)".contains("hunter2"))
    }

    @Test func invalidStringIsRefusedWithoutShowingItsPassword() {
        #expect {
            _ = try PostgresConnectionString("postgres://alice:hunter2@db/jobs?nosuchoption=1")
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.kind == .invalidConnectionString && !error.description.contains("hunter2")
                && error.description.contains("nosuchoption") && error.description.hasPrefix("[postgres_invalid_connection_string]")
        }
        #expect(throws: PostgresError.self) { _ = try PostgresConnectionString("host=x password='unterminated") }
    }

    /// Every way libpq can refuse a string that holds a password: the error never shows the password, as written
    /// or decoded (a bad `%`-escape in it made libpq quote it whole, issue 42).
    @Test func noParseErrorShowsThePassword() {
        let refused = [
            ("postgres://alice:hunter2%zz@db/jobs", "hunter2"),
            ("postgres://alice:hun%zzter2@db/jobs", "hun%zzter2"),
            ("postgres://alice:hunter2@db/jobs?password=%zzsecret9", "secret9"),
            ("postgres://alice:hunter2@[::1/jobs", "hunter2"),
            ("postgres://alice:hunter2@db/jobs?sslmode", "hunter2"),
            ("postgres://alice:hunter 2@db/jobs", "hunter"),
            ("postgres://alice:p/ss%zz@db/jobs", "p/ss"),
            ("host=x password=hunter2 nosuch=1", "hunter2"),
            ("host=x password='two words' =bad", "two words"),
            ("host=x password='un%zz terminated", "terminated"),
        ]
        for (text, secret) in refused {
            do {
                // One libpq takes after all: then its printed forms must hide the password.
                let string = try PostgresConnectionString(text)
                #expect(!string.description.contains(secret), "\(text): \(string)")
            } catch {
                #expect(!error.description.contains(secret), "\(text): \(error.description)")
                #expect(error.kind == .invalidConnectionString)
            }
        }
    }

    @Test func reconnectBackoffDoublesUpToItsCeilingWithJitter() {
        let policy = PostgresReconnectPolicy(initialDelaySeconds: 0.05, maxDelaySeconds: 5)
        #expect(policy.delay(afterFailures: 0, unitRandom: 1) == 0.05)
        #expect(policy.delay(afterFailures: 0, unitRandom: 0) == 0.025)
        #expect(policy.delay(afterFailures: 3, unitRandom: 1) == 0.4)
        #expect(policy.delay(afterFailures: 20, unitRandom: 1) == 5)
        #expect(policy.delay(afterFailures: 20, unitRandom: 0) == 2.5)
    }
}

@Suite(.serialized)
struct PostgresConnectionTests {
    @Test func parameterisedQueriesRoundTripValuesAndNulls() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            defer { connection.close() }
            let hostile = "x'); DROP TABLE pg_class; --"
            let result = try await connection.query(
                "SELECT $1::text, $2::bigint, $3::float8, $4::boolean, $5::text, array_length($6::text[], 1), ($6::text[])[2]",
                [.text(hostile), .integer(-9_007_199_254_740_993), .double(0.25), .bool(true), .null,
                 .textArray(["a,b", "quote \" and \\ back", "{}"])])
            #expect(result.columns.count == 7)
            let row = try #require(result.rows.first)
            #expect(row.text(0) == hostile)
            #expect(row.int(1) == -9_007_199_254_740_993)
            #expect(row.double(2) == 0.25)
            #expect(row.bool(3) == true)
            #expect(row.text(4) == nil)
            #expect(row.int(5) == 3)
            #expect(row.text(6) == "quote \" and \\ back")
        }
    }

    /// Array parameters (a set-based write's columns) carry every element byte for byte: quotes, backslashes
    /// and both together, array syntax, multi-byte UTF-8, an empty element, NULL, JSON text.
    @Test func arrayElementsRoundTripWhateverTheyHold() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            defer { connection.close() }
            let elements: [String?] = [
                "plain", "quote \" inside", "back \\ slash", "\\\"", "\"\\", "{a,b}", "NULL", "", "été 📷 \\\\",
                nil, #"{"path":"C:\\x","note":"say \"hi\""}"#,
            ]
            let result = try await connection.query(
                "SELECT v, v IS NULL FROM unnest($1::text[]) WITH ORDINALITY AS a(v, n) ORDER BY n",
                [.array(elements.map { $0.map(PostgresValue.text) ?? .null })])
            #expect(result.rows.map { $0.text(0) } == elements)
            #expect(result.rows.map { $0.bool(1) } == elements.map { $0 == nil })
            let texts = try await connection.query(
                "SELECT unnest($1::text[])", [.textArray(elements.compactMap { $0 })])
            #expect(texts.rows.map { $0.text(0) } == elements.compactMap { $0 })
        }
    }

    @Test func serverErrorCarriesItsSQLState() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            defer { connection.close() }
            await #expect {
                _ = try await connection.query("SELECT * FROM no_such_table")
            } throws: { error in
                (error as? PostgresError)?.kind == .server && (error as? PostgresError)?.sqlState == "42P01"
            }
            // The connection stays usable after an error.
            #expect(try await connection.query("SELECT 1").rows.first?.int(0) == 1)
        }
    }

    @Test func pipelineIsOneTransactionAllOrNothing() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            defer { connection.close() }
            _ = try await connection.query("CREATE TABLE t (id integer PRIMARY KEY)")
            await #expect {
                _ = try await connection.pipeline([
                    PostgresStatement("INSERT INTO t VALUES (1)"), PostgresStatement("INSERT INTO t VALUES (2)"),
                    PostgresStatement("INSERT INTO t VALUES (1)"), PostgresStatement("INSERT INTO t VALUES (3)"),
                ])
            } throws: { error in (error as? PostgresError)?.sqlState == "23505" }
            #expect(try await connection.query("SELECT count(*) FROM t").rows.first?.int(0) == 0)
            let results = try await connection.pipeline((1...100).map { PostgresStatement("INSERT INTO t VALUES ($1::integer)", [.integer(Int64($0))]) })
            #expect(results.count == 100)
            #expect(results.allSatisfy { $0.affectedRows == 1 })
            #expect(try await connection.query("SELECT count(*), sum(id) FROM t").rows.first?.values == ["100", "5050"])
        }
    }

    @Test func manyRequestsInFlightAnswerInOrder() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            defer { connection.close() }
            // 50 requests sent before the first answer arrives: one connection, answered in send order.
            let tasks = (0..<50).map { index in
                Task { @LoopActor in
                    try await connection.query("SELECT $1::integer * 2", [.integer(Int64(index))]).rows.first?.int(0)
                }
            }
            var values: [Int: Int64?] = [:]
            for (index, task) in tasks.enumerated() { values[index] = try await task.value }
            #expect(values.count == 50)
            #expect((0..<50).allSatisfy { values[$0] == Int64($0 * 2) })
        }
    }

    @Test func aSlowQueryDoesNotBlockTheLoop() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            defer { connection.close() }
            var ticks = 0
            let timer = LoopTimer(loop: .main)
            timer.start(milliseconds: 10, repeatMilliseconds: 10) { ticks += 1 }
            defer { timer.close() }
            _ = try await connection.query("SELECT pg_sleep(0.5)")
            // 500 ms at one tick per 10 ms: the loop kept running while the server worked.
            #expect(ticks >= 30)
        }
    }

    @Test func passwordOverTCPConnectsAndAWrongOneFailsWithoutShowingIt() async throws {
        try await withPostgresServer { server in
            let good = PostgresConnection(loop: .main, connectionString: try PostgresConnectionString(server.tcpURI))
            try await good.connect()
            #expect(try await good.query("SELECT current_user").rows.first?.text(0) == "trailbook")
            #expect(!good.connectionString.description.contains(server.password))
            good.close()

            let wrong = "wr0ng-\(UInt32.random(in: 1...UInt32.max))"
            let bad = PostgresConnection(
                loop: .main,
                connectionString: try PostgresConnectionString("postgres://trailbook:\(wrong)@127.0.0.1:\(server.port)/postgres"))
            defer { bad.close() }
            await #expect {
                try await bad.connect()
            } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return error.kind == .connectionFailed && error.message.contains("password authentication failed")
                    && !error.description.contains(wrong) && error.description.contains("trailbook:***@127.0.0.1")
            }
            #expect(bad.state == .idle)
            #expect(bad.lastFailure.map { !$0.contains(wrong) } == true)
        }
    }

    @Test func notifyReachesAListener() async throws {
        try await withPostgresServer { server in
            let listener = try await connected(to: server)
            let sender = try await connected(to: server)
            defer {
                listener.close()
                sender.close()
            }
            var received: [PostgresNotification] = []
            listener.onNotification = { received.append($0) }
            try await listener.listen("trailbook jobs")
            _ = try await sender.query("SELECT pg_notify($1, $2)", [.text("trailbook jobs"), .text("queued:photos")])
            _ = try await sender.query("SELECT pg_notify('other_channel', 'not for us')")
            #expect(await eventually(within: 5) { !received.isEmpty })
            #expect(received.map(\.channel) == ["trailbook jobs"])
            #expect(received.first?.payload == "queued:photos")
            #expect(received.first?.senderPID == sender.backendPID)
        }
    }

    @Test func connectingToNoServerFailsAtOnceAndCanBeRetried() async throws {
        try await withPostgresServer { server in
            // The same socket directory and port, but the server is down: libpq finds no socket.
            try await Task.detached { try server.shutDown() }.value
            let connection = PostgresConnection(
                loop: .main, connectionString: try PostgresConnectionString(server.socketConnectionString))
            defer { connection.close() }
            let clock = ContinuousClock()
            let start = clock.now
            await #expect {
                try await connection.connect()
            } throws: { ($0 as? PostgresError)?.kind == .connectionFailed }
            #expect(clock.now - start < .seconds(2))
            #expect(connection.state == .idle)
            await #expect {
                _ = try await connection.query("SELECT 1")
            } throws: { ($0 as? PostgresError)?.kind == .notConnected }
            try await Task.detached { try server.startUp() }.value
            try await connection.connect()
            #expect(try await connection.query("SELECT 1").rows.first?.int(0) == 1)
            #expect(connection.reconnections == 0)
        }
    }

    @Test func serverRestartIsSurvivedByReconnecting() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(
                to: server, policy: PostgresReconnectPolicy(initialDelaySeconds: 0.05, maxDelaySeconds: 0.2))
            let sender = try await connected(to: server)
            defer {
                connection.close()
                sender.close()
            }
            var received: [String] = []
            var reconnected = 0
            connection.onNotification = { received.append($0.payload) }
            connection.onReconnect = { reconnected += 1 }
            try await connection.listen("ch")
            let before = try #require(connection.backendPID)

            try await Task.detached { try server.shutDown() }.value
            #expect(await eventually(within: 5) { connection.state != .ready })
            // While it is down a request fails at once, without waiting for the server.
            let clock = ContinuousClock()
            let start = clock.now
            await #expect {
                _ = try await connection.query("SELECT 1")
            } throws: { ($0 as? PostgresError)?.kind == .notConnected }
            #expect(clock.now - start < .milliseconds(100))

            try await Task.detached { try server.startUp() }.value
            try await connection.waitUntilReady(timeoutSeconds: 10)
            #expect(connection.reconnections == 1)
            #expect(reconnected == 1)
            #expect(connection.backendPID != before)
            #expect(try await connection.query("SELECT 41 + $1::integer", [.integer(1)]).rows.first?.int(0) == 42)
            // Its channel is listened to again on the new session.
            try await sender.waitUntilReady(timeoutSeconds: 10)
            _ = try await sender.query("SELECT pg_notify('ch', 'after restart')")
            #expect(await eventually(within: 5) { received == ["after restart"] })
        }
    }

    /// A network cut sends no FIN: the socket stays open and silent. With `responseTimeoutSeconds`, the requests in
    /// flight fail as lost once nothing came back for that long, later ones fail at once while the network is
    /// down (the reconnection attempts are accepted and never answered), and the connection is back once it heals.
    @Test func aSilentNetworkCutFailsTheRequestsInFlightAndReconnectsWhenItHeals() async throws {
        try await withPostgresServer { server in
            let proxy = try CutProxy(unixSocket: server.socketPath)
            defer { proxy.stop() }
            let connection = PostgresConnection(
                loop: .main, connectionString: try PostgresConnectionString(server.tcpURI(port: proxy.port)),
                reconnectPolicy: PostgresReconnectPolicy(
                    initialDelaySeconds: 0.05, maxDelaySeconds: 0.2, attemptTimeoutSeconds: 0.5))
            connection.responseTimeoutSeconds = 0.5
            defer { connection.close() }
            try await connection.connect()
            // Answers faster than the deadline keep the connection: a second of queries 50 ms apart.
            for _ in 0..<20 {
                #expect(try await connection.query("SELECT pg_sleep(0.05), 1").rows.first?.int(1) == 1)
            }
            #expect(connection.state == .ready)

            try proxy.cut()
            let clock = ContinuousClock()
            let start = clock.now
            let inFlight = (0..<3).map { n in Task { @LoopActor in try await connection.query("SELECT \(n)") } }
            for request in inFlight {
                await #expect {
                    _ = try await request.value
                } throws: { error in
                    let error = error as? PostgresError
                    return error?.kind == .connectionLost && error?.message.contains("no answer for 0.5 s") == true
                        && error?.message.contains(server.password) == false
                }
            }
            let noticed = clock.now - start
            #expect(noticed >= .milliseconds(450) && noticed < .seconds(3), "noticed after \(noticed)")
            #expect(connection.state != .ready)
            let refused = clock.now
            await #expect {
                _ = try await connection.query("SELECT 1")
            } throws: { ($0 as? PostgresError)?.kind == .notConnected }
            #expect(clock.now - refused < .milliseconds(100))
            // Some attempts were made into the cut and timed out, unanswered.
            #expect(await eventually(within: 5) { (try? proxy.connections().silent) ?? 0 >= 2 })

            try proxy.heal()
            try await connection.waitUntilReady(timeoutSeconds: 10)
            #expect(connection.reconnections == 1)
            #expect(try await connection.query("SELECT 41 + 1").rows.first?.int(0) == 42)
            #expect(try proxy.connections().forwarding == 1)
        }
    }

    /// A statement with parameters is prepared once per session and then run by name; a new session (the backend
    /// killed, the connection made again) prepares it again, and a prepare the server refuses leaves the
    /// connection usable.
    @Test func statementsArePreparedOncePerSessionAndAgainAfterAReconnection() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            let killer = try await connected(to: server)
            defer {
                connection.close()
                killer.close()
            }
            let sum = "SELECT $1::integer + $2::integer"
            let preparedNow = PostgresStatement("SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", [.text(sum)])
            for n in 0..<3 {
                let rows = try await connection.pipeline([
                    PostgresStatement(sum, [.integer(40), .integer(Int64(n))]), preparedNow,
                    PostgresStatement(sum, [.integer(1), .integer(1)]),
                ])
                #expect(rows[0].rows.first?.int(0) == 40 + Int64(n))
                #expect(rows[1].rows.first?.int(0) == 1, "prepared once, whatever the calls")
                #expect(rows[2].rows.first?.int(0) == 2)
            }
            let pid = try #require(connection.backendPID)
            _ = try await killer.query("SELECT pg_terminate_backend($1::integer)", [.integer(Int64(pid))])
            #expect(await eventually(within: 10) { connection.reconnections == 1 })
            try await connection.waitUntilReady(timeoutSeconds: 10)
            #expect(connection.backendPID != pid)
            // The new session has none: the statement is prepared again (a stale name would fail with 26000).
            #expect(try await connection.query(sum, [.integer(41), .integer(1)]).rows.first?.int(0) == 42)
            #expect(try await connection.pipeline([preparedNow])[0].rows.first?.int(0) == 1)
            // A prepare the server refuses fails its request only.
            await #expect {
                _ = try await connection.pipeline([PostgresStatement(sum, [.integer(1), .integer(2)]),
                    PostgresStatement("SELECT nonsense FROM nowhere WHERE x = $1", [.integer(1)])])
            } throws: { ($0 as? PostgresError)?.sqlState == "42P01" }
            #expect(try await connection.query(sum, [.integer(2), .integer(3)]).rows.first?.int(0) == 5)
            await #expect {
                _ = try await connection.query("SELECT nonsense FROM nowhere WHERE x = $1", [.integer(1)])
            } throws: { ($0 as? PostgresError)?.sqlState == "42P01" }
        }
    }

    /// `sessionStatements` hold for the first session and for each one after a reconnection.
    @Test func sessionStatementsApplyToEverySession() async throws {
        try await withPostgresServer { server in
            let connection = PostgresConnection(
                loop: .main, connectionString: try PostgresConnectionString(server.socketConnectionString))
            connection.sessionStatements = ["SET enable_seqscan = off", "SET application_name = 'session-test'"]
            try await connection.connect()
            let killer = try await connected(to: server)
            defer {
                connection.close()
                killer.close()
            }
            let settings = "SELECT current_setting('enable_seqscan'), current_setting('application_name')"
            var row = try #require(try await connection.query(settings).rows.first)
            #expect(row.values == ["off", "session-test"])
            let pid = try #require(connection.backendPID)
            _ = try await killer.query("SELECT pg_terminate_backend($1::integer)", [.integer(Int64(pid))])
            #expect(await eventually(within: 10) { connection.reconnections == 1 })
            try await connection.waitUntilReady(timeoutSeconds: 10)
            row = try #require(try await connection.query(settings).rows.first)
            #expect(row.values == ["off", "session-test"])
        }
    }

    @Test func aQueryInFlightWhenTheServerDiesFailsAsLost() async throws {
        try await withPostgresServer { server in
            let connection = try await connected(to: server)
            let killer = try await connected(to: server)
            defer {
                connection.close()
                killer.close()
            }
            let pid = try #require(connection.backendPID)
            let slow = Task { @LoopActor in try await connection.query("SELECT pg_sleep(30)") }
            _ = try await killer.query("SELECT pg_sleep(0.1)")
            _ = try await killer.query("SELECT pg_terminate_backend($1::integer)", [.integer(Int64(pid))])
            await #expect {
                _ = try await slow.value
            } throws: { error in
                let kind = (error as? PostgresError)?.kind
                return kind == .connectionLost || kind == .server
            }
            try await connection.waitUntilReady(timeoutSeconds: 10)
            #expect(try await connection.query("SELECT 1").rows.first?.int(0) == 1)
        }
    }
}
