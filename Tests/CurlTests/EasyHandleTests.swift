import CCurlShim
import CLibcurl
@testable import Curl
#if canImport(Glibc)
import Glibc
#endif
import Testing

@Suite(.timeLimit(.minutes(1)))
struct EasyHandleTests {
    @Test(arguments: [
        ("https://h/", true), ("HTTPS://h/", true), ("hTtPs:", true), ("http://h/", false), ("https", false),
        ("httpsx://h/", false), ("", false), ("https;//h/", false), ("https\u{1A}//h/", false),
    ])
    func theSchemeIsHTTPSInAnyCase(url: String, isHTTPS: Bool) {
        #expect(EasyOptions(url: url).isHTTPS == isHTTPS)
    }

    @Test func aTransferWithAnOptionLibcurlRefusesEndsWithItsCode() {
        CurlLibrary.initialize()
        let multi = MultiHandle()
        defer { multi.cleanup() }
        // Given a URL longer than libcurl takes in an option (8,000,000 bytes)
        let easy = multi.makeEasyHandle()
        easy.configure(EasyOptions(url: "http://127.0.0.1/" + String(repeating: "a", count: 8_000_000)))

        // When the transfer is added and the multi handle runs
        multi.add(easy)
        #expect(multi.timeoutMilliseconds == 0)
        multi.perform()
        let ended = multi.completed()

        // Then it ends at once with libcurl's code for a bad argument (43),
        // and its message names the option
        #expect(ended.count == 1)
        #expect(ended.first?.handle === easy)
        #expect(ended.first?.code == 43)
        #expect(easy.errorMessage(code: 43).hasPrefix("libcurl refused CURLOPT_URL: "))
        multi.recycle(easy)

        // And the handle, made as new, takes an option it accepts
        let again = multi.makeEasyHandle()
        #expect(again === easy)
        again.configure(EasyOptions(url: "http://127.0.0.1:1/"))
        multi.add(again)
        #expect(multi.completed().isEmpty)
        multi.remove(again)
        again.cleanup()
    }

    @Test func aReusedHandleSendsNoHeaderItsLastTransferAskedFor() throws {
        CurlLibrary.initialize()
        let origin = try #require(Listener())
        defer { close(origin.fd) }
        let multi = MultiHandle()
        defer { multi.cleanup() }
        let url = "http://127.0.0.1:\(origin.port)/a"

        // Given a transfer that sent a header of its own and asked for
        // every content coding
        var first = EasyOptions(url: url)
        first.headers = [("X-Probe", Array("1".utf8))]
        let handle = multi.makeEasyHandle()
        handle.configure(first)
        let firstRequest = origin.request(of: handle, on: multi)
        #expect(firstRequest.contains("\r\nX-Probe: 1\r\n"))
        #expect(firstRequest.contains("\r\nAccept-Encoding: "))
        multi.recycle(handle)

        // When its handle makes a transfer that asks for neither
        var second = EasyOptions(url: url)
        second.acceptsEncodings = false
        let again = multi.makeEasyHandle()
        #expect(again === handle)
        again.configure(second)
        let secondRequest = origin.request(of: again, on: multi)

        // Then its request carries neither
        #expect(secondRequest.hasPrefix("GET /a HTTP/1.1\r\n"))
        #expect(!secondRequest.contains("X-Probe"))
        #expect(!secondRequest.contains("Accept-Encoding"))
        multi.recycle(again)
    }

