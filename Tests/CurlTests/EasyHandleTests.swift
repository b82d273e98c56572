import Curl
import Testing

@Suite(.timeLimit(.minutes(1)))
struct EasyHandleTests {
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
}
