import Foundation
import Testing

@testable import Courier

/// The disk tier's binary head: what courier writes reads back exactly, and
/// bytes of any other shape (the cache directory is anyone's) read as no
/// entry, never a trap.
@Suite struct StoredHeadTests {
    /// A head's fields as bytes, laid out as `StoredHead` describes, each
    /// of which a case spoils.
    struct Head {
        var magic: [UInt8] = StoredHead.magic
        var status: [UInt8] = Head.le(UInt16(200))
        var times: [[UInt8]] = [Head.time(1_714_564_800), Head.time(1_714_564_800.5), Head.time(1_714_564_801)]
        var key: [UInt8] = Head.string("k")
        var url: [UInt8] = Head.string("http://o/x")
        var headers: [UInt8] = Head.count(2) + Head.string("content-type") + Head.string("text/plain") + Head.string("etag") + Head.string("\"a\"")
        var vary: [UInt8] = Head.count(1) + Head.string("accept") + Head.string("*/*")
        var raw: [UInt8] = Head.count(1) + Head.string("last-modified") + Head.string([0x22, 0xE9, 0x22])
        var digests: [UInt8] = Head.count(1) + Head.string("sha256") + Head.string(BodyDigests.of([], [.sha256])[.sha256] ?? [])
        var trailer: [UInt8] = []

        var bytes: [UInt8] {
            magic + status + times.joined() + key + url + headers + vary + raw + digests + trailer
        }

        static func le<Integer: FixedWidthInteger>(_ value: Integer) -> [UInt8] {
            withUnsafeBytes(of: value.littleEndian) { Array($0) }
        }

        static func time(_ secondsSince1970: Double) -> [UInt8] {
            le(Date(timeIntervalSince1970: secondsSince1970).timeIntervalSinceReferenceDate.bitPattern)
        }

        static func count(_ count: UInt32) -> [UInt8] { le(count) }

        static func string(_ text: String) -> [UInt8] { string(Array(text.utf8)) }

        static func string(_ bytes: [UInt8]) -> [UInt8] { le(UInt32(bytes.count)) + bytes }
    }

