/// The library's perceptual hashes in memory, in local-ID order, for near-duplicate search: 16 bytes a photo
/// (1 000 000 photos: 16 MB), scanned with one XOR and one population count per photo.
///
/// `PhotoStore` keeps one, loaded from the `phash` column on the first search and kept in step with the store's
/// own writes, so a search costs a pass over an array instead of a SQLite scan of the `photos` table (which made
/// tagging a whole library quadratic in SQLite row reads).
struct PerceptualHashIndex {
    /// Local IDs, ascending; `hashes[i]` is the hash of `ids[i]`.
    private var ids: [PhotoLocalID] = []
    private var hashes: [UInt64] = []

    /// An index of `entries`, which must be in ascending local-ID order, each ID once.
    init(ascending entries: [(PhotoLocalID, UInt64)]) {
        ids = entries.map(\.0)
        hashes = entries.map(\.1)
    }

    /// How many photos have a hash.
    var count: Int { ids.count }

    /// Records (or replaces) the hash of photo `id`.
    mutating func set(_ hash: PerceptualHash, for id: PhotoLocalID) {
        let at = position(of: id)
        if at < ids.count, ids[at] == id {
            hashes[at] = hash.value
        } else {
            ids.insert(id, at: at)
            hashes.insert(hash.value, at: at)
        }
    }

    /// Forgets the hash of photo `id` (its file changed), if it had one.
    mutating func remove(_ id: PhotoLocalID) {
        let at = position(of: id)
        guard at < ids.count, ids[at] == id else { return }
        ids.remove(at: at)
        hashes.remove(at: at)
    }

    /// The photo before `id` (lower local ID) whose hash is nearest to `hash` within `maxDistance` bits (Hamming
    /// distance), with the distance; ties go to the lower local ID. `nil` if none is that near.
    func nearest(to hash: PerceptualHash, maxDistance: Int, before id: PhotoLocalID) -> (
        localID: PhotoLocalID, distance: Int
    )? {
        var best: (index: Int, distance: Int)?
        var limit = maxDistance
        for index in 0..<position(of: id) {
            let distance = (hashes[index] ^ hash.value).nonzeroBitCount
            if distance <= limit, distance < (best?.distance ?? Int.max) {
                best = (index, distance)
                if distance == 0 { break }
                limit = distance - 1
            }
        }
        return best.map { (ids[$0.index], $0.distance) }
    }

    /// The index of the first entry with local ID ≥ `id` (binary search).
    private func position(of id: PhotoLocalID) -> Int {
        var low = 0, high = ids.count
        while low < high {
            let mid = (low + high) / 2
            if ids[mid] < id { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
