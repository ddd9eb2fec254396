import Foundation

/// The PostgreSQL cluster every `PostgresServer` of a test process starts from: `initdb` runs once, into
/// `template`, and each server copies its data directory (`cp -a`), which takes a fraction of `initdb`'s one to
/// five seconds. The copy holds the superuser `PostgresServer.user` with this process's random password; the
/// template is removed when the process exits.
///
/// `initdb` and the server refuse to run as root, so when the tests run as root (as on CI) every server command
/// runs as the unprivileged user `nobody` through `setpriv --reuid --regid --clear-groups` (util-linux), and the
/// directories (under /tmp, which `nobody` can reach) are handed to that user first.
struct PostgresCluster: Sendable {
    /// The template's directory: the cluster in `data/`, the superuser's password in `password`.
    let directory: String
    /// The superuser's password (asked on TCP only).
    let password: String
    /// Where the server binaries are (`pg_config --bindir`, else the newest `/usr/lib/postgresql/*/bin`).
    let binDirectory: String
    /// Whether server commands run as `nobody` (the tests run as root).
    let runAsNobody: Bool

    /// This process's template, made on first use; the error of `initdb` if it failed.
    static let template: Result<PostgresCluster, any Error> = Result { try PostgresCluster() }

    private init() throws {
        binDirectory = try Self.findBinDirectory()
        runAsNobody = getuid() == 0
        directory = try Self.makeDirectory(runAsNobody: runAsNobody)
        password = "pw-" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
        do {
            let passwordFile = directory + "/password"
            try Data((password + "\n").utf8).write(to: URL(fileURLWithPath: passwordFile))
            if runAsNobody, let nobody = getpwnam("nobody") {
                chown(passwordFile, nobody.pointee.pw_uid, nobody.pointee.pw_gid)
            }
            try Self.run(
                "\(binDirectory)/initdb",
                [
                    "-D", "\(directory)/data", "-U", "trailbook", "--auth-local=trust", "--auth-host=scram-sha-256",
                    "--pwfile=\(passwordFile)", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
                ], asNobody: runAsNobody, in: directory)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        Self.madeDirectory = directory
        atexit { if let made = PostgresCluster.madeDirectory { try? FileManager.default.removeItem(atPath: made) } }
    }

    /// The template's directory once made, for the exit handler (which cannot capture).
    nonisolated(unsafe) private static var madeDirectory: String?

    /// A new temporary directory for a cluster, under /tmp and owned by `nobody` when running as root.
    /// - Throws: `PostgresServer.SetupError` if it cannot be made.
    static func makeDirectory(runAsNobody: Bool) throws -> String {
        let base = runAsNobody ? "/tmp" : FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/trailbook-pg-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw PostgresServer.SetupError(description: "mkdtemp in \(base) failed") }
        let directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if runAsNobody {
            guard let nobody = getpwnam("nobody") else { throw PostgresServer.SetupError(description: "no user nobody") }
            chown(directory, nobody.pointee.pw_uid, nobody.pointee.pw_gid)
        }
        return directory
    }

    /// Runs `path` (as `nobody` when `asNobody`) and waits for it, its output in `<tool>.out` in `directory`.
    ///
    /// `ChildProcess`, not Foundation's `Process`: `Process.waitUntilExit` never returned for `pg_ctl start`,
    /// whose server lives on as its orphan.
    /// - Throws: `PostgresServer.SetupError` with the command's output if it fails.
    static func run(_ path: String, _ arguments: [String], asNobody: Bool = false, in directory: String) throws {
        let tool = (path as NSString).lastPathComponent
        let outputFile = "\(directory)/\(tool).out"
        let command = [path] + arguments
        let pid = try ChildProcess.spawn(
            "/usr/bin/env",
            asNobody ? ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] + command : command,
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "LC_ALL": "C"],
            output: outputFile)
        let status = ChildProcess.exitStatus(of: pid)
        guard status == 0 else {
            let printed = (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? ""
            throw PostgresServer.SetupError(
                description: "\(tool) \(arguments.joined(separator: " ")) failed (exit \(status.map(String.init) ?? "by signal")): \(printed)")
        }
    }

    private static func findBinDirectory() throws -> String {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["pg_config", "--bindir"]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        if (try? process.run()) != nil {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if process.terminationStatus == 0, FileManager.default.isExecutableFile(atPath: path + "/initdb") {
                return path
            }
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let path = "/usr/lib/postgresql/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: path + "/initdb") { return path }
        }
        throw PostgresServer.SetupError(description: "no PostgreSQL server binaries (initdb): run scripts/install-deps.sh")
    }

}
