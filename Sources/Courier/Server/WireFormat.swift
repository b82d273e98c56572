import JSON
import JSONRPC

/// How the scheduler's answers and notices look on the wire.
extension CourierServer {
    static let unknownReceipt = ErrorCode(rawValue: -32001)

    static func json(_ answer: Answer) -> JSON {
        switch answer {
        case .download(let reply):
            var object: [String: JSON] = [
                "receipt": .string(reply.receipt), "task": .string(reply.task), "state": .string(reply.state),
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
            return ["task": .string(id), "state": .string(state)]
        case .tasks(let reports):
            return [
                "tasks": .array(reports.map { report in
                    var object = report.figures.fields
                    object["receipts"] = .array(report.receipts.map(JSON.string))
                    object["state"] = .string(report.state.name)
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
            params["receipts"] = .array(receipts.map(JSON.string))
            return ("download/progress", .object(params))
        case .finished(let receipt, let task, let outcome):
            return ("download/finished", ["receipt": .string(receipt), "task": .string(task), "outcome": outcome.json])
        case .view(let notice):
            return notice.notification
        case .retrying(let notice):
            return ("download/retrying", notice.params)
        }
    }

    static func rpcError(_ error: SchedulerError) -> RPCError {
        switch error {
        case .unknownReceipt(let id): RPCError(unknownReceipt, "unknown receipt '\(id)'", data: ["receipt": .string(id)])
        case .unknownTask(let id): RPCError(unknownReceipt, "unknown task '\(id)'", data: ["task": .string(id)])
        }
    }
}

extension TaskProgress {
    var fields: [String: JSON] {
        [
            "task": .string(task),
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
        object["receipt"] = .string(receipt)
        object["state"] = .string(state)
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
            "task": .string(task), "receipts": .array(receipts.map(JSON.string)), "attempt": JSON(attempt),
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
