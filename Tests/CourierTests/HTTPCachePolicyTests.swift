import Foundation
import Testing

@testable import Courier

@Suite(.timeLimit(.minutes(1)))
struct HTTPCachePolicyTests {
    /// 2024-05-01 12:00:00 GMT.
    private let t0 = Date(timeIntervalSince1970: 1_714_564_800)

    private func date(_ offset: TimeInterval) -> String { HTTPDate.format(t0 + offset) }

    /// A response fetched by a request sent at `t0` and answered at
    /// `t0 + delay`.
    private func response(
        _ headers: [(String, String)], status: Int = 200, delay: TimeInterval = 0,
        vary: [String: String] = [:]
    ) -> CachedResponse {
        CachedResponse(
            status: status, headers: headers.map { (name: $0.0, value: $0.1) }, url: "http://o/x", requestTime: t0,
            responseTime: t0 + delay, varyValues: vary)
    }

    // MARK: - Storing

    struct StoreCase: CustomTestStringConvertible, Sendable {
        var name: String
        var status: Int
        var request: [(name: String, value: String)]
        var response: [(name: String, value: String)]
        var storable: Bool
        var testDescription: String { name }
    }

    static let storeCases: [StoreCase] = [
        StoreCase(name: "plain 200", status: 200, request: [], response: [], storable: true),
        StoreCase(name: "204 by default", status: 204, request: [], response: [], storable: true),
        StoreCase(name: "404 by default", status: 404, request: [], response: [], storable: true),
        StoreCase(name: "206 never", status: 206, request: [], response: [("cache-control", "max-age=60")], storable: false),
        StoreCase(name: "304 never", status: 304, request: [], response: [], storable: false),
        StoreCase(name: "response no-store", status: 200, request: [], response: [("cache-control", "public, no-store")], storable: false),
        StoreCase(name: "request no-store", status: 200, request: [("Cache-Control", "no-store")], response: [], storable: false),
        StoreCase(name: "private in a private cache", status: 200, request: [], response: [("cache-control", "private, max-age=60")], storable: true),
        StoreCase(name: "no-cache is stored", status: 200, request: [], response: [("cache-control", "no-cache")], storable: true),
        StoreCase(name: "500 without freshness", status: 500, request: [], response: [], storable: false),
        StoreCase(name: "500 with max-age", status: 500, request: [], response: [("cache-control", "max-age=5")], storable: true),
        StoreCase(name: "302 with Expires", status: 302, request: [], response: [("expires", "Wed, 01 May 2024 13:00:00 GMT")], storable: true),
        StoreCase(name: "Authorization alone", status: 200, request: [("Authorization", "Bearer x")], response: [("cache-control", "max-age=60")], storable: false),
        StoreCase(name: "Authorization with public", status: 200, request: [("Authorization", "Bearer x")], response: [("cache-control", "public")], storable: true),
        StoreCase(name: "Authorization with must-revalidate", status: 200, request: [("authorization", "x")], response: [("cache-control", "must-revalidate")], storable: true),
        StoreCase(name: "Authorization with s-maxage", status: 200, request: [("authorization", "x")], response: [("cache-control", "s-maxage=9")], storable: true),
        StoreCase(name: "Vary: *", status: 200, request: [], response: [("vary", "accept, *")], storable: false),
    ]

    @Test(arguments: storeCases)
    func storable(_ c: StoreCase) {
        #expect(HTTPCachePolicy.isStorable(status: c.status, requestHeaders: c.request, responseHeaders: c.response) == c.storable)
    }

