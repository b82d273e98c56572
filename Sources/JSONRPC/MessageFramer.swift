#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the framer found in the byte stream.
public enum FramerEvent: Equatable, Sendable {
    /// The bytes of one message, without framing.
    case message([UInt8])
    /// A message longer than the limit was skipped; its size, or at least the
    /// bytes seen before it was given up on.
    case tooLarge(Int)
    /// Broken framing that was skipped; the text says what was wrong.
    case malformed(String)
}

/// An incremental parser that splits a byte stream into messages. Feed it
/// bytes as they arrive with `push`, then take events with `next` until it
/// returns nil. It never holds more than one message (up to the limit) plus
/// one read's worth of bytes.
public struct MessageFramer: Sendable {
    public private(set) var framing: Framing?
    public let maxMessageBytes: Int

    /// Longest header line accepted in the LSP framing.
    public static let maxHeaderLineBytes = 8192

    private enum State: Sendable {
        case ready
        case body(Int)
        case skipBody(Int)
        case skipLine
    }

    private struct HeaderBlock: Sendable {
        var lines = 0
        var contentLength: Int?
        var problem: String?
    }

    private var buffer: [UInt8] = []
    private var start = 0
    /// Where the search for the next newline resumes.
    private var scanned = 0
    private var state = State.ready
    private var header = HeaderBlock()

    public init(mode: FramingMode = .auto, maxMessageBytes: Int = 16 << 20) {
        self.framing = mode.forced
        self.maxMessageBytes = maxMessageBytes
    }

    public mutating func push(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    public mutating func push(_ bytes: some Sequence<UInt8>) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// The next event the bytes pushed so far hold, or nil when more bytes
    /// are needed.
    public mutating func next() -> FramerEvent? {
        while true {
            if framing == nil, !detectFraming(atEnd: false) { return nil }
            switch state {
            case .skipBody(let remaining):
                let taken = min(remaining, buffer.count - start)
                start += taken
                if taken < remaining {
                    state = .skipBody(remaining - taken)
                    return nil
                }
                state = .ready
            case .skipLine:
                guard let newline = findNewline() else {
                    start = buffer.count
                    scanned = start
                    return nil
                }
                start = newline + 1
                state = .ready
            case .body(let length):
                guard buffer.count - start >= length else { return nil }
                scanned = start + length
                let message = takeMessage(start..<start + length, next: start + length)
                state = .ready
                return .message(message)
            case .ready:
                let event: FramerEvent?
                let progressed: Bool
                switch framing! {
                case .ndjson: (event, progressed) = nextLine()
                case .lsp: (event, progressed) = nextHeaderLine()
                }
                if let event { return event }
                if !progressed { return nil }
            }
        }
    }

    /// Called at the end of input: reports what is left half-framed. A last
    /// newline-delimited message without its newline still counts.
    public mutating func finish() -> [FramerEvent] {
        var events: [FramerEvent] = []
        while let event = next() { events.append(event) }
        if framing == nil { _ = detectFraming(atEnd: true) }
        let rest = buffer[start...]
        defer {
            start = buffer.count
            scanned = start
            state = .ready
            header = HeaderBlock()
        }
        switch state {
        case .body(let length):
            events.append(.malformed("input ended inside a message: \(rest.count) of \(length) bytes arrived"))
        case .skipBody, .skipLine:
            break
        case .ready:
            if framing == .ndjson, rest.contains(where: { !Self.isWhitespace($0) }) {
                if rest.count > maxMessageBytes {
                    events.append(.tooLarge(rest.count))
                } else {
                    events.append(.message(Array(rest.drop(while: Self.isWhitespace))))
                }
            } else if framing == .lsp, header.lines > 0 || !rest.isEmpty {
                events.append(.malformed("input ended inside a header block"))
            }
        }
        return events
    }

    // MARK: - Newline-delimited

    /// A line is too large when it holds more than `maxMessageBytes` bytes
    /// besides its CR LF, white space or not: judged the same whether the
    /// line arrives at once or byte by byte. Without a newline yet, one byte
    /// more may still be the CR of a line that fits.
    private mutating func nextLine() -> (FramerEvent?, Bool) {
        guard let newline = findNewline() else {
            if buffer.count - start - 1 > maxMessageBytes {
                let seen = buffer.count - start
                start = buffer.count
                scanned = start
                state = .skipLine
                return (.tooLarge(seen), true)
            }
            return (nil, false)
        }
        var end = newline
        if end > start, buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        // The line as a range, not a slice: a slice would share the buffer
        // that `takeMessage` may take.
        let line = start..<end
        start = newline + 1
        if line.count > maxMessageBytes { return (.tooLarge(line.count), true) }
        if buffer[line].allSatisfy(Self.isWhitespace) { return (nil, true) }
        return (.message(takeMessage(line, next: start)), true)
    }

    /// The bytes of `range` of the buffer, as the message's own array,
    /// with the framer going on at `next` (where `start` is, or is to be).
    /// A message that takes most of the buffer (a long batch) takes the
    /// buffer itself, cut to it, and leaves a new buffer with the bytes
    /// from `next` on: a copy of the few bytes around the message rather
    /// than of the message, into memory touched for the first time.
    private mutating func takeMessage(_ range: Range<Int>, next: Int) -> [UInt8] {
        guard range.count >= 1 << 16, range.count >= buffer.count / 2 else {
            start = next
            return Array(buffer[range])
        }
        let rest = Array(buffer[next...])
        var message = buffer
        buffer = rest
        scanned = max(scanned - next, 0)
        start = 0
        message.removeSubrange(range.upperBound...)
        message.removeSubrange(..<range.lowerBound)
        return message
    }

    // MARK: - LSP base protocol

    /// A header line longer than `maxHeaderLineBytes` (counting its CR) is
    /// skipped with its block whether it arrives at once or byte by byte.
    private mutating func nextHeaderLine() -> (FramerEvent?, Bool) {
        let tooLong = FramerEvent.malformed("header line longer than \(Self.maxHeaderLineBytes) bytes")
        guard let newline = findNewline() else {
            if buffer.count - start > Self.maxHeaderLineBytes {
                start = buffer.count
                scanned = start
                state = .skipLine
                header = HeaderBlock()
                return (tooLong, true)
            }
            return (nil, false)
        }
        if newline - start > Self.maxHeaderLineBytes {
            start = newline + 1
            header = HeaderBlock()
            return (tooLong, true)
        }
        var end = newline
        if end > start, buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let line = buffer[start..<end]
        start = newline + 1

        if line.isEmpty {
            let block = header
            header = HeaderBlock()
            if block.lines == 0 { return (nil, true) }
            if let problem = block.problem { return (.malformed(problem), true) }
            guard let length = block.contentLength else {
                return (.malformed("header block without Content-Length"), true)
            }
            if length > maxMessageBytes {
                state = .skipBody(length)
                return (.tooLarge(length), true)
            }
            state = .body(length)
            return (nil, true)
        }

        header.lines += 1
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        let name = colon.map { Self.trimmingBlanks(line[..<$0]) } ?? line[line.endIndex...]
        guard let colon, !name.isEmpty, name.allSatisfy(Self.isTokenByte) else {
            header = HeaderBlock()
            // A body that could not be skipped (its length was unknown) runs
            // into the next header block: resume at the Content-Length inside.
            if let resume = Self.contentLengthHeader(in: line), resume > line.startIndex {
                start = resume
                scanned = resume
                return (.malformed("expected a header line, got \(Self.preview(line[..<resume]))"), true)
            }
            return (.malformed("expected a header line, got \(Self.preview(line))"), true)
        }
        if Self.equalsIgnoringCase(name, Self.contentLengthName) {
            let value = Self.trimmingBlanks(line[(colon + 1)...])
            var length = 0
            let valid = !value.isEmpty && value.count <= 18 && value.allSatisfy { byte in
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return false }
                length = length * 10 + Int(byte - UInt8(ascii: "0"))
                return true
            }
            if valid, header.contentLength == nil || header.contentLength == length {
                header.contentLength = length
            } else {
                header.problem = "invalid Content-Length \(Self.preview(value))"
            }
        }
        return (nil, true)
    }

