import PhotoLibrary
import TrailbookEngine

/// Worker task `photo.inspect`: reads one photo file and returns its `PhotoInspection` (stable ID, stamp, EXIF
/// metadata and, when asked, the pixel analysis). Runs in a worker process because it parses untrusted bytes.
///
/// Payload: `{"path": BytePath, "pixels": Bool, "keywords": Bool}` (`path`: a string, or `{"base64", "text"}` for a
/// name that is not UTF-8; `keywords`: also read the XMP keywords). Errors:
/// the photo library's codes (`empty`, `unsupported_format`, `io`, `too_large`, …) as `JobError`s. A photo whose
/// pixels do not decode is a result with `pixelError` set.
public struct InspectPhotoTask: WorkerTask {
    /// `photo.inspect`.
    public static let name = "photo.inspect"

    /// Decoder limits (pixel count, memory) applied to every decode.
    public var limits = DecodeLimits()

    /// A task decoding within `limits` (default: `DecodeLimits()`, 100 megapixels).
    public init(limits: DecodeLimits = DecodeLimits()) {
        self.limits = limits
    }

    /// Inspects the file at `payload.path` (pixels too when `payload.pixels` is true).
    ///
    /// - Returns: the `PhotoInspection` as JSON.
    /// - Throws: `JobError` with the photo library's code (`empty`, `unsupported_format`, `corrupt`, `io`, `too_large`) or
    ///   `bad_request`.
    public func perform(_ payload: JSONValue) throws -> JSONValue {
        guard let value = payload["path"], let path = try? JSONCoding.convert(value, to: BytePath.self) else {
            throw JobError(code: "bad_request", message: "photo.inspect needs a path (a string or {\"base64\": …})")
        }
        do {
            let inspection = try PhotoInspection(
                path: path, analysePixels: payload["pixels"]?.boolValue ?? false, limits: limits,
                readKeywords: payload["keywords"]?.boolValue ?? false)
            return JSONCoding.value(of: inspection)
        } catch {
            throw error.jobError
        }
    }
}

/// The worker tasks of the tagging job kinds, for the `worker` subcommand's table.
public enum TaggingWorkerTasks {
    /// Registers every tagging task in `table`, decoding within `limits` (the daemon's `--max-megapixels`).
    public static func register(in table: inout WorkerTaskTable, limits: DecodeLimits = DecodeLimits()) {
        table.register(InspectPhotoTask(limits: limits))
    }
}
