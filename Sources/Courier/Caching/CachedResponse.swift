import Foundation

/// What the caches keep about a response besides its body: the status line,
/// the headers, and the times its age is computed from (RFC 9111 §4.2.3).
struct CachedResponse: Sendable {
    var status: Int
    /// In arrival order, names in lower case.
    var headers: [(name: String, value: String)]
    /// The URL the body came from, after redirects.
    var url: String
    /// When the request that fetched it, or last revalidated it, was sent.
    var requestTime: Date
    /// When that response, or the last 304, arrived.
    var responseTime: Date
    /// When it was first stored.
    var storedAt: Date
    /// The values the request had for the header fields the response's `Vary`
    /// names, by lower-case name; a field the request lacked is absent.
    var varyValues: [String: String]

    init(
        status: Int, headers: [(name: String, value: String)], url: String, requestTime: Date, responseTime: Date,
        storedAt: Date? = nil, varyValues: [String: String] = [:]
    ) {
        self.status = status
        self.headers = headers.map { ($0.name.lowercased(), $0.value) }
        self.url = url
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.storedAt = storedAt ?? responseTime
        self.varyValues = varyValues
    }

    /// A response as a transfer reported it, with the hop-by-hop fields left
    /// out, and the values of the `request`'s fields its `Vary` names.
    init(
        head: ResponseHead, requestURL: String, requestHeaders: [(name: String, value: String)], requestTime: Date,
        responseTime: Date
    ) {
        self.init(
            status: head.status, headers: HTTPCachePolicy.storableHeaders(head.headers), url: head.finalURL ?? requestURL,
            requestTime: requestTime, responseTime: responseTime,
            varyValues: HTTPCachePolicy.varyValues(requestHeaders: requestHeaders, responseHeaders: head.headers))
    }

    var head: ResponseHead { ResponseHead(status: status, headers: headers, finalURL: url) }

    /// Every line of the field `name` joined with ", ", or nil without one.
    func header(_ name: String) -> String? {
        HTTPCachePolicy.field(name, in: headers)
    }
}

extension CachedResponse: Equatable {
    static func == (lhs: CachedResponse, rhs: CachedResponse) -> Bool {
        lhs.status == rhs.status && lhs.url == rhs.url && lhs.requestTime == rhs.requestTime
            && lhs.responseTime == rhs.responseTime && lhs.storedAt == rhs.storedAt && lhs.varyValues == rhs.varyValues
            && lhs.headers.elementsEqual(rhs.headers, by: { $0.name == $1.name && $0.value == $1.value })
    }
}
