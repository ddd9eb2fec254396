/// What the submits under way on this daemon do (their jobs' `JobKind.duplicateKeys`), for the duplicate check
/// of `Scheduler.submit(_:)`.
///
/// A submit's entry claims its keys once it passes the check, and holds them until its submit is answered (its
/// jobs stored, or refused). A later entry whose key is held is refused as a duplicate of the holder, within its
/// batch or across submits, without asking the store: the holder's jobs are not in the store yet.
///
/// The store's half of the check may be answered after the loop ran (a shared store's read is awaited): a submit
/// committed meanwhile is then neither held nor, if the read's snapshot came before its commit, in the answer.
/// So a committed submit's claims are kept until every read begun before its release has ended
/// (`beginRead()`/`endRead(_:)`); claims of a refused submit go at once (its jobs never existed).
struct SubmitClaims {
    /// Who holds a key: the job, its submit (`Scheduler`'s serial number of the `submit(_:)` call) and its
    /// index in that submit's batch.
    struct Holder: Equatable {
        var jobID: String
        var submit: Int
        var index: Int
    }

    /// Claims by kind and key (`"kind\u{0}key"`), oldest first.
    private var claims: [String: [Holder]] = [:]
    /// The claim keys of each submit under way, for `release(submit:stored:)`.
    private var keysOfSubmit: [Int: Set<String>] = [:]
    /// Claims of stored submits kept for the reads in flight at their release, in release order: each goes once
    /// every read up to `upTo` (the newest begun at its release) has ended.
    private var kept: [(upTo: Int, submit: Int, keys: Set<String>)] = []
    /// Reads begun and not ended, by token.
    private var readsInFlight: Set<Int> = []
    private var lastReadToken = 0

    /// The oldest holder of any of `keys` of `kind`, or `nil` when none is claimed.
    func holder(of keys: [String], kind: String) -> (holder: Holder, key: String)? {
        for key in keys {
            if let holder = claims[Self.claimKey(kind, key)]?.first { return (holder, key) }
        }
        return nil
    }

    /// Records that `holder`'s job of `kind` does `keys`.
    mutating func claim(_ keys: [String], kind: String, by holder: Holder) {
        for key in Set(keys) {
            let claimKey = Self.claimKey(kind, key)
            claims[claimKey, default: []].append(holder)
            keysOfSubmit[holder.submit, default: []].insert(claimKey)
        }
    }

    /// Ends the claims of `submit`, answered: at once when its jobs were not `stored`, or when no read is in
    /// flight; else once the reads in flight now have ended.
    mutating func release(submit: Int, stored: Bool) {
        guard let keys = keysOfSubmit.removeValue(forKey: submit) else { return }
        if stored && !readsInFlight.isEmpty {
            kept.append((lastReadToken, submit, keys))
        } else {
            drop(submit: submit, keys: keys)
        }
    }

    /// Notes a store read of the check begun; returns its token for `endRead(_:)`.
    mutating func beginRead() -> Int {
        lastReadToken += 1
        readsInFlight.insert(lastReadToken)
        return lastReadToken
    }

    /// Notes the read `token` ended; drops the kept claims no read in flight can have missed.
    mutating func endRead(_ token: Int) {
        readsInFlight.remove(token)
        let oldest = readsInFlight.min() ?? Int.max
        var done = 0
        while done < kept.count, kept[done].upTo < oldest {
            drop(submit: kept[done].submit, keys: kept[done].keys)
            done += 1
        }
        kept.removeFirst(done)
    }

    private mutating func drop(submit: Int, keys: Set<String>) {
        for claimKey in keys {
            claims[claimKey]?.removeAll { $0.submit == submit }
            if claims[claimKey]?.isEmpty == true { claims[claimKey] = nil }
        }
    }

    /// Whether nothing is claimed or kept (for tests).
    var isEmpty: Bool { claims.isEmpty && keysOfSubmit.isEmpty }

    private static func claimKey(_ kind: String, _ key: String) -> String { kind + "\u{0}" + key }
}
