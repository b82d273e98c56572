import Testing

@testable import Courier

/// The key a request's response is cached under: its URL's bytes or its
/// `cacheKey`'s, escaped, made with the request.
@Suite(.timeLimit(.minutes(1)))
struct ResponseCacheKeyTests {
    private func request(_ url: String, cacheKey: String? = nil) -> DownloadRequest {
        DownloadRequest(
            url: url, scheme: "http", hasUserInfo: false, headers: [], slot: nil, priority: .normal,
            cachePolicy: .default, accept: nil, body: .none, textEncoding: nil, destination: nil, maxBytes: nil,
            timeout: 300, cacheKey: cacheKey, wait: false)
    }

    @Test func aRequestIsKeyedByItsURLOrItsCacheKey() {
        #expect(ResponseCache.key(for: request("http://a/x?y=1")) == "url http://a/x?y=1")
        #expect(ResponseCache.key(for: request("http://a/x", cacheKey: "http://a/x")) == "key http://a/x")
        #expect(ResponseCache.key(for: request("http://a/x")) == ResponseCache.key(url: "http://a/x"))
        #expect(ResponseCache.key(for: request("http://a/x", cacheKey: "k")) == ResponseCache.key(cacheKey: "k"))
        #expect(ResponseCache.key(for: request("http://a/é b")) == "url http://a/%C3%A9%20b")
        #expect(ResponseCache.key(cacheKey: "") == "key ")
    }

    @Test(arguments: [
        ("plain/ASCII~!", "plain/ASCII~!"), ("50%", "50%25"), ("a b", "a%20b"), ("é", "%C3%A9"),
        ("e\u{301}", "e%CC%81"), ("\u{7F}\u{0}", "%7F%00"), ("", ""),
    ])
    func bytesOutsidePrintableASCIIAndPercentAreEscaped(text: String, escaped: String) {
        #expect(ResponseCache.escaped(text) == escaped)
        // A substring's bytes are read as a string's are.
        #expect(ResponseCache.escaped(String(("<" + text + ">").dropFirst().dropLast())) == escaped)
    }
}
