import Foundation
import JSON
import JSONRPC
import Testing

@testable import Courier
@testable import Curl

/// The byte-level checks of protocol/security.md, with the Swift String
/// pitfalls they exist for: `"\r\n"` is one Character, canonically
/// equivalent strings are `==`, and NUL hides behind a combining mark.
@Suite(.timeLimit(.minutes(1)))
struct SecurityTests {
    // MARK: - Field syntax

    @Test(arguments: [
        ("plain", true), ("a b\tc", true), ("caf\u{E9}", true), ("", true),
        ("a\r\nb", false), ("\r\n", false), ("a\nb", false), ("a\rb", false), ("a\u{0}b", false),
        ("\u{0}\u{301}", false), ("\r\n\u{301}", false), ("a\u{1}b", false), ("a\u{7F}b", false),
    ])
    func fieldValues(value: String, valid: Bool) {
        #expect(HTTPField.isValidValue(value) == valid)
    }

    @Test func aGraphemeClusterHidesCRLFFromCharacterComparison() {
        // The reason the checks work on bytes.
        let value = "a\r\nInjected: 1"
        #expect(!value.contains(where: { $0 == "\r" || $0 == "\n" }))
        #expect(!HTTPField.isValidValue(value))
    }

    @Test(arguments: [
        ("Accept", true), ("X-Custom_1.2~!#$%&'*+^`|", true), ("", false), ("X Y", false), ("X:Y", false),
        ("X\u{E9}", false), ("X\r\nY", false), ("X\u{0}", false), ("K", true), ("\u{212A}", false),
    ])
    func fieldNames(name: String, valid: Bool) {
        #expect(HTTPField.isValidName(name) == valid)
    }

    // MARK: - Identity

    @Test func exactStringsCompareBytesNotEquivalence() {
        #expect("K" == "\u{212A}")
        #expect("\u{E9}" == "e\u{301}")
        #expect(ExactString("K") != ExactString("\u{212A}"))
        #expect(ExactString("\u{E9}") != ExactString("e\u{301}"))
        #expect(ExactString("same") == ExactString("same"))
        let slots: Set = [ExactString("K"), ExactString("\u{212A}"), ExactString("\u{E9}"), ExactString("e\u{301}")]
        #expect(slots.count == 4)
        #expect(!"K".isExactly("\u{212A}"))
        // Equal bytes hash alike however each string was made
        let long = "http://origin.example/" + String(repeating: "a", count: 100)
        let copied = String(decoding: Array(long.utf8), as: UTF8.self)
        let sliced = String("x\(long)".dropFirst())
        #expect(ExactString(long).hashValue == ExactString(copied).hashValue)
        #expect(Set([ExactString(long)]).contains(ExactString(sliced)))
        #expect(!Set([ExactString(long)]).contains(ExactString(long + "b")))
    }

    @Test func taskKeysOfEquivalentURLsDiffer() throws {
        let settings = Configuration(cacheDir: "/nonexistent")
        let precomposed = try DownloadRequest(Params(["url": "http://o/caf\u{E9}"]), defaults: settings)
        let decomposed = try DownloadRequest(Params(["url": "http://o/cafe\u{301}"]), defaults: settings)
        #expect(TaskKey(precomposed) != TaskKey(decomposed))
        #expect(ResponseCache.key(for: precomposed) != ResponseCache.key(for: decomposed))
    }

    @Test func cacheKeysAreNamespacedAndEscapedToPrintableASCII() {
        #expect(ResponseCache.key(url: "http://o/a") == "url http://o/a")
        #expect(ResponseCache.key(cacheKey: "http://o/a") == "key http://o/a")
        #expect(ResponseCache.key(url: "http://o/a") != ResponseCache.key(cacheKey: "http://o/a"))
        #expect(ResponseCache.escaped("a b%\u{E9}\u{0}\n") == "a%20b%25%C3%A9%00%0A")
        #expect(ResponseCache.escaped("%C3%A9") != ResponseCache.escaped("\u{E9}"))
        #expect(ResponseCache.key(url: "K") != ResponseCache.key(url: "\u{212A}"))
    }

