/// Why a run stops, once something asked it to: what `Scheduler.finish` records when the run's kind returns.
/// One value instead of four flags, so a run cannot be both "lease lost" and "paused", say.
enum RunStop {
    /// Nothing asked it to stop.
    case none
    /// Asked to stop for `reason` (a user's cancel, a timeout, a reclaim), `detail` saying why (it becomes the
    /// job's `cancellation.detail`). With `thenPause` the job is paused afterwards instead of queued again (a
    /// user's `pause`).
    case stopping(CancellationReason, detail: String, thenPause: Bool)
    /// The store refused the run's progress or checkpoint for good (a full disk): whatever the kind returns but
    /// success, the run ends with `failure` (retryable), not with its stop reason.
    case storeFailed(JobError)
    /// This daemon lost the job's lease (shared store): the run ends here, and nothing of its end is written or
    /// announced (the daemon that rescued the job owns it). Final: nothing asked later changes it.
    case leaseLost

    /// The same stop, paused afterwards: a `pause` that reaches a run already stopping turns its stop into a
    /// pause. A store failure or a lost lease stays as it is (neither ends in a pause).
    var pausedAfterwards: RunStop {
        guard case .stopping(let reason, let detail, _) = self else { return self }
        return .stopping(reason, detail: detail, thenPause: true)
    }

    /// The `detail` and `thenPause` of a `stopping` run; empty and `false` otherwise.
    var detailAndPause: (detail: String, thenPause: Bool) {
        guard case .stopping(_, let detail, let thenPause) = self else { return ("", false) }
        return (detail, thenPause)
    }

    /// Whether the lease was lost.
    var isLeaseLost: Bool {
        if case .leaseLost = self { return true }
        return false
    }
}
