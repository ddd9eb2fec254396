import Foundation
import Testing
import TrailbookProtocol

@testable import TrailbookClient

/// The error code table (`ErrorCodes`) is the one source of codes and exit statuses: every code the sources emit is
/// in it, and the CLI's exit statuses and `--help` come from it.
struct ErrorCodeTableTests {
    static let root = ReferenceFilesTests.root

    /// Codes that are built at run time, listed by hand: `duplicate_<kind>` (Scheduler) for each job kind.
    static let builtCodes = Commands.jobKinds.map { "duplicate_\($0)" }

    /// Photo library codes that reach a job under another name (`PhotoLibraryService.jobError`).
    static let renamed: Set<String> = ["store"]

    @Test func everyCodeTheSourcesEmitIsInTheTable() throws {
        let emitted = try Self.emittedCodes()
        #expect(emitted.count > 60, "the scan found the codes: \(emitted.count)")
        // Literals, and the raw values of the tus, S3 and photo library code types (named or spelled by their case).
        for code in ["no_such_job", "store_unavailable", "bad_request", "offset_mismatch", "gone", "slow_down", "s3_unavailable", "unsupported_format", "truncated"] {
            #expect(emitted.contains(code), "the scan finds \(code)")
        }
        let missing = (emitted.subtracting(Self.renamed).union(Self.builtCodes)).filter { ErrorCodes.entry(for: $0) == nil }
        #expect(
            missing.isEmpty,
            "add these codes to ErrorCodes.all (Sources/TrailbookProtocol/Errors/ErrorCodes.swift), then run scripts/generate-reference.sh: \(missing.sorted())")
    }

    @Test func theTableIsSortedWithOneEntryPerCodeAndSaysWhatToDo() {
        let codes = ErrorCodes.all.map(\.code)
        #expect(codes == codes.sorted(), "in alphabetical order")
        #expect(Set(codes).count == codes.count, "each code once")
        for entry in ErrorCodes.all {
            #expect(!entry.meaning.isEmpty && !entry.remedy.isEmpty, "\(entry.code)")
            #expect(entry.code.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" }, "\(entry.code) is snake_case")
        }
    }

    /// The CLI's exit statuses come from the table: the codes README, docs/design.md and `--help` disagreed on.
    @Test func theCLIsExitStatusesComeFromTheTable() {
        func exit(_ code: String) -> Int32 { DaemonReply(error: JobError(code: code, message: "")).exitCode }
        #expect(exit("store_unavailable") == 3)
        #expect(exit("no_such_job") == 4 && exit("ambiguous_id") == 4 && exit("no_such_photo") == 4)
        #expect(exit("invalid_state") == 1 && exit("store_write_failed") == 1)
        #expect(exit("source_missing") == 2 && exit("bad_destination") == 2)
        #expect(exit("a_code_nobody_knows") == 2)
        for entry in ErrorCodes.all { #expect(exit(entry.code) == entry.exitStatus.rawValue, "\(entry.code)") }
        #expect(ExitCode.daemonUnreachable == ExitStatus.daemonUnreachable.rawValue)
    }

    @Test func helpListsTheExitCodesOfTheTable() {
        let help = Commands.all.first { $0.path == ["submit", "upload"] }!.helpText
        #expect(help.contains(ExitStatus.summaryLine))
        for status in ExitStatus.allCases { #expect(help.contains("\(status.rawValue) \(status.meaning)")) }
        #expect(ExitStatus.summaryLine.contains("3 the daemon, or its shared job store, is not reachable"))
    }

    /// The codes in the sources: `code: "x"` and `"code": "x"` literals, and the raw values of the error code types
    /// of the job kinds (`TusError.Code`, `S3Error.Code`, `PhotoLibraryError.Code`).
    static func emittedCodes() throws -> Set<String> {
        var codes: Set<String> = []
        let literal = try Regex(#"(?:code: |"code": )"([a-z][a-z0-9_]*)""#)
        for file in try swiftFiles(under: ["Sources", "Jobs"]) where !file.hasSuffix("ErrorCodes.swift") {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            for match in text.matches(of: literal) {
                if let code = match.output[1].substring { codes.insert(String(code)) }
            }
            if file.hasSuffix("TusError.swift") || file.hasSuffix("S3Error.swift") || file.hasSuffix("PhotoLibraryError.swift") {
                codes.formUnion(rawValues(in: text))
            }
        }
        return codes
    }

    /// The raw values of the cases of the `enum Raw`, `enum Code` and `enum Kind` in `text`: `name = "raw"`, or
    /// the name in snake case.
    static func rawValues(in text: String) -> Set<String> {
        var values: Set<String> = []
        var inEnum = false
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.contains("enum Raw") || trimmed.contains("enum Code") || trimmed.contains("enum Kind") {
                inEnum = true
                continue
            }
            if inEnum && trimmed.hasPrefix("}") { inEnum = false }
            guard inEnum, trimmed.hasPrefix("case ") else { continue }
            for item in trimmed.dropFirst(5).split(separator: ",") {
                let parts = item.split(separator: "=").map { $0.trimmingCharacters(in: .whitespaces) }
                if parts.count == 2 {
                    values.insert(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
                } else if let name = parts.first, !name.isEmpty {
                    values.insert(name.reduce(into: "") { $0 += $1.isUppercase ? "_" + $1.lowercased() : String($1) })
                }
            }
        }
        return values
    }

    static func swiftFiles(under folders: [String]) throws -> [String] {
        var files: [String] = []
        for folder in folders {
            let base = root.appendingPathComponent(folder).path
            guard let walker = FileManager.default.enumerator(atPath: base) else { continue }
            for case let relative as String in walker where relative.hasSuffix(".swift") { files.append(base + "/" + relative) }
        }
        return files
    }
}
