import CCurl

/// One request in flight: its curl easy handle, the bytes going out and coming in, and the continuation of the
/// task that awaits it. Loop-confined; owned by `HTTPClient.transfers` from `start` until it completes.
///
/// curl's callbacks find it through `userdata` (`Unmanaged.passUnretained`), which is safe because the client keeps
/// it alive for as long as the easy handle is in the multi handle.
final class Transfer {
    let id: Int
    let easy: UnsafeMutableRawPointer
    private let request: HTTPRequest
    private var sendOffset = 0
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let onSendProgress: ((Int64) -> Void)?
    private var lastReportedSent: Int64 = -1

    private var status = 0
    private var responseHeaders = HTTPHeaders()
    private var responseBody: [UInt8] = []

    /// Makes the easy handle and sets every option.
    /// - Throws: `HTTPError` if curl rejects an option (for example an unsupported URL scheme).
    init(id: Int, request: HTTPRequest, onSendProgress: ((Int64) -> Void)?) throws(HTTPError) {
        guard let easy = curl_easy_init() else {
            throw HTTPError(kind: .other, message: "curl_easy_init failed")
        }
        self.id = id
        self.easy = easy
        self.request = request
        self.onSendProgress = onSendProgress
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        do throws(HTTPError) {
            try configure()
        } catch {
            cleanUp()
            throw error
        }
    }

    /// The awaiting task, resumed exactly once by `finish` or `fail`.
    var continuation: CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>?

    private func check(_ code: CURLcode, _ what: String) throws(HTTPError) {
        if code != CURLE_OK { throw HTTPError(curl: code, detail: "\(what): \(String(cString: curl_easy_strerror(code)))") }
    }

