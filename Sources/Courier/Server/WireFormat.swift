import JSON
import JSONRPC

/// How the scheduler's answers and notices look on the wire.
extension CourierServer {
    static let unknownReceipt = ErrorCode(rawValue: -32001)

    /// Answers `reply` with `answer`. A `download` answer, one for every
    /// download, is written straight from its values on the output's
    /// thread, copying the text its outcome shares; the others go through
    /// `json(_:)`.
    static func send(_ answer: Answer, to reply: Reply) {
        guard case .download(let download) = answer else { return reply.success(json(answer)) }
        guard download.outcome != nil else {
            // The answer of a request that does not wait (most of them):
            // its message holds its few members, not a whole reply with
            // room for an outcome.
            let (receipt, task, state, reused, source) = (download.receipt, download.task, download.state, download.reused, download.source)
            return reply.success(estimate: download.estimatedEncodedCount) { object in
                DownloadReply.write(to: object, receipt: receipt, task: task, state: state, reused: reused, source: source)
            }
        }
        reply.success(estimate: download.estimatedEncodedCount, sharing: download.outcome?.sharedHeaders) { download.write(to: $0) }
    }

    static func json(_ answer: Answer) -> JSON {
        switch answer {
        case .download(let reply):
            return JSON(object: reply.write)
        case .bound(_, let bound):
            return ["bound": .bool(bound)]
        case .cancelled(let count):
            return ["cancelled": .bool(count > 0), "count": JSON(count)]
        case .task(let id, let state):
            return ["task": .string(id.description), "state": .string(state.wireName)]
        case .tasks(let reports):
            return [
                "tasks": .array(reports.map { report in
                    .init(object: { report.figures.write(to: $0, receipts: report.receipts, state: report.state) })
                })
            ]
        case .receipt(let progress):
            return JSON(object: { progress.figures.write(to: $0, receipt: progress.receipt, state: progress.state) })
        }
    }

    /// Sends `notice` on `connection`. `download/progress` and
    /// `download/finished`, several for every download, are written straight
    /// from their values on the output's thread.
    static func send(_ notice: consuming Notice, on connection: Connection) {
        let (method, params): (String, JSON)
        switch consume notice {
        case .progress(let figures, let receipts):
            let key = progressKey(task: figures.task, receipts: receipts)
            connection.send(notification: "download/progress", estimate: 160, coalescingKey: key) { params in
                figures.write(to: params, receipts: receipts)
            }
            return
        case .finished(let receipt, let task, let outcome):
            connection.send(
                notification: "download/finished", estimate: outcome.estimatedEncodedCount + 40, sharing: outcome.sharedHeaders
            ) { params in
                params.set("outcome", object: { outcome.write(to: $0) })
                params.set("receipt", receipt.description)
                params.set("task", task.description)
            }
            return
        case .view(let notice):
            (method, params) = notice.notification
        case .retrying(let notice):
            (method, params) = ("download/retrying", notice.params)
        }
        connection.send(notification: method, params: params, coalescingKey: coalescingKey(method, params))
    }

    /// `download/progress` of task 4 for receipts 7 and 9: a newer progress
    /// replaces an older one still waiting only when both name the same
    /// task and receipts. Numbers, not text, as several are made per
    /// download.
    static func progressKey(task: TaskID, receipts: [ReceiptID]) -> CoalescingKey {
        var numbers: [Int] = []
        numbers.reserveCapacity(1 + receipts.count)
        numbers.append(task.number)
        for receipt in receipts { numbers.append(receipt.number) }
        return CoalescingKey("download/progress", numbers: numbers)
    }

    static func rpcError(_ error: SchedulerError) -> RPCError {
        switch error {
        case .unknownReceipt(let id): unknown(receipt: id.description)
        case .unknownTask(let id): unknown(task: id.description)
        }
    }

    /// The answer for a receipt the client names that courier does not
    /// know: one it never issued, or one forgotten.
    static func unknown(receipt: String) -> RPCError {
        RPCError(unknownReceipt, "unknown receipt '\(receipt)'", data: ["receipt": .string(receipt)])
    }

    /// The answer for a task the client names that courier does not know.
    static func unknown(task: String) -> RPCError {
        RPCError(unknownReceipt, "unknown task '\(task)'", data: ["task": .string(task)])
    }
}

extension TaskID {
    /// The id `wire` names when it is written as courier writes ids (`t42`),
    /// byte for byte; nil for any other string (`t042`, `t+42`, `T42`).
    init?(wire: String) {
        guard let number = issuedNumber(wire, prefix: "t") else { return nil }
        self.init(number)
    }
}

