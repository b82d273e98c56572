import JSON

/// Where an outcome's body came from.
enum OutcomeSource: String, Sendable {
    case network
    case memory
    case disk
    case revalidated
}

/// What a receipt ended with: the `outcome` of `download/finished`.
struct Outcome: Sendable {
    var url: String
    var finalURL: String
    var status: Int?
    var httpVersion: String?
    var headers: [String: String] = [:]
    var contentType: String?
    var size: Int64 = 0
    var path: String?
    var text: String?
    var base64: String?
    var source = OutcomeSource.network
    var durationMs = 0.0
    var image: ImageInfo?
    var error: TransferFailure?

    var ok: Bool { error == nil }

    init(url: String, finalURL: String? = nil) {
        self.url = url
        self.finalURL = finalURL ?? url
    }

    init(url: String, failure: TransferFailure) {
        self.init(url: url)
        self.error = failure
    }

    /// An outcome carrying a response's status line and headers.
    init(url: String, response: ResponseHead) {
        self.init(url: url, finalURL: response.finalURL)
        status = response.status == 0 ? nil : response.status
        httpVersion = response.httpVersion
        headers = response.headerObject
        contentType = response.contentType
    }

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
        ]
        if let path { object["path"] = .string(path) }
        if let text { object["text"] = .string(text) }
        if let base64 { object["base64"] = .string(base64) }
        if let image { object["image"] = image.json }
        if let error {
            var detail: [String: JSON] = ["code": .string(error.code.rawValue), "message": .string(error.message)]
            if error.code == .httpStatus, let status { detail["httpStatus"] = JSON(status) }
            if let curlCode = error.curlCode { detail["curlCode"] = .integer(Int64(curlCode)) }
            object["error"] = .object(detail)
        }
        return .object(object)
    }
}
