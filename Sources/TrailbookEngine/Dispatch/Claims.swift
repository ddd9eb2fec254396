import TrailbookLoop

/// A shared store's claims of queued jobs (`LeasingJobStoring.sendClaim`): where this daemon's one claim in flight
/// is, the jobs claimed to take the slot of a run stopping for them, and the checkpoints claims read with their
/// jobs. Its transitions say what the caller does next; sending the claim and running what it took is the
/// `Scheduler`'s (`claim(from:)`, `preemptOnSharedStore`).
@LoopActor
final class Claims {
    /// Where the claim is.
    enum Phase: Equatable {
        /// None asked for.
        case none
        /// Put off because a group was in flight: the group's answer claims.
        case putOff
        /// Sent, not answered yet; `again` if something asked for a claim meanwhile (a slot freed, a notice of
        /// work): its answer claims again.
        case inFlight(again: Bool)
    }

    /// What the caller does with a claim it asked for (`ask(groupInFlight:)`).
    enum Asked: Equatable {
        /// Send it now: it is in flight.
        case send
        /// Send nothing: the claim in flight claims again when answered, or the group in flight's answer claims.
        case wait
    }

    /// Where the claim is now.
    private(set) var phase = Phase.none
    /// `settled()` callers, resumed when the claim in flight is answered (`resumeWaiters()`).
    private let answerWaiters = WaitList()
    /// Jobs claimed to take the slot of a run stopping for them (`preemptOnSharedStore`), in claim order; each
    /// holds a slot and starts once one is free (`launchHeldClaims`).
    private var held: [ClaimedRun] = []
    /// The checkpoints claims read with their jobs (a value of `nil`: the job had none), by job id, until the run
    /// first loads its checkpoint, saves one or ends: the first `loadCheckpoint` of a claimed run costs no round
    /// trip. Once that run saved or ended, the store has the newer state.
    private var checkpoints: [String: JSONValue?] = [:]

    /// No claim, nothing held.
    nonisolated init() {}

    /// Whether no claim is in flight or put off.
    var isIdle: Bool { phase == .none }

    /// Whether a claim waits for the group in flight to be answered.
    var isPutOff: Bool { phase == .putOff }

    /// How many claimed jobs wait for a slot.
    var heldCount: Int { held.count }

    /// A claim for free slots is asked for: sent now unless one is in flight (then its answer claims again) or a
    /// group is (a job the group puts back in the queue must be announced, and its lease released, before it can
    /// be claimed again; the group's answer claims).
    func ask(groupInFlight: Bool) -> Asked {
        if case .inFlight = phase {
            phase = .inFlight(again: true)
            return .wait
        }
        guard !groupInFlight else {
            phase = .putOff
            return .wait
        }
        phase = .inFlight(again: false)
        return .send
    }

    /// A claim of a job that outranks a run (preemption) is asked for: sent only when no claim is in flight or put
    /// off and no group is in flight.
    /// - Returns: whether to send it (it is in flight then).
    func askAlone(groupInFlight: Bool) -> Bool {
        guard phase == .none, !groupInFlight else { return false }
        phase = .inFlight(again: false)
        return true
    }

    /// The claim in flight is answered: none is in flight any more. The caller runs what it took, then calls
    /// `resumeWaiters()`, then claims again if asked to.
    /// - Returns: whether something asked for a claim meanwhile; `nil` if no claim was in flight (the answer is
    ///   ignored).
    func answered() -> Bool? {
        guard case .inFlight(let again) = phase else { return nil }
        phase = .none
        return again
    }

    /// Resumes the `settled()` callers once an answered claim's jobs were launched.
    func resumeWaiters() {
        answerWaiters.resumeAll()
    }

    /// Waits until no claim is in flight.
    func settled() async {
        guard case .inFlight = phase else { return }
        await answerWaiters.wait()
    }

    /// Keeps the checkpoint `run` was claimed with, for its run's first `loadCheckpoint`.
    func remember(_ run: ClaimedRun) {
        checkpoints.updateValue(run.checkpoint, forKey: run.job.id)
    }

    /// Takes the checkpoint job `id` was claimed with.
    /// - Returns: `nil` if none is kept (never claimed, or already taken or forgotten); `.some(nil)` if the job
    ///   had no checkpoint when claimed.
    func takeCheckpoint(of id: String) -> JSONValue?? {
        checkpoints.removeValue(forKey: id)
    }

    /// Forgets the checkpoint job `id` was claimed with (its run saved a newer one, or ended).
    func forgetCheckpoint(of id: String) {
        checkpoints.removeValue(forKey: id)
    }

    /// Holds a job claimed over this daemon's runs until a slot is free.
    func hold(_ run: ClaimedRun) {
        held.append(run)
    }

    /// Takes the oldest held claim, `nil` if none is held.
    func takeHeld() -> ClaimedRun? {
        held.isEmpty ? nil : held.removeFirst()
    }
}