extension ReceiptID {
    /// The id `wire` names when it is written as courier writes ids (`r42`),
    /// byte for byte; nil for any other string.
    init?(wire: String) {
        guard let number = issuedNumber(wire, prefix: "r") else { return nil }
        self.init(number)
    }
}

/// The number of an id written as `prefix` and the number in decimal, as
/// `description` writes it: no sign, no leading zero, no other byte.
private func issuedNumber(_ wire: String, prefix: Unicode.Scalar) -> Int? {
    let bytes = wire.utf8
    guard bytes.first == UInt8(ascii: prefix), let number = Int(Substring(bytes.dropFirst())), number > 0,
        String(number).utf8.elementsEqual(bytes.dropFirst())
    else { return nil }
    return number
}

extension ReplyState {
    /// As answers and `progress` write it.
    var wireName: String {
        switch self {
        case .queued: "queued"
        case .running: "running"
        case .suspended: "suspended"
        case .retrying: "retrying"
        case .finished: "finished"
        }
    }
}

extension [ReceiptID] {
    var json: JSON { .array(map { .string($0.description) }) }
}

extension DownloadReply {
    /// The `download` answer's members.
    func write(to object: JSONObjectWriter) {
        // Written where it lies: binding it would copy the whole outcome.
        if outcome != nil { object.set("outcome", object: { self.outcome?.write(to: $0) }) }
        Self.write(to: object, receipt: receipt, task: task, state: state, reused: reused, source: source)
    }

    /// The members after `outcome`.
    static func write(
        to object: JSONObjectWriter, receipt: ReceiptID, task: TaskID, state: ReplyState, reused: Bool, source: OutcomeSource?
    ) {
        object.set("receipt", receipt.description)
        object.set("reused", reused)
        if let source { object.set("source", source.rawValue) }
        object.set("state", state.wireName)
        object.set("task", task.description)
    }

    var estimatedEncodedCount: Int { 80 + (outcome?.estimatedEncodedCount ?? 0) }
}

extension TaskProgress {
    /// The figures' members, with a receipt's or a task's `receipt`,
    /// `receipts` and `state` among them where they sort.
    func write(
        to object: JSONObjectWriter, receipt: ReceiptID? = nil, receipts: [ReceiptID]? = nil, state: ReplyState? = nil
    ) {
        object.set("bytesPerSecond", bytesPerSecond)
        object.set("expected", expected)
        object.set("fraction", fraction)
        if let receipt { object.set("receipt", receipt.description) }
        if let receipts { object.set("receipts", strings: receipts.map(\.description)) }
        object.set("received", received)
        if let state { object.set("state", state.wireName) }
        object.set("task", task.description)
    }
}

extension ViewNotice {
    var notification: (method: String, params: JSON) {
        switch self {
        case .animating(let view, let animating):
            ("view/animating", ["view": .string(view), "animating": .bool(animating)])
        case .progress(let view, let received, let expected):
            (
                "view/progress",
                [
                    "view": .string(view), "fraction": fraction.map(JSON.double) ?? .null, "received": .integer(received),
                    "expected": expected.map(JSON.integer) ?? .null,
                ]
            )
        }
    }
}

extension RetryNotice {
    var params: JSON {
        [
            "task": .string(task.description), "receipts": receipts.json, "attempt": JSON(attempt),
            "delay": .double(delay), "error": JSON(object: { error.write(to: $0, httpStatus: httpStatus) }),
        ]
    }
}

extension TransferFailure {
    /// The members of an outcome's `error`; `httpStatus` is the response's
    /// status, named for an `http_status` error; `retryAfter` goes last.
    func write(to object: JSONObjectWriter, httpStatus: Int?, retryAfter: Int64? = nil) {
        if let actual { object.set("actual", actual) }
        object.set("code", code.rawValue)
        if let curlCode { object.set("curlCode", Int64(curlCode)) }
        if let expected { object.set("expected", expected) }
        if code == .httpStatus, let httpStatus { object.set("httpStatus", httpStatus) }
        object.set("message", message)
        if let retryAfter { object.set("retryAfter", retryAfter) }
    }
}

extension ImageInfo {
    func write(to object: JSONObjectWriter) {
        object.set("format", format)
        object.set("height", height)
        object.set("width", width)
    }
}

extension Outcome {
    var json: JSON { JSON(object: write) }

