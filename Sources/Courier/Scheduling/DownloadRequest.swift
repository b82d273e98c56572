import Curl
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking

enum Priority: String, Sendable, Comparable, CaseIterable {
    case high
    case normal
    case low

    var rank: Int {
        switch self {
        case .high: 0
        case .normal: 1
        case .low: 2
        }
    }

    static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rank > rhs.rank }
}

enum BodyKind: String, Sendable {
    case none
    case text
    case base64
}

enum CachePolicy: String, Sendable {
    case `default`
    case reload
    case cacheElseLoad
    case cacheOnly
}

/// The params of one `download`, checked. Its fields are held in one
/// box that every copy shares: the scheduler's records, the orders it
/// hands out and their deliveries each hold the request, so a copy costs
/// one reference rather than one per field.
struct DownloadRequest: Sendable {
    /// What a request holds.
    private struct Fields: Sendable {
        let url: String
        let scheme: String
        /// The URL carries a user name or password.
        let hasUserInfo: Bool
        /// Names as the client gave them; compared without case.
        let headers: [(name: String, value: String)]
        let slot: String?
        let priority: Priority
        let cachePolicy: CachePolicy
        let accept: [String]?
        let body: BodyKind
        let textEncoding: String?
        let destination: String?
        let maxBytes: Int64?
        let timeout: Double
        let cacheKey: String?
        let wait: Bool
        /// How many attempts may follow the first after transient failures.
        let retries: Int
        /// More http or https URLs of the same resource, asked in turn after
        /// `url` when attempts fail. Not part of the request's identity.
        let mirrors: [String]
        /// What the body must hash to; checked per receipt, so receipts of one
        /// task may expect different digests.
        let integrity: Integrity?
        /// Bytes per second its transfer may take; nil for no limit of its own.
        let maxRate: Int64?
        /// The key the caches know its response by (`ResponseCache.key(for:)`):
        /// made once, for the lookup and for the store after a transfer.
        let cacheStorageKey: String
    }

    private final class Box: Sendable {
        let fields: Fields

        init(_ fields: Fields) { self.fields = fields }
    }

    private let box: Box

    init(
        url: String, scheme: String, hasUserInfo: Bool, headers: [(name: String, value: String)], slot: String?,
        priority: Priority, cachePolicy: CachePolicy, accept: [String]?, body: BodyKind, textEncoding: String?,
        destination: String?, maxBytes: Int64?, timeout: Double, cacheKey: String?, wait: Bool,
        retries: Int = Configuration.defaultRetries, mirrors: [String] = [], integrity: Integrity? = nil, maxRate: Int64? = nil
    ) {
        box = Box(
            Fields(
                url: url, scheme: scheme, hasUserInfo: hasUserInfo, headers: headers, slot: slot, priority: priority,
                cachePolicy: cachePolicy, accept: accept, body: body, textEncoding: textEncoding, destination: destination,
                maxBytes: maxBytes, timeout: timeout, cacheKey: cacheKey, wait: wait, retries: retries, mirrors: mirrors,
                integrity: integrity, maxRate: maxRate,
                cacheStorageKey: cacheKey.map(ResponseCache.key(cacheKey:)) ?? ResponseCache.key(url: url)))
    }

    var url: String { box.fields.url }
    var scheme: String { box.fields.scheme }
    var hasUserInfo: Bool { box.fields.hasUserInfo }
    var headers: [(name: String, value: String)] { box.fields.headers }
    var slot: String? { box.fields.slot }
    var priority: Priority { box.fields.priority }
    var cachePolicy: CachePolicy { box.fields.cachePolicy }
    var accept: [String]? { box.fields.accept }
    var body: BodyKind { box.fields.body }
    var textEncoding: String? { box.fields.textEncoding }
    var destination: String? { box.fields.destination }
    var maxBytes: Int64? { box.fields.maxBytes }
    var timeout: Double { box.fields.timeout }
    var cacheKey: String? { box.fields.cacheKey }
    var wait: Bool { box.fields.wait }
    var retries: Int { box.fields.retries }
    var mirrors: [String] { box.fields.mirrors }
    var integrity: Integrity? { box.fields.integrity }
    var maxRate: Int64? { box.fields.maxRate }
    var cacheStorageKey: String { box.fields.cacheStorageKey }

    /// Header names whose values identify the user: a response to a request
    /// carrying one is never stored, and none follows a redirect to another
    /// origin.
    static let credentialHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// Whether the request carries credentials: a user name or password in
    /// its URL, or a credential header.
    var hasCredentials: Bool {
        hasUserInfo || headers.contains { Self.credentialHeaders.contains($0.name.lowercased()) }
    }