    @Test func hopByHopFieldsAreNotStored() {
        let kept = HTTPCachePolicy.storableHeaders([
            ("Connection", "close, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "5"), ("Transfer-Encoding", "chunked"),
            ("ETag", "\"a\""), ("Content-Length", "3"),
        ])
        #expect(kept.map(\.name) == ["etag", "content-length"])
        // Names as long as hop-by-hop ones are kept unless they are one.
        let alike = HTTPCachePolicy.storableHeaders([
            ("Expires", "0"), ("Upgrade", "h2"), ("TE", "trailers"), ("Trailer", "x"), ("Connection", "keep-alive"),
            ("Keep-Alive", "5"), ("Location", "/b"),
        ])
        #expect(alike.map(\.name) == ["expires", "location"])
        let single = HTTPCachePolicy.storableHeaders([("Connection", " X-Single "), ("X-Single", "1"), ("", "empty")])
        #expect(single.map(\.name) == [""])
    }

    /// A store parses the head's fields once, to decide whether it may
    /// be stored; the stored response keeps them only when they are the
    /// stored headers' own, not when `Connection` named a field they read.
    @Test func fieldsParsedForTheStoreDecisionServeOnlyWhatIsStored() {
        let head = ResponseHead(
            status: 200,
            headers: [
                ("cache-control", "max-age=600"), ("connection", "Cache-Control"), ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
                ("etag", "\"a\""),
            ])
        let fields = CachedResponse.Fields(head.headers)
        #expect(HTTPCachePolicy.isStorable(status: 200, requestHeaders: [], response: fields))
        #expect(fields.cacheControl.maxAge == 600)
        let stored = CachedResponse(
            head: head, fields: fields, requestURL: "http://o/r", requestHeaders: [], requestTime: t0, responseTime: t0)
        #expect(stored.headers.map(\.name) == ["date", "etag"])
        #expect(stored.fields.cacheControl.maxAge == nil)
        #expect(HTTPCachePolicy.freshnessLifetime(of: stored) == 0)
        #expect(stored.validators == Validators(etag: Array("\"a\"".utf8), lastModified: nil))
        // Without such a `Connection` they are the stored response's.
        var plain = head
        plain.headers.remove(at: 1)
        let kept = CachedResponse(
            head: plain, fields: CachedResponse.Fields(plain.headers), requestURL: "http://o/r", requestHeaders: [],
            requestTime: t0, responseTime: t0)
        #expect(HTTPCachePolicy.freshnessLifetime(of: kept) == 600)
    }

    @Test func fieldsAreFoundWithoutCaseAndJoined() {
        let headers = [
            ("ETag", "\"a\""), ("etag", "\"b\""), ("ETags", "x"), ("Cache-Control", "max-age=1"), ("\u{C9}tag", "y"),
        ]
        #expect(HTTPCachePolicy.field("etag", in: headers) == "\"a\", \"b\"")
        #expect(HTTPCachePolicy.field("CACHE-control", in: headers) == "max-age=1")
        #expect(HTTPCachePolicy.field("vary", in: headers) == nil)
        #expect(HTTPCachePolicy.field("\u{E9}tag", in: headers) == "y")
    }

    // MARK: - Freshness

    struct FreshnessCase: CustomTestStringConvertible, Sendable {
        var name: String
        var headers: [(String, String)]
        var status = 200
        var delay: TimeInterval = 0
        /// Seconds after `t0`.
        var at: TimeInterval
        var lifetime: TimeInterval
        var age: TimeInterval
        var fresh: Bool
        var testDescription: String { name }
    }

    static let day: TimeInterval = 86_400
    /// Built against `t0` = 2024-05-01 12:00:00 GMT.
    static let freshnessCases: [FreshnessCase] = [
        FreshnessCase(name: "max-age fresh", headers: [("cache-control", "max-age=100")], at: 99, lifetime: 100, age: 99, fresh: true),
        FreshnessCase(name: "max-age stale", headers: [("cache-control", "max-age=100")], at: 100, lifetime: 100, age: 100, fresh: false),
        FreshnessCase(
            name: "max-age beats Expires",
            headers: [("cache-control", "max-age=10"), ("date", "Wed, 01 May 2024 12:00:00 GMT"), ("expires", "Wed, 01 May 2024 13:00:00 GMT")],
            at: 20, lifetime: 10, age: 20, fresh: false),
        FreshnessCase(
            name: "s-maxage ignored", headers: [("cache-control", "s-maxage=1000, max-age=5")], at: 10, lifetime: 5, age: 10,
            fresh: false),
        FreshnessCase(
            name: "Expires minus Date",
            headers: [("date", "Wed, 01 May 2024 12:00:00 GMT"), ("expires", "Wed, 01 May 2024 13:00:00 GMT")],
            at: 3599, lifetime: 3600, age: 3599, fresh: true),
        FreshnessCase(
            name: "Expires without Date uses response time",
            headers: [("expires", "Wed, 01 May 2024 12:01:00 GMT")], delay: 10, at: 30, lifetime: 50, age: 30, fresh: true),
        FreshnessCase(
            name: "invalid Expires is already expired", headers: [("expires", "0")], at: 0, lifetime: 0, age: 0, fresh: false),
        FreshnessCase(
            name: "invalid max-age is stale", headers: [("cache-control", "max-age=soon")], at: 0, lifetime: 0, age: 0,
            fresh: false),
        FreshnessCase(
            name: "Age header adds to age",
            headers: [("cache-control", "max-age=100"), ("date", "Wed, 01 May 2024 12:00:00 GMT"), ("age", "60")],
            at: 30, lifetime: 100, age: 90, fresh: true),
        FreshnessCase(
            name: "Age plus response delay",
            headers: [("cache-control", "max-age=100"), ("date", "Wed, 01 May 2024 12:00:02 GMT"), ("age", "60")], delay: 2,
            at: 40, lifetime: 100, age: 100, fresh: false),
        FreshnessCase(
            name: "apparent age from an old Date",
            headers: [("cache-control", "max-age=100"), ("date", "Wed, 01 May 2024 11:59:00 GMT")], at: 30,
            lifetime: 100, age: 90, fresh: true),
        FreshnessCase(
            name: "heuristic 10% of Date - Last-Modified",
            headers: [("date", "Wed, 01 May 2024 12:00:00 GMT"), ("last-modified", "Wed, 01 May 2024 02:00:00 GMT")],
            at: 3599, lifetime: 3600, age: 3599, fresh: true),
        FreshnessCase(
            name: "heuristic capped at a day",
            headers: [("date", "Wed, 01 May 2024 12:00:00 GMT"), ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT")],
            at: day - 1, lifetime: day, age: day - 1, fresh: true),
        FreshnessCase(
            name: "public allows the heuristic for a 302",
            headers: [("cache-control", "public, x"), ("date", "Wed, 01 May 2024 12:00:00 GMT"), ("last-modified", "Wed, 01 May 2024 02:00:00 GMT")],
            status: 302, at: 10, lifetime: 3600, age: 10, fresh: true),
        FreshnessCase(
            name: "no heuristic for a 500", headers: [("last-modified", "Wed, 01 May 2024 02:00:00 GMT")], status: 500, at: 1,
            lifetime: 0, age: 1, fresh: false),
        FreshnessCase(name: "nothing: lifetime 0", headers: [], at: 0, lifetime: 0, age: 0, fresh: false),
    ]

    @Test(arguments: freshnessCases)
    func freshness(_ c: FreshnessCase) {
        let stored = response(c.headers, status: c.status, delay: c.delay)
        let now = t0 + c.at
        #expect(HTTPCachePolicy.freshnessLifetime(of: stored) == c.lifetime)
        #expect(HTTPCachePolicy.currentAge(of: stored, now: now) == c.age)
        #expect(HTTPCachePolicy.freshness(of: stored, now: now).isFresh == c.fresh)
    }

    @Test func staleCarriesValidators() {
        let stored = response([("cache-control", "max-age=10"), ("etag", "\"v1\""), ("last-modified", date(-3600))])
        let expected = Validators(etag: Array("\"v1\"".utf8), lastModified: Array(date(-3600).utf8))
        #expect(HTTPCachePolicy.freshness(of: stored, now: t0 + 5) == .fresh)
        #expect(HTTPCachePolicy.freshness(of: stored, now: t0 + 11) == .stale(expected))
        #expect(HTTPCachePolicy.freshness(of: response([]), now: t0) == .stale(Validators()))
    }

    @Test func noCacheAlwaysRevalidates() {
        let validators = Validators(etag: Array("\"v1\"".utf8))
        let stored = response([("cache-control", "no-cache, max-age=1000"), ("etag", "\"v1\"")])
        #expect(HTTPCachePolicy.freshness(of: stored, now: t0) == .mustRevalidate(validators))

        let fresh = response([("cache-control", "max-age=1000"), ("etag", "\"v1\"")])
        #expect(HTTPCachePolicy.freshness(of: fresh, requestHeaders: [("Cache-Control", "no-cache")], now: t0) == .mustRevalidate(validators))
        #expect(HTTPCachePolicy.freshness(of: fresh, requestHeaders: [("cache-control", "max-age=0")], now: t0) == .mustRevalidate(validators))
        #expect(HTTPCachePolicy.freshness(of: fresh, requestHeaders: [("Pragma", "no-cache")], now: t0) == .mustRevalidate(validators))
        #expect(HTTPCachePolicy.freshness(of: fresh, requestHeaders: [("Pragma", "no-cache"), ("Cache-Control", "max-age=9")], now: t0) == .fresh)
    }

    @Test func requestDirectivesNarrowOrWidenFreshness() {
        let stored = response([("cache-control", "max-age=100")])
        #expect(HTTPCachePolicy.freshness(of: stored, requestHeaders: [("cache-control", "max-age=30")], now: t0 + 31) != .fresh)
        #expect(HTTPCachePolicy.freshness(of: stored, requestHeaders: [("cache-control", "max-age=30")], now: t0 + 29) == .fresh)
        #expect(HTTPCachePolicy.freshness(of: stored, requestHeaders: [("cache-control", "min-fresh=50")], now: t0 + 60) != .fresh)
        #expect(HTTPCachePolicy.freshness(of: stored, requestHeaders: [("cache-control", "max-stale=20")], now: t0 + 119) == .fresh)
        #expect(HTTPCachePolicy.freshness(of: stored, requestHeaders: [("cache-control", "max-stale=20")], now: t0 + 121) != .fresh)
        #expect(HTTPCachePolicy.freshness(of: stored, requestHeaders: [("cache-control", "max-stale")], now: t0 + 1e6) == .fresh)
        let strict = response([("cache-control", "max-age=100, must-revalidate")])
        #expect(HTTPCachePolicy.freshness(of: strict, requestHeaders: [("cache-control", "max-stale")], now: t0 + 101) != .fresh)
    }

    // MARK: - Vary

    @Test func varyMatching() {
        let request: [(name: String, value: String)] = [("Accept", "image/webp,image/*"), ("User-Agent", "a")]
        let headers: [(name: String, value: String)] = [("vary", "Accept, Accept-Language")]
        let values = HTTPCachePolicy.varyValues(requestHeaders: request, responseHeaders: headers)
        #expect(values == ["accept": "image/webp,image/*"])
        let stored = response(headers.map { ($0.name, $0.value) }, vary: values)

        // Same values (whitespace around list items aside) match; the absent field must stay absent
        #expect(HTTPCachePolicy.matches(stored, requestHeaders: [("accept", "image/webp, image/*"), ("User-Agent", "b")]))
        #expect(!HTTPCachePolicy.matches(stored, requestHeaders: [("Accept", "image/png")]))
        #expect(!HTTPCachePolicy.matches(stored, requestHeaders: []))
        #expect(!HTTPCachePolicy.matches(stored, requestHeaders: request + [("Accept-Language", "fr")]))

        // No Vary matches everything; Vary: * nothing
        #expect(HTTPCachePolicy.matches(response([]), requestHeaders: request))
        #expect(!HTTPCachePolicy.matches(response([("vary", "*")]), requestHeaders: []))
    }

    // MARK: - Revalidation

    @Test func conditionalHeadersFromValidators() {
        let both = response([("etag", "W/\"v1\""), ("last-modified", "Wed, 01 May 2024 02:00:00 GMT")])
        let headers = HTTPCachePolicy.conditionalHeaders(for: both)
        #expect(headers.map(\.name) == ["If-None-Match", "If-Modified-Since"])
        #expect(headers.map(\.value) == [Array("W/\"v1\"".utf8), Array("Wed, 01 May 2024 02:00:00 GMT".utf8)])
        #expect(HTTPCachePolicy.conditionalHeaders(for: response([("last-modified", "x")])).map(\.name) == ["If-Modified-Since"])
        #expect(HTTPCachePolicy.conditionalHeaders(for: response([])).isEmpty)
    }

    @Test func notModifiedRefreshesHeadersAndTimes() throws {
        // Given a stale response
        let stored = response([
            ("content-type", "image/png"), ("content-length", "1234"), ("cache-control", "max-age=60"), ("etag", "\"v1\""),
            ("date", date(0)), ("x-old", "1"),
        ])
        #expect(HTTPCachePolicy.freshness(of: stored, now: t0 + 120) == .stale(Validators(etag: Array("\"v1\"".utf8))))

        // When a 304 arrives at t0 + 121
        let merged = try #require(
            HTTPCachePolicy.merging(
                notModified: [
                    ("Cache-Control", "max-age=300"), ("ETag", "\"v1\""), ("Date", date(121)), ("Content-Length", "0"),
                    ("Connection", "keep-alive"),
                ], into: stored, requestTime: t0 + 120, responseTime: t0 + 121))

        // Then its fields replace the stored ones, except the framing and hop-by-hop ones
        #expect(merged.header("cache-control") == "max-age=300")
        #expect(merged.header("content-length") == "1234")
        #expect(merged.header("content-type") == "image/png")
        #expect(merged.header("x-old") == "1")
        #expect(merged.header("date") == date(121))
        #expect(merged.header("connection") == nil)
        #expect(merged.headers.filter { $0.name == "cache-control" }.count == 1)
        #expect((merged.requestTime, merged.responseTime) == (t0 + 120, t0 + 121))
        #expect(merged.storedAt == stored.storedAt)
        #expect(HTTPCachePolicy.freshness(of: merged, now: t0 + 400) == .fresh)
        #expect(HTTPCachePolicy.currentAge(of: merged, now: t0 + 400) == 280)
    }

    @Test func changedHeadersAndURLAreReadAgain() {
        // Given a response fresh for 60 s, with no validators, named after its URL
        var stored = response([("Cache-Control", "max-age=60"), ("Date", date(0))])
        #expect(HTTPCachePolicy.freshnessLifetime(of: stored) == 60)
        #expect(stored.fileName == "x")
        #expect(stored.headerObject == ["cache-control": "max-age=60", "date": date(0)])

        // When its headers and URL are replaced
        stored.headers = [("cache-control", "no-cache"), ("etag", "\"v2\""), ("age", "30"), ("vary", "*"), ("vary", "accept")]
        stored.url = "http://o/dir/picture.png"

        // Then the rules read the new fields, not the ones parsed before
        #expect(HTTPCachePolicy.freshness(of: stored, now: t0) == .mustRevalidate(Validators(etag: Array("\"v2\"".utf8))))
        #expect(HTTPCachePolicy.currentAge(of: stored, now: t0) == 30)
        #expect(!HTTPCachePolicy.matches(stored, requestHeaders: []))
        #expect(stored.fileName == "picture.png")
        // And an outcome shows the new headers, repeated ones joined
        #expect(stored.headerObject == ["cache-control": "no-cache", "etag": "\"v2\"", "age": "30", "vary": "*, accept"])
        #expect(stored.headerObject == stored.head.headerObject)
    }

    @Test func notModifiedForAnotherRepresentationIsRefused() {
        let stored = response([("etag", "\"v1\""), ("last-modified", "Wed, 01 May 2024 02:00:00 GMT")])
        #expect(HTTPCachePolicy.merging(notModified: [("etag", "\"v2\"")], into: stored, requestTime: t0, responseTime: t0) == nil)
        #expect(HTTPCachePolicy.merging(notModified: [("etag", "W/\"v1\"")], into: stored, requestTime: t0, responseTime: t0) != nil)
        #expect(
            HTTPCachePolicy.merging(
                notModified: [("last-modified", "Wed, 01 May 2024 03:00:00 GMT")], into: stored, requestTime: t0,
                responseTime: t0) == nil)
        #expect(HTTPCachePolicy.merging(notModified: [], into: stored, requestTime: t0, responseTime: t0) != nil)
        let untagged = response([])
        #expect(HTTPCachePolicy.merging(notModified: [("etag", "\"v1\"")], into: untagged, requestTime: t0, responseTime: t0) == nil)
    }

