/// The validators of a stored response, for a conditional request: their
/// bytes as the origin sent them, which need not be UTF-8 (an entity tag is
/// opaque, RFC 9110 §8.8.3).
struct Validators: Equatable, Sendable {
    var etag: [UInt8]?
    var lastModified: [UInt8]?

    /// The fields validators are read from, whose bytes a stored response
    /// keeps when they are not UTF-8.
    static let fieldNames: Set<String> = ["etag", "last-modified"]

    var isEmpty: Bool { etag == nil && lastModified == nil }

    /// `If-None-Match` from the ETag, `If-Modified-Since` from Last-Modified
    /// (its value as the origin sent it, as RFC 9110 §13.1.3 advises); a
    /// validator that is no field value courier would send is left out.
    var requestHeaders: [(name: String, value: [UInt8])] {
        var headers: [(name: String, value: [UInt8])] = []
        if let etag, HTTPField.isSendableValidator(etag) { headers.append(("If-None-Match", etag)) }
        if let lastModified, HTTPField.isSendableValidator(lastModified) {
            headers.append(("If-Modified-Since", lastModified))
        }
        return headers
    }
}
