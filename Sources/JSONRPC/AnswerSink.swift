import JSON

/// Where a dispatcher's answers go: one message at a time, or a batch's
/// answers as one array.
///
/// A batch's answers wait, encoded, until its last one is made; the room
/// they take while they wait is the sink's, shared by every batch sent to
/// it, so what waits stays within `batchRoom` bytes whatever the client
/// sends.
public protocol AnswerSink: Sendable {
    /// Sends one message on its own.
    func send(_ message: JSONMessage)

    /// The most bytes of answers that may wait for the rest of their batch
    /// at once.
    var batchRoom: Int { get }

    /// Takes room for `count` bytes of an answer that waits for the rest of
    /// its batch; false, taking nothing, when the answers already waiting
    /// leave less.
    func holdBatchAnswer(_ count: Int) -> Bool

    /// Sends a batch's encoded answers as one array and gives back the room
    /// they took (`held` bytes, what `holdBatchAnswer` granted for them).
    func sendBatch(_ answers: [[UInt8]], held: Int)

    /// Runs `work` where the sink writes, after what was sent before it,
    /// and meanwhile counts it as `estimate` bytes of output: a batch's
    /// answer made on a busy thread is encoded there. `work` runs even
    /// when nothing can be written any more, so the batch still completes.
    func whenWriting(estimate: Int, _ work: @escaping @Sendable () -> Void)
}

extension AnswerSink {
    /// Sends one message on its own.
    public func send(_ message: JSON) {
        send(JSONMessage(message))
    }
}