    @Test func validatorsAndVaryValuesCompareAsBytes() throws {
        // Given a response stored for a request whose Accept-Language was "é" decomposed,
        // with an entity tag holding "é" precomposed
        let decomposed = "e\u{301}"
        let precomposed = "\u{E9}"
        let headers: [(name: String, value: String)] = [("vary", "Accept-Language"), ("etag", "\"\(precomposed)\"")]
        let values = HTTPCachePolicy.varyValues(requestHeaders: [("Accept-Language", decomposed)], responseHeaders: headers)
        let stored = response(headers.map { ($0.name, $0.value) }, vary: values)

        // Then a request with the canonically equivalent, other bytes is another variant
        #expect(HTTPCachePolicy.matches(stored, requestHeaders: [("Accept-Language", decomposed)]))
        #expect(!HTTPCachePolicy.matches(stored, requestHeaders: [("Accept-Language", precomposed)]))

        // And a 304 whose entity tag is the same text in other bytes names another representation
        let sameBytes = [(name: "etag", value: "\"\(precomposed)\"")]
        let otherBytes = [(name: "etag", value: "\"\(decomposed)\"")]
        #expect(HTTPCachePolicy.merging(notModified: sameBytes, into: stored, requestTime: t0, responseTime: t0) != nil)
        #expect(HTTPCachePolicy.merging(notModified: otherBytes, into: stored, requestTime: t0, responseTime: t0) == nil)

        // And a 304 whose entity tag shows the same U+FFFD text in other bytes names another representation
        var rawHead = ResponseHead(status: 200, headers: [("etag", "\"\u{FFFD}\""), ("cache-control", "no-cache")])
        rawHead.rawValues = ["etag": [0x22, 0xE9, 0x22]]
        let raw = CachedResponse(head: rawHead, requestURL: "http://o/r", requestHeaders: [], requestTime: t0, responseTime: t0)
        let lossy = [(name: "etag", value: "\"\u{FFFD}\"")]
        #expect(HTTPCachePolicy.merging(notModified: lossy, rawValues: ["etag": [0x22, 0xE9, 0x22]], into: raw, requestTime: t0, responseTime: t0) != nil)
        #expect(HTTPCachePolicy.merging(notModified: lossy, rawValues: ["etag": [0x22, 0xE8, 0x22]], into: raw, requestTime: t0, responseTime: t0) == nil)
        #expect(HTTPCachePolicy.merging(notModified: lossy, into: raw, requestTime: t0, responseTime: t0) == nil)

        // And the validator replayed is the stored bytes
        let replayed = try #require(HTTPCachePolicy.conditionalHeaders(for: stored).first { $0.name == "If-None-Match" })
        #expect(replayed.value == Array("\"\(precomposed)\"".utf8))
    }

