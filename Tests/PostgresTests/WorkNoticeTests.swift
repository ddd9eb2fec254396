import Testing
import TrailbookPostgres

/// `WorkNotice`: the jobs channel's payloads, and which daemons they wake.
struct WorkNoticeTests {
    @Test func payloadsReadBackAsSent() {
        for notice: WorkNotice in [.queued(queue: "default", pinnedHost: nil), .queued(queue: "photos", pinnedHost: "host a")] {
            #expect(WorkNotice(payload: notice.payload) == notice)
        }
        #expect(WorkNotice.queued(queue: "default", pinnedHost: "host-a").payload == "queue default host host-a")
    }

    /// A payload this version does not read (a rescue, an older daemon's bare queue name) wakes every daemon.
    @Test func anythingElseIsUnspecifiedAndConcernsEveryone() {
        for payload in ["rescued", "queued", "default", "", "queue", "queue ", "queue default host", "queue default pinned x"] {
            #expect(WorkNotice(payload: payload) == .unspecified, "\(payload)")
        }
        #expect(WorkNotice.unspecified.concerns(queues: ["elsewhere"], host: "b"))
    }

    @Test func aNoticeConcernsTheDaemonsOfItsQueueAndPinnedHostOnly() {
        let anyHost = WorkNotice.queued(queue: "photos", pinnedHost: nil)
        #expect(anyHost.concerns(queues: ["default", "photos"], host: "b"))
        #expect(!anyHost.concerns(queues: ["default"], host: "b"))
        let pinned = WorkNotice.queued(queue: "default", pinnedHost: "a")
        #expect(pinned.concerns(queues: ["default"], host: "a"))
        #expect(!pinned.concerns(queues: ["default"], host: "b"))
        #expect(!pinned.concerns(queues: ["photos"], host: "a"))
    }

    @Test func aTransactionSendsEachNoticeOnceAndFallsBackToOneWhenThereAreMany() {
        let notices = WorkNotice.notices(for: [("default", nil), ("default", "a"), ("default", nil), ("photos", nil)])
        #expect(notices == [
            .queued(queue: "default", pinnedHost: nil), .queued(queue: "default", pinnedHost: "a"),
            .queued(queue: "photos", pinnedHost: nil),
        ])
        let many = (0...WorkNotice.mostPerTransaction).map { (queue: "default", pinnedHost: Optional("host-\($0)")) }
        #expect(WorkNotice.notices(for: many) == [.unspecified])
        #expect(WorkNotice.notices(for: Array(many.prefix(WorkNotice.mostPerTransaction))).count == WorkNotice.mostPerTransaction)
        #expect(WorkNotice.notices(for: []).isEmpty)
    }
}
