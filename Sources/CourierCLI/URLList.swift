#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The URLs `courier get` fetches: those of its command line, then those of
/// its `-i` file, one a line (blank lines and lines starting with `#` left
/// out, as aria2c reads them), with `http://` put before each that names no
/// scheme, as curl does.
enum URLList {
    /// Why the `-i` file could not be read, as a sentence naming it.
    struct ReadFailure: Error {
        let message: String
    }

    /// The URLs of `text`, one a line, spaces around them left out.
    static func urls(in text: String) -> [String] {
        text.split(whereSeparator: \.isNewline).compactMap { line in
            let url = line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()
            return url.isEmpty || url.first == "#" ? nil : String(url)
        }
    }

    /// `url`, after `http://` when it starts with no `scheme://`
    /// (`127.0.0.1:8080/x`, `example.org/logo.png`).
    static func withScheme(_ url: String) -> String {
        let bytes = Array(url.utf8)
        let isSchemeByte = { (byte: UInt8) in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
        let scheme = bytes.prefix(while: isSchemeByte)
        let startsWithLetter = scheme.first.map { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0 | 0x20) } ?? false
        if startsWithLetter, bytes.dropFirst(scheme.count).starts(with: Array("://".utf8)) { return url }
        return "http://" + url
    }

    /// The text of the file at `path`, or of stdin for `-`.
    static func read(_ path: String) throws(ReadFailure) -> String {
        let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReadFailure(message: "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else {
                throw ReadFailure(message: "cannot read \(path == "-" ? "stdin" : path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
