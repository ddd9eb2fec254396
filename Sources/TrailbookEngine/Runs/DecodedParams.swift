import TrailbookLoop
import TrailbookProtocol

/// Owns the params submits here decoded (the kind's `Params`, from the check that validated them), by job id,
/// until the job's run takes them: a job submitted and run by this daemon has its params decoded once, not again
/// at its start (issue 37).
///
/// A value is handed over only while the run's params are still the JSON it was decoded from (a resume with
/// changes amends them), so a run never sees other params than decoding would give it. Bounded: at most
/// `capacity` values, the oldest dropped first, so entries of jobs that never run (cancelled while queued, a
/// submit refused after its check) age out, and a million queued jobs are not held in memory.
@LoopActor
final class DecodedParams {
    /// The most values kept.
    nonisolated static let capacity = 4_096

    private struct Entry {
        var params: JSONValue
        var decoded: any Sendable
    }

    private var entries: [String: Entry] = [:]
    /// Job ids in the order kept, from `head` on; ids already taken stay until `compact` drops them.
    private var order: [String] = []
    private var head = 0

    /// Nothing kept.
    nonisolated init() {}

    /// The number of values kept.
    var count: Int { entries.count }

    /// Keeps `decoded`, the kind's params decoded from `params`, for job `id`'s run; drops the oldest value kept
    /// when `capacity` are.
    func keep(_ decoded: any Sendable, from params: JSONValue, for id: String) {
        if entries.count >= Self.capacity { dropOldest() }
        entries[id] = Entry(params: params, decoded: decoded)
        order.append(id)
        if order.count > 2 * Self.capacity { compact() }
    }

    /// Takes what was kept for job `id`: the decoded params if they were decoded from `params`, else `nil` (the
    /// caller decodes them).
    func take(_ id: String, params: JSONValue) -> (any Sendable)? {
        guard !entries.isEmpty, let entry = entries.removeValue(forKey: id) else { return nil }
        return entry.params == params ? entry.decoded : nil
    }

    private func dropOldest() {
        while head < order.count {
            let id = order[head]
            head += 1
            if entries.removeValue(forKey: id) != nil { return }
        }
    }

    /// Drops the ids of `order` no longer kept: it holds at most `capacity` afterwards, and this runs at most once
    /// every `capacity` values kept.
    private func compact() {
        order = order[head...].filter { entries[$0] != nil }
        head = 0
    }
}
