#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
// BytePath lives in its own module, so the photo library (which has no engine dependency) keeps paths as bytes
// too; re-exported here so that every user of the protocol and the engine keeps seeing it.
@_exported import TrailbookPaths

extension BytePath {
    /// The path's JSON value (see `BytePath`'s documentation): a string when UTF-8, else `{"base64", "text"}`.
    public var json: JSONValue {
        if let text { return .string(text) }
        return ["base64": .string(Data(bytes).base64EncodedString()), "text": .string(description)]
    }
}