    @Test func credentialsAreDetectedInHeadersAndInTheURL() throws {
        let settings = Configuration(cacheDir: "/nonexistent")
        func request(_ params: [String: JSON]) throws -> DownloadRequest {
            try DownloadRequest(Params(JSON.object(params)), defaults: settings)
        }
        #expect(try !request(["url": "http://o/a"]).hasCredentials)
        #expect(try request(["url": "http://u:p@o/a"]).hasCredentials)
        #expect(try request(["url": "http://token@o/a"]).hasCredentials)
        #expect(try request(["url": "http://o/a", "headers": ["authorization": "Bearer x"]]).hasCredentials)
        #expect(try request(["url": "http://o/a", "headers": ["Cookie": "a=b"]]).hasCredentials)
        #expect(try !ResponseCache.applies(to: request(["url": "http://o/a", "headers": ["Authorization": "x"]])))
    }

    @Test func invalidParamsAreRefusedOnBytes() {
        let settings = Configuration(cacheDir: "/nonexistent")
        let cases: [[String: JSON]] = [
            ["url": "http://o/a\u{0}\u{301}"],
            ["url": "http://o/a\r\n"],
            ["url": "http://o/a", "headers": ["X": "a\r\nY: b"]],
            ["url": "http://o/a", "headers": ["X\u{E9}": "v"]],
            ["url": "http://o/a", "accept": ["image/*", "a\r\nY: b"]],
            ["url": "http://o/a", "destination": "/tmp/a\u{0}b"],
        ]
        for params in cases {
            #expect(throws: RPCError.self) { try DownloadRequest(Params(JSON.object(params)), defaults: settings) }
        }
    }

    // MARK: - Stored validators

