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
