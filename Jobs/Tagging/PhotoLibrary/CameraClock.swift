/// Capture times a camera writes when its clock was never set (or lost its battery): its factory default, not
/// when the photo was taken. Such a time is kept as the file has it, flagged (`PhotoJSON.clockNotSet`, a warning)
/// and gives no `year:`/`month:` tags.
///
/// Recognised: midnight exactly on 1 January of any year (`1998-01-01T00:00:00`, `2000-01-01T00:00:00`,
/// `2016-01-01T00:00:00`: cameras start at New Year of their model year, and a clock that is set stands at midnight
/// to the second only by chance), and any time on 1970-01-01 or 1980-01-01 (clocks counting from the Unix or the
/// FAT epoch, a few minutes in by the time the photo is taken). The offset, if any, is not looked at.
public enum CameraClock {
    /// Whether `takenAt` (ISO 8601 as `PhotoMetadata.takenAt` writes it) is a clock's factory default.
    public static func isFactoryDefault(_ takenAt: String) -> Bool {
        let text = Array(takenAt.utf8.prefix(19))
        guard text.count == 19 else { return false }
        let day = String(decoding: text[0..<10], as: UTF8.self)
        if day == "1970-01-01" || day == "1980-01-01" { return true }
        return day.hasSuffix("-01-01") && String(decoding: text[11..<19], as: UTF8.self) == "00:00:00"
    }

    /// The warning for a factory-default capture time.
    static func warning(_ takenAt: String) -> String {
        "taken_at \(takenAt) is a camera clock's factory default (its clock was never set): not used for year or "
            + "month tags"
    }
}