    // MARK: - Parsing

    @Test func cacheControlParsing() {
        let control = CacheControl(parsing: #"Max-Age=60, private="set-cookie, x", no-cache, max-age=5, community="UCI""#)
        #expect(control.maxAge == 60)
        #expect(control.directives["private"] == "set-cookie, x")
        #expect(control.noCache && control.isPrivate && !control.noStore)
        #expect(CacheControl(parsing: "max-age=99999999999").maxAge == 2_147_483_648)
        #expect(CacheControl([("Cache-Control", "no-store"), ("cache-control", "max-age=1")]).maxAge == 1)
    }

    @Test func httpDates() {
        let expected = Date(timeIntervalSince1970: 784_111_777)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.format(expected) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(t0) == "Wed, 01 May 2024 12:00:00 GMT")
        #expect(HTTPDate.parse("0") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 PST") == nil)
    }

    @Test func fieldNamesCompareWithoutCaseAsBytes() {
        // ASCII names match in any case, and only names of the same bytes
        #expect(HTTPCachePolicy.isNamed("Cache-Control", "cache-control"))
        #expect(HTTPCachePolicy.isNamed("CACHE-CONTROL", "cache-control"))
        #expect(!HTTPCachePolicy.isNamed("Cache-Contro1", "cache-control"))
        #expect(!HTTPCachePolicy.isNamed("cache-control ", "cache-control"))
        #expect(!HTTPCachePolicy.isNamed("@ge", "`ge"))
        #expect(!HTTPCachePolicy.isNamed("[ge", "{ge"))
        // A name longer than a small string, and one that is not ASCII
        let long = "x-" + String(repeating: "Long-Name-", count: 4)
        #expect(HTTPCachePolicy.isNamed(long, long.lowercased()))
        #expect(HTTPCachePolicy.isNamed("ÉTAG", "étag"))
        #expect(!HTTPCachePolicy.isNamed("ÉTAG", "etag"))
        #expect(HTTPCachePolicy.isLowercased("content-type"))
        #expect(!HTTPCachePolicy.isLowercased("content-Type"))
        #expect(!HTTPCachePolicy.isLowercased("étag"))
        #expect(HTTPCachePolicy.isLowercased("@[`{"))
    }
}
