import TrailbookLoop

extension UploadJob {
    /// Tests only (`TRAILBOOK_JOBS_TEST_FILE_LIST_PAGE`, honoured with the test kinds): the entries a folder upload
    /// reads from its file list per store call (`UploadFileList.pageSize`, 1 000 by default), so an end-to-end test
    /// crosses page boundaries with a few hundred files. `entries` is clamped to 1…10 000.
    @LoopActor
    public static func setFileListPageForTests(_ entries: Int) {
        UploadFileList.pageSize = max(1, min(entries, 10_000))
    }

    /// Tests only (`TRAILBOOK_JOBS_TEST_LISTING_PAUSE`, honoured with the test kinds): seconds a folder upload's
    /// first run waits after writing each page of its file list (`UploadTreeListing`), so an end-to-end test can
    /// `kill -9` the daemon while the list is being taken. Clamped to 0…10.
    @LoopActor
    public static func setListingPauseForTests(_ seconds: Double) {
        UploadTreeListing.pauseForTests = max(0, min(seconds, 10))
    }
}
