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
