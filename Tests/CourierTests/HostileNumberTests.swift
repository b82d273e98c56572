import Foundation
import JSON
import Testing

@testable import Courier

/// Numbers from origins and from the shared cache directory are hostile:
/// none may trap, and what the cache computes from them stays finite and
/// within 0...2^31 seconds.
@Suite(.timeLimit(.minutes(1)))
struct HostileNumberTests {
    /// 2024-05-01 12:00:00 GMT.
    private static let t0 = Date(timeIntervalSince1970: 1_714_564_800)
    private static let limit: TimeInterval = 2_147_483_648

    private static func response(_ headers: [(String, String)], status: Int = 200) -> CachedResponse {
        CachedResponse(
            status: status, headers: headers.map { (name: $0.0, value: $0.1) }, url: "http://o/x", requestTime: t0,
            responseTime: t0)
    }

    // MARK: - Age

    struct AgeCase: CustomTestStringConvertible, Sendable {
        var age: String
        var seconds: TimeInterval
        var testDescription: String { "Age: \(age.prefix(24))\(age.count > 24 ? "…" : "")" }
    }

    /// RFC 9111 §5.1: an Age that is not delta-seconds is ignored; §1.2.2:
    /// one too large counts as 2^31.
    static let ageCases: [AgeCase] = [
        AgeCase(age: "7", seconds: 7),
        AgeCase(age: " 7 ", seconds: 7),
        AgeCase(age: "7, 9", seconds: 7),
        AgeCase(age: "2147483647", seconds: 2_147_483_647),
        AgeCase(age: "2147483648", seconds: limit),
        AgeCase(age: "99999999999999999999", seconds: limit),
        AgeCase(age: String(repeating: "9", count: 5000), seconds: limit),
        AgeCase(age: "inf", seconds: 0),
        AgeCase(age: "infinity", seconds: 0),
        AgeCase(age: "nan", seconds: 0),
        AgeCase(age: "1e400", seconds: 0),
        AgeCase(age: "1e3", seconds: 0),
        AgeCase(age: "-5", seconds: 0),
        AgeCase(age: "+5", seconds: 0),
        AgeCase(age: "5.5", seconds: 0),
        AgeCase(age: "0x10", seconds: 0),
        AgeCase(age: "", seconds: 0),
        AgeCase(age: "\u{0663}", seconds: 0),
    ]

    @Test(arguments: ageCases)
    func age(_ c: AgeCase) {
        let response = Self.response([("age", c.age)])
        #expect(HTTPCachePolicy.currentAge(of: response, now: Self.t0) == c.seconds)
    }

    // MARK: - Lifetimes

    struct LifetimeCase: CustomTestStringConvertible, Sendable {
        var name: String
        var headers: [(name: String, value: String)]
        var lifetime: TimeInterval
        var testDescription: String { name }
    }

    static let lifetimeCases: [LifetimeCase] = [
        LifetimeCase(name: "max-age huge", headers: [("cache-control", "max-age=99999999999999999999")], lifetime: limit),
        LifetimeCase(name: "max-age 2^63", headers: [("cache-control", "max-age=9223372036854775808")], lifetime: limit),
        LifetimeCase(name: "max-age negative", headers: [("cache-control", "max-age=-5")], lifetime: 0),
        LifetimeCase(name: "max-age 1e400", headers: [("cache-control", "max-age=1e400")], lifetime: 0),
        LifetimeCase(name: "max-age inf", headers: [("cache-control", "max-age=inf")], lifetime: 0),
        LifetimeCase(name: "max-age nan", headers: [("cache-control", "max-age=nan")], lifetime: 0),
        LifetimeCase(name: "max-age quoted", headers: [("cache-control", "max-age=\"60\"")], lifetime: 60),
        LifetimeCase(
            name: "Expires year 999999999999",
            headers: [("expires", "Sun, 06 Nov 999999999999 08:49:37 GMT")], lifetime: 0),
        LifetimeCase(name: "Expires year 9999", headers: [("expires", "Fri, 31 Dec 9999 23:59:59 GMT")], lifetime: limit),
        LifetimeCase(
            name: "Expires year 9999, Date year 1583",
            headers: [("expires", "Fri, 31 Dec 9999 23:59:59 GMT"), ("date", "Mon, 01 Jan 1583 00:00:00 GMT")],
            lifetime: limit),
        LifetimeCase(
            name: "Date year 999999999999",
            headers: [("date", "Sun, 06 Nov 999999999999 08:49:37 GMT"), ("expires", "Wed, 01 May 2024 12:01:00 GMT")],
            lifetime: 60),
        LifetimeCase(
            name: "Date year -999999999999",
            headers: [("date", "Sun, 06 Nov -999999999999 08:49:37 GMT"), ("expires", "Wed, 01 May 2024 12:01:00 GMT")],
            lifetime: 60),
        LifetimeCase(
            name: "Last-Modified year 999999999999",
            headers: [("last-modified", "Sun, 06 Nov 999999999999 08:49:37 GMT")], lifetime: 0),
        LifetimeCase(
            name: "Last-Modified year 1583", headers: [("last-modified", "Mon, 01 Jan 1583 00:00:00 GMT")],
            lifetime: 86_400),
    ]

