import ThumbnailJob
import TrailbookCLI

// The whole trailbook-jobs command line, with the `thumbnails` kind beside uploads and tagging:
// `thumbnail-jobs daemon`, `thumbnail-jobs submit --from -`, `thumbnail-jobs watch`, …
TrailbookCommandLine.main(kinds: { [ThumbnailJob()] })
