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

    /// Wraps encoded values, as the elements of one JSON array, for the
    /// wire, copying each once.
    public func frame(array elements: [[UInt8]]) -> [UInt8] {
        let length = Self.arrayLength(elements)
        let header = self == .lsp ? Array("Content-Length: \(length)\r\n\r\n".utf8) : []
        var framed = header
        framed.reserveCapacity(header.count + length + 1)
        framed.append(UInt8(ascii: "["))
        for (index, element) in elements.enumerated() {
            if index > 0 { framed.append(UInt8(ascii: ",")) }
            framed.append(contentsOf: element)
        }
        framed.append(UInt8(ascii: "]"))
        if self == .ndjson { framed.append(UInt8(ascii: "\n")) }
        return framed
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
