#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Courier
import SystemPackage

/// The URLs `courier get` fetches: those of its command line, then those of
/// its `-i` file, one a line (blank lines and lines starting with `#` left
/// out, as aria2c reads them), with `http://` put before each that names no
/// scheme, as curl does. As in aria2c's input files, an indented line
/// `checksum=TYPE=HEX` or `integrity=SRI` under a URL gives that URL's
/// expected digest.
enum URLList {
    /// Why the `-i` file could not be read, as a sentence naming it.
    struct ReadFailure: Error {
        let message: String
    }

    /// One URL of the list, with what its body must hash to.
    struct Entry: Equatable {
        var url: String
        /// In Subresource Integrity form.
        var integrity: String?
    }

    /// The entries of `text`, one URL a line, spaces around them left out;
    /// `name` names the file in messages.
    static func entries(in text: String, name: String) throws(ReadFailure) -> [Entry] {
        var entries: [Entry] = []
        for (number, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let trimmed = line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()
            guard !trimmed.isEmpty, trimmed.first != "#" else { continue }
            let text = String(trimmed)
            let place = "\(name):\(number + 1)"
            guard line.first?.isWhitespace == true, let digest = try digestOption(text, at: place) else {
                entries.append(Entry(url: text))
                continue
            }
            guard let last = entries.indices.last else {
                throw ReadFailure(message: "\(place): '\(text)' comes before any URL")
            }
            guard entries[last].integrity == nil else {
                throw ReadFailure(message: "\(place): a second digest for \(entries[last].url)")
            }
            entries[last].integrity = digest
        }
        return entries
    }

    /// The digest an option line gives, in Subresource Integrity form, or
    /// nil when the line is not one.
    private static func digestOption(_ line: String, at place: String) throws(ReadFailure) -> String? {
        do throws(ExpectedDigest.Malformed) {
            if line.hasPrefix("checksum=") { return try ExpectedDigest.checksum(String(line.dropFirst(9))) }
            if line.hasPrefix("integrity=") { return try ExpectedDigest.integrity(String(line.dropFirst(10))) }
        } catch {
            throw ReadFailure(message: "\(place): \(error.message)")
        }
        return nil
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
        let file = FileDescriptor(rawValue: fd)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count: Int
            do {
                count = try chunk.withUnsafeMutableBytes { try file.read(into: $0) }
            } catch {
                throw ReadFailure(message: "cannot read \(path == "-" ? "stdin" : path): \(error)")
            }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