    @Test func storedValidatorsThatCouldEndALineAreNeverReplayed() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = ResponseCache(
            configuration: Configuration(cacheDir: directory), root: try CacheRoot(testing: directory), logger: .init(label: "test"))
        let request = try DownloadRequest(Params(["url": "http://o/a"]), defaults: Configuration(cacheDir: directory))
        let old = Date(timeIntervalSince1970: 1_000_000)
        for (etag, replayed) in [("\"good\"", true), ("\"x\"\r\nX-Injected: 1", false), ("\"x\u{0}\"", false)] {
            let response = CachedResponse(
                status: 200, headers: [("etag", etag), ("cache-control", "no-cache")], url: "http://o/a",
                requestTime: old, responseTime: old)
            cache.memory.set(MemoryCache.Entry(response: response, body: [1]), for: ResponseCache.key(for: request))
            switch cache.lookup(request) {
            case .stale(let stale):
                #expect(replayed)
                #expect(stale.conditionalHeaders.allSatisfy { HTTPField.isValidValue($0.value) })
            case .miss:
                #expect(!replayed)
            case .hit:
                Issue.record("a no-cache response was served without revalidation")
            }
        }
    }

    // MARK: - Redirects

    @Test func redirectPolicy() throws {
        let policy = RedirectPolicy()
        let https = CurlURL("https://a.example/x")
        let http = try #require(CurlURL("http://a.example/y"))
        #expect(policy.refusal(from: https, to: http, hop: 1)?.code == .insecureRedirect)
        #expect(RedirectPolicy(allowsInsecure: true).refusal(from: https, to: http, hop: 1) == nil)
        #expect(policy.refusal(from: https, to: try #require(CurlURL("ftp://a.example/")), hop: 1)?.code == .schemeNotAllowed)
        #expect(policy.refusal(from: https, to: try #require(CurlURL("file:///etc/passwd")), hop: 1)?.code == .schemeNotAllowed)
        #expect(policy.refusal(from: CurlURL("http://a/"), to: http, hop: 11)?.code == .tooManyRedirects)
        #expect(policy.refusal(from: CurlURL("http://a/"), to: http, hop: 10) == nil)
    }

    @Test(arguments: [
        ("https://a.example/x", "https://a.example/y", true),
        ("https://a.example/x", "https://a.example:443/y", true),
        ("https://a.example/x", "https://b.example/y", false),
        ("https://a.example/x", "https://a.example:8443/y", false),
        ("http://a.example/x", "https://a.example/y", false),
    ])
    func credentialHeadersStayWithTheirOrigin(from: String, to: String, kept: Bool) throws {
        let headers = [("Authorization", "a"), ("cookie", "c"), ("Proxy-Authorization", "p"), ("X-Other", "o")]
        let next = RedirectPolicy.headers(headers, from: CurlURL(from), to: try #require(CurlURL(to)))
        #expect(next.map(\.name) == (kept ? headers.map(\.0) : ["X-Other"]))
    }

    /// Location bytes, and the URL curl 7.88 requests when it follows them
    /// itself (for the password, the same `Authorization` bytes).
    static let redirectTargets: [(location: [UInt8], target: String)] = [
        (Array("http://h/a/".utf8) + [0xC3, 0x28], "http://h/a/%c3("),
        (Array("http://h/a b?q=".utf8) + [0xC3] + Array(" y&r=%41#f".utf8) + [0xC3], "http://h/a%20b?q=%c3+y&r=%41#f%c3"),
        (Array("HTTP://u:p".utf8) + [0xC3] + Array("@h/x/../y".utf8), "http://u:p%c3@h/y"),
        (Array("http://h/caf\u{E9}".utf8), "http://h/caf%c3%a9"),
        (Array("http://h/already%20escaped%zz".utf8), "http://h/already%20escaped%zz"),
    ]

    @Test(arguments: redirectTargets)
    func redirectTargetsAreEscapedAsCurlEscapesThem(location: [UInt8], target: String) {
        #expect(CurlURL.redirectTarget(location) == target)
        #expect(CurlURL.redirectTarget(Array(target.utf8)) == target, "escaping twice changes nothing")
    }

    @Test func redirectTargetsThatAreNoURLsAreNotFollowed() {
        #expect(CurlURL.redirectTarget(Array("http://h/a".utf8) + [0, 0x62]) == nil)
        #expect(CurlURL.redirectTarget(Array("http://h/".utf8) + [0x7F]) == nil)
        // libcurl leaves a host name as it is: one that is not UTF-8 is no text to follow.
        #expect(CurlURL.redirectTarget(Array("http://ex".utf8) + [0xC3] + Array("ample/".utf8)) == nil)
    }

    // MARK: - Destinations

    @Test func temporaryNamesSitBesideTheirDestinationCutTo100Characters() throws {
        let mark = ".courier-\(getpid())-"
        for name in ["file.bin", String(repeating: "é", count: 150), String(repeating: "a", count: 100)] {
            let temporary = Destination.temporaryName(for: name)
            let kept = String(name.prefix(100))
            #expect(temporary.hasPrefix("." + kept + mark))
            #expect(temporary.hasSuffix(".part"))
            let suffix = temporary.dropFirst(1 + kept.count + mark.count).dropLast(5)
            #expect(UInt64(String(suffix), radix: 36) != nil)
            #expect(suffix == suffix.lowercased())
            #expect(suffix.count == 1 || suffix.first != "0", "the digits are the number's, with no leading zero")
        }
        #expect(Destination.temporaryName(for: "a") != Destination.temporaryName(for: "a"))
    }

    @Test func trustedParentsSplitThePathAtItsLastSlash() {
        #expect(Destination("/d/e/f.bin", root: nil).trustedParent! == ("/d/e", "f.bin"))
        #expect(Destination("/f", root: nil).trustedParent! == ("/", "f"))
        #expect(Destination("/d/ü", root: nil).trustedParent! == ("/d", "ü"))
        for path in ["/d/", "/d/.", "/d/..", "f", "/d/a\u{0}b"] { #expect(Destination(path, root: nil).trustedParent == nil) }
        #expect(Destination("/d/f", root: "/d").trustedParent == nil)
    }

    @Test func withoutARootTheCheckReadsTheFormOfThePath() {
        // Paths that name a file pass, whatever their directories hold
        for path in ["/d/e/f.bin", "/f", "/d/ü", "/d/./..x", "/d/.../f", "/nonexistent/d/f", "/d/e\u{301}"] {
            #expect(throws: Never.self) { try Destination(path, root: nil).check() }
        }
        // Paths that name no file, or hold a NUL byte, are refused, each
        // saying why
        for path in ["/d/", "/d/.", "/d/..", "/", "", "/.."] {
            #expect { try Destination(path, root: nil).check() } throws: { error in
                "\(error)" == "the destination \(path) names no file"
            }
        }
        for path in ["/d/a\u{0}b", "/d\u{0}/f", "/d/f\u{0}", "/d/\u{0}"] {
            #expect { try Destination(path, root: nil).check() } throws: { error in
                "\(error)" == "the destination contains a NUL byte"
            }
        }
    }

    @Test func destinationsUnderARootNeverFollowSymlinks() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("courier-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let root = base + "/root"
        let outside = base + "/outside"
        try FileManager.default.createDirectory(atPath: root + "/real", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: root + "/file-link", withDestinationPath: outside + "/f")

        func failure(_ path: String) -> Destination.Failure? {
            do throws(Destination.Failure) {
                _ = try Destination(path, root: root).openParent(create: true)
                return nil
            } catch {
                return error
            }
        }
        func isNotAllowed(_ failure: Destination.Failure?) -> Bool {
            if case .notAllowed = failure { return true }
            return false
        }
        #expect(failure(root + "/real/f") == nil)
        #expect(failure(root + "/new/dir/f") == nil)
        #expect(FileManager.default.fileExists(atPath: root + "/new/dir"))
        for path in [
            root + "/link/f", root + "/link/../f", root + "/link/new/f", root + "/file-link", root + "/../outside/f",
            root + "/real/../../outside/f", base + "/rootK/f", outside + "/f", root,
        ] {
            #expect(isNotAllowed(failure(path)), "\(path)")
        }
        #expect((try FileManager.default.contentsOfDirectory(atPath: outside)).isEmpty)
    }

    @Test func aPathIsAbsoluteByItsFirstByte() throws {
        let accented = "/\u{301}tmp/x"
        #expect(!accented.hasPrefix("/"), "a character comparison sees an accented slash")
        #expect(accented.isAbsolutePath && !"\u{301}/tmp".isAbsolutePath && !"tmp/x".isAbsolutePath)
        let request = try DownloadRequest(Params(["url": "http://origin/a", "destination": .string(accented)]), defaults: Configuration())
        #expect(request.destination == accented)
        #expect(throws: RPCError.self) {
            try DownloadRequest(Params(["url": "http://origin/a", "destination": "\u{301}/tmp/x"]), defaults: Configuration())
        }
    }

    @Test func aRootIsComparedAsBytes() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("courier-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        try FileManager.default.createDirectory(atPath: base + "/rootK", withIntermediateDirectories: true)
        #expect(throws: Destination.Failure.self) {
            _ = try Destination(base + "/root\u{212A}/f", root: base + "/rootK").openParent(create: true)
        }
        #expect(!FileManager.default.fileExists(atPath: base + "/root\u{212A}"))
    }

    // MARK: - Logs

    @Test(arguments: [
        ("GET https://alice:s3cret@host/p", "GET https://alice:***@host/p"),
        ("https://t0ken@host/", "https://***@host/"),
        ("no url here", "no url here"),
        ("Authorization: Bearer abc", "Authorization: ***"),
        (#"{"authorization":"Bearer abc","x":1}"#, #"{"authorization":"***","x":1}"#),
        ("cookie=abc", "cookie=***"),
        ("line\nforged", "line\\nforged"),
        ("cr\r\nlf", "cr\\r\\nlf"),
        ("nul\u{0}", "nul\\u{00}"),
        ("ls\u{2028}ps\u{2029}", "ls\\u{2028}ps\\u{2029}"),
        ("caf\u{E9}", "caf\u{E9}"),
    ])
    func logText(input: String, expected: String) {
        #expect(Redaction.logText(input) == expected)
    }

    @Test func proxyPasswordsAreNotReported() {
        var settings = Configuration(cacheDir: "/nonexistent")
        settings.proxy = "http://bob:hunter2@proxy:3128"
        #expect(settings.json["proxy"] == "http://bob:***@proxy:3128")
    }
}