    struct Spoiled: CustomTestStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var testDescription: String { name }
    }

    private static func spoiled(_ name: String, _ change: (inout Head) -> Void) -> Spoiled {
        var head = Head()
        change(&head)
        return Spoiled(name: name, bytes: head.bytes)
    }

    static let spoiledHeads: [Spoiled] = [
        spoiled("another version") { $0.magic[3] = 2 },
        spoiled("no magic") { $0.magic = [0] },
        spoiled("status 99") { $0.status = Head.le(UInt16(99)) },
        spoiled("status 1000") { $0.status = Head.le(UInt16(1000)) },
        spoiled("status 0") { $0.status = Head.le(UInt16(0)) },
        spoiled("status cut") { $0.status = [200] },
        spoiled("time before 1970") { $0.times[0] = Head.time(-1) },
        spoiled("time past 9999") { $0.times[1] = Head.time(253_402_300_800) },
        spoiled("time NaN") { $0.times[2] = Head.le(Double.nan.bitPattern) },
        spoiled("time infinite") { $0.times[0] = Head.le(Double.infinity.bitPattern) },
        spoiled("time largest") { $0.times[1] = Head.le(Double.greatestFiniteMagnitude.bitPattern) },
        spoiled("key length past the end") { $0.key = Head.le(UInt32.max) + [0x6B] },
        spoiled("key length one past the end") { $0.key = Head.le(UInt32(2)) + [0x6B]; $0.url = []; $0.headers = []; $0.vary = []; $0.raw = []; $0.digests = [] },
        spoiled("key not UTF-8") { $0.key = Head.string([0x6B, 0xFF]) },
        spoiled("url not UTF-8") { $0.url = Head.string([0xC3, 0x28]) },
        spoiled("url a lone surrogate") { $0.url = Head.string([0xED, 0xA0, 0x80]) },
        spoiled("header count past the end") { $0.headers = Head.count(UInt32.max) + Head.string("a") + Head.string("b") },
        spoiled("header count one more") { $0.headers = Head.count(3) + Head.string("a") + Head.string("b") + Head.string("c") + Head.string("d") },
        spoiled("header name empty") { $0.headers = Head.count(1) + Head.string("") + Head.string("b") },
        spoiled("header name with a space") { $0.headers = Head.count(1) + Head.string("a b") + Head.string("c") },
        spoiled("header name with a colon") { $0.headers = Head.count(1) + Head.string("a:") + Head.string("c") },
        spoiled("header name not ASCII") { $0.headers = Head.count(1) + Head.string("café") + Head.string("c") },
        spoiled("header name not UTF-8") { $0.headers = Head.count(1) + Head.string([0x61, 0xFF]) + Head.string("c") },
        spoiled("header value with CR LF") { $0.headers = Head.count(1) + Head.string("x") + Head.string("a\r\nset-cookie: y") },
        spoiled("header value with NUL") { $0.headers = Head.count(1) + Head.string("x") + Head.string([0x61, 0, 0x62]) },
        spoiled("header value not UTF-8") { $0.headers = Head.count(1) + Head.string("x") + Head.string([0x61, 0xC0, 0xAF]) },
        spoiled("header value length past the end") { $0.headers = Head.count(1) + Head.string("x") + Head.le(UInt32.max - 3) },
        spoiled("vary name twice") { $0.vary = Head.count(2) + Head.string("accept") + Head.string("a") + Head.string("accept") + Head.string("b") },
        spoiled("vary value with LF") { $0.vary = Head.count(1) + Head.string("accept") + Head.string("a\nb") },
        spoiled("vary count past the end") { $0.vary = Head.count(0x1000_0000) },
        spoiled("raw bytes of another field") { $0.raw = Head.count(1) + Head.string("x-other") + Head.string("a") },
        spoiled("raw bytes empty") { $0.raw = Head.count(1) + Head.string("etag") + Head.string("") },
        spoiled("raw bytes with CR") { $0.raw = Head.count(1) + Head.string("etag") + Head.string([0x22, 0x0D, 0x22]) },
        spoiled("raw bytes too long") { $0.raw = Head.count(1) + Head.string("etag") + Head.string([UInt8](repeating: 0x61, count: 8193)) },
        spoiled("raw bytes twice") {
            $0.raw = Head.count(2) + Head.string("etag") + Head.string([0xE9]) + Head.string("etag") + Head.string([0xEA])
        },
        spoiled("digest of an unknown algorithm") { $0.digests = Head.count(1) + Head.string("md5") + Head.string([UInt8](repeating: 0, count: 16)) },
        spoiled("digest name in upper case") { $0.digests = Head.count(1) + Head.string("SHA256") + Head.string([UInt8](repeating: 0, count: 32)) },
        spoiled("digest too short") { $0.digests = Head.count(1) + Head.string("sha256") + Head.string([UInt8](repeating: 0, count: 31)) },
        spoiled("digest of another length") { $0.digests = Head.count(1) + Head.string("sha384") + Head.string([UInt8](repeating: 0, count: 32)) },
        spoiled("digest twice") {
            let digest = Head.string("sha256") + Head.string([UInt8](repeating: 0, count: 32))
            $0.digests = Head.count(2) + digest + digest
        },
        spoiled("digest count past the end") { $0.digests = Head.count(UInt32.max) },
        spoiled("a byte after the end") { $0.trailer = [0] },
        spoiled("no digests count") { $0.digests = [] },
    ]

    @Test(arguments: spoiledHeads)
    func spoiledHeadIsNoEntry(_ spoiled: Spoiled) {
        #expect(StoredHead.read(spoiled.bytes) == nil)
        #expect(DiskCacheEntry.parseMetadata(spoiled.bytes) == nil)
    }

    @Test func soundHeadIsAnEntry() throws {
        let (key, response) = try #require(DiskCacheEntry.parseMetadata(Head().bytes))
        #expect(key == "k")
        #expect(response.status == 200)
        #expect(response.url == "http://o/x")
        #expect(response.header("etag") == "\"a\"")
        #expect(response.varyValues == ["accept": "*/*"])
        #expect(response.rawValues == ["last-modified": [0x22, 0xE9, 0x22]])
        #expect(response.responseTime == Date(timeIntervalSince1970: 1_714_564_800.5))
        #expect(response.storedAt == Date(timeIntervalSince1970: 1_714_564_801))
        #expect(response.digests == BodyDigests.of([], [.sha256]))
    }

    @Test func everyCutOfASoundHeadIsNoEntry() {
        let bytes = Head().bytes
        for length in 0..<bytes.count {
            #expect(StoredHead.read(Array(bytes[..<length])) == nil, "cut at \(length)")
        }
    }

    @Test func writtenHeadIsTheDescribedLayout() {
        // Given a response with one of each field
        var response = CachedResponse(
            status: 200, headers: [("Content-Type", "text/plain"), ("ETag", "\"a\"")], url: "http://o/x",
            requestTime: Date(timeIntervalSince1970: 1_714_564_800), responseTime: Date(timeIntervalSince1970: 1_714_564_800.5),
            storedAt: Date(timeIntervalSince1970: 1_714_564_801), varyValues: ["accept": "*/*"],
            digests: BodyDigests.of([], [.sha256]))
        response.rawValues = ["last-modified": [0x22, 0xE9, 0x22]]
        // Then its head is byte for byte the layout the type describes
        #expect(StoredHead.write(key: "k", response: response) == Head().bytes)
    }

    @Test func writtenHeadReadsBackExactly() throws {
        // Given a response with times that are not whole, many digests and fields
        let response = CachedResponse(
            status: 203, headers: [("Content-Type", "text/plain"), ("X-Odd", "a \u{7F} é"), ("X-Empty", "")], url: "http://o/é?a=1",
            requestTime: Date(timeIntervalSinceReferenceDate: 0.1 + 0.2), responseTime: Date(timeIntervalSince1970: 1_764_138_294.123_456_7),
            storedAt: Date(timeIntervalSince1970: 0), varyValues: ["accept": "*/*", "accept-language": "fr", "x-none": ""],
            digests: BodyDigests.of(Array("body".utf8), [.sha256, .sha384, .sha512]))
        // When its head is written and read
        let written = StoredHead.write(key: "url é", response: response)
        let (key, parsed) = try #require(StoredHead.read(written))
        // Then it is the same response, each time to the bit
        #expect(key == "url é")
        #expect(parsed == response)
        for (a, b) in [(parsed.requestTime, response.requestTime), (parsed.responseTime, response.responseTime)] {
            #expect(a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern)
        }
    }

    @Test func headOfLongAndEmptyFieldsReadsBackExactly() throws {
        // Given fields of every size around a small string's limit, and
        // several lines of one name
        let values = ["", "a", String(repeating: "b", count: 15), String(repeating: "c", count: 16), String(repeating: "d", count: 4000)]
        let response = CachedResponse(
            status: 200, headers: values.map { ("x-field", $0) } + [("set-cookie", "a=1"), ("set-cookie", "b=2")],
            url: "http://o/" + String(repeating: "p", count: 300), requestTime: Date(timeIntervalSince1970: 1),
            responseTime: Date(timeIntervalSince1970: 2), varyValues: ["x-long": String(repeating: "v", count: 100)])
        // When its head is written and read
        let written = StoredHead.write(key: "url " + String(repeating: "k", count: 200), response: response)
        let (key, parsed) = try #require(StoredHead.read(written))
        // Then every field is there as it was, in order
        #expect(key == "url " + String(repeating: "k", count: 200))
        #expect(parsed == response)
    }
}
