import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the caches keep about a response besides its body: the status line,
/// the headers, the times its age is computed from (RFC 9111 §4.2.3), and
/// the body's digests that were taken when it was stored.
struct CachedResponse: Sendable {
    var status: Int
    /// In arrival order, names in lower case.
    var headers: [(name: String, value: String)] {
        didSet {
            fields = Fields(headers, rawValues: rawValues)
            headerObject = ResponseHead.joined(headers)
        }
    }
    /// The bytes of the validator fields (`Validators.fieldNames`) that
    /// are not UTF-8, by name: `headers` holds them as text, with U+FFFD in
    /// their place, and these go back to the origin.
    var rawValues: [String: [UInt8]] {
        didSet { fields = Fields(headers, rawValues: rawValues) }
    }
    /// What the caching rules read from `headers`, parsed when they are set
    /// rather than on every lookup.
    private(set) var fields: Fields
    /// `headers` as an outcome shows them: joined once, not on every hit.
    private(set) var headerObject: [String: String]
    /// The URL the body came from, after redirects.
    var url: String {
        didSet { fileName = Delivery.fileName(for: url) }
    }
    /// The file name a delivery gives the body, from `url`'s last path
    /// component: found once, not on every hit.
    private(set) var fileName: String
    /// When the request that fetched it, or last revalidated it, was sent.
    var requestTime: Date
    /// When that response, or the last 304, arrived.
    var responseTime: Date
    /// When it was first stored.
    var storedAt: Date
    /// The values the request had for the header fields the response's `Vary`
    /// names, by lower-case name; a field the request lacked is absent.
    var varyValues: [String: String]
    /// The body's digests by the algorithms some request's `integrity`
    /// named when it was fetched. The memory tier's are taken from the bytes
    /// it holds; the disk tier's are another process's word, which a body
    /// is checked against only to be refused without reading it.
    var digests: BodyDigests

    init(
        status: Int, headers: [(name: String, value: String)], url: String, requestTime: Date, responseTime: Date,
        storedAt: Date? = nil, varyValues: [String: String] = [:], digests: BodyDigests = BodyDigests(),
        rawValues: [String: [UInt8]] = [:]
    ) {
        self.status = status
        self.headers = headers.map { (HTTPCachePolicy.lowercased($0.name), $0.value) }
        self.rawValues = rawValues.filter { Validators.fieldNames.contains($0.key) }
        self.fields = Fields(self.headers, rawValues: self.rawValues)
        self.headerObject = ResponseHead.joined(self.headers)
        self.url = url
        self.fileName = Delivery.fileName(for: url)
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.storedAt = storedAt ?? responseTime
        self.varyValues = varyValues
        self.digests = digests
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
            varyValues: HTTPCachePolicy.varyValues(requestHeaders: requestHeaders, responseHeaders: head.headers),
            rawValues: head.rawValues)
    }

    /// The fields of `headers` that decide freshness, validation and `Vary`.
    struct Fields: Sendable {
        var cacheControl: CacheControl
        /// `Date`, parsed; nil without one or when it is not an HTTP date.
        var date: Date?
        /// nil without `Expires`; `.some(nil)` when it is not an HTTP date.
        var expires: Date??
        /// `Last-Modified`, parsed.
        var lastModified: Date?
        /// `Age` when its first item is delta-seconds.
        var age: TimeInterval?
        var validators: Validators
        /// What `Vary` names: nil for `*`.
        var varyNames: [String]?

        init(_ headers: [(name: String, value: String)], rawValues: [String: [UInt8]]) {
            func field(_ name: String) -> String? { HTTPCachePolicy.field(name, in: headers) }
            func bytes(_ name: String) -> [UInt8]? { rawValues[name] ?? field(name).map { Array($0.utf8) } }
            cacheControl = CacheControl(headers)
            date = field("date").flatMap(HTTPDate.parse)
            expires = field("expires").map(HTTPDate.parse)
            let lastModifiedText = field("last-modified")
            lastModified = lastModifiedText.flatMap(HTTPDate.parse)
            age = field("age").flatMap { value in
                CacheControl.deltaSeconds(value.split(separator: ",").first.map { $0.trimmingBlanks } ?? "")
            }
            validators = Validators(etag: bytes("etag"), lastModified: bytes("last-modified"))
            varyNames = HTTPCachePolicy.varyNames(headers)
        }
    }

    /// The name of the `path` file the hits of this response, stored under
    /// `key`, share: the key and the time the response was fetched or last
    /// revalidated, hashed (another response gets another file), then the
    /// file name of its URL.
    func pathFileName(key: String) -> String {
        var bytes = Array(key.utf8)
        bytes.append(UInt8(ascii: "\n"))
        withUnsafeBytes(of: responseTime.timeIntervalSince1970.bitPattern.littleEndian) { bytes += $0 }
        return String(XXH3.hash(bytes), radix: 16) + "-" + fileName
    }

    var head: ResponseHead { ResponseHead(status: status, headers: headers, finalURL: url, rawValues: rawValues) }

    /// Every line of the field `name` joined with ", ", or nil without one.
    func header(_ name: String) -> String? {
        HTTPCachePolicy.field(name, in: headers)
    }
}

extension CachedResponse: Equatable {
    static func == (lhs: CachedResponse, rhs: CachedResponse) -> Bool {
        lhs.status == rhs.status && lhs.url == rhs.url && lhs.requestTime == rhs.requestTime
            && lhs.responseTime == rhs.responseTime && lhs.storedAt == rhs.storedAt && lhs.varyValues == rhs.varyValues
            && lhs.digests == rhs.digests && lhs.rawValues == rhs.rawValues
            && lhs.headers.elementsEqual(rhs.headers, by: { $0.name == $1.name && $0.value == $1.value })
    }
}