    /// Whether a response's Content-Type is one `accept` allows.
    func accepts(contentType: String?) -> Bool {
        guard let accept, !accept.isEmpty else { return true }
        guard let contentType else { return false }
        let media = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingBlanks.lowercased()
        } ?? ""
        let type = media.split(separator: "/").first.map(String.init) ?? media
        return accept.contains { pattern in
            let pattern = pattern.split(separator: ";", maxSplits: 1).first.map {
                $0.trimmingBlanks
            } ?? pattern
            return pattern == "*/*" || pattern == media || pattern == "\(type)/*"
        }
    }

    /// Why a response cannot satisfy this request, if it cannot.
    func refusal(of response: ResponseHead, size: Int64?, memoryBodyLimit: Int64) -> TransferFailure? {
        // Status 0: a scheme without status lines (file://, with --allow-scheme).
        if response.status != 0, !(200...299).contains(response.status) {
            return TransferFailure(code: .httpStatus, message: "the origin answered HTTP \(response.status)")
        }
        // The content type is looked up among the fields only for a
        // receipt that limits it.
        if let accept, !accept.isEmpty, !accepts(contentType: response.contentType) {
            return TransferFailure(
                code: .unacceptableContentType,
                message: "content type \(response.contentType ?? "(none)") is not among \(accept)")
        }
        return size.flatMap { limitRefusal(received: $0, memoryBodyLimit: memoryBodyLimit) }
    }

    /// Why a body of `received` bytes is more than this receipt takes, if it
    /// is: more than its `maxBytes`; for a body held in memory (`text` or
    /// `base64`), more than `memoryBodyLimit` (`--max-memory-body`) either
    /// as the decoded bytes, which are read back into memory, or as the
    /// JSON string the receipt's outcome carries: base64 takes four bytes
    /// for every three, and text what its escapes take, `textLength` (at
    /// least `received` when unknown). Decoded (decompressed) bytes count,
    /// so a small gzip cannot expand into gigabytes of memory. Other
    /// receipts of its task have their own limits.
    func limitRefusal(received: Int64, textLength: Int64? = nil, memoryBodyLimit: Int64) -> TransferFailure? {
        if let maxBytes, received > maxBytes {
            return TransferFailure(code: .tooLarge, message: "the body exceeds maxBytes (\(maxBytes) bytes)")
        }
        guard body != .none else { return nil }
        if received > memoryBodyLimit {
            return TransferFailure(
                code: .tooLarge, message: "the body exceeds maxMemoryBody (\(memoryBodyLimit) bytes), the limit of text and base64 bodies")
        }
        let jsonLength = body == .base64 ? Self.base64Length(of: received) : max(textLength ?? received, received)
        return jsonLength > memoryBodyLimit ? Self.tooLargeAsJSON(body, limit: memoryBodyLimit) : nil
    }

    /// The failure of a body whose JSON string takes more than `limit`.
    static func tooLargeAsJSON(_ body: BodyKind, limit: Int64) -> TransferFailure {
        TransferFailure(
            code: .tooLarge, message: "the body takes more than maxMemoryBody (\(limit) bytes) as the JSON string of its \(body.rawValue)")
    }

    /// The characters base64 writes for `count` bytes.
    static func base64Length(of count: Int64) -> Int64 {
        let (length, overflow) = (count / 3 + (count % 3 == 0 ? 0 : 1)).multipliedReportingOverflow(by: 4)
        return overflow ? .max : length
    }

    /// The charset a `text` body is decoded from: `textEncoding`, else the
    /// response's `charset`, else none (UTF-8).
    func textCharset(contentType: String?) -> String? {
        textEncoding ?? TextDecoding.charset(ofContentType: contentType)
    }
}

