/// How messages are delimited on the wire.
public enum Framing: String, Sendable, CaseIterable {
    /// The LSP base protocol: `Content-Length: N\r\n`, optional other
    /// headers, `\r\n`, then N bytes.
    case lsp
    /// One message a line; blank lines are ignored.
    case ndjson

    /// Wraps one encoded message for the wire.
    public func frame(_ body: [UInt8]) -> [UInt8] {
        switch self {
        case .lsp:
            var framed = Array("Content-Length: \(body.count)\r\n\r\n".utf8)
            framed.reserveCapacity(framed.count + body.count)
            framed.append(contentsOf: body)
            return framed
        case .ndjson:
            var framed = body
            framed.append(UInt8(ascii: "\n"))
            return framed
        }
    }

    /// Appends to `buffer` one message that `write` appends, framed: the
    /// message is written once, in place.
    public func frame(into buffer: inout [UInt8], _ write: (inout [UInt8]) -> Void) {
        let start = buffer.count
        write(&buffer)
        switch self {
        case .lsp:
            buffer.insert(contentsOf: "Content-Length: \(buffer.count - start)\r\n\r\n".utf8, at: start)
        case .ndjson:
            buffer.append(UInt8(ascii: "\n"))
        }
    }

    /// Wraps encoded values, as the elements of one JSON array, for the
    /// wire, copying each once.
    public func frame(array elements: [[UInt8]]) -> [UInt8] {
        var framed: [UInt8] = []
        framed.reserveCapacity(Self.arrayLength(elements) + 32)
        frame(array: elements, into: &framed)
        return framed
    }

    /// Appends the framed array of `elements` to `buffer`, copying each once.
    public func frame(array elements: [[UInt8]], into buffer: inout [UInt8]) {
        if self == .lsp { buffer.append(contentsOf: "Content-Length: \(Self.arrayLength(elements))\r\n\r\n".utf8) }
        buffer.append(UInt8(ascii: "["))
        for (index, element) in elements.enumerated() {
            if index > 0 { buffer.append(UInt8(ascii: ",")) }
            buffer.append(contentsOf: element)
        }
        buffer.append(UInt8(ascii: "]"))
        if self == .ndjson { buffer.append(UInt8(ascii: "\n")) }
    }

    /// The bytes of the JSON array of `elements`.
    static func arrayLength(_ elements: [[UInt8]]) -> Int {
        elements.reduce(2 + max(elements.count - 1, 0)) { $0 + $1.count }
    }
}

/// The framing a server uses: detected from the client's first bytes, or
/// forced.
public enum FramingMode: String, Sendable, CaseIterable {
    case auto
    case lsp
    case ndjson

    public var forced: Framing? {
        switch self {
        case .auto: nil
        case .lsp: .lsp
        case .ndjson: .ndjson
        }
    }
}
