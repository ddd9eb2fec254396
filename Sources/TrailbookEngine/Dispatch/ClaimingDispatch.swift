import TrailbookLoop

/// The dispatch of a daemon sharing its store with others (`LeasingJobStoring`, the PostgreSQL store): it owns the
/// store's leasing calls (claims, the lease heartbeat, checkpoints and control requests sent without waiting) and
/// the callbacks the store makes, and the state they need: the claims (`Claims`), the heartbeat timer
/// (`Heartbeat`) and the waits for runs on other daemons (`ControlWaits`). What the answers mean for runs stays the
/// `Scheduler`'s (`Scheduler+Dispatch.swift`, `Scheduler+Leases.swift`, `Scheduler+SharedPreemption.swift`).
@LoopActor
final class ClaimingDispatch {
    /// The shared store; named nowhere else in the engine's scheduler.
    private let leasing: any LeasingJobStoring
    /// The claim in flight, the jobs held for a stopping run's slot and the checkpoints claims read.
    let claims = Claims()
    /// Renews this daemon's leases, rescues expired ones and claims work, every third of a lease.
    let heartbeat = Heartbeat()
    /// The waits of this daemon's `cancel`/`pause` requests for runs on other daemons.
    let controlWaits = ControlWaits()

    /// Dispatch by claims from `store`.
    init(store: any LeasingJobStoring) {
        leasing = store
    }

    /// This daemon's host name (`LeasingJobStoring.host`).
    var host: String { leasing.host }

    /// The heartbeat's period in milliseconds: a third of a lease (`LeasingJobStoring.leaseSeconds`), at least 10.
    var heartbeatMilliseconds: UInt64 { UInt64(max(10, leasing.leaseSeconds * 1000 / 3)) }

    /// Sets the store's callbacks, each called on the loop thread: `workAvailable` when another daemon queued or
    /// freed work, `control` when another daemon asks for a run of this one to be cancelled or paused,
    /// `controlledEnd` when a run some daemon asked to control ended (`controlWaits` hears it here), and
    /// `leaseLost` when a write sent without waiting found a run's lease lost.
    func listen(
        workAvailable: @escaping @LoopActor () -> Void,
        control: @escaping @LoopActor (String, JobControl) -> Void,
        leaseLost: @escaping @LoopActor (String) -> Void
    ) {
        leasing.onWorkAvailable = { LoopIsolation.assume { workAvailable() } }
        leasing.onControl = { id, request in LoopIsolation.assume { control(id, request) } }
        leasing.onControlledEnd = { [controlWaits] id in LoopIsolation.assume { controlWaits.heard(id) } }
        leasing.onLeaseLost = { id in LoopIsolation.assume { leaseLost(id) } }
    }

    /// Claims up to `limit` queued jobs of `kinds` (`LeasingJobStoring.sendClaim(limit:kinds:completion:)`);
    /// `answer` is called on the loop with the runs claimed or the store's error.
    func claim(
        limit: Int, kinds: [String], answer: @escaping @LoopActor (Result<[ClaimedRun], any Error>) -> Void
    ) {
        leasing.sendClaim(limit: limit, kinds: kinds) { result in answer(result) }
    }

    /// Claims at most one queued job of `kinds` above `priority`, to preempt a run
    /// (`LeasingJobStoring.sendClaim(outranking:kinds:completion:)`); `answer` as for `claim(limit:kinds:answer:)`.
    func claim(
        outranking priority: Int, kinds: [String],
        answer: @escaping @LoopActor (Result<[ClaimedRun], any Error>) -> Void
    ) {
        leasing.sendClaim(outranking: priority, kinds: kinds) { result in answer(result) }
    }

    /// One heartbeat (`LeasingJobStoring.maintainLeases`): `answer` is called on the loop with what it found.
    func tendLeases(answer: @escaping @LoopActor (LeaseMaintenance) -> Void) {
        leasing.maintainLeases { found in LoopIsolation.assume { answer(found) } }
    }

    /// Sends job `id`'s checkpoint and progress without waiting (`LeasingJobStoring.sendCheckpoint`); `answer` is
    /// called on the loop with `nil` once written or the store's error (`JobStoreError.leaseLost`: the run is no
    /// longer this daemon's), or not at all if a newer checkpoint replaced it before it was sent.
    func sendCheckpoint(
        id: String, _ checkpoint: JSONValue, progress: JobProgress,
        answer: @escaping @LoopActor ((any Error)?) -> Void
    ) {
        leasing.sendCheckpoint(id: id, checkpoint, progress: progress) { error in
            LoopIsolation.assume { answer(error) }
        }
    }

    /// Asks the daemon running job `id` to `control` it (`LeasingJobStoring.requestControl`), without holding the
    /// loop.
    /// - Returns: `true` once asked, `false` if the job was not running any more (nothing asked), or the store's
    ///   error (`JobStoreError.unavailable` past its request timeout).
    func requestControl(_ control: JobControl, of id: String) async -> Result<Bool, any Error> {
        await withCheckedContinuation { continuation in
            leasing.requestControl(control, of: id) { continuation.resume(returning: $0) }
        }
    }
}