    @Test(arguments: lifetimeCases)
    func lifetime(_ c: LifetimeCase) {
        let response = Self.response(c.headers.map { ($0.name, $0.value) })
        #expect(HTTPCachePolicy.freshnessLifetime(of: response) == c.lifetime)
    }

    /// Every combination of hostile headers: lifetime and age stay within
    /// 0...2^31, so `expires` in `cache/lookup` can be computed and written.
    @Test func everyCombinationStaysBounded() {
        let dates = [
            "Sun, 06 Nov 999999999999 08:49:37 GMT", "Sun, 06 Nov -1994 08:49:37 GMT", "Mon, 01 Jan 1583 00:00:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT", "garbage",
        ]
        let ages = ["inf", "nan", "1e400", "-1", "99999999999999999999", "3"]
        let controls = ["max-age=99999999999999999999", "max-age=-1", "max-age=1e400", "public", "max-stale"]
        let nows = [Self.t0, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 253_402_300_799)]
        for date in dates {
            for other in dates {
                for age in ages {
                    for control in controls {
                        let response = Self.response([
                            ("date", date), ("expires", other), ("last-modified", other), ("age", age),
                            ("cache-control", control),
                        ])
                        for now in nows {
                            let lifetime = HTTPCachePolicy.freshnessLifetime(of: response)
                            let age = HTTPCachePolicy.currentAge(of: response, now: now)
                            #expect((0...Self.limit).contains(lifetime))
                            #expect((0...Self.limit).contains(age))
                            _ = HTTPCachePolicy.freshness(of: response, requestHeaders: [("cache-control", control)], now: now)
                            _ = now.addingTimeInterval(lifetime - age).formatted(.iso8601)
                        }
                    }
                }
            }
        }
    }

    @Test func responseHeadIgnoresAbsurdContentLength() {
        for value in ["99999999999999999999", "1e400", "inf", "", "x"] {
            let head = ResponseHead(status: 200, headers: [("content-length", value)])
            #expect(head.announcedLength == nil)
        }
        for value in ["-5", "+5", "-0"] {
            let head = ResponseHead(status: 200, headers: [("content-length", value)])
            #expect(head.announcedLength == nil)
        }
    }

    // MARK: - Disk cache metadata

    /// Metadata as courier writes it, with `field` replaced by `value`
    /// (raw JSON), or left out when `value` is nil.
    private static func metadata(_ field: String? = nil, _ value: String?) -> [UInt8] {
        var fields: [(String, String)] = [
            ("key", #""k""#), ("url", #""http://o/x""#), ("status", "200"),
            ("headers", #"[["content-type","text/plain"],["etag","\"a\""]]"#), ("vary", #"{"accept":"*/*"}"#),
            ("requestTime", "1714564800"), ("responseTime", "1714564800.5"), ("storedAt", "1714564800.5"),
            ("digests", #"{"sha256":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}"#),
        ]
        if let field, let index = fields.firstIndex(where: { $0.0 == field }) {
            if let value { fields[index].1 = value } else { fields.remove(at: index) }
        } else if let field, let value {
            fields.append((field, value))
        }
        return Array(("{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}").utf8)
    }

    struct MetadataCase: CustomTestStringConvertible, Sendable {
        var field: String
        /// Raw JSON, or nil to leave the field out.
        var value: String?
        var testDescription: String { "\(field): \(value ?? "(missing)")" }
    }

    static let absurdMetadata: [MetadataCase] = [
        MetadataCase(field: "requestTime", value: "1e308"),
        MetadataCase(field: "requestTime", value: "-1e308"),
        MetadataCase(field: "responseTime", value: "1e308"),
        MetadataCase(field: "responseTime", value: "-1e308"),
        MetadataCase(field: "storedAt", value: "1.7976931348623157e308"),
        MetadataCase(field: "responseTime", value: "253402300800"),
        MetadataCase(field: "requestTime", value: "-1"),
        MetadataCase(field: "requestTime", value: "\"NaN\""),
        MetadataCase(field: "responseTime", value: "null"),
        MetadataCase(field: "storedAt", value: nil),
        MetadataCase(field: "status", value: "4611686018427387904"),
        MetadataCase(field: "status", value: "-200"),
        MetadataCase(field: "status", value: "0"),
        MetadataCase(field: "status", value: "99"),
        MetadataCase(field: "status", value: "1000"),
        MetadataCase(field: "status", value: "\"200\""),
        MetadataCase(field: "status", value: "200.5"),
        MetadataCase(field: "status", value: nil),
        MetadataCase(field: "key", value: "7"),
        MetadataCase(field: "url", value: nil),
        MetadataCase(field: "headers", value: "{}"),
        MetadataCase(field: "headers", value: #"[["a"]]"#),
        MetadataCase(field: "headers", value: #"[["a","b","c"]]"#),
        MetadataCase(field: "headers", value: #"[["a",1]]"#),
        MetadataCase(field: "headers", value: #"[["","b"]]"#),
        MetadataCase(field: "headers", value: #"[["a b","c"]]"#),
        MetadataCase(field: "headers", value: #"[["a:","c"]]"#),
        MetadataCase(field: "headers", value: #"[["x","a\r\nset-cookie: y"]]"#),
        MetadataCase(field: "headers", value: #"[["x","a\nb"]]"#),
        MetadataCase(field: "headers", value: #"[["x","a\u0000b"]]"#),
        MetadataCase(field: "headers", value: #"[["caf\u00e9","b"]]"#),
        MetadataCase(field: "vary", value: #"{"accept":1}"#),
        MetadataCase(field: "vary", value: #"{"a b":"c"}"#),
        MetadataCase(field: "vary", value: #"{"accept":"a\r\nb"}"#),
        MetadataCase(field: "vary", value: "[]"),
        MetadataCase(field: "bytes", value: "[]"),
        MetadataCase(field: "bytes", value: #"{"etag":1}"#),
        MetadataCase(field: "bytes", value: #"{"etag":"!!"}"#),
        MetadataCase(field: "bytes", value: #"{"etag":""}"#),
        MetadataCase(field: "bytes", value: #"{"etag":"Ig0KIg=="}"#),
        MetadataCase(field: "bytes", value: #"{"etag":"IgAi"}"#),
        MetadataCase(field: "bytes", value: #"{"x-other":"YQ=="}"#),
        MetadataCase(field: "bytes", value: "{\"etag\":\"\(Data(repeating: 0x61, count: 8193).base64EncodedString())\"}"),
        MetadataCase(field: "digests", value: "[]"),
        MetadataCase(field: "digests", value: #"{"sha256":1}"#),
        MetadataCase(field: "digests", value: #"{"md5":"1B2M2Y8AsgTpgAmY7PhCfg=="}"#),
        MetadataCase(field: "digests", value: #"{"SHA256":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}"#),
        MetadataCase(field: "digests", value: #"{"sha256":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"}"#),
        MetadataCase(field: "digests", value: #"{"sha256":"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU="}"#),
        MetadataCase(field: "digests", value: #"{"sha384":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}"#),
        MetadataCase(field: "digests", value: #"{"sha256":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV="}"#),
    ]

    @Test(arguments: absurdMetadata)
    func absurdMetadataIsNoEntry(_ c: MetadataCase) {
        #expect(DiskCacheEntry.parseMetadata(Self.metadata(c.field, c.value)) == nil)
    }

    @Test func soundMetadataIsAnEntry() throws {
        let (key, response) = try #require(DiskCacheEntry.parseMetadata(Self.metadata(nil, nil)))
        #expect(key == "k")
        #expect(response.status == 200)
        #expect(response.header("etag") == "\"a\"")
        #expect(response.varyValues == ["accept": "*/*"])
        #expect(response.responseTime == Date(timeIntervalSince1970: 1_714_564_800.5))
        #expect(response.digests == BodyDigests.of([], [.sha256]))
    }

    @Test func metadataWrittenBeforeDigestsWereKeptIsAnEntryWithNone() throws {
        let (_, response) = try #require(DiskCacheEntry.parseMetadata(Self.metadata("digests", nil)))
        #expect(response.digests.isEmpty)
        #expect(response.status == 200)
    }

    @Test func writtenMetadataReadsBack() throws {
        // Given a response as courier stores it
        let response = CachedResponse(
            status: 203, headers: [("Content-Type", "text/plain"), ("X-Odd", "a \u{7F} é")], url: "http://o/é",
            requestTime: Self.t0, responseTime: Self.t0 + 1, varyValues: ["accept": "*/*"],
            digests: BodyDigests.of(Array("body".utf8), [.sha384, .sha512]))
        // When its metadata is written and read
        let parsed = try #require(DiskCacheEntry.parseMetadata(DiskCacheEntry.metadata(key: "k", response: response)))
        // Then it is the same response
        #expect(parsed.key == "k")
        #expect(parsed.response == response)
    }

    @Test func validatorBytesThatAreNotUTF8ReadBack() throws {
        // Given a response whose ETag holds bytes that are not UTF-8
        var head = ResponseHead(status: 200, headers: [("etag", "\"caf\u{FFFD}\""), ("content-type", "text/plain")])
        head.rawValues = ["etag": Array("\"caf".utf8) + [0xE9, 0x22]]
        let response = CachedResponse(
            head: head, requestURL: "http://o/x", requestHeaders: [], requestTime: Self.t0, responseTime: Self.t0)
        // When its metadata is written and read
        let metadata = DiskCacheEntry.metadata(key: "k", response: response)
        let parsed = try #require(DiskCacheEntry.parseMetadata(metadata))
        // Then the bytes are kept beside the lossy text, and go back as they came
        #expect(metadata.starts(with: StoredHead.magic))
        #expect(parsed.response == response)
        #expect(parsed.response.header("etag") == "\"caf\u{FFFD}\"")
        let sent = HTTPCachePolicy.conditionalHeaders(for: parsed.response)
        #expect(sent.map(\.name) == ["If-None-Match"])
        #expect(sent.first?.value == Array("\"caf".utf8) + [0xE9, 0x22])
    }

    @Test func metadataInTheTextEarlierCouriersWroteReadsBack() throws {
        // Given a response with fractional times, digests, vary values, headers and validator bytes
        var response = CachedResponse(
            status: 200, headers: [("Content-Type", "text/plain"), ("ETag", "\"é\""), ("X-Z", "")], url: "http://o/x?a=1",
            requestTime: Date(timeIntervalSince1970: 1_764_138_294.123_456_7), responseTime: Date(timeIntervalSince1970: 1_764_138_294.9),
            storedAt: Date(timeIntervalSince1970: 0.1), varyValues: ["accept": "*/*", "accept-language": "fr"],
            digests: BodyDigests.of(Array("body".utf8), [.sha256, .sha512]))
        response.rawValues = ["last-modified": [0x22, 0xE9, 0x22]]
        // And the JSON text earlier couriers wrote for it
        let object: JSON = [
            "key": .string("url k"),
            "url": .string(response.url),
            "status": JSON(response.status),
            "headers": .array(response.headers.map { .array([.string($0.name), .string($0.value)]) }),
            "vary": .object(response.varyValues.mapValues(JSON.string)),
            "requestTime": .double(response.requestTime.timeIntervalSince1970),
            "responseTime": .double(response.responseTime.timeIntervalSince1970),
            "storedAt": .double(response.storedAt.timeIntervalSince1970),
            "digests": .object(Dictionary(uniqueKeysWithValues: response.digests.algorithms.map { algorithm in
                (algorithm.rawValue, JSON.string(BodyDigests.base64(response.digests[algorithm] ?? [])))
            })),
            "bytes": ["last-modified": .string("Iuki")],
        ]
        let text = JSONCodec.encode(object)
        // When it is read
        let parsed = try #require(DiskCacheEntry.parseMetadata(text))
        // Then it is the same response, times as the text gave them
        #expect(parsed.key == "url k")
        #expect(parsed.response.rawValues == ["last-modified": [0x22, 0xE9, 0x22]])
        #expect(parsed.response.requestTime.timeIntervalSince1970.bitPattern == response.requestTime.timeIntervalSince1970.bitPattern)
        // And written again it is the binary head, which reads back as the same response, times to the bit
        let written = DiskCacheEntry.metadata(key: parsed.key, response: parsed.response)
        #expect(written.starts(with: StoredHead.magic))
        let again = try #require(DiskCacheEntry.parseMetadata(written))
        #expect(again.key == "url k")
        #expect(again.response == parsed.response)
        #expect(
            again.response.requestTime.timeIntervalSinceReferenceDate.bitPattern
                == parsed.response.requestTime.timeIntervalSinceReferenceDate.bitPattern)
    }

    // MARK: - Image headers

    struct ImageCase: CustomTestStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var info: ImageInfo?
        var testDescription: String { name }
    }

    private static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    private static func png(width: [UInt8], height: [UInt8]) -> [UInt8] {
        pngSignature + [0, 0, 0, 13] + Array("IHDR".utf8) + width + height + [8, 2, 0, 0, 0]
    }

    static let imageCases: [ImageCase] = [
        ImageCase(name: "png 3x2", bytes: png(width: [0, 0, 0, 3], height: [0, 0, 0, 2]), info: ImageInfo(format: "png", width: 3, height: 2)),
        ImageCase(name: "png 2^32-1 wide", bytes: png(width: [0xFF, 0xFF, 0xFF, 0xFF], height: [0, 0, 0, 2]), info: nil),
        ImageCase(name: "png 2^31 high", bytes: png(width: [0, 0, 0, 3], height: [0x80, 0, 0, 0]), info: nil),
        ImageCase(name: "png 0 wide", bytes: png(width: [0, 0, 0, 0], height: [0, 0, 0, 2]), info: nil),
        ImageCase(
            name: "png 2^31-1 square", bytes: png(width: [0x7F, 0xFF, 0xFF, 0xFF], height: [0x7F, 0xFF, 0xFF, 0xFF]),
            info: ImageInfo(format: "png", width: Int(Int32.max), height: Int(Int32.max))),
        ImageCase(name: "png cut in its size", bytes: Array(png(width: [0, 0, 0, 3], height: [0, 0, 0, 2])[..<23]), info: nil),
        ImageCase(name: "gif cut", bytes: Array("GIF89a".utf8) + [1, 0, 1], info: nil),
        ImageCase(name: "webp VP8X cut", bytes: Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8X".utf8) + [UInt8](repeating: 0xFF, count: 13), info: nil),
        ImageCase(
            name: "webp VP8X largest", bytes: Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8X".utf8) + [UInt8](repeating: 0xFF, count: 14),
            info: ImageInfo(format: "webp", width: 1 << 24, height: 1 << 24)),
        ImageCase(name: "jpeg segment past the end", bytes: [0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 20), info: nil),
        ImageCase(name: "jpeg zero-length segment", bytes: [0xFF, 0xD8, 0xFF, 0xE0, 0, 0] + [UInt8](repeating: 0xFF, count: 20), info: nil),
        ImageCase(name: "jpeg all fill bytes", bytes: [0xFF, 0xD8] + [UInt8](repeating: 0xFF, count: 64), info: nil),
        ImageCase(
            name: "jpeg SOF0 65535 square", bytes: [0xFF, 0xD8, 0xFF, 0xC0, 0, 17, 8, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0],
            info: ImageInfo(format: "jpeg", width: 65_535, height: 65_535)),
    ]

    @Test(arguments: imageCases)
    func image(_ c: ImageCase) {
        #expect(ImageInfo.sniff(c.bytes) == c.info)
    }

    @Test func everyPrefixAndCorruptionOfAnImageIsSafe() {
        // Given headers of each format, cut at every length and with every
        // byte set to 0x00 and 0xFF in turn
        let headers: [[UInt8]] = [
            Self.png(width: [0, 0, 0, 3], height: [0, 0, 0, 2]),
            Array("GIF89a".utf8) + [3, 0, 2, 0],
            Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8 ".utf8) + [UInt8](repeating: 0, count: 7) + [0x9D, 0x01, 0x2A, 3, 0, 2, 0],
            Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8L".utf8) + [0, 0, 0, 0, 0x2F, 0xFF, 0xFF, 0xFF, 0xFF],
            [0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 17, 8, 0, 2, 0, 3, 1, 0, 0],
        ]
        for header in headers {
            for length in 0...header.count {
                _ = ImageInfo.sniff(Array(header[..<length]))
            }
            for index in header.indices {
                for byte: UInt8 in [0x00, 0xFF] {
                    var corrupt = header
                    corrupt[index] = byte
                    // Then sniffing answers, and never with a negative size
                    if let info = ImageInfo.sniff(corrupt) {
                        #expect(info.width >= 0 && info.height >= 0)
                    }
                }
            }
        }
    }
}
