/// A long step of a job that moves none of its units: listing a destination, comparing a folder with it, hashing
/// files to tell whether they are there already. Published beside the unit count while it lasts ("listing the
/// destination: 41 000 objects"), so people see what the job is doing, and each step of its count is movement for
/// the stall timeout (`JobContext.reportPhase`). JSON, inside the progress object: `phase` =
/// `{"label", "count", "unit"}`, absent when the job is in no such step.
public struct ProgressPhase: Sendable, Equatable {
    /// What the job is doing, in words, lower case: "listing the destination", "comparing with the destination".
    public var label: String
    /// How far it got, in `unit`: objects listed, files checked, bytes hashed. Only grows within one phase.
    public var count: Int64
    /// What `count` counts (`objects`, `files`, `bytes`; bytes are shown as sizes).
    public var unit: ProgressUnit

    /// The phase `label`, `count` `unit`s into it.
    public init(label: String, count: Int64, unit: ProgressUnit) {
        self.label = label
        self.count = count
        self.unit = unit
    }

    /// The JSON object `{"count", "label", "unit"}`.
    public var json: JSONValue {
        ["count": .number(Double(count)), "label": .string(label), "unit": .string(unit.rawValue)]
    }

    /// Reads the shape `json` writes; `nil` for anything else.
    public init?(json: JSONValue) {
        guard let label = json["label"]?.stringValue, let count = json["count"]?.intValue,
            let unit = json["unit"]?.stringValue.flatMap(ProgressUnit.init(rawValue:))
        else { return nil }
        self.init(label: label, count: count, unit: unit)
    }
}