extension DownloadRequest {
    /// A download asked for with these values, checked: `url` (and each of
    /// `mirrors`) an absolute URL libcurl takes, `headers` and `accept`
    /// fit for a request line, `textEncoding` one courier decodes,
    /// `destination` an absolute path, `integrity` digests in Subresource
    /// Integrity form. `maxBytes`, `timeout` and `retries` left nil take
    /// `defaults`'; a `maxRate` of 0 is no limit. `download` and
    /// `courier get` both ask for downloads through here.
    init(
        url: String, headers: [(name: String, value: String)] = [], slot: String? = nil,
        priority: Priority = .normal, cachePolicy: CachePolicy = .default, accept: [String]? = nil,
        body: BodyKind = .none, textEncoding: String? = nil, destination: String? = nil, maxBytes: Int64? = nil,
        timeout: Double? = nil, cacheKey: String? = nil, wait: Bool = false, retries: Int? = nil,
        mirrors: [String] = [], integrity: String? = nil, maxRate: Int64? = nil, defaults: some Defaults
    ) throws(Refusal) {
        let checked = try Self.checkedURL(url)
        for (name, value) in headers {
            guard HTTPField.isValidName(name) else { throw .headerName(name) }
            guard HTTPField.isValidValue(value) else { throw .headerValue(name: name) }
        }
        var headers = headers
        let accept = accept.map { $0.map { $0.lowercased().trimmingBlanks } }
        if let accept, !accept.allSatisfy(HTTPField.isValidValue) { throw .acceptEntry }
        if let accept, !headers.contains(where: { $0.name.lowercased() == "accept" }), !accept.isEmpty {
            headers.append(("Accept", accept.joined(separator: ", ")))
        }
        if headers.count > 1 { headers.sort { $0.name.lowercased() < $1.name.lowercased() } }
        if let textEncoding, !TextDecoding.isSupported(textEncoding) { throw .textEncoding(textEncoding) }
        if let destination, !destination.isAbsolutePath { throw .relativeDestination }
        if let destination, !Self.holds(destination, noByteBut: { $0 != 0 }) { throw .destinationWithNUL }
        for mirror in mirrors { try Self.checkMirror(mirror) }
        var expected: Integrity?
        if let integrity {
            do throws(Integrity.Malformed) {
                expected = try Integrity(parsing: integrity)
            } catch {
                throw .integrity(error.message)
            }
        }
        self.init(
            url: url, scheme: checked.scheme, hasUserInfo: checked.hasUserInfo, headers: headers, slot: slot,
            priority: priority, cachePolicy: cachePolicy, accept: accept, body: body, textEncoding: textEncoding,
            destination: destination, maxBytes: maxBytes ?? defaults.maxBytes, timeout: timeout ?? defaults.timeout,
            cacheKey: cacheKey, wait: wait, retries: retries ?? defaults.retries, mirrors: mirrors,
            integrity: expected, maxRate: maxRate.flatMap { $0 > 0 ? $0 : nil })
    }

    /// What a download left out takes from the settings: its `maxBytes`,
    /// `timeout` and `retries`. `Configuration` gives them, and so does
    /// `DefaultValues`, the three alone, which a server copies from its
    /// settings for each request instead of the whole configuration.
    protocol Defaults {
        var maxBytes: Int64? { get }
        var timeout: Double { get }
        var retries: Int { get }
    }

    /// The settings a download takes when it leaves them out, and no more.
    struct DefaultValues: Defaults, Sendable {
        var maxBytes: Int64?
        var timeout: Double
        var retries: Int

        init(_ settings: Configuration) {
            maxBytes = settings.maxBytes
            timeout = settings.timeout
            retries = settings.retries
        }
    }

    /// Why a download cannot be asked for as given.
    enum Refusal: Error, Hashable, Sendable, CustomStringConvertible {
        case invalidURL
        case noHost
        case headerName(String)
        case headerValue(name: String)
        case acceptEntry
        case textEncoding(String)
        case relativeDestination
        case destinationWithNUL
        case invalidMirror
        case mirrorScheme
        /// Why the `integrity` text is not digests in Subresource Integrity form.
        case integrity(String)

        /// The value refused, by its name in a request.
        var field: String {
            switch self {
            case .invalidURL, .noHost: "url"
            case .headerName, .headerValue: "headers"
            case .acceptEntry: "accept"
            case .textEncoding: "textEncoding"
            case .relativeDestination, .destinationWithNUL: "destination"
            case .invalidMirror, .mirrorScheme: "mirrors"
            case .integrity: "integrity"
            }
        }

        var description: String {
            switch self {
            case .invalidURL: "param 'url' is not a valid absolute URL"
            case .noHost: "param 'url' has no host"
            case .headerName(let name): "header name '\(name)' is not a valid HTTP token"
            case .headerValue(let name): "header '\(name)' contains CR, LF, NUL or another control character"
            case .acceptEntry: "an 'accept' entry contains CR, LF, NUL or another control character"
            case .textEncoding(let name): "unknown text encoding '\(name)'"
            case .relativeDestination: "param 'destination' must be an absolute path"
            case .destinationWithNUL: "param 'destination' contains a NUL byte"
            case .invalidMirror: "a 'mirrors' entry is not a valid absolute URL with a host"
            case .mirrorScheme: "a 'mirrors' entry must be an http or https URL"
            case .integrity(let message): message
            }
        }
    }

