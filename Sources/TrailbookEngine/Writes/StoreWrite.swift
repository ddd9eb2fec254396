/// What became of one write to the job store (`Scheduler.write`, `Scheduler.settled`).
enum StoreWrite {
    /// The store took it.
    case written
    /// A shared store fenced it off (`JobStoreError.leaseLost`): another daemon holds the job now. Not a fault:
    /// there is nothing to retry, and the job's state is the other daemon's to announce.
    case fencedOff
    /// The store refused it (a lock, a full disk, an outage): `refusal` says why. The store retry is armed.
    case refused(StoreRefusal)

    /// Whether the store took it.
    var isWritten: Bool {
        if case .written = self { return true }
        return false
    }
}
