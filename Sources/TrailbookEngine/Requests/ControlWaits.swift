import TrailbookLoop

/// Owns this daemon's waits for the ends of runs on other daemons that it asked to `cancel` or `pause` (shared
/// store), by job id: a notice that such a run ended wakes every wait for that job.
@LoopActor
final class ControlWaits {
    private var waits: [String: [ControlledEndWait]] = [:]

    /// None.
    nonisolated init() {}

    /// A new wait for the end of job `id`'s run, until `remove`.
    func add(for id: String) -> ControlledEndWait {
        let wait = ControlledEndWait()
        waits[id, default: []].append(wait)
        return wait
    }

    /// Forgets `wait` (its request was answered or gave up).
    func remove(_ wait: ControlledEndWait, for id: String) {
        waits[id]?.removeAll { $0 === wait }
        if waits[id]?.isEmpty == true { waits[id] = nil }
    }

    /// Job `id`'s run ended (a notice): every wait for it reads the job again.
    func heard(_ id: String) {
        for wait in waits[id] ?? [] { wait.heard() }
    }
}
