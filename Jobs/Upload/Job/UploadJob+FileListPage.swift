import TrailbookLoop

extension UploadJob {
    /// Tests only (`TRAILBOOK_JOBS_TEST_FILE_LIST_PAGE`, honoured with the test kinds): the entries a folder upload
    /// reads from its file list per store call (`UploadFileList.pageSize`, 1 000 by default), so an end-to-end test
    /// crosses page boundaries with a few hundred files. `entries` is clamped to 1…10 000.
    @LoopActor
    public static func setFileListPageForTests(_ entries: Int) {
        UploadFileList.pageSize = max(1, min(entries, 10_000))
    }
}
