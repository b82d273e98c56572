import JSON
import JSONRPC

/// How the scheduler's answers and notices look on the wire.
extension CourierServer {
    static let unknownReceipt = ErrorCode(rawValue: -32001)

    static func json(_ answer: Answer) -> JSON {
        switch answer {
        case .download(let reply):
            var object: [String: JSON] = [
                "receipt": .string(reply.receipt.description), "task": .string(reply.task.description),
                "state": .string(reply.state.wireName),
                "reused": .bool(reply.reused),
            ]
            if let source = reply.source { object["source"] = .string(source.rawValue) }
            if let outcome = reply.outcome { object["outcome"] = outcome.json }
            return .object(object)
        case .bound(_, let bound):
            return ["bound": .bool(bound)]
        case .cancelled(let count):
            return ["cancelled": .bool(count > 0), "count": JSON(count)]
        case .task(let id, let state):
            return ["task": .string(id.description), "state": .string(state.wireName)]
        case .tasks(let reports):
            return [
                "tasks": .array(reports.map { report in
                    var object = report.figures.fields
                    object["receipts"] = report.receipts.json
                    object["state"] = .string(report.state.wireName)
                    return .object(object)
                })
            ]
        case .receipt(let progress):
            return progress.json
        }
    }

    /// The method and params of a notice.
    static func notification(_ notice: Notice) -> (method: String, params: JSON) {
        switch notice {
        case .progress(let figures, let receipts):
            var params = figures.fields
            params["receipts"] = receipts.json
            return ("download/progress", .object(params))
        case .finished(let receipt, let task, let outcome):
            return (
                "download/finished",
                ["receipt": .string(receipt.description), "task": .string(task.description), "outcome": outcome.json]
            )
        case .view(let notice):
            return notice.notification
        case .retrying(let notice):
            return ("download/retrying", notice.params)
        }
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

extension TaskProgress {
    var fields: [String: JSON] {
        [
            "task": .string(task.description),
            "received": .integer(received),
            "expected": expected.map(JSON.integer) ?? .null,
            "fraction": fraction.map(JSON.double) ?? .null,
            "bytesPerSecond": .double(bytesPerSecond),
        ]
    }
}

extension ReceiptProgress {
    var json: JSON {
        var object = figures.fields
        object["receipt"] = .string(receipt.description)
        object["state"] = .string(state.wireName)
        return .object(object)
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
            "delay": .double(delay), "error": .object(error.fields(httpStatus: httpStatus)),
        ]
    }
}

extension TransferFailure {
    /// The members of an outcome's `error`; `httpStatus` is the response's
    /// status, named for an `http_status` error.
    func fields(httpStatus: Int?) -> [String: JSON] {
        var detail: [String: JSON] = ["code": .string(code.rawValue), "message": .string(message)]
        if code == .httpStatus, let httpStatus { detail["httpStatus"] = JSON(httpStatus) }
        if let curlCode { detail["curlCode"] = .integer(Int64(curlCode)) }
        if let expected { detail["expected"] = .string(expected) }
        if let actual { detail["actual"] = .string(actual) }
        return detail
    }
}

extension ImageInfo {
    var json: JSON { ["format": .string(format), "width": JSON(width), "height": JSON(height)] }
}

extension Outcome {
    var json: JSON {
        var object: [String: JSON] = [
            "ok": .bool(ok),
            "url": .string(url),
            "finalUrl": .string(finalURL),
            "status": status.map { JSON($0) } ?? .null,
            "httpVersion": JSON(httpVersion),
            "headers": .object(headers.mapValues(JSON.string)),
            "contentType": JSON(contentType),
            "size": .integer(size),
            "source": .string(source.rawValue),
            "durationMs": .double((durationMs * 1000).rounded() / 1000),
            "attempts": JSON(attempts),
        ]
        if let path { object["path"] = .string(path) }
        if let text { object["text"] = .string(text) }
        if let base64 { object["base64"] = .string(base64) }
        if let image { object["image"] = image.json }
        if let resumedFrom, resumedFrom > 0 { object["resumedFrom"] = .integer(resumedFrom) }
        if let error {
            var detail = error.fields(httpStatus: status)
            if let retryAfter { detail["retryAfter"] = .integer(retryAfter) }
            object["error"] = .object(detail)
        }
        return .object(object)
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
