/// What a view bound to an unfinished task is told at once.
public struct TaskSnapshot: Hashable, Sendable {
    /// Transferring now (false while queued or suspended).
    public var running: Bool
    public var received: Int64
    /// The size of the body, when known.
    public var expected: Int64?

    public init(running: Bool, received: Int64, expected: Int64?) {
        self.running = running
        self.received = received
        self.expected = expected
    }
}
