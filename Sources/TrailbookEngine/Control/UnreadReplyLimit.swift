import TrailbookLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Bounds the memory control clients that do not read can make the daemon hold: replies and feed events written
/// to them and not yet taken (libuv keeps each write's bytes until the peer reads them).
///
/// Two rules, checked after each reply and once a second while any client holds more than `stuckBytes`:
/// - per client: one holding more than `stuckBytes` that has taken none of them for `stuckSeconds` is dropped
///   (a watcher that never reads, a half-closed client that asked for a big `list` and never reads it);
/// - all clients together: past `totalBytes`, the clients holding the most are dropped, largest first, until
///   the rest hold at most half of it, so a crowd of such clients cannot grow the daemon either.
///
/// A dropped client's connection is closed at once (its unread bytes freed) and the daemon logs why; it sees its
/// connection end and can connect again (a watcher with `--since`). The freed memory is handed back to the
/// system (`malloc_trim`), not only to the allocator, so a daemon's size comes back down after such a crowd.
@LoopActor
final class UnreadReplyLimit {
    /// Unread bytes a client may hold however long it takes to read them.
    let stuckBytes: Int
    /// Seconds a client holding more than `stuckBytes` may go without taking any.
    let stuckSeconds: Double
    /// Unread bytes all clients together may hold.
    let totalBytes: Int

    /// A client being watched: its connection, what to do to drop it, and how its unread bytes went.
    private final class Client {
        let pipe: PipeConnection
        let drop: () -> Void
        var lastPending = 0
        var stuckSince: Double?

        init(pipe: PipeConnection, drop: @escaping () -> Void) {
            self.pipe = pipe
            self.drop = drop
        }
    }

    private var clients: [ObjectIdentifier: Client] = [:]
    private var timer: LoopTimer?
    /// Bytes freed by drops since the last `malloc_trim`.
    private var freedSinceTrim = 0
    /// When `malloc_trim` last ran (it walks the heap: at most once a second).
    private var lastTrim = -Double.infinity

    init(stuckBytes: Int = 1 << 20, stuckSeconds: Double = 10, totalBytes: Int = 64 << 20) {
        self.stuckBytes = stuckBytes
        self.stuckSeconds = stuckSeconds
        self.totalBytes = totalBytes
    }

    /// Watches `pipe` until `forget` (or until it is dropped); `drop` closes it and forgets its state elsewhere.
    func watch(_ pipe: PipeConnection, drop: @escaping () -> Void) {
        clients[ObjectIdentifier(pipe)] = Client(pipe: pipe, drop: drop)
    }

    /// Stops watching `pipe` (it closed).
    func forget(_ pipe: PipeConnection) {
        clients[ObjectIdentifier(pipe)] = nil
    }

    /// Applies both rules now; arms the once-a-second check while a client holds more than `stuckBytes`.
    func check() {
        let now = Timestamp.monotonic()
        var total = 0
        var holding = false
        for (id, client) in clients {
            if client.pipe.isClosing {
                clients[id] = nil
                continue
            }
            let pending = client.pipe.pendingWriteBytes
            total += pending
            if pending <= stuckBytes {
                client.stuckSince = nil
            } else if pending < client.lastPending || client.stuckSince == nil {
                // It took some (or just went past the mark): its time starts now.
                client.stuckSince = now
                holding = true
            } else if now - client.stuckSince! >= stuckSeconds {
                drop(client, pending, why: "took none of its \(Self.mebibytes(pending)) of unread replies or events for \(Int(stuckSeconds)) s")
                total -= pending
                continue
            } else {
                holding = true
            }
            client.lastPending = pending
        }
        if total > totalBytes {
            for client in clients.values.sorted(by: { $0.pipe.pendingWriteBytes > $1.pipe.pendingWriteBytes }) {
                guard total > totalBytes / 2 else { break }
                let pending = client.pipe.pendingWriteBytes
                guard pending > 0 else { break }
                drop(
                    client, pending,
                    why: "held \(Self.mebibytes(pending)) of unread replies or events while clients together held over "
                        + "\(Self.mebibytes(totalBytes))")
                total -= pending
            }
        }
        if freedSinceTrim >= 4 << 20, now - lastTrim >= 1 {
            lastTrim = now
            // glibc keeps freed memory in its arenas; give it back so the daemon shrinks once such clients are gone.
            _ = mallocTrim(0)
            freedSinceTrim = 0
        }
        if holding {
            let timer = self.timer ?? LoopTimer(loop: .main)
            self.timer = timer
            if !timer.isActive { timer.start(seconds: 1) { [weak self] in self?.check() } }
        }
    }

    /// Stops the timer (daemon shutdown).
    func close() {
        timer?.close()
        timer = nil
        clients.removeAll()
    }

    /// Notes that a client that held `bytes` went away (its connection closed), for `malloc_trim`.
    func released(_ bytes: Int) {
        freedSinceTrim += bytes
    }

    private func drop(_ client: Client, _ pending: Int, why: String) {
        clients[ObjectIdentifier(client.pipe)] = nil
        DaemonLog.write("dropped a control client that \(why); it may connect again (a watcher with --since)")
        freedSinceTrim += pending
        client.drop()
    }

    private static func mebibytes(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + (1 << 19)) >> 20
        return "\(tenths / 10).\(tenths % 10) MiB"
    }
}

/// glibc's `malloc_trim(3)` (`<malloc.h>`, which the Glibc module does not bring in): gives the heap's free memory
/// back to the system, keeping `pad` bytes; returns 1 if any was given back.
@_silgen_name("malloc_trim")
private func mallocTrim(_ pad: Int) -> Int32