    /// What a download needs of a URL it has checked.
    struct CheckedURL: Sendable {
        var url: String
        var scheme: String
        var hasUserInfo: Bool
    }

    /// The last URL libcurl parsed for a check, and how many of its first
    /// bytes decide the check (`CurlURL.decidingPrefixLength(of:)`; 0 when
    /// they are not known).
    private struct LastURL: Sendable {
        var checked: CheckedURL
        var decidingPrefix: Int
    }

    /// The last URL checked: clients often ask for one URL many times in a
    /// row (a pipelined run of cache hits), or for many URLs of one origin
    /// (a batch of files of one server), and libcurl's parse is the dearest
    /// part of the check. A URL equal to it, or one with the same bytes up
    /// to the end of its authority, takes its result. Compared as bytes,
    /// as URLs are.
    private static let lastURL = Locked<LastURL?>(nil)

    /// Longer URLs are parsed whole: far below the 8,000,000 bytes libcurl
    /// takes at most, and longer than any URL a batch holds many of.
    static let longestSharedCheck = 1 << 16

    /// `url` checked: no blanks or control bytes, an absolute URL libcurl
    /// takes, with a host for http and https.
    static func checkedURL(_ url: String) throws(Refusal) -> CheckedURL {
        if let last = lastURL.withLock({ $0 }) {
            if last.checked.url.isExactly(url) { return last.checked }
            if last.decidingPrefix > 0, url.utf8.count <= longestSharedCheck,
                Self.startsWithBytes(url, of: last.checked.url, count: last.decidingPrefix),
                Self.holds(url, noByteBut: isURLByte)
            {
                return CheckedURL(url: url, scheme: last.checked.scheme, hasUserInfo: last.checked.hasUserInfo)
            }
        }
        guard Self.holds(url, noByteBut: isURLByte), let parsed = CurlURL.checked(url) else {
            throw .invalidURL
        }
        let web = parsed.scheme == "http" || parsed.scheme == "https"
        if web, (parsed.host ?? "").isEmpty {
            throw .noHost
        }
        let checked = CheckedURL(url: url, scheme: parsed.scheme, hasUserInfo: parsed.hasUserInfo)
        let prefix = web ? CurlURL.decidingPrefixLength(of: url) ?? 0 : 0
        lastURL.withLock { $0 = LastURL(checked: checked, decidingPrefix: prefix) }
        return checked
    }

    /// What a URL may hold: no control byte, space or DEL.
    private static func isURLByte(_ byte: UInt8) -> Bool { byte > 0x20 && byte != 0x7F }

    /// Whether `text` starts with the first `count` UTF-8 bytes of `other`,
    /// which has at least that many.
    private static func startsWithBytes(_ text: String, of other: String, count: Int) -> Bool {
        guard text.utf8.count >= count, other.utf8.count >= count else { return false }
        let compared = text.utf8.withContiguousStorageIfAvailable { mine in
            other.utf8.withContiguousStorageIfAvailable { theirs in
                memcmp(mine.baseAddress!, theirs.baseAddress!, count) == 0
            }
        }
        return (compared ?? nil) ?? text.utf8.prefix(count).elementsEqual(other.utf8.prefix(count))
    }

    /// Whether every UTF-8 byte of `text` is one `allowed` allows: read
    /// from where the string holds them in one piece (a native string
    /// always does), as a loop over the bytes of a view steps through the
    /// string's storage for each.
    static func holds(_ text: String, noByteBut allowed: (UInt8) -> Bool) -> Bool {
        let checked = text.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where !allowed(byte) { return false }
            return true
        }
        return checked ?? text.utf8.allSatisfy(allowed)
    }

    /// A `mirrors` entry checked as `url` is, and http or https whatever
    /// `--allow-scheme` allows.
    private static func checkMirror(_ mirror: String) throws(Refusal) {
        let scheme: String
        do throws(Refusal) {
            scheme = try checkedURL(mirror).scheme
        } catch {
            throw .invalidMirror
        }
        guard scheme == "http" || scheme == "https" else { throw .mirrorScheme }
    }
}

extension Configuration: DownloadRequest.Defaults {}
