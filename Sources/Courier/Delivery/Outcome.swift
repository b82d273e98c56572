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
    /// For a memory hit, the text of the members its entry gives every
    /// hit's outcome alike (`headers`, `finalURL`, `size`, `status`, …),
    /// made once for the entry (`sharedText(response:size:)`), which the
    /// hit's `download/finished` copies.
    var sharedHeaders: SharedJSON?
    var contentType: String?
    var size: Int64 = 0
    var path: String?
    var text: String?
    var base64: String?
    var source = OutcomeSource.network
    var durationMs = 0.0
    var image: ImageInfo?
    var error: TransferFailure?
    /// Requests to origins this outcome took: 0 for a cache hit.
    var attempts = 0
    /// With `error`: the seconds the origin's `Retry-After` asked for, when
    /// waiting that long is why courier did not try again.
    var retryAfter: Int64?
    /// The byte offset the last attempt continued a kept body from.
    var resumedFrom: Int64?

    var ok: Bool { error == nil }

    init(url: String, finalURL: String? = nil) {
        self.url = url
        self.finalURL = finalURL ?? url
    }

    init(url: String, failure: TransferFailure) {
        self.init(url: url)
        self.error = failure
    }

    /// An outcome carrying a response's status line and headers; `headers`
    /// is the response's `headerObject` when the caller holds it already.
    init(url: String, response: ResponseHead, headers: [String: String]? = nil) {
        self.init(url: url, finalURL: response.finalURL)
        status = response.status == 0 ? nil : response.status
        httpVersion = response.httpVersion
        self.headers = headers ?? response.headerObject
        contentType = response.contentType
    }
}
