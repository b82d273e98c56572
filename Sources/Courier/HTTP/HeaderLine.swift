#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line of a response's head as libcurl hands it over (its CR LF
/// included), read as bytes: a status line, a field, the continuation of
/// the field before it (obsolete line folding), or the blank line that ends
/// the head. The three digits of a status line are read the way curl reads
/// them; a field's name must be a token (RFC 9110 §5.6.2) and is lowered;
/// blanks around names, values and continuations go. A value that is not
/// UTF-8 (obs-text, RFC 9110 §5.5) is text with U+FFFD in place of each
/// such sequence, and keeps its bytes beside it: an entity tag is opaque,
/// and goes back to the origin as it came.
enum HeaderLine: Equatable {
    /// `HTTP/1.1 200 OK`: status 0 when the code is not three digits.
    case status(Int, version: String)
    /// `bytes` is nil when the value is UTF-8 (its bytes are `value.utf8`).
    case field(name: String, value: String, bytes: [UInt8]? = nil)
    /// A line that starts with a space or a tab, to be joined to the field
    /// before it with one space.
    case continuation(String, bytes: [UInt8]? = nil)
    /// The blank line after the fields.
    case end
    /// Neither: a line without a colon, or a name that is no token.
    case ignored

    init(_ line: UnsafeRawBufferPointer) {
        let bytes = line.bindMemory(to: UInt8.self)
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        let text = bytes[..<end]
        if text.isEmpty {
            self = .end
        } else if Self.isStatusLine(text) {
            let space = text.firstIndex(of: 0x20) ?? text.endIndex
            let code = text[space...].drop(while: { $0 == 0x20 }).prefix(while: { $0 != 0x20 })
            // The three digits curl reads, whatever follows them.
            let status = code.count >= 3 ? HTTPField.decimal(code.prefix(3)).map { Int($0) } ?? 0 : 0
            let version = UnsafeBufferPointer(rebasing: text[(text.startIndex + 5)..<space])
            self = .status(status, version: String(decoding: version, as: UTF8.self))
        } else if let first = text.first, first == 0x20 || first == 0x09 {
            let (value, bytes) = Self.decoded(UnsafeBufferPointer(rebasing: HTTPField.trimmingBlanks(text)))
            self = .continuation(value, bytes: bytes)
        } else if let colon = Self.colon(in: text) {
            // Blanks around the name and the value go, found by index in the
            // line's own buffer.
            var nameStart = text.startIndex
            var nameEnd = colon
            while nameStart < nameEnd, Self.isBlank(bytes[nameStart]) { nameStart += 1 }
            while nameEnd > nameStart, Self.isBlank(bytes[nameEnd - 1]) { nameEnd -= 1 }
            var valueStart = colon + 1
            var valueEnd = end
            while valueStart < valueEnd, Self.isBlank(bytes[valueStart]) { valueStart += 1 }
            while valueEnd > valueStart, Self.isBlank(bytes[valueEnd - 1]) { valueEnd -= 1 }
            guard let name = Self.lowercasedName(UnsafeBufferPointer(rebasing: bytes[nameStart..<nameEnd])) else {
                self = .ignored
                return
            }
            let (value, raw) = Self.decoded(UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd]))
            self = .field(name: name, value: value, bytes: raw)
        } else {
            self = .ignored
        }
    }

    /// The line starts with `HTTP/`: compared byte by byte, without the
    /// generic `starts(with:)` a slice would go through.
    private static func isStatusLine(_ text: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        guard text.count >= 5 else { return false }
        let start = text.startIndex
        return text[start] == UInt8(ascii: "H") && text[start + 1] == UInt8(ascii: "T") && text[start + 2] == UInt8(ascii: "T")
            && text[start + 3] == UInt8(ascii: "P") && text[start + 4] == UInt8(ascii: "/")
    }

    /// Where the first colon of `text` is: found by `memchr`, which reads
    /// the bytes a word at a time.
    private static func colon(in text: Slice<UnsafeBufferPointer<UInt8>>) -> Int? {
        guard let base = text.base.baseAddress, !text.isEmpty,
            let found = memchr(base + text.startIndex, Int32(UInt8(ascii: ":")), text.count)
        else { return nil }
        return text.startIndex + UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
    }

    private static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// A value as text, and its bytes when they are not UTF-8. Most values
    /// are ASCII, found so eight bytes at a time: a short one is copied into
    /// a string's inline storage, which checks nothing more of ASCII; a
    /// longer one made from the buffer as it stands, without the generic
    /// validation a slice would go through.
    private static func decoded(_ buffer: UnsafeBufferPointer<UInt8>) -> (String, [UInt8]?) {
        if isASCII(buffer) {
            guard buffer.count <= 15 else { return (String(decoding: buffer, as: UTF8.self), nil) }
            let text = String(unsafeUninitializedCapacity: buffer.count) { storage in
                _ = storage.initialize(fromContentsOf: buffer)
                return buffer.count
            }
            return (text, nil)
        }
        if let text = String(validating: buffer, as: UTF8.self) { return (text, nil) }
        return (String(decoding: buffer, as: UTF8.self), Array(buffer))
    }

    /// No byte of `buffer` has its high bit set: read a word at a time, the
    /// last few bytes one by one.
    static func isASCII(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let start = buffer.baseAddress else { return true }
        let raw = UnsafeRawPointer(start)
        var offset = 0
        var bits: UInt64 = 0
        while offset + 8 <= buffer.count {
            bits |= raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < buffer.count {
            bits |= UInt64(start[offset])
            offset += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }

    /// `source` in lower case when it is a token, nil when it is not (or
    /// empty): one of the names most responses carry is its literal, which
    /// costs no string made anew (its letters and hyphens make it a token
    /// in either case); another is checked and made in the string's own
    /// storage.
    private static func lowercasedName(_ source: UnsafeBufferPointer<UInt8>) -> String? {
        switch source.count {
        case 0:
            return nil
        case 4:
            if matches(source, "date") { return "date" }
            if matches(source, "etag") { return "etag" }
        case 6:
            if matches(source, "server") { return "server" }
        case 10:
            if matches(source, "connection") { return "connection" }
        case 12:
            if matches(source, "content-type") { return "content-type" }
        case 13:
            if matches(source, "last-modified") { return "last-modified" }
            if matches(source, "accept-ranges") { return "accept-ranges" }
            if matches(source, "cache-control") { return "cache-control" }
        case 14:
            if matches(source, "content-length") { return "content-length" }
        default:
            break
        }
        guard source.allSatisfy(HTTPField.isTokenByte) else { return nil }
        return String(unsafeUninitializedCapacity: source.count) { buffer in
            for index in 0..<source.count {
                buffer[index] = asciiLowercased(source[index])
            }
            return source.count
        }
    }

    /// `name`, a token of the same length as `lowered`, is `lowered` once
    /// its letters are lowered.
    private static func matches(_ name: UnsafeBufferPointer<UInt8>, _ lowered: StaticString) -> Bool {
        let expected = lowered.utf8Start
        for index in 0..<name.count where asciiLowercased(name[index]) != expected[index] { return false }
        return true
    }

    /// `byte` in lower case when it is an ASCII capital letter.
    private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
    }
}

