#if canImport(Glibc)
import Glibc
#endif
import Curl

/// A listening socket on 127.0.0.1 that reads one request per connection
/// and closes it unanswered.
struct Listener {
    let fd: Int32
    let port: UInt16

    init?() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound, fcntl(fd, F_SETFL, O_NONBLOCK) == 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    /// Runs `easy` on `multi` (within a bounded number of turns) and
    /// returns the head of the request it sent.
    func request(of easy: EasyHandle, on multi: MultiHandle) -> String {
        var received: [UInt8] = []
        var client: Int32 = -1
        multi.add(easy)
        defer { multi.remove(easy) }
        for _ in 0..<500 {
            multi.perform()
            if client < 0 { client = accept(fd, nil, nil) }
            if client >= 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(client, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count > 0 { received += buffer[..<count] }
                if received.suffix(4).elementsEqual("\r\n\r\n".utf8) {
                    close(client)
                    return String(decoding: received, as: UTF8.self)
                }
            }
            multi.poll(timeoutMilliseconds: 10)
        }
        if client >= 0 { close(client) }
        return String(decoding: received, as: UTF8.self)
    }
}
