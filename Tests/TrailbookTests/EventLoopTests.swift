import Foundation
import Testing
import TestSupport
import TrailbookEngine
import TrailbookLoop

struct EventLoopTests {
    @Test func executeRunsOnTheLoopThreadAndTimersFireInOrder() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let order = await bound.run { bound in
            #expect(bound.loop.inLoopThread)
            return await withCheckedContinuation { (continuation: CheckedContinuation<[Int], Never>) in
                var fired: [Int] = []
                var timers: [LoopTimer] = []
                for (index, delay) in [30, 10, 20].enumerated() {
                    let timer = LoopTimer(loop: bound.loop)
                    timers.append(timer)
                    timer.start(milliseconds: UInt64(delay)) {
                        fired.append(index)
                        if fired.count == 3 {
                            for timer in timers { timer.close() }
                            continuation.resume(returning: fired)
                        }
                    }
                }
            }
        }
        #expect(order == [1, 2, 0])
        #expect(runner.finish(), "loop did not exit: a handle was left open")
    }

    @Test func poolWorkRunsOffTheLoopAndCompletesOnIt() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let (onPool, back) = try await bound.run { bound in
            let onPool = try await bound.loop.runOnPool { [loop = bound.loop] in loop.inLoopThread }
            return (onPool, bound.loop.inLoopThread)
        }
        #expect(onPool == false)
        #expect(back == true)
        #expect(runner.finish())
    }

    @Test func poolWorkErrorsPropagate() async throws {
        struct Boom: Error {}
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        await #expect(throws: Boom.self) {
            try await bound.run { bound in try await bound.loop.runOnPool { () throws -> Int in throw Boom() } }
        }
        #expect(runner.finish())
    }

    @Test func fileSystemRequests() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let directory = NSTemporaryDirectory() + "/loopfs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data(repeating: 7, count: 1234).write(to: URL(fileURLWithPath: directory + "/a"))
        let (size, isFile, moved, missing) = try await bound.run { bound in
            let fs = FileSystem(loop: bound.loop)
            let status = try await fs.status(of: directory + "/a")
            try await fs.rename(directory + "/a", to: directory + "/b")
            let moved = try await fs.status(of: directory + "/b").inode == status.inode
            try await fs.removeFile(directory + "/b")
            try await fs.removeFile(directory + "/b")  // already gone: not an error
            var missing: UVError?
            do { _ = try await fs.status(of: directory + "/b") } catch { missing = error as? UVError }
            return (status.size, status.isRegularFile, moved, missing?.name)
        }
        #expect(size == 1234)
        #expect(isFile)
        #expect(moved)
        #expect(missing == "ENOENT")
        #expect(runner.finish())
    }

    @Test func pipeServerEchoesAndSeesThePeerUID() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let path = NSTemporaryDirectory() + "/loop-\(UUID().uuidString.prefix(8)).sock"
        let uid = try await bound.run { bound in
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<UInt32, any Error>) in
                var server: PipeServer?
                do {
                    server = try PipeServer(loop: bound.loop, path: path) { connection in
                        let peer = connection.peerUID ?? UInt32.max
                        connection.startReading(
                            onRead: { bytes in connection.write(Array(bytes)) },
                            onEnd: { _ in
                                connection.close()
                                server?.close()
                                continuation.resume(returning: peer)
                            })
                    }
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                Thread {
                    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                    var address = sockaddr_un()
                    address.sun_family = sa_family_t(AF_UNIX)
                    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
                    _ = withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                    }
                    _ = "ping\n".withCString { write(fd, $0, 5) }
                    var reply = [UInt8](repeating: 0, count: 5)
                    _ = read(fd, &reply, 5)
                    precondition(reply == Array("ping\n".utf8), "echo mismatch")
                    close(fd)
                }.start()
            }
        }
        #expect(uid == getuid())
        var info = stat()
        // Mode 0600 while listening is checked on a live daemon (socketIsPrivateToItsUser); closed, the server
        // leaves no socket file behind.
        #expect(stat(path, &info) != 0, "the socket file is removed when the server closes")
        #expect(runner.finish())
    }

    @Test func bindingAnOverlongPathFails() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let name = await bound.run { bound -> String in
            do {
                _ = try PipeServer(loop: bound.loop, path: "/tmp/" + String(repeating: "x", count: 200)) { _ in }
                return "bound"
            } catch {
                return (error as? UVError)?.name ?? "\(error)"
            }
        }
        #expect(name == "ENAMETOOLONG")
        #expect(runner.finish())
    }

    /// A path where a file other than a socket is (a mistyped `--socket`) is refused, and the file is left as it
    /// was: the server used to unlink whatever was there.
    @Test func bindingWhereARegularFileIsLeavesTheFile() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let path = NSTemporaryDirectory() + "precious-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt"
        try "keep me".write(toFile: path, atomically: false, encoding: .utf8)
        defer { unlink(path) }
        let name = await bound.run { bound -> String in
            do {
                let server = try PipeServer(loop: bound.loop, path: path) { _ in }
                server.close()
                return "bound"
            } catch {
                return (error as? UVError)?.name ?? "\(error)"
            }
        }
        #expect(name == "EEXIST")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
        #expect(runner.finish())
    }

    /// A check handle started from another check handle's callback (the group commit announcing an end starts the
    /// feed's write) runs in the next iteration at once, with nothing else to wake the loop. libuv runs the check
    /// handles started before the pass began (loop-watcher.c) and a started check handle does not keep the poll
    /// from blocking, so it used to wait for the next I/O or timer: a watcher of an idle daemon never got the
    /// event, and `submit --wait` hung.
    @Test func aCheckHandleStartedFromACheckCallbackRunsWithoutAnotherWakeUp() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let seconds = await bound.run { bound -> Double in
            await withCheckedContinuation { (continuation: CheckedContinuation<Double, Never>) in
                let first = CheckHandle(loop: bound.loop)
                let second = CheckHandle(loop: bound.loop)
                // The only other thing on this loop: without the fix, the poll sleeps until it is due.
                let deadline = LoopTimer(loop: bound.loop)
                let started = Date()
                var answered = false
                func finish() {
                    guard !answered else { return }
                    answered = true
                    for handle in [first, second, deadline] as [LoopHandle] { handle.close() }
                    continuation.resume(returning: Date().timeIntervalSince(started))
                }
                first.start {
                    first.stop()
                    second.start {
                        second.stop()
                        finish()
                    }
                }
                deadline.start(milliseconds: 3_000) { finish() }
            }
        }
        #expect(seconds < 1, "the second check handle ran after \(seconds) s")
        #expect(runner.finish())
    }

    /// A prepare handle runs once per iteration before the poll, so what a timer's callback leaves for it (the
    /// daemon's log lines of the turn) is handled before the loop sleeps; unreferenced, it does not keep the loop
    /// running on its own.
    @Test func aPrepareHandleRunsBeforeTheLoopSleepsAndDoesNotKeepItAlive() async throws {
        let runner = LoopThread()
        let bound = LoopBound(runner.loop)
        let seen = await bound.run { bound -> [String] in
            await withCheckedContinuation { (continuation: CheckedContinuation<[String], Never>) in
                var seen: [String] = []
                let prepare = PrepareHandle(loop: bound.loop)
                prepare.keepsLoopAlive = false
                let first = LoopTimer(loop: bound.loop)
                let second = LoopTimer(loop: bound.loop)
                prepare.start { seen.append("prepare") }
                first.start(milliseconds: 10) {
                    seen.append("first")
                    // Due long after: between the two the loop sleeps, and the prepare handle ran just before.
                    second.start(milliseconds: 200) {
                        seen.append("second")
                        for handle in [prepare, first, second] as [LoopHandle] { handle.close() }
                        continuation.resume(returning: seen)
                    }
                }
            }
        }
        let afterFirst = try #require(seen.firstIndex(of: "first"))
        #expect(seen[afterFirst + 1] == "prepare", "\(seen)")
        #expect(seen.filter { $0 == "prepare" }.count <= 6, "once per iteration, not in a busy loop: \(seen)")
        #expect(runner.finish())
    }

    /// A task started with `Task.onLoop` prefers the loop as its executor: what it awaits resumes on the loop
    /// thread, and nonisolated async code it calls runs there too (a plain `Task { @LoopActor in }` runs that
    /// code on Swift's global executor, and resumes each wait through it: two thread wake-ups an `await`).
    @Test func aTaskStartedOnTheLoopStaysOnTheLoopThread() async throws {
        _ = TestEventLoop.started
        let threads = await Task.onLoop { () async -> [Bool] in
            var seen: [Bool] = [EventLoop.main.inLoopThread]
            seen.append(await Self.nonisolatedStep())
            await Scheduler.nextTurn()
            seen.append(EventLoop.main.inLoopThread)
            seen.append(await Self.nonisolatedStep())
            return seen
        }.value
        #expect(threads == [true, true, true, true], "on the loop thread at each step: \(threads)")
        let plain = await Task { @LoopActor () async -> Bool in await Self.nonisolatedStep() }.value
        #expect(!plain, "without the preference nonisolated code runs elsewhere (this test's premise)")
        // A task that does not prefer the loop is not treated as if it did: its isolated calls run in order, each
        // to its first suspension, as `PostgresStoreActor` relies on for the order of its requests.
        let order = await Task { @LoopActor () async -> [Int] in
            var order: [Int] = []
            let first = Task { @LoopActor in order.append(await Self.isolatedSteps(1, count: 5)) }
            let second = Task { @LoopActor in order.append(await Self.isolatedSteps(2, count: 1)) }
            await first.value
            await second.value
            return order
        }.value
        #expect(order == [1, 2], "\(order)")
    }

    /// Passes through `count` nested `LoopActor` async functions without suspending, then returns `tag`.
    @LoopActor static func isolatedSteps(_ tag: Int, count: Int) async -> Int {
        count == 0 ? tag : await isolatedSteps(tag, count: count - 1)
    }

    /// Whether nonisolated async code runs on the loop thread (after a suspension of its own).
    nonisolated static func nonisolatedStep() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { continuation.resume() }
        }
        return EventLoop.main.inLoopThread
    }
}
