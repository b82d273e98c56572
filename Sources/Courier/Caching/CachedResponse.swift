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
            fields = Fields(headers)
            joinedHeaders = nil
        }
    }
    /// The bytes of the validator fields (`Validators.fieldNames`) that
    /// are not UTF-8, by name: `headers` holds them as text, with U+FFFD in
    /// their place, and these go back to the origin.
    var rawValues: [String: [UInt8]]
    /// What the caching rules read from `headers`, parsed when they are set
    /// rather than on every lookup.
    private(set) var fields: Fields
    /// `headers` joined, once the memory tier keeps them so
    /// (`keepHeaderObject()`): most stored responses are never served, and
    /// are not joined for nothing.
    private var joinedHeaders: [String: String]?
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
        let lowered =
            headers.allSatisfy { HTTPCachePolicy.isLowercased($0.name) }
            ? headers : headers.map { (HTTPCachePolicy.lowercased($0.name), $0.value) }
        self.init(
            status: status, lowercasedHeaders: lowered, fields: Fields(lowered), url: url, requestTime: requestTime,
            responseTime: responseTime, storedAt: storedAt, varyValues: varyValues, digests: digests, rawValues: rawValues)
    }

    /// A response as a transfer reported it, with the hop-by-hop fields left
    /// out, and the values of the `request`'s fields its `Vary` names.
    /// `fields` are those of `head`'s headers when the caller parsed them
    /// already (to decide whether it may be stored): they serve unless
    /// `Connection` named one of the fields they are read from.
    init(
        head: ResponseHead, fields: Fields? = nil, requestURL: String, requestHeaders: [(name: String, value: String)],
        requestTime: Date, responseTime: Date
    ) {
        let (stored, droppedListed) = HTTPCachePolicy.storable(head.headers)
        let fields = droppedListed ? Fields(stored) : fields ?? Fields(stored)
        self.init(
            status: head.status, lowercasedHeaders: stored, fields: fields, url: head.finalURL ?? requestURL,
            requestTime: requestTime, responseTime: responseTime, storedAt: nil,
            varyValues: HTTPCachePolicy.varyValues(requestHeaders: requestHeaders, names: fields.varyNames),
            digests: BodyDigests(), rawValues: head.rawValues)
    }

    /// `headers` with their names in lower case, and their `fields`.
    private init(
        status: Int, lowercasedHeaders headers: [(name: String, value: String)], fields: Fields, url: String,
        requestTime: Date, responseTime: Date, storedAt: Date?, varyValues: [String: String], digests: BodyDigests,
        rawValues: [String: [UInt8]]
    ) {
        self.status = status
        self.headers = headers
        // Most heads have no value that is not UTF-8: nothing to filter.
        self.rawValues = rawValues.isEmpty ? rawValues : rawValues.filter { Validators.fieldNames.contains($0.key) }
        self.fields = fields
        self.url = url
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.storedAt = storedAt ?? responseTime
        self.varyValues = varyValues
        self.digests = digests
    }

    /// `headers` as an outcome shows them: joined when asked, or as kept
    /// by `keepHeaderObject()`.
    var headerObject: [String: String] { joinedHeaders ?? ResponseHead.joined(headers) }

    /// Joins `headers` once for every later `headerObject`: for a response
    /// the memory tier serves again and again.
    mutating func keepHeaderObject() {
        if joinedHeaders == nil { joinedHeaders = ResponseHead.joined(headers) }
    }

    /// The file name a delivery gives the body, from `url`'s last path
    /// component.
    var fileName: String { Delivery.fileName(for: url) }

    /// The validators, as the origin sent their bytes.
    var validators: Validators {
        Validators(
            etag: rawValues["etag"] ?? fields.etag.map { Array($0.utf8) },
            lastModified: rawValues["last-modified"] ?? fields.lastModifiedText.map { Array($0.utf8) })
    }

    /// The fields of `headers` that decide freshness, validation and `Vary`.
    struct Fields: Sendable {
        var cacheControl = CacheControl()
        /// `Date`, parsed; nil without one or when it is not an HTTP date.
        var date: Date?
        /// nil without `Expires`; `.some(nil)` when it is not an HTTP date.
        var expires: Date??
        /// `Last-Modified` as text, and parsed.
        var lastModifiedText: String?
        var lastModified: Date?
        /// `Age` when its first item is delta-seconds.
        var age: TimeInterval?
        /// `ETag` as text (its bytes may be in `rawValues`).
        var etag: String?
        /// What `Vary` names: nil for `*`.
        var varyNames: [String]? = []

        /// Read in one pass over `headers` (names compared without case);
        /// a field given on several lines is their values joined with ", ",
        /// as `HTTPCachePolicy.field` joins them.
        init(_ headers: [(name: String, value: String)]) {
            var date: String?
            var expires: String?
            var age: String?
            var vary: String?
            func join(_ value: String, to field: inout String?) {
                field = field.map { $0 + ", " + value } ?? value
            }
            for (name, value) in headers {
                switch name.utf8.count {
                case 3 where HTTPCachePolicy.isNamed(name, "age"): join(value, to: &age)
                case 4 where HTTPCachePolicy.isNamed(name, "date"): join(value, to: &date)
                case 4 where HTTPCachePolicy.isNamed(name, "etag"): join(value, to: &etag)
                case 4 where HTTPCachePolicy.isNamed(name, "vary"): join(value, to: &vary)
                case 7 where HTTPCachePolicy.isNamed(name, "expires"): join(value, to: &expires)
                case 13 where HTTPCachePolicy.isNamed(name, "cache-control"): cacheControl.add(value)
                case 13 where HTTPCachePolicy.isNamed(name, "last-modified"): join(value, to: &lastModifiedText)
                default: break
                }
            }
            self.date = date.flatMap(HTTPDate.parse)
            self.expires = expires.map(HTTPDate.parse)
            lastModified = lastModifiedText.flatMap(HTTPDate.parse)
            self.age = age.flatMap { value in
                CacheControl.deltaSeconds(value.split(separator: ",").first.map { $0.trimmingBlanks } ?? "")
            }
            varyNames = vary.map(HTTPCachePolicy.varyNames(listedIn:)) ?? []
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