    /// The outcome's members, as `download/finished` carries them. Those
    /// from `finalUrl` to `httpVersion` and from `size` to `status` are
    /// copied from `sharedHeaders` when it holds them
    /// (`sharedText(response:size:)`) and the message shares it.
    func write(to object: JSONObjectWriter) {
        object.set("attempts", attempts)
        if let base64 { object.set("base64", base64) }
        object.set("contentType", contentType)
        object.set("durationMs", (durationMs * 1000).rounded() / 1000)
        if let error {
            object.set("error", object: { error.write(to: $0, httpStatus: status, retryAfter: retryAfter) })
        }
        object.set("finalUrl", sharedMembers: sharedHeaders) { object in
            Self.writeResponse(to: object, finalURL: finalURL, headers: headers, sharedHeaders: sharedHeaders, httpVersion: httpVersion)
        }
        if let image { object.set("image", object: { image.write(to: $0) }) }
        object.set("ok", ok)
        if let path { object.set("path", path) }
        if let resumedFrom, resumedFrom > 0 { object.set("resumedFrom", resumedFrom) }
        object.set("size", sharedMembers: sharedHeaders) { object in
            Self.writeFigures(to: object, size: size, source: source, status: status)
        }
        if let text { object.set("text", text) }
        object.set("url", url)
    }

    /// The members from `finalUrl` to `httpVersion`.
    private static func writeResponse(
        to object: JSONObjectWriter, finalURL: String, headers: [String: String], sharedHeaders: SharedJSON?,
        httpVersion: String?
    ) {
        object.set("finalUrl", finalURL)
        object.set("headers", shared: sharedHeaders, or: headers)
        object.set("httpVersion", httpVersion)
    }

    /// The members from `size` to `status`.
    private static func writeFigures(to object: JSONObjectWriter, size: Int64, source: OutcomeSource, status: Int?) {
        object.set("size", size)
        object.set("source", source.rawValue)
        object.set("status", status.map(Int64.init))
    }

    /// The text the outcome of every memory hit of `response` (a body of
    /// `size` bytes) shares as its `sharedHeaders`: its members from
    /// `finalUrl` to `httpVersion` and from `size` to `status`, which such
    /// an outcome takes from the stored response whatever the request
    /// (`url`, `path`, `image`, `text` are the receipt's and written apart).
    static func sharedText(response: CachedResponse, size: Int64) -> SharedJSON? {
        // As `Outcome(url:response:headers:)` takes them from the hit's head.
        let head = response.head
        let finalURL = head.finalURL ?? response.url
        let status = head.status == 0 ? nil : head.status
        let headers = response.headerObject
        var count = 120 + finalURL.utf8.count
        for (name, value) in headers { count += name.utf8.count + value.utf8.count + 6 }
        return SharedJSON(
            runs: [
                ("finalUrl", {
                    writeResponse(to: $0, finalURL: finalURL, headers: headers, sharedHeaders: nil, httpVersion: head.httpVersion)
                }),
                ("size", { writeFigures(to: $0, size: size, source: .memory, status: status) }),
            ], sizeHint: count)
    }

    /// About how many bytes `write` makes: exact but for escapes and reals.
    /// The text `sharedHeaders` holds stands for the members it writes,
    /// without going through the headers again.
    var estimatedEncodedCount: Int {
        var count = 200 + url.utf8.count + (contentType?.utf8.count ?? 0)
        count += (path?.utf8.count ?? 0) + (text?.utf8.count ?? 0) + (base64?.utf8.count ?? 0)
        if let sharedHeaders {
            count += sharedHeaders.byteCount
        } else {
            count += finalURL.utf8.count
            for (name, value) in headers { count += name.utf8.count + value.utf8.count + 6 }
        }
        if let error { count += 60 + error.message.utf8.count }
        return count
    }
}

extension InProcessDownloads.Completion {
    /// The outcome as `download/finished` carries it, with `skipped`,
    /// `alreadyComplete` and `file_exists` written in: what
    /// `courier get --json` prints.
    public var json: JSON {
        guard case .object(var fields) = outcome.json else { return outcome.json }
        if let conflict {
            fields["ok"] = false
            fields["path"] = nil
            fields["error"] = ["code": .string(InProcessDownloads.fileExists), "message": .string(conflict.description)]
        } else if skipped || alreadyComplete {
            fields[skipped ? "skipped" : "alreadyComplete"] = true
        }
        return .object(fields)
    }
}