    /// A reused handle hands libcurl a plain URL parsed, changing only
    /// the path and query it holds when the origin is the same: each
    /// transfer asks for its own, and reports its own text as the URL it
    /// went to; a URL that is not plain goes as libcurl parses it, and
    /// reports the text libcurl makes of it.
    @Test func aReusedHandleAsksForEachTransfersOwnURL() throws {
        try withOriginAndProxy { origin, other, multi in
            let base = "http://127.0.0.1:\(origin.port)"
            let steps: [(url: String, listener: Listener, target: String, effective: String)] = [
                (base + "/a?b=c", origin, "/a?b=c", base + "/a?b=c"),
                (base + "/d", origin, "/d", base + "/d"),
                (base + "/e%2F?f%2F", origin, "/e%2F?f%2F", base + "/e%2F?f%2F"),
                (base + "/g/../h?", origin, "/h?", base + "/h"),
                (base + "/i?j", origin, "/i?j", base + "/i?j"),
                (base + "/k", origin, "/k", base + "/k"),
                ("http://127.0.0.1:\(other.port)/l?m", other, "/l?m", "http://127.0.0.1:\(other.port)/l?m"),
                ("http://127.0.0.1:\(other.port)", other, "/", "http://127.0.0.1:\(other.port)/"),
                (base + "/n", origin, "/n", base + "/n"),
            ]
            var options = EasyOptions(url: base)
            options.proxyEnvironment = ProxyEnvironment(variables: [:])
            var handle: EasyHandle?
            for step in steps {
                options.url = step.url
                let easy = multi.makeEasyHandle()
                #expect(handle == nil || easy === handle)
                handle = easy
                easy.configure(options)
                let request = step.listener.request(of: easy, on: multi)
                #expect(request.hasPrefix("GET \(step.target) HTTP/1.1\r\n"), "\(step.url)")
                #expect(easy.effectiveURL == step.effective)
                #expect(easy.reportedEffectiveURL == step.effective)
                multi.recycle(easy)
            }
        }
    }

    @Test func aCopyOfOptionsChangedInASharedOptionLeavesTheOriginalAsItWas() {
        // Given options and a copy of them
        let original = EasyOptions(url: "http://h/")
        var changed = original

        // When the copy changes options every transfer of a run shares
        changed.userAgent = "probe"
        changed.followRedirects = false

        // Then the original keeps its own, and the two no longer share them
        #expect(original.userAgent == "courier" && original.followRedirects)
        #expect(changed.userAgent == "probe" && !changed.followRedirects)
        #expect(!original.sharesFixedOptions(with: changed))
        // And options set back to the same values share them again
        var back = changed
        back.userAgent = "courier"
        back.followRedirects = true
        #expect(back.sharesFixedOptions(with: original))
    }

    @Test func aReusedHandleSendsTheUserAgentItsNextTransferAsksFor() throws {
        CurlLibrary.initialize()
        let origin = try #require(Listener())
        defer { close(origin.fd) }
        let multi = MultiHandle()
        defer { multi.cleanup() }

        // Given a handle whose transfer sent courier's user agent
        let first = EasyOptions(url: "http://127.0.0.1:\(origin.port)/a")
        let handle = multi.makeEasyHandle()
        handle.configure(first)
        #expect(origin.request(of: handle, on: multi).contains("\r\nUser-Agent: courier\r\n"))
        multi.recycle(handle)

        // When it makes a transfer with a copy of those options that asks for another
        var second = first
        second.userAgent = "probe/2"
        let again = multi.makeEasyHandle()
        #expect(again === handle)
        again.configure(second)
        let request = origin.request(of: again, on: multi)

        // Then that one is sent, and the first no more
        #expect(request.contains("\r\nUser-Agent: probe/2\r\n"))
        #expect(!request.contains("User-Agent: courier"))
        multi.recycle(again)
    }

    /// The request a transfer straight to its origin writes, headers of its
    /// own or not, is the one libcurl writes when it makes the
    /// `Accept-Encoding` field itself: a handle with the same options whose
    /// list holds the transfer's own headers alone.
    @Test(arguments: [
        [(String, String)](), [("X-A", "1"), ("X-B", "2")], [("accept-encoding", "br")], [("ACCEPT-ENCODING", "")],
        [("Accept", "text/plain"), ("User-Agent", "probe")], [("X-Empty", "")], [("accept", "*/*")], [("USER-AGENT", "")],
    ])
    func aDirectRequestIsTheOneLibcurlWritesItself(headers: [(String, String)]) throws {
        for path in ["/a?b=c", "/a/./b?"] {
            try aDirectRequestIsTheOneLibcurlWritesItself(path: path, headers: headers)
        }
    }

