import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// HTTP caching rules (RFC 9111) for a private cache, as pure functions of
/// headers and an injected `now`.
///
/// courier is a private cache, so `private` responses are stored and
/// `s-maxage` is ignored for freshness. Its disk tier is shared by every
/// process and client on one cache directory, so a request carrying
/// `Authorization` is treated as a shared cache must (§3.5): its response is
/// stored only with `public`, `s-maxage` or `must-revalidate`.
/// `isStorable` admits every status RFC 9111 allows; courier itself only
/// ever stores 2xx responses, since other statuses fail the download.
enum HTTPCachePolicy {
    /// Statuses heuristically cacheable (RFC 9110 §15.1); 206 is left out
    /// because courier does not store partial content.
    static let cacheableByDefault: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]
    /// Heuristic freshness is this fraction of the time since Last-Modified…
    static let heuristicFraction = 0.1
    /// …but never more than a day.
    static let heuristicLimit: TimeInterval = 86_400
    /// Fields that describe the connection, not the response: never stored
    /// (RFC 9111 §3.1).
    static let hopByHopFields: Set<String> = [
        "connection", "keep-alive", "proxy-authenticate", "proxy-authentication-info", "proxy-authorization",
        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    ]
    /// Fields a 304 does not update because they frame the stored body
    /// (RFC 9111 §3.2), besides the hop-by-hop ones.
    static let framingFields: Set<String> = ["content-length", "content-encoding", "content-range"]

    // MARK: - Storing

    /// Whether a response may be stored at all (RFC 9111 §3).
    static func isStorable(
        status: Int, requestHeaders: [(name: String, value: String)], responseHeaders: [(name: String, value: String)]
    ) -> Bool {
        isStorable(
            status: status, requestHeaders: requestHeaders, cacheControl: CacheControl(responseHeaders),
            hasExpires: field("expires", in: responseHeaders) != nil, isMatchable: varyNames(responseHeaders) != nil)
    }

    /// `isStorable` of a response whose headers' `fields` are parsed.
    static func isStorable(
        status: Int, requestHeaders: [(name: String, value: String)], response fields: CachedResponse.Fields
    ) -> Bool {
        isStorable(
            status: status, requestHeaders: requestHeaders, cacheControl: fields.cacheControl,
            hasExpires: fields.expires != nil, isMatchable: fields.varyNames != nil)
    }

    /// `isStorable` of a response with the `Cache-Control` directives
    /// `response`, an `Expires` or not, and a `Vary` some request may match
    /// (not `*`) or not.
    private static func isStorable(
        status: Int, requestHeaders: [(name: String, value: String)], cacheControl response: CacheControl,
        hasExpires: Bool, isMatchable: Bool
    ) -> Bool {
        guard (200...599).contains(status), status != 206, status != 304, !response.noStore, isMatchable else {
            return false
        }
        // Most requests carry no header at all: nothing to read.
        if !requestHeaders.isEmpty {
            if CacheControl(requestHeaders).noStore { return false }
            if field("authorization", in: requestHeaders) != nil,
                !(response.isPublic || response.sMaxAge != nil || response.mustRevalidate)
            {
                return false
            }
        }
        if cacheableByDefault.contains(status) { return true }
        return response.maxAge != nil || hasExpires || response.isPublic || response.isPrivate
    }

    /// `headers` without the hop-by-hop fields and those `Connection` names,
    /// names in lower case.
    static func storableHeaders(_ headers: [(name: String, value: String)]) -> [(name: String, value: String)] {
        storable(headers).headers
    }

    /// `storableHeaders`, and whether a field left out was one `Connection`
    /// named, not one of `hopByHopFields`.
    static func storable(
        _ headers: [(name: String, value: String)]
    ) -> (headers: [(name: String, value: String)], droppedListed: Bool) {
        // `Connection` lists a name or two (most often an option such as
        // `keep-alive`): compared one by one, not hashed, and split only
        // when it lists more than one.
        var listed: [Substring] = []
        if let connection = field("connection", in: headers) {
            if connection.utf8.contains(UInt8(ascii: ",")) {
                listed = connection.split(separator: ",").map { Substring(HTTPField.trimmingBlanks($0.utf8)) }
            } else {
                listed = [Substring(HTTPField.trimmingBlanks(connection.utf8))]
            }
        }
        var stored: [(name: String, value: String)] = []
        stored.reserveCapacity(headers.count)
        var droppedListed = false
        for (name, value) in headers {
            let name = lowercased(name)
            if isHopByHop(name) { continue }
            if !listed.isEmpty, listed.contains(where: { $0.utf8.count == name.utf8.count && isNamed(String($0), name) }) {
                droppedListed = true
                continue
            }
            stored.append((name, value))
        }
        return (stored, droppedListed)
    }

    /// Whether the lower-case `name` is one of `hopByHopFields`: hashed
    /// only when its length is one of theirs, which most names' is not.
    private static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2, 7, 10, 16, 17, 18, 19, 25: hopByHopFields.contains(name)
        default: false
        }
    }

    /// A field name in lower case: `name` itself when it holds no upper-case
    /// letter and nothing but ASCII, as the names a transfer read do (it
    /// lowers them as it reads them), so they are not made anew.
    static func lowercased(_ name: String) -> String {
        isLowercased(name) ? name : name.lowercased()
    }

    /// Whether `name` holds no upper-case letter and nothing but ASCII.
    static func isLowercased(_ name: String) -> Bool {
        func check(_ bytes: some Sequence<UInt8>) -> Bool {
            bytes.allSatisfy { $0 < 0x80 && ($0 < UInt8(ascii: "A") || $0 > UInt8(ascii: "Z")) }
        }
        // A native string lends its bytes without being made contiguous.
        return name.utf8.withContiguousStorageIfAvailable(check) ?? check(name.utf8)
    }

    // MARK: - Freshness

    /// How long the response stays fresh from its origin's point of view
    /// (RFC 9111 §4.2.1): max-age, else Expires − Date, else the heuristic
    /// from Last-Modified for statuses cacheable by default, else 0. Always
    /// within 0...2^31 seconds, whatever the headers say.
    static func freshnessLifetime(of response: CachedResponse) -> TimeInterval {
        let fields = response.fields
        if let maxAge = fields.cacheControl.maxAge { return bounded(maxAge, nan: 0) }
        if let expires = fields.expires {
            guard let expiry = expires else { return 0 }
            return bounded(expiry.timeIntervalSince(dateValue(of: response)), nan: 0)
        }
        guard cacheableByDefault.contains(response.status) || fields.cacheControl.isPublic,
            let lastModified = fields.lastModified
        else { return 0 }
        let sinceModified = bounded(dateValue(of: response).timeIntervalSince(lastModified), nan: 0)
        return min(sinceModified * heuristicFraction, heuristicLimit)
    }

    /// The response's age at `now` (RFC 9111 §4.2.3), within 0...2^31
    /// seconds. An `Age` that is not delta-seconds is ignored (§5.1).
    static func currentAge(of response: CachedResponse, now: Date) -> TimeInterval {
        let ageValue = response.fields.age ?? 0
        let apparentAge = bounded(response.responseTime.timeIntervalSince(dateValue(of: response)), nan: 0)
        let responseDelay = bounded(response.responseTime.timeIntervalSince(response.requestTime), nan: 0)
        let correctedInitialAge = max(apparentAge, ageValue + responseDelay)
        let residentTime = bounded(now.timeIntervalSince(response.responseTime), nan: 0)
        return bounded(correctedInitialAge + residentTime, nan: CacheControl.maximumDeltaSeconds)
    }

    /// `interval` within 0...2^31 seconds; `nan` when it is not a number.
    private static func bounded(_ interval: TimeInterval, nan: TimeInterval) -> TimeInterval {
        interval.isNaN ? nan : min(max(interval, 0), CacheControl.maximumDeltaSeconds)
    }

    /// Whether `response` may answer a request with `requestHeaders` at
    /// `now` without validation (RFC 9111 §4.2, §5.2.1). The request's
    /// `no-cache` (or `Pragma: no-cache` without Cache-Control) and
    /// `max-age=0` ask for revalidation; its `max-age`, `min-fresh` and
    /// `max-stale` narrow or widen what counts as fresh; a stored `no-cache`
    /// always asks for revalidation, and `must-revalidate` forbids `max-stale`.
    static func freshness(
        of response: CachedResponse, requestHeaders: [(name: String, value: String)] = [], now: Date
    ) -> Freshness {
        let stored = response.fields.cacheControl
        // Most requests carry no header at all: nothing to parse.
        let request = requestHeaders.isEmpty ? CacheControl([]) : CacheControl(requestHeaders)
        let pragmaNoCache =
            !requestHeaders.isEmpty && field("cache-control", in: requestHeaders) == nil
            && (field("pragma", in: requestHeaders)?.lowercased().contains("no-cache") ?? false)
        if stored.noCache || request.noCache || pragmaNoCache || request.maxAge == 0 {
            return .mustRevalidate(response.validators)
        }
        let lifetime = freshnessLifetime(of: response)
        let age = currentAge(of: response, now: now)
        if let maxAge = request.maxAge, age > maxAge { return .stale(response.validators) }
        if let minFresh = request.minFresh, lifetime - age < minFresh { return .stale(response.validators) }
        if lifetime > age { return .fresh }
        if let maxStale = request.maxStale, !stored.mustRevalidate, age - lifetime <= maxStale { return .fresh }
        return .stale(response.validators)
    }

    static func validators(of response: CachedResponse) -> Validators {
        response.validators
    }

    /// The conditional request headers that revalidate `response`.
    static func conditionalHeaders(for response: CachedResponse) -> [(name: String, value: [UInt8])] {
        validators(of: response).requestHeaders
    }

    // MARK: - Vary

    /// The lower-case field names `Vary` lists; nil for `Vary: *`, which no
    /// request matches.
    static func varyNames(_ responseHeaders: [(name: String, value: String)]) -> [String]? {
        field("vary", in: responseHeaders).map(varyNames(listedIn:)) ?? []
    }

    /// The lower-case field names the `Vary` value `vary` lists; nil for `*`.
    static func varyNames(listedIn vary: String) -> [String]? {
        var names: [String] = []
        for part in vary.split(separator: ",") {
            let name = part.trimmingBlanks.lowercased()
            if name == "*" { return nil }
            if !name.isEmpty, !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// The request's values of the fields the response's `Vary` names, to
    /// store with the response.
    static func varyValues(
        requestHeaders: [(name: String, value: String)], responseHeaders: [(name: String, value: String)]
    ) -> [String: String] {
        varyValues(requestHeaders: requestHeaders, names: varyNames(responseHeaders))
    }

    /// The request's values of the fields `names` (what a response's `Vary`
    /// lists), to store with the response.
    static func varyValues(requestHeaders: [(name: String, value: String)], names: [String]?) -> [String: String] {
        var values: [String: String] = [:]
        for name in names ?? [] {
            values[name] = normalizedField(name, in: requestHeaders)
        }
        return values
    }

    /// Whether a request with `requestHeaders` may be answered by `response`
    /// as far as its `Vary` goes (RFC 9111 §4.1): every field it names has
    /// the value it had when stored, as bytes (not Unicode-equivalent
    /// text), absent ones absent.
    static func matches(_ response: CachedResponse, requestHeaders: [(name: String, value: String)]) -> Bool {
        guard let names = response.fields.varyNames else { return false }
        return names.allSatisfy { name in
            switch (normalizedField(name, in: requestHeaders), response.varyValues[name]) {
            case (nil, nil): true
            case (let asked?, let stored?): asked.utf8.elementsEqual(stored.utf8)
            default: false
            }
        }
    }

    // MARK: - 304

    /// `stored` refreshed by a 304 (RFC 9111 §4.3.4, §3.2): the 304's fields
    /// replace the stored ones of the same names, except the framing and
    /// hop-by-hop fields, and its times become the response's. Nil when the
    /// 304 names a different representation (its ETag, compared as bytes,
    /// or without one its Last-Modified, differs from the stored one): fetch
    /// it again.
    static func merging(
        notModified headers: [(name: String, value: String)], rawValues: [String: [UInt8]] = [:], into stored: CachedResponse,
        requestTime: Date, responseTime: Date
    ) -> CachedResponse? {
        if let etag = rawValues["etag"] ?? field("etag", in: headers).map({ Array($0.utf8) }) {
            guard let storedTag = stored.validators.etag, opaqueTag(storedTag) == opaqueTag(etag) else { return nil }
        } else if let lastModified = field("last-modified", in: headers), let storedDate = stored.header("last-modified"),
            HTTPDate.parse(lastModified) != HTTPDate.parse(storedDate)
        {
            return nil
        }
        let incoming = storableHeaders(headers).filter { !framingFields.contains($0.name) }
        let replaced = Set(incoming.map(\.name))
        var merged = stored
        merged.headers = stored.headers.filter { !replaced.contains($0.name) } + incoming
        merged.rawValues = stored.rawValues.filter { !replaced.contains($0.key) }
            .merging(rawValues.filter { replaced.contains($0.key) && Validators.fieldNames.contains($0.key) }) { $1 }
        merged.requestTime = requestTime
        merged.responseTime = responseTime
        return merged
    }

    // MARK: - Fields

    /// Every line of the field `name` among `headers` (compared without
    /// case), joined with ", "; nil when there is none.
    static func field(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        let name = lowercased(name)
        var result: String?
        for header in headers where header.name.utf8.count == name.utf8.count && isNamed(header.name, name) {
            result = result.map { $0 + ", " + header.value } ?? header.value
        }
        return result
    }

    /// Whether the field name `name` is `lowered` (in lower case, of the
    /// same length) compared without case: byte by byte for an ASCII name,
    /// with no lower-case copy made.
    static func isNamed(_ name: String, _ lowered: String) -> Bool {
        // Nil when a byte of `name` is not ASCII: then it is lowered whole.
        func compare(_ bytes: UnsafeBufferPointer<UInt8>, _ expected: UnsafeBufferPointer<UInt8>) -> Bool? {
            guard bytes.count == expected.count else { return false }
            for index in bytes.indices {
                let byte = bytes[index]
                if byte >= 0x80 { return nil }
                let folded = byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
                if folded != expected[index] { return false }
            }
            return true
        }
        // Native strings, as header names are, lend their bytes as they are.
        let equal: Bool?? = name.utf8.withContiguousStorageIfAvailable { bytes in
            lowered.utf8.withContiguousStorageIfAvailable { compare(bytes, $0) } ?? nil
        }
        if let equal { return equal ?? (lowercased(name) == lowered) }
        var (name, lowered) = (name, lowered)
        let slow = name.withUTF8 { bytes in lowered.withUTF8 { compare(bytes, $0) } }
        return slow ?? (lowercased(name) == lowered)
    }

    /// A field's value with the whitespace around its list items removed, so
    /// formatting differences do not defeat `Vary`.
    private static func normalizedField(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        field(name, in: headers).map { value in
            value.split(separator: ",", omittingEmptySubsequences: false)
                .map { $0.trimmingBlanks }.joined(separator: ",")
        }
    }

    /// The Date field, else when the response arrived.
    private static func dateValue(of response: CachedResponse) -> Date {
        response.fields.date ?? response.responseTime
    }

    /// An entity tag without its weakness marker, for the weak comparison.
    private static func opaqueTag(_ tag: [UInt8]) -> ArraySlice<UInt8> {
        let trimmed = HTTPField.trimmingBlanks(tag)
        return trimmed.starts(with: "W/".utf8) ? trimmed.dropFirst(2) : trimmed
    }
}
