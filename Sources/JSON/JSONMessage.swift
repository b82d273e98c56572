/// JSON text to be written later, perhaps on another thread: what it is
/// made from, and about how many bytes it takes, for counting output that
/// waits to be encoded.
public struct JSONMessage: Sendable {
    /// About how many bytes the text takes (see `JSON.estimatedEncodedCount`).
    public let estimate: Int
    private let source: Source

    /// What the text is made from, kept as it is given: a message is made
    /// for every answer, and a closure around the members would be one
    /// more allocation each.
    private enum Source: Sendable {
        case value(JSON)
        case object(@Sendable (JSONObjectWriter) -> Void, sharing: SharedJSON?)
    }

    /// The text of `value`, as `JSONCodec.encode` writes it.
    public init(_ value: JSON) {
        estimate = value.estimatedEncodedCount
        source = .value(value)
    }

    /// The object `members` writes (see `JSONCodec.encodeObject`), from
    /// values the closure holds.
    public init(estimate: Int, object members: @escaping @Sendable (JSONObjectWriter) -> Void) {
        self.estimate = estimate
        source = .object(members, sharing: nil)
    }

    /// The object `members` writes, which may copy the text of `shared`
    /// (see `JSONCodec.encodeObject(into:sizeHint:sharing:_:)`).
    public init(estimate: Int, sharing shared: SharedJSON, object members: @escaping @Sendable (JSONObjectWriter) -> Void) {
        self.estimate = estimate
        source = .object(members, sharing: shared)
    }

    /// Appends the text to `text`.
    public func encode(into text: inout [UInt8]) {
        switch source {
        case .value(let value):
            JSONCodec.encode(value, into: &text)
        case .object(let members, let shared?):
            JSONCodec.encodeObject(into: &text, sizeHint: estimate, sharing: shared, members)
        case .object(let members, nil):
            JSONCodec.encodeObject(into: &text, sizeHint: estimate, members)
        }
    }

    /// The text, in room made for the estimate at once: an answer kept
    /// for its batch is encoded on its own, and grown from nothing it
    /// would be allocated and copied four or five times over.
    public var encoded: [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(estimate + estimate / 8 + 16)
        encode(into: &text)
        return text
    }
}