    private func aDirectRequestIsTheOneLibcurlWritesItself(path: String, headers: [(String, String)]) throws {
        CurlLibrary.initialize()
        let origin = try #require(Listener())
        defer { close(origin.fd) }
        let multi = MultiHandle()
        defer { multi.cleanup() }
        var options = EasyOptions(url: "http://127.0.0.1:\(origin.port)\(path)")
        options.followRedirects = false
        options.proxyEnvironment = ProxyEnvironment(variables: [:])
        options.headers = headers.map { ($0.0, Array($0.1.utf8)) }

        // Given the request a handle writes, and again on its reuse
        let handle = multi.makeEasyHandle()
        handle.configure(options)
        let written = origin.request(of: handle, on: multi)
        multi.recycle(handle)
        let again = multi.makeEasyHandle()
        #expect(again === handle)
        again.configure(options)
        let writtenAgain = origin.request(of: again, on: multi)
        multi.recycle(again)

        // When libcurl writes the fields itself
        let reference = EasyHandle()
        reference.configure(options)
        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in headers { list = curl_slist_append(list, "\(name): \(value)") }
        #expect(courier_easy_setopt_ptr(reference.raw, CURLOPT_HTTPHEADER, list) == CURLE_OK)
        #expect(courier_easy_setopt_ptr(reference.raw, CURLOPT_USERAGENT, options.userAgent) == CURLE_OK)
        let libcurls = origin.request(of: reference, on: multi)
        multi.remove(reference)
        reference.cleanup()
        curl_slist_free_all(list)

        // Then both requests are libcurl's, byte for byte, with each field
        // unless the transfer names one of its own
        #expect(written == libcurls)
        #expect(writtenAgain == libcurls)
        let named = { (field: String) in headers.contains { $0.0.lowercased() == field } }
        #expect(libcurls.contains("\r\nAccept-Encoding: ") == !named("accept-encoding"))
        #expect(libcurls.contains("\r\nUser-Agent: courier\r\n") == !named("user-agent"))
        #expect(libcurls.contains("\r\nAccept: */*\r\n") == !named("accept"))
    }

    /// A reused handle asks for content codings again once a transfer that
    /// asked for none (a resumed body) has gone, and through a proxy
    /// libcurl writes the field itself, once.
    @Test func theFieldFollowsEachTransfersAsk() throws {
        try withOriginAndProxy { origin, proxy, multi in
            var options = EasyOptions(url: "http://127.0.0.1:\(origin.port)/a")
            options.followRedirects = false
            options.proxyEnvironment = ProxyEnvironment(variables: [:])
            var requests: [String] = []
            for accepts in [true, false, true] {
                options.acceptsEncodings = accepts
                let handle = multi.makeEasyHandle()
                handle.configure(options)
                requests.append(origin.request(of: handle, on: multi))
                multi.recycle(handle)
            }
            #expect(requests.map { $0.contains("\r\nAccept-Encoding: ") } == [true, false, true])
            #expect(requests[0] == requests[2])

            options.proxy = "http://127.0.0.1:\(proxy.port)"
            let handle = multi.makeEasyHandle()
            handle.configure(options)
            let proxied = proxy.request(of: handle, on: multi)
            multi.recycle(handle)
            #expect(proxied.split(separator: "\r\nAccept-Encoding: ", omittingEmptySubsequences: false).count == 2)
        }
    }

