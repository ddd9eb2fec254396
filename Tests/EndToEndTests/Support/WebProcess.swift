import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real `trailbook-jobs web` process against a `DaemonHarness`'s daemon: started with `--port 0`, its URL (with
/// the token) read from the one line it prints.
final class WebProcess {
    let process = Process()
    /// The URL printed, `http://127.0.0.1:PORT/PREFIX/?token=…`.
    let url: String
    /// `http://127.0.0.1:PORT`.
    let origin: String
    /// The port bound.
    let port: Int
    /// The token of the URL.
    let token: String
    /// The prefix given (`""` or `/x`).
    let prefix: String
    /// stderr so far goes here.
    let logPath: String

    /// Starts `web --port 0` with `arguments` added, in `harness`'s environment; waits up to 20 s for its URL.
    init(_ harness: DaemonHarness, arguments: [String] = [], prefix: String = "") throws {
        self.prefix = prefix
        logPath = harness.home.file("web-\(UUID().uuidString.prefix(8)).log")
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: Binary.path)
        process.arguments = ["web", "--port", "0"] + (prefix.isEmpty ? [] : ["--prefix", prefix]) + arguments
        process.environment = harness.environment
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !text.contains("\n") {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        guard let range = text.range(of: "http://127.0.0.1:") else {
            process.terminate()
            throw HarnessError("web did not print its URL; stdout: \(text)")
        }
        let url = String(text[range.lowerBound...].prefix { !$0.isWhitespace })
        self.url = url
        port = Int(url.dropFirst("http://127.0.0.1:".count).prefix { $0.isNumber })!
        origin = "http://127.0.0.1:\(port)"
        token = String(url[url.range(of: "token=")!.upperBound...])
        // Keep reading stdout so the process never blocks on a full pipe.
        output.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
    }

    deinit { stop() }

    /// The process's stderr so far.
    func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Sends `signal` and waits up to 10 s; the exit status, or `nil` if it did not exit.
    @discardableResult
    func stop(signal: Int32 = SIGKILL) -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// The session cookie, as the browser gets it by opening `url`.
    func sessionCookie() throws -> String {
        let response = try RawHTTP.send(
            port: port, "GET \(prefix)/?token=\(token) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        guard response.status == 303, let cookie = response.header("set-cookie") else {
            throw HarnessError("opening the URL gave \(response.status), not a cookie")
        }
        return String(cookie.prefix { $0 != ";" })
    }
}

/// A plain HTTP/1.1 client on a TCP socket: every byte of the request is the test's own (a foreign `Host`, no
/// `Origin`, …), and an event stream can be read line by line.
final class RawHTTP {
    /// A response's status line and header fields.
    struct Response {
        var status: Int
        var headers: [(String, String)]
        var body: String
        /// The first field named `name` (any case).
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to 127.0.0.1:`port` and writes `request` (with `Connection: close` added unless `keepOpen`).
    init(port: Int, _ request: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            close(fd)
            throw HarnessError("cannot connect to port \(port): errno \(errno)")
        }
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count
        else {
            throw HarnessError("cannot send the request")
        }
    }

    deinit { close(fd) }

    /// Sends `request` (which should say `Connection: close` or carry no body-less keep-alive) and reads the whole
    /// response.
    static func send(port: Int, _ request: String) throws -> Response {
        var text = request
        if !text.lowercased().contains("connection:") {
            text = text.replacingOccurrences(of: "\r\n\r\n", with: "\r\nConnection: close\r\n\r\n")
        }
        let connection = try RawHTTP(port: port, text)
        var response = try connection.head()
        var body: [UInt8] = connection.buffer
        while let chunk = connection.readChunk() { body += chunk }
        if response.header("transfer-encoding")?.lowercased() == "chunked" { body = RawHTTP.unchunk(body) }
        response.body = String(decoding: body, as: UTF8.self)
        return response
    }

    /// Reads the status line and header fields.
    func head() throws -> Response {
        while true {
            if let end = Self.find(Array("\r\n\r\n".utf8), in: buffer) {
                let text = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeSubrange(..<(end + 4))
                var lines = text.components(separatedBy: "\r\n")
                let status = Int(lines.removeFirst().split(separator: " ")[1]) ?? 0
                let headers = lines.compactMap { line -> (String, String)? in
                    guard let colon = line.firstIndex(of: ":") else { return nil }
                    return (
                        String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                    )
                }
                return Response(status: status, headers: headers, body: "")
            }
            guard let chunk = readChunk() else { throw HarnessError("the connection closed before the header ended") }
            buffer += chunk
        }
    }

    /// The event stream's next line that starts with `prefix` (the chunk framing lines skipped), or `nil` if the
    /// stream ends or `seconds` pass.
    func line(startingWith prefix: String, within seconds: Double = 10) -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            while let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self).trimmingCharacters(in: ["\r"])
                buffer.removeSubrange(...newline)
                if line.hasPrefix(prefix) { return line }
            }
            guard let chunk = readChunk() else { return nil }
            buffer += chunk
        }
        return nil
    }

    private func readChunk() -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return n > 0 ? Array(chunk[..<n]) : nil
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where Array(haystack[start..<(start + needle.count)]) == needle
        {
            return start
        }
        return nil
    }

    private static func unchunk(_ body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var rest = body[...]
        while let end = find(Array("\r\n".utf8), in: Array(rest)) {
            let size = Int(String(decoding: rest.prefix(end), as: UTF8.self), radix: 16) ?? 0
            rest = rest.dropFirst(end + 2)
            if size == 0 { break }
            out += rest.prefix(size)
            rest = rest.dropFirst(size + 2)
        }
        return out
    }
}
