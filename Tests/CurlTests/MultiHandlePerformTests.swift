import Curl
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// libcurl runs (`performIfDue`) for what may have given it work — a
/// handle added, a socket ready, its own timer — and not for a poll that a
/// wake-up alone ended, where each run would still check every transfer's
/// socket with a system call.
@Suite(.timeLimit(.minutes(1)))
struct MultiHandlePerformTests {
    @Test func libcurlRunsForANewHandleAndAReadySocketNotForAWakeUp() throws {
        CurlLibrary.initialize()
        let origin = try #require(Listener())
        defer { close(origin.fd) }
        let multi = MultiHandle()
        defer { multi.cleanup() }
        let easy = multi.makeEasyHandle()
        easy.configure(EasyOptions(url: "http://127.0.0.1:\(origin.port)/a"))

        // Given a transfer just added: libcurl runs for it
        multi.add(easy)
        #expect(multi.performIfDue())
        // and, turned until the origin has its whole request, waits for
        // the answer
        var client: Int32 = -1
        var request: [UInt8] = []
        for _ in 0..<500 where !request.suffix(4).elementsEqual("\r\n\r\n".utf8) {
            multi.poll(timeoutMilliseconds: 10)
            multi.performIfDue()
            if client < 0 { client = accept(origin.fd, nil, nil) }
            guard client >= 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(client, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { request += buffer[..<count] }
        }
        defer { if client >= 0 { close(client) } }
        #expect(request.starts(with: "GET /a HTTP/1.1\r\n".utf8))
        multi.performIfDue()

        // When a wake-up alone ends a poll
        multi.waker.wakeup()
        multi.poll(timeoutMilliseconds: 30_000)

        // Then libcurl does not run
        #expect(!multi.performIfDue())

        // And when the answer arrives, it runs and the transfer ends
        let answer = Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)
        #expect(send(client, answer, answer.count, 0) == answer.count)
        var ended: [(handle: EasyHandle, code: Int32)] = []
        for _ in 0..<500 where ended.isEmpty {
            multi.poll(timeoutMilliseconds: 10)
            multi.performIfDue()
            ended = multi.completed()
        }
        #expect(ended.first?.handle === easy)
        #expect(ended.first?.code == 0)
        multi.recycle(easy)
    }
}