    @Test(arguments: [
        ([:], "", "", ""),
        (["http_proxy": "http://h:1", "https_proxy": "http://s:2", "no_proxy": "a,b"], "http://h:1", "http://s:2", "a,b"),
        // Upper-case HTTP_PROXY is not read; HTTPS_PROXY and the others are.
        (["HTTP_PROXY": "http://h:1", "HTTPS_PROXY": "http://s:2", "NO_PROXY": "*"], "", "http://s:2", "*"),
        (["all_proxy": "http://a:3", "ALL_PROXY": "http://b:4"], "http://a:3", "http://a:3", ""),
        (["ALL_PROXY": "http://b:4", "https_proxy": "http://s:2"], "http://b:4", "http://s:2", ""),
        // Lower case wins; an empty variable counts as not set.
        (["https_proxy": "http://s:2", "HTTPS_PROXY": "http://t:5", "no_proxy": "", "NO_PROXY": "c"], "", "http://s:2", "c"),
        (["http_proxy": "", "all_proxy": "http://a:3"], "http://a:3", "http://a:3", ""),
    ])
    func theEnvironmentsProxiesAreReadByLibcurlsRules(
        variables: [String: String], http: String, https: String, noProxy: String
    ) {
        let environment = ProxyEnvironment(variables: variables)
        let text = { (bytes: [CChar]) in String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        for (isHTTPS, proxy) in [(false, http), (true, https)] {
            let setting = environment.setting(https: isHTTPS)
            #expect(setting.proxy.last == 0 && setting.noProxy.last == 0)
            #expect(text(setting.proxy) == proxy)
            #expect(text(setting.noProxy) == noProxy)
        }
    }

    /// Runs `body` with an origin and a proxy listening on 127.0.0.1 and
    /// a multi handle, all closed after.
    private func withOriginAndProxy(_ body: (Listener, Listener, MultiHandle) throws -> Void) throws {
        CurlLibrary.initialize()
        let origin = try #require(Listener())
        let proxy = try #require(Listener())
        defer {
            close(origin.fd)
            close(proxy.fd)
        }
        let multi = MultiHandle()
        defer { multi.cleanup() }
        try body(origin, proxy, multi)
    }

    @Test func aTransferGoesThroughTheEnvironmentsProxyUnlessItsHostBypassesIt() throws {
        try withOriginAndProxy { origin, proxy, multi in
            let url = "http://127.0.0.1:\(origin.port)/a"
            let through = ProxyEnvironment(variables: ["http_proxy": "http://127.0.0.1:\(proxy.port)"])

            // Given an environment naming a proxy for http:// URLs
            var options = EasyOptions(url: url)
            options.proxyEnvironment = through
            let handle = multi.makeEasyHandle()
            handle.configure(options)

            // Then the request goes to the proxy, in absolute form
            #expect(proxy.request(of: handle, on: multi).hasPrefix("GET \(url) HTTP/1.1\r\n"))
            multi.recycle(handle)

            // And when the environment's no_proxy names the host, the reused
            // handle's request goes to the origin
            options.proxyEnvironment = ProxyEnvironment(variables: ["http_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": "127.0.0.1"])
            let again = multi.makeEasyHandle()
            again.configure(options)
            #expect(origin.request(of: again, on: multi).hasPrefix("GET /a HTTP/1.1\r\n"))
            multi.recycle(again)

            // And an explicit proxy wins over the environment's no_proxy
            options.proxy = "http://127.0.0.1:\(proxy.port)"
            let third = multi.makeEasyHandle()
            third.configure(options)
            #expect(proxy.request(of: third, on: multi).hasPrefix("GET \(url) HTTP/1.1\r\n"))
            multi.recycle(third)
        }
    }

    @Test func aReusedHandleTakesTheEnvironmentsProxyForItsURLsScheme() throws {
        try withOriginAndProxy { origin, proxy, multi in
            let environment = ProxyEnvironment(variables: ["https_proxy": "http://127.0.0.1:\(proxy.port)"])

            // Given a handle whose https:// transfer went through the
            // environment's proxy for https
            var secure = EasyOptions(url: "https://127.0.0.1:\(origin.port)/s")
            secure.proxyEnvironment = environment
            let handle = multi.makeEasyHandle()
            handle.configure(secure)
            #expect(proxy.request(of: handle, on: multi).hasPrefix("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\n"))
            multi.recycle(handle)

            // When it is reused for an http:// URL, for which there is none
            var plain = EasyOptions(url: "http://127.0.0.1:\(origin.port)/a")
            plain.proxyEnvironment = environment
            let again = multi.makeEasyHandle()
            #expect(again === handle)
            again.configure(plain)

            // Then its request goes to the origin itself
            #expect(origin.request(of: again, on: multi).hasPrefix("GET /a HTTP/1.1\r\n"))
            multi.recycle(again)
        }
    }
}
