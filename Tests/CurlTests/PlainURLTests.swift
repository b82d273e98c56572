import CLibcurl
@testable import Curl
import Testing

@Suite struct PlainURLTests {
    /// The text libcurl's URL API makes of `url` once it has parsed it as
    /// it parses `CURLOPT_URL`; nil when it does not take it.
    private func libcurlsText(of url: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK
        else { return nil }
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_URL, &text, 0) == CURLUE_OK, let text else { return nil }
        defer { curl_free(text) }
        return String(cString: text)
    }

    private func isPlain(_ url: String) -> Bool {
        Array(url.utf8).withUnsafeBufferPointer { PlainURL($0) != nil }
    }

    @Test(arguments: [
        "http://127.0.0.1:8080/w1/0", "https://127.0.0.1:8443/w1/1999", "https://example.com/", "http://a/b?c=d&e=/f?g",
        "https://h-1.example.org:443/x/.well-known/y", "http://0.0.0.0:1/", "http://255.255.255.255:65535/%2Fa%2fb?%41",
        "https://a.b/c..d/e.", "http://x/a//b/", "http://x/~user/!$&'()*+,;=:@",
    ])
    func aPlainURLIsTheTextLibcurlMakesOfIt(url: String) {
        #expect(isPlain(url))
        #expect(libcurlsText(of: url) == url)
    }

    @Test(arguments: [
        // Another text once parsed: scheme, host, port, path, query, fragment.
        "HTTP://h/", "Https://h/", "http://H/", "http://h", "http://h:/", "http://h:080/", "http://127.1/",
        "http://0x7f.0.0.1/", "http://127.0.0.01/", "http://h/a/../b", "http://h/./b", "http://h/a/.", "http://h/a/..",
        "http://h/a/.?q", "http://h/?", "http://h/a#f", "http://h/#", "http:///h/", "http:/h/", "http://h/a?b#",
        // Or parts the form leaves out: user, IPv6, escapes in the host, spaces, other bytes, schemes.
        "http://u:p@h/", "http://[::1]/", "http://h%41/", "http://h/a b", "http://h/\u{E9}", "ftp://h/",
        "http://256.0.0.1/", "http://1.2.3/", "http://1.2.3.4.5/", "http://h:0/", "http://h:65536/", "http://_h/",
        "http://1h/", "http://h_/", "http://h/a\\b/..",
    ])
    func anotherURLIsNotPlain(url: String) {
        #expect(!isPlain(url))
    }
}
