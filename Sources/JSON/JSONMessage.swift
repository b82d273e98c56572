/// JSON text to be written later, perhaps on another thread: what it is
/// made from, and about how many bytes it takes, for counting output that
/// waits to be encoded.
public struct JSONMessage: Sendable {
    /// About how many bytes the text takes (see `JSON.estimatedEncodedCount`).
    public let estimate: Int
    private let write: @Sendable (inout [UInt8]) -> Void

    /// The text of `value`, as `JSONCodec.encode` writes it.
    public init(_ value: JSON) {
        estimate = value.estimatedEncodedCount
        write = { JSONCodec.encode(value, into: &$0) }
    }

    /// The object `members` writes (see `JSONCodec.encodeObject`), from
    /// values the closure holds.
    public init(estimate: Int, object members: @escaping @Sendable (JSONObjectWriter) -> Void) {
        self.estimate = estimate
        write = { JSONCodec.encodeObject(into: &$0, sizeHint: estimate, members) }
    }

    /// The object `members` writes, which may copy the text of `shared`
    /// (see `JSONCodec.encodeObject(into:sizeHint:sharing:_:)`).
    public init(estimate: Int, sharing shared: SharedJSON, object members: @escaping @Sendable (JSONObjectWriter) -> Void) {
        self.estimate = estimate
        write = { JSONCodec.encodeObject(into: &$0, sizeHint: estimate, sharing: shared, members) }
    }

    /// Appends the text to `text`.
    public func encode(into text: inout [UInt8]) {
        write(&text)
    }

    /// The text.
    public var encoded: [UInt8] {
        var text: [UInt8] = []
        encode(into: &text)
        return text
    }
}
