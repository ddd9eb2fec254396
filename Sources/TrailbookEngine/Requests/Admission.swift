import TrailbookLoop

/// Owns what the submits under way hold while they are checked, before the store has their jobs: their
/// idempotency keys (one submit per key at a time; a retry arriving meanwhile waits for the first try and then
/// finds its job), the duplicate keys their checked entries do (`SubmitClaims`), and the number naming each
/// submit's claims.
@LoopActor
final class Admission {
    /// Idempotency keys of submits under way (validated, not yet stored).
    private var keysInFlight: Set<String> = []
    /// The submits waiting for one of `keysInFlight`.
    private let keyWaiters = WaitList()
    /// What the submits under way do, for the duplicate check (`Scheduler.refuseDuplicate`).
    var claims = SubmitClaims()
    /// The number of the last submit begun, which names its claims.
    private var lastSubmit = 0

    /// Nothing held.
    nonisolated init() {}

    /// Waits until no submit under way holds any of `keys`, then holds them until `release(_:)`.
    func hold(_ keys: Set<String>) async {
        while !keys.isDisjoint(with: keysInFlight) {
            await keyWaiters.wait()
        }
        keysInFlight.formUnion(keys)
    }

    /// Gives up `keys` (held by `hold(_:)`); the submits waiting for them look again.
    func release(_ keys: Set<String>) {
        keysInFlight.subtract(keys)
        keyWaiters.resumeAll()
    }

    /// A new submit's number, for its claims (`SubmitClaims.Holder.submit`).
    func beginSubmit() -> Int {
        lastSubmit += 1
        return lastSubmit
    }
}