    // MARK: - Detection and buffering

    /// Decides the framing from the first bytes that are not white space:
    /// `Content-` starts LSP framing, anything else newline-delimited JSON.
    private mutating func detectFraming(atEnd: Bool) -> Bool {
        while start < buffer.count, Self.isWhitespace(buffer[start]) { start += 1 }
        scanned = max(scanned, start)
        let prefix = Array("content-".utf8)
        let available = buffer[start...].prefix(prefix.count).map { $0 | 0x20 }
        if available.isEmpty, !atEnd { return false }
        if available.count < prefix.count, !atEnd, available == Array(prefix.prefix(available.count)) {
            return false
        }
        framing = available == prefix ? .lsp : .ndjson
        return true
    }

    /// Where the next newline lies, searched for with memchr from where the
    /// last search stopped: every byte of a long batch is searched, and a
    /// step of `firstIndex(of:)` per byte cost several instructions each.
    private mutating func findNewline() -> Int? {
        scanned = max(scanned, start)
        let from = scanned
        let found = buffer.withUnsafeBufferPointer { bytes -> Int? in
            guard from < bytes.count, let base = bytes.baseAddress,
                let newline = memchr(base + from, Int32(UInt8(ascii: "\n")), bytes.count - from)
            else { return nil }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(newline))
        }
        guard let found else {
            scanned = buffer.count
            return nil
        }
        scanned = found + 1
        return found
    }

    private mutating func compact() {
        guard start > 0, start == buffer.count || start >= 1 << 16 else { return }
        buffer.removeSubrange(..<start)
        scanned -= start
        start = 0
    }

    /// Where a `Content-Length:` header name (in any case) starts in `line`.
    private static func contentLengthHeader(in line: ArraySlice<UInt8>) -> Int? {
        let name = Array("content-length:".utf8)
        guard line.count >= name.count else { return nil }
        return (line.startIndex...(line.endIndex - name.count)).first { index in
            zip(line[index...], name).allSatisfy { byte, expected in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == expected : byte == expected
            }
        }
    }

    private static let contentLengthName = Array("content-length".utf8)

    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ lowercase: [UInt8]) -> Bool {
        bytes.count == lowercase.count && zip(bytes, lowercase).allSatisfy { byte, expected in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == expected : byte == expected
        }
    }

    private static func trimmingBlanks(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = bytes.firstIndex(where: { !isBlank($0) }), let last = bytes.lastIndex(where: { !isBlank($0) }) else {
            return bytes[bytes.endIndex...]
        }
        return bytes[first...last]
    }

    /// RFC 9110 token characters, the only ones a header name may hold.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func preview(_ bytes: ArraySlice<UInt8>) -> String {
        let text = String(decoding: bytes.prefix(40), as: UTF8.self)
        return "'\(text)\(bytes.count > 40 ? "…" : "")'"
    }
}