extension ResponseHead {
    /// Takes in one line of the head: a status line starts a new head (the
    /// one of a redirect or of a `100 Continue` before it is left behind), a
    /// field joins the headers, a continuation joins the last field. True
    /// when the line ends the head.
    ///
    /// The line is consumed: its strings move into the head rather than
    /// being copied and the line's own released.
    mutating func read(_ line: consuming HeaderLine) -> Bool {
        switch consume line {
        case .status(let status, let version):
            self = ResponseHead(status: status, headers: [], httpVersion: version)
            // Room for a usual head's fields, so the list is not grown
            // (allocated and copied) four times on the way.
            headers.reserveCapacity(16)
        case .field(let name, let value, let bytes):
            headers.append((name, value))
            // Only validators go back to the origin, and most heads have
            // none whose bytes are not UTF-8.
            if let bytes, Validators.fieldNames.contains(name) {
                rawValues[name] = bytes
            } else if !rawValues.isEmpty {
                rawValues[name] = nil
            }
        case .continuation(let text, let bytes):
            guard let last = headers.indices.last else { break }
            let name = headers[last].name
            if (bytes != nil && Validators.fieldNames.contains(name)) || rawValues[name] != nil {
                rawValues[name] = (rawValues[name] ?? Array(headers[last].value.utf8)) + [0x20] + (bytes ?? Array(text.utf8))
            }
            headers[last].value += " " + text
        case .end:
            return true
        case .ignored:
            break
        }
        return false
    }
}
