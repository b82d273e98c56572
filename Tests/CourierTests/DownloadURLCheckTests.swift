import Curl
import JSON
import JSONRPC
import Testing

@testable import Courier

/// `download`'s check of its URL remembers the last URL it took; these
/// make sure what it remembers never stands in for another URL.
@Suite(.timeLimit(.minutes(1)), .serialized)
struct DownloadURLCheckTests {
    private let settings = Configuration(cacheDir: "/nonexistent")

    private func request(_ url: String) throws -> DownloadRequest {
        try DownloadRequest(Params(["url": .string(url)]), defaults: settings)
    }

    @Test(arguments: [
        "http://o/a", "HTTPS://u:p@o:8443/a?b#c", "http://u@o/", "http://:p@o/", "file:///etc/passwd", "x-other://h/p",
        "http:///a", "http://[::1]:80/a", "http://o:99999/a", "not a url", "http://\u{E9}.example/", "",
    ])
    func theCheckReadsWhatAParseReads(url: String) {
        // Given a URL, parsed whole and parsed for the check
        let whole = CurlURL(url)
        let checked = CurlURL.checked(url)

        // Then the check finds the same scheme, host and credentials, or
        // refuses the same URLs
        #expect(checked?.scheme == whole?.scheme)
        #expect(checked?.host == whole?.host)
        #expect(checked?.hasUserInfo == whole?.hasUserInfo)
        #expect((checked == nil) == (whole == nil))
    }

    @Test func theSameURLTwiceGivesTheSameRequest() throws {
        // Given a URL with credentials checked once
        let first = try request("HTTP://u:p@o/a")

        // When it is checked again
        let second = try request("HTTP://u:p@o/a")

        // Then both see its scheme and credentials
        #expect(first.scheme == "http" && second.scheme == "http")
        #expect(first.hasUserInfo && second.hasUserInfo)
    }

    @Test func aDifferentURLIsCheckedOnItsOwn() throws {
        // Given a URL with credentials checked last
        _ = try request("http://u:p@o/a")

        // When another URL comes, without credentials, with another scheme
        let other = try request("https://o/a")

        // Then its own facts are taken
        #expect(!other.hasUserInfo)
        #expect(other.scheme == "https")
    }

    @Test func aBadURLAfterAGoodOneIsStillRefused() throws {
        // Given a good URL checked last
        _ = try request("http://o/a")

        // Then URLs that differ from it are refused as before, every time
        for bad in ["http://o/a ", "http://o/a\u{7F}", "not a url", "http://o/a\r\n"] {
            #expect(throws: RPCError.self) { try request(bad) }
            #expect(throws: RPCError.self) { try request(bad) }
        }
        #expect(try request("http://o/a").scheme == "http")
    }

    @Test func anEquivalentURLIsNotTakenForTheLastOne() throws {
        // Given the precomposed spelling checked last
        let precomposed = DownloadRequest.checkedURL
        _ = try precomposed("http://o/caf\u{E9}")

        // When the decomposed one, equal as a Swift String, is checked
        let decomposed = try DownloadRequest.checkedURL("http://o/cafe\u{301}")

        // Then the result names the bytes the client sent
        #expect(decomposed.url.isExactly("http://o/cafe\u{301}"))
    }
}

/// A URL with the bytes of the last one checked up to the end of its
/// authority takes that one's check: these make sure it finds what
/// libcurl's own parse of it finds, refusals too.
@Suite(.timeLimit(.minutes(1)), .serialized)
struct DownloadURLSharedAuthorityTests {
    @Test(arguments: [
        ("http://o/a", "http://o/"), ("HTTPS://u:p@o:8443/a?b#c", "HTTPS://u:p@o:8443/"), ("http://o?x", "http://o?"),
        ("http://o#f", "http://o#"), ("http:///o/a", "http:///o/"), ("http://[::1]:80/a", "http://[::1]:80/"),
        ("http://o", nil), ("no scheme/a", nil), ("", nil),
    ] as [(String, String?)])
    func theDecidingPrefixEndsWithTheAuthority(url: String, prefix: String?) {
        #expect(CurlURL.decidingPrefixLength(of: url) == prefix?.utf8.count)
    }

    @Test(arguments: [
        "/b", "/../../x", "/./a/../b", "/a%zz%00", "/a?b#c", "?q", "#f", "/@evil.example:80/", "//other.example/x",
        "/\u{E9}t\u{E9}", "/a b", "/a\u{7F}", "/a\r\n", "/a\u{0}b", "/a\tb", ":99999/a", "@p/a", "",
        "/" + String(repeating: "x", count: 70_000),
    ])
    func aURLOfTheLastOnesAuthorityIsCheckedAsLibcurlChecksIt(tail: String) throws {
        for last in ["http://o/a", "HTTPS://u:p@o:8443/a", "http://[::1]:80/a", "http://o?x", "https://o#x"] {
            // Given a URL checked last, and one with the same bytes up to
            // the end of its authority
            let prefix = try #require(CurlURL.decidingPrefixLength(of: last))
            let url = String(decoding: Array(last.utf8.prefix(prefix)) + Array(tail.utf8), as: UTF8.self)
            _ = try DownloadRequest.checkedURL(last)

            // When the other is checked
            let checked = try? DownloadRequest.checkedURL(url)

            // Then it is taken when libcurl takes it (with no byte a URL may
            // not hold, and a host), with the scheme and credentials libcurl
            // finds
            let allowed = url.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }
            let parsed = allowed ? CurlURL.checked(url) : nil
            let taken = parsed.map { $0.host?.isEmpty == false } ?? false
            #expect((checked != nil) == taken, "\(url)")
            #expect(checked?.scheme == (taken ? parsed?.scheme : nil), "\(url)")
            #expect(checked?.hasUserInfo == (taken ? parsed?.hasUserInfo : nil), "\(url)")
            #expect(checked.map { $0.url.isExactly(url) } ?? true)
        }
    }

    @Test func anotherAuthorityIsParsedOnItsOwn() throws {
        // Given a URL of one authority checked last
        _ = try DownloadRequest.checkedURL("http://o/a")

        // Then URLs that differ from it inside their authority are checked
        // on their own
        #expect(throws: DownloadRequest.Refusal.self) { try DownloadRequest.checkedURL("http://o:99999/a") }
        #expect(try DownloadRequest.checkedURL("http://o@p/a").hasUserInfo)
        #expect(try DownloadRequest.checkedURL("https://o/a").scheme == "https")
    }
}
