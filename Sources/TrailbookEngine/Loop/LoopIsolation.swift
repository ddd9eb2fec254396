import TrailbookLoop

/// Runs loop-thread callbacks (libuv handle callbacks, which the compiler cannot see are on the loop) in the
/// `LoopActor`'s isolation; the executor's `checkIsolated` traps if they ever are not.
enum LoopIsolation {
    static func assume(_ body: @LoopActor () -> Void) {
        // What MainActor.assumeIsolated does, for our global actor: check at run time, then call.
        LoopActor.shared.preconditionIsolated()
        withoutActuallyEscaping(body) { body in
            unsafeBitCast(body, to: (() -> Void).self)()
        }
    }
}
