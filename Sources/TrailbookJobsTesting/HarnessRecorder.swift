@_spi(Harness) import TrailbookEngine
import TrailbookLoop

/// Stands in for the scheduler behind `JobKindHarness`'s contexts: keeps the checkpoint, records progress and log
/// lines, and stops the job at the harness's stop point.
@LoopActor
final class HarnessRecorder: HarnessHost {
    var progressReports: [JobProgress] = []
    var logs: [HarnessLogLine] = []
    var checkpoint: JSONValue?
    /// Checkpoint saves of the attempt running (or last run).
    var checkpointSaves = 0
    /// Where, and why, to stop the attempt running; cleared once it stopped.
    var stopPoint: (point: HarnessStopPoint, reason: CancellationReason)?
    /// The context of the attempt running: only its reports count towards the stop point.
    weak var running: JobContext?

    nonisolated init(checkpoint: JSONValue?) { self.checkpoint = checkpoint }

    func jobDidReportProgress(_ job: JobContext) {
        progressReports.append(job.progress)
        stopIfAt(job) { if case .progress(let mark) = $0 { job.progress.completed >= mark } else { false } }
    }

    func jobSaveCheckpoint(_ job: JobContext, _ checkpoint: JSONValue) throws {
        self.checkpoint = checkpoint
        if job === running { checkpointSaves += 1 }
        let saves = checkpointSaves
        stopIfAt(job) { if case .checkpointSave(let n) = $0 { saves >= n } else { false } }
    }

    func jobLoadCheckpoint(_ job: JobContext) throws -> JSONValue? { checkpoint }

    func jobLog(_ job: JobContext, level: LogLevel, message: String) {
        logs.append(HarnessLogLine(attempt: job.attempt, level: level, message: message))
        stopIfAt(job) { if case .log(let text) = $0 { message.contains(text) } else { false } }
    }

    /// Stops `job` for the stop point's reason if it is the running attempt and `reached` says it got there.
    private func stopIfAt(_ job: JobContext, _ reached: (HarnessStopPoint) -> Bool) {
        guard let (point, reason) = stopPoint, job === running, reached(point) else { return }
        stopPoint = nil
        job.harnessStop(reason)
    }
}
