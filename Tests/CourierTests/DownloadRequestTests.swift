import JSON
import JSONRPC
import Testing

@testable import Courier

/// A download's values are checked in one place, whether `download`'s
/// params or `courier get` ask for it.
@Suite(.timeLimit(.minutes(1)))
struct DownloadRequestTests {
    private let defaults = Configuration(cacheDir: "/nonexistent")

    @Test(arguments: [
        "http://o/a b", "http://o/\u{0}", "not a url", "http://o/a\u{7F}", "http://origin.example/a-long-path\u{1}/b",
        "http://origin.example/a-long-path/b\u{7F}",
    ])
    func anInvalidURLIsRefused(url: String) {
        #expect(throws: DownloadRequest.Refusal.invalidURL) { try DownloadRequest(url: url, defaults: defaults) }
    }

    @Test func eachValueIsCheckedAndNamed() {
        func refusal(_ make: () throws(DownloadRequest.Refusal) -> DownloadRequest) -> DownloadRequest.Refusal? {
            do {
                _ = try make()
                return nil
            } catch {
                return error
            }
        }
        let url = "http://o/a"
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, headers: [("X Y", "v")], defaults: defaults) } == .headerName("X Y"))
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, headers: [("X", "a\r\nY: b")], defaults: defaults) } == .headerValue(name: "X"))
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, accept: ["a\nb"], defaults: defaults) } == .acceptEntry)
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, textEncoding: "klingon", defaults: defaults) } == .textEncoding("klingon"))
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, destination: "tmp/x", defaults: defaults) } == .relativeDestination)
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, destination: "/tmp/\u{0}", defaults: defaults) } == .destinationWithNUL)
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, destination: "/tmp/a-long-directory/\u{0}/x", defaults: defaults) } == .destinationWithNUL)
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, destination: "/tmp/a-long-directory/x\u{0}", defaults: defaults) } == .destinationWithNUL)
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, destination: "/tmp/a-long-directory/\u{E9}x", defaults: defaults) } == nil)
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, mirrors: ["nonsense"], defaults: defaults) } == .invalidMirror)
        #expect(refusal { () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, mirrors: ["ftp://o/a"], defaults: defaults) } == .mirrorScheme)
        guard case .integrity = refusal({ () throws(DownloadRequest.Refusal) in try DownloadRequest(url: url, integrity: "md5-x", defaults: defaults) }) else {
            Issue.record("a malformed integrity is refused")
            return
        }
    }

    @Test func unsetValuesTakeTheDefaultsAndAcceptBecomesAHeader() throws {
        var defaults = defaults
        defaults.maxBytes = 99
        defaults.timeout = 12
        defaults.retries = 5
        let request = try DownloadRequest(
            url: "http://o/a", headers: [("X-B", "2"), ("x-a", "1")], accept: [" Image/PNG "], maxRate: 0, defaults: defaults)
        #expect(request.maxBytes == 99 && request.timeout == 12 && request.retries == 5 && request.maxRate == nil)
        #expect(request.accept == ["image/png"])
        #expect(request.headers.map(\.name) == ["Accept", "x-a", "X-B"])
        #expect(request.headers.first?.value == "image/png")
    }

    @Test func aURLAndADestinationAloneReadAsEveryParamLeftOut() throws {
        // Given settings of their own
        var defaults = defaults
        defaults.maxBytes = 99
        defaults.timeout = 12
        defaults.retries = 5

        // When a download gives a URL and a destination alone, and another
        // gives the same with every other param at the value it takes when
        // left out
        let alone = try DownloadRequest(Params(["url": "http://o/a", "destination": "/tmp/a"]), defaults: defaults)
        let spelled = try DownloadRequest(
            Params([
                "url": "http://o/a", "destination": "/tmp/a", "headers": [:], "slot": nil, "priority": "normal",
                "cachePolicy": "default", "body": "none", "wait": false, "mirrors": [], "maxRate": 0,
            ]), defaults: defaults)

        // Then both ask for the same
        for request in [alone, spelled] {
            #expect(request.url == "http://o/a" && request.destination == "/tmp/a" && request.scheme == "http")
            #expect(request.headers.isEmpty && request.slot == nil && request.priority == .normal)
            #expect(request.cachePolicy == .default && request.accept == nil && request.body == .none)
            #expect(request.textEncoding == nil && request.cacheKey == nil && !request.wait && request.mirrors.isEmpty)
            #expect(request.maxBytes == 99 && request.timeout == 12 && request.retries == 5 && request.maxRate == nil)
            #expect(request.integrity == nil && request.cacheStorageKey == ResponseCache.key(url: "http://o/a"))
        }

        // And the same values are refused alike, alone or not
        for extra in [[:], ["priority": "normal"]] as [[String: JSON]] {
            let missing = extra.merging(["destination": "/tmp/a"]) { $1 }
            #expect(throws: RPCError.invalidParams("missing param 'url'", param: "url")) {
                try DownloadRequest(Params(.object(missing)), defaults: defaults)
            }
            let relative = extra.merging(["url": "http://o/a", "destination": "tmp"]) { $1 }
            #expect(throws: RPCError.invalidParams("param 'destination' must be an absolute path", param: "destination")) {
                try DownloadRequest(Params(.object(relative)), defaults: defaults)
            }
            let notText = extra.merging(["url": "http://o/a", "destination": 1]) { $1 }
            #expect(throws: RPCError.self) { try DownloadRequest(Params(.object(notText)), defaults: defaults) }
        }
    }

    @Test func paramsAreRefusedAsTheRequestIs() {
        let cases: [([String: JSON], String, String)] = [
            (["url": "http://o/a b"], "param 'url' is not a valid absolute URL", "url"),
            (["url": "http://o/a", "headers": ["X Y": "v"]], "header name 'X Y' is not a valid HTTP token", "headers"),
            (["url": "http://o/a", "headers": ["X": 1]], "header 'X' must have a string value", "headers"),
            (["url": "http://o/a", "destination": "tmp"], "param 'destination' must be an absolute path", "destination"),
            (["url": "http://o/a", "mirrors": ["ftp://o/a"]], "a 'mirrors' entry must be an http or https URL", "mirrors"),
        ]
        for (params, message, param) in cases {
            #expect(throws: RPCError.invalidParams(message, param: param)) {
                try DownloadRequest(Params(.object(params)), defaults: defaults)
            }
        }
    }
}