    private func configure() throws(HTTPError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        try check(tb_easy_setopt_str(easy, CURLOPT_URL, request.url), "URL")
        try check(tb_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https"), "protocols")
        try check(tb_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1), "NOSIGNAL")
        try check(tb_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer), "ERRORBUFFER")
        try check(tb_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, request.connectTimeoutMilliseconds), "timeout")
        if let total = request.timeoutMilliseconds {
            try check(tb_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, total), "timeout")
        }
        if let stall = request.stallTimeoutSeconds {
            try check(tb_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1), "LOW_SPEED_LIMIT")
            try check(tb_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, stall), "LOW_SPEED_TIME")
        }
        if let rate = request.maxSendBytesPerSecond {
            try check(tb_easy_setopt_off(easy, CURLOPT_MAX_SEND_SPEED_LARGE, curl_off_t(rate)), "MAX_SEND_SPEED")
        }
        if let ca = request.caBundlePath {
            try check(tb_easy_setopt_str(easy, CURLOPT_CAINFO, ca), "CAINFO")
        }

        let method = request.method.uppercased()
        if method == "HEAD" {
            try check(tb_easy_setopt_long(easy, CURLOPT_NOBODY, 1), "NOBODY")
        } else if method == "GET" && request.body.isEmpty {
            try check(tb_easy_setopt_long(easy, CURLOPT_HTTPGET, 1), "HTTPGET")
        } else {
            // Every other method sends its body (possibly empty) through the read callback with a Content-Length.
            try check(tb_easy_setopt_long(easy, CURLOPT_UPLOAD, 1), "UPLOAD")
            try check(tb_easy_setopt_off(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(request.body.count)), "INFILESIZE")
            try check(tb_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, request.method), "CUSTOMREQUEST")
            try check(tb_easy_setopt_ptr(easy, CURLOPT_READDATA, me), "READDATA")
            try check(tb_easy_setopt_read_cb(easy) { buffer, size, count, data in
                Unmanaged<Transfer>.fromOpaque(data!).takeUnretainedValue().read(into: buffer!, capacity: size * count)
            }, "READFUNCTION")
            try check(tb_easy_setopt_ptr(easy, CURLOPT_SEEKDATA, me), "SEEKDATA")
            try check(tb_easy_setopt_seek_cb(easy) { data, offset, origin in
                Unmanaged<Transfer>.fromOpaque(data!).takeUnretainedValue().seek(to: Int(offset), origin: origin)
            }, "SEEKFUNCTION")
        }

        for (name, value) in request.headers {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }
        // A 100-continue round trip costs a second per chunk against servers that ignore it; tus does not need it.
        headerList = curl_slist_append(headerList, "Expect:")
        try check(tb_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList), "HTTPHEADER")

        try check(tb_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me), "HEADERDATA")
        try check(tb_easy_setopt_header_cb(easy) { buffer, size, count, data in
            Unmanaged<Transfer>.fromOpaque(data!).takeUnretainedValue().receiveHeader(buffer!, count: size * count)
        }, "HEADERFUNCTION")
        try check(tb_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me), "WRITEDATA")
        try check(tb_easy_setopt_write_cb(easy) { buffer, size, count, data in
            Unmanaged<Transfer>.fromOpaque(data!).takeUnretainedValue().receiveBody(buffer!, count: size * count)
        }, "WRITEFUNCTION")
        if onSendProgress != nil || request.stallTimeoutSeconds != nil {
            try check(tb_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0), "NOPROGRESS")
            try check(tb_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, me), "XFERINFODATA")
            try check(tb_easy_setopt_xferinfo_cb(easy) { data, _, received, _, sent in
                Unmanaged<Transfer>.fromOpaque(data!).takeUnretainedValue().progress(
                    sent: Int64(sent), received: Int64(received))
            }, "XFERINFOFUNCTION")
        }
    }

    /// The quiet watch: when no byte moved either way (`sent` + `received`) last changed, and whether the transfer
    /// was aborted for it.
    private var lastMove = ContinuousClock.now
    private var lastMoved: Int64 = -1
    private var abortedQuiet = false

    // MARK: curl callbacks (on the loop thread, inside curl_multi_socket_action)

    private func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        let count = min(capacity, request.body.count - sendOffset)
        guard count > 0 else { return 0 }
        request.body.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + sendOffset, byteCount: count)
        }
        sendOffset += count
        return count
    }

    private func seek(to offset: Int, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0, offset <= request.body.count else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
        sendOffset = offset
        return Int32(CURL_SEEKFUNC_OK)
    }

    private func receiveHeader(_ buffer: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        let line = String(decoding: UnsafeRawBufferPointer(start: buffer, count: count), as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            // A new response begins (after a 100 Continue, or a retried request): forget the previous one's fields.
            responseHeaders = HTTPHeaders()
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon]
            let value = line[line.index(after: colon)...].trimmingSpaces()
            responseHeaders.add(name: String(name), value: value)
        }
        return count
    }

    private func receiveBody(_ buffer: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        responseBody.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: count))
        return count
    }

    /// curl's progress callback: reports bytes sent, and aborts the transfer (returns non-zero) once no byte
    /// moved either way for `stallTimeoutSeconds`. curl's own low-speed limit measures an average over the last
    /// seconds, so after a burst (a body poured into the socket buffers) it notices a silent network several
    /// seconds late; this counts from the last byte. curl calls it at least about once a second.
    private func progress(sent: Int64, received: Int64) -> Int32 {
        if sent != lastReportedSent {
            lastReportedSent = sent
            onSendProgress?(sent)
        }
        let now = ContinuousClock.now
        if sent + received != lastMoved {
            lastMoved = sent + received
            lastMove = now
        } else if let stall = request.stallTimeoutSeconds, now - lastMove >= .seconds(stall) {
            abortedQuiet = true
            return 1
        }
        return 0
    }

    // MARK: completion

    /// Resumes the awaiting task with the outcome of `code` and frees the easy handle. Call once, after the easy
    /// handle has left the multi handle.
    func finish(_ code: CURLcode) {
        let outcome: Result<HTTPResponse, HTTPError>
        if code == CURLE_OK {
            var status = 0
            _ = tb_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            outcome = .success(HTTPResponse(status: status, headers: responseHeaders, body: responseBody))
        } else if abortedQuiet {
            let seconds = request.stallTimeoutSeconds ?? 0
            outcome = .failure(HTTPError(
                kind: .timedOut, message: "no byte moved for \(seconds) s (the network or the server went silent)",
                curlCode: Int32(bitPattern: CURLE_OPERATION_TIMEDOUT.rawValue)))
        } else {
            outcome = .failure(HTTPError(curl: code, detail: String(cString: errorBuffer)))
        }
        complete(outcome)
    }

    /// Resumes the awaiting task with `error` and frees the easy handle. Call once, after the easy handle has left
    /// the multi handle (or was never added).
    func fail(_ error: HTTPError) { complete(.failure(error)) }

    private func complete(_ outcome: Result<HTTPResponse, HTTPError>) {
        // The body bytes curl sent on the connection, whatever the outcome: what a caller counts as handed over.
        var uploaded: curl_off_t = 0
        _ = tb_easy_getinfo_off(easy, CURLINFO_SIZE_UPLOAD_T, &uploaded)
        var outcome = outcome
        switch outcome {
        case .success(var response):
            response.bytesSent = Int64(uploaded)
            outcome = .success(response)
        case .failure(var error):
            error.bytesSent = Int64(uploaded)
            outcome = .failure(error)
        }
        cleanUp()
        continuation?.resume(returning: outcome)
        continuation = nil
    }

    private func cleanUp() {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        headerList = nil
        errorBuffer.deallocate()
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}
