/// The validators of a stored response, for a conditional request.
struct Validators: Equatable, Sendable {
    var etag: String?
    var lastModified: String?

    var isEmpty: Bool { etag == nil && lastModified == nil }

    /// `If-None-Match` from the ETag, `If-Modified-Since` from Last-Modified
    /// (its value as the origin sent it, as RFC 9110 §13.1.3 advises).
    var requestHeaders: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        if let etag { headers.append(("If-None-Match", etag)) }
        if let lastModified { headers.append(("If-Modified-Since", lastModified)) }
        return headers
    }
}
