import TrailbookLoop

/// The reply lines of one control connection, written in the order its requests came while several of them are
/// answered at once (`ControlServer`: pipelined submits wait for their group commit together).
///
/// Each request takes a place (`open`) before it is handled, and gives its reply line to that place (`fill`);
/// a line is written once every place before it is filled, so the client reads its replies in request order.
@LoopActor
final class OrderedReplies {
    /// Writes one reply line to the connection.
    private let write: ([UInt8]) -> Void
    /// The first place whose reply is not written yet.
    private var nextToWrite = 0
    /// Places handed out so far.
    private var opened = 0
    /// Filled places waiting for an earlier one; `nil` for a request that writes no reply line of its own.
    private var filled: [Int: [UInt8]?] = [:]
    private let written = WaitList()

    /// Replies written through `write`.
    init(write: @escaping ([UInt8]) -> Void) { self.write = write }

    /// Places opened and not written yet: requests under way.
    var unanswered: Int { opened - nextToWrite }

    /// The next place in reply order.
    func open() -> Int {
        opened += 1
        return opened - 1
    }

    /// Gives place `place` its reply `line` (`nil`: none, the request wrote what it had to itself) and writes
    /// every reply now in order.
    func fill(_ place: Int, with line: [UInt8]?) {
        filled[place] = .some(line)
        while let next = filled.removeValue(forKey: nextToWrite) {
            if let next { write(next) }
            nextToWrite += 1
        }
        written.resumeAll()
    }

    /// Waits until at most `count` requests are unanswered (0: every reply is written).
    func answered(leaving count: Int = 0) async {
        while unanswered > count { await written.wait() }
    }
}
