import Foundation
import Testing
import TrailbookEngine
import TestSupport
import TrailbookLoop

/// `WorkerPool` against real worker processes (`trailbook-jobs worker`), on a private loop.
@Suite(.serialized)
struct WorkerPoolTests {
    static func options(workers: Int = 2, timeout: Double = 10) -> WorkerPoolOptions {
        var options = WorkerPoolOptions()
        options.executable = Binary.path
        options.workers = workers
        options.requestTimeoutSeconds = timeout
        return options
    }

    /// Runs `body` with a pool on a fresh loop, then shuts the pool down and checks that the loop could stop
    /// (every process and pipe handle closed).
    static func withPool<T: Sendable>(
        _ options: WorkerPoolOptions, _ body: @Sendable (isolated LoopBound, WorkerPool) async throws -> T
    ) async throws -> T {
        let runner = LoopThread()
        let result = try await LoopBound(runner.loop).run { bound in
            let pool = WorkerPool(loop: bound.loop, options: options)
            let result: Result<T, any Error>
            do { result = .success(try await body(bound, pool)) } catch { result = .failure(error) }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                pool.shutdown { continuation.resume() }
            }
            return try result.get()
        }
        #expect(runner.finish(), "the loop stopped: every worker handle was closed")
        return result
    }

    @Test func echoRunsOnALazilySpawnedWorker() async throws {
        let (answers, spawned) = try await Self.withPool(Self.options()) { _, pool in
            #expect(pool.workerCount == 0, "no worker before the first request")
            var answers: [JSONValue] = []
            for n in 1...4 { answers.append(try await pool.run(task: "echo", payload: ["n": .number(Double(n))])) }
            return (answers, pool.statistics.spawned)
        }
        #expect(answers.map { $0["n"]?.intValue } == [1, 2, 3, 4])
        #expect(spawned == 1, "one request at a time needs one worker")
    }

    @Test func anIdleWorkerUsesNoCPU() async throws {
        let (before, after) = try await Self.withPool(Self.options(workers: 1)) { _, pool in
            _ = try await pool.run(task: "echo", payload: 1)
            let pid = try #require(pool.workerPIDs.first)
            let before = Self.cpuTicks(pid)
            try await Task.sleep(for: .seconds(1))
            return (before, Self.cpuTicks(pid))
        }
        #expect(
            before != nil && before == after,
            "CPU ticks of an idle worker: \(String(describing: before)) → \(String(describing: after))")
    }

    /// utime + stime of `pid`, in clock ticks.
    static func cpuTicks(_ pid: Int32) -> Int? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    /// Four requests on a pool of two: both workers are spawned and serve requests at the same time. Checked from
    /// when each request slept in which worker (not from the run's wall time, which spawning two processes on a
    /// busy 2-core machine can stretch past any bound).
    @Test func twoWorkersServeConcurrentRequests() async throws {
        let (answers, spawned) = try await Self.withPool(Self.options()) { _, pool in
            let results = await withCheckedContinuation {
                (continuation: CheckedContinuation<[Result<JSONValue, JobError>], Never>) in
                var results: [Result<JSONValue, JobError>] = []
                for _ in 0..<4 {
                    pool.submit(task: "test.sleep", payload: ["ms": 1_000]) { result in
                        results.append(result)
                        if results.count == 4 { continuation.resume(returning: results) }
                    }
                }
            }
            return (results.compactMap { try? $0.get() }, pool.statistics.spawned)
        }
        #expect(answers.count == 4 && spawned == 2)
        let spans = answers.compactMap { answer -> (pid: Int64, started: Double, ended: Double)? in
            guard let pid = answer["pid"]?.intValue, let started = answer["started"]?.doubleValue,
                let ended = answer["ended"]?.doubleValue
            else { return nil }
            return (pid, started, ended)
        }
        #expect(Set(spans.map(\.pid)).count == 2, "served by both workers: \(spans)")
        let overlapping = spans.contains { a in
            spans.contains { b in a.pid != b.pid && a.started < b.ended && b.started < a.ended }
        }
        #expect(overlapping, "two requests ran at once in different workers: \(spans)")
    }

    @Test func aWorkerThatCrashesIsRestartedAndTheRequestRetriedOnce() async throws {
        let marker = NSTemporaryDirectory() + "/crash-once-\(UUID().uuidString)"
        defer { unlink(marker) }
        let (answer, stats) = try await Self.withPool(Self.options(workers: 1)) { _, pool in
            let answer = try await pool.run(task: "test.crash-once", payload: ["marker": .string(marker)])
            return (answer, pool.statistics)
        }
        #expect(answer["marker"]?.stringValue == marker)
        #expect(stats.crashed == 1 && stats.retried == 1 && stats.spawned == 2)
    }

    @Test func aRequestThatCrashesTwiceFailsWithWorkerCrashedAndThePoolGoesOn() async throws {
        let (error, next) = try await Self.withPool(Self.options(workers: 1)) { _, pool in
            var caught: JobError?
            do { _ = try await pool.run(task: "test.crash", payload: nil) } catch { caught = error as? JobError }
            let next = try await pool.run(task: "echo", payload: "still here")
            return (caught, next)
        }
        #expect(error?.code == "worker_crashed")
        // In words, with the signal, the time and the tries; the code is not repeated in the message.
        let message = error?.message ?? ""
        #expect(message.hasPrefix("the worker was killed by signal 6 after "), "\(message)")
        #expect(message.hasSuffix(" s on test.crash (the second try, each in a fresh worker)"), "\(message)")
        #expect(!message.contains("worker_crashed"))
        #expect(next == "still here")
    }

    @Test func aHungWorkerIsKilledAtTheTimeLimit() async throws {
        let (error, seconds, next) = try await Self.withPool(Self.options(workers: 1)) { _, pool in
            let started = Date()
            var caught: JobError?
            do { _ = try await pool.run(task: "test.hang", payload: nil, timeoutSeconds: 0.3) } catch {
                caught = error as? JobError
            }
            let seconds = Date().timeIntervalSince(started)
            let next = try await pool.run(task: "echo", payload: 7)
            #expect(pool.statistics.timedOut == 1)
            return (caught, seconds, next)
        }
        #expect(error?.code == "worker_timeout")
        #expect(error?.message == "the worker ran past its time limit of 0.3 s on test.hang and was killed with signal 9")
        #expect(seconds >= 0.3 && seconds < 2, "took \(seconds) s")
        #expect(next == 7, "a fresh worker took over")
    }

    /// A decoder spinning on the CPU is ended by the worker's CPU-time limit (RLIMIT_CPU, SIGXCPU), long before
    /// the request's 30 s time limit; the request is retried once in a fresh worker, then fails, and the pool goes on.
    @Test func theWorkerCPULimitEndsASpinningDecoder() async throws {
        var options = Self.options(workers: 1, timeout: 30)
        options.cpuLimitSeconds = 1
        let (error, seconds, stats, next) = try await Self.withPool(options) { _, pool in
            let started = Date()
            var caught: JobError?
            do { _ = try await pool.run(task: "test.spin", payload: nil) } catch { caught = error as? JobError }
            let seconds = Date().timeIntervalSince(started)
            let next = try await pool.run(task: "echo", payload: "after")
            return (caught, seconds, pool.statistics, next)
        }
        #expect(error?.code == "worker_crashed")
        #expect(error?.message.contains("signal \(SIGXCPU)") == true, "\(String(describing: error))")
        #expect(stats.crashed == 2 && stats.retried == 1 && stats.timedOut == 0)
        #expect(seconds < 25, "ended by the CPU limit, not the 30 s request limit: \(seconds) s")
        #expect(next == "after")
    }

    @Test func theWorkerMemoryLimitStopsAnOversizedAllocation() async throws {
        var options = Self.options(workers: 1)
        options.memoryLimitBytes = 256 << 20
        let (error, small) = try await Self.withPool(options) { _, pool in
            var caught: JobError?
            do { _ = try await pool.run(task: "test.allocate", payload: ["bytes": .number(Double(1 << 30))]) } catch {
                caught = error as? JobError
            }
            let small = try await pool.run(task: "test.allocate", payload: ["bytes": .number(Double(16 << 20))])
            return (caught, small)
        }
        #expect(error?.code == "out_of_memory", "\(String(describing: error))")
        #expect(small["allocated"]?.intValue == 16 << 20)
    }

    @Test func anAbandonedRequestsAnswerIsDropped() async throws {
        let (called, next) = try await Self.withPool(Self.options(workers: 1)) { _, pool in
            var called = false
            let ticket = pool.submit(task: "test.sleep", payload: ["ms": 200]) { _ in called = true }
            let queued = pool.submit(task: "echo", payload: 1) { _ in called = true }
            pool.abandon(ticket)
            pool.abandon(queued)
            let next = try await pool.run(task: "echo", payload: 2)
            return (called, next)
        }
        #expect(!called)
        #expect(next == 2)
    }
}
