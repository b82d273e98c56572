import JSON
import Synchronization

/// The one reply a request gets. Handlers call `success` or `failure` exactly
/// once, now or later from any thread; a request whose reply is dropped
/// unanswered is answered with -32603 so the client never waits forever.
public final class Reply: Sendable {
    public let id: JSON
    public let method: String
    private let sink: @Sendable (JSONMessage) -> Void
    /// Set by the first answer: an atomic flag, as a reply is made for
    /// every request and freed on whichever thread answered it.
    private let answered = Atomic(false)
    /// The batch whose array carries this answer; nil for a request sent
    /// alone.
    private let collector: BatchCollector?

    init(id: JSON, method: String, batch: BatchCollector? = nil, sink: @escaping @Sendable (JSONMessage) -> Void) {
        self.id = id
        self.method = method
        self.collector = batch
        self.sink = sink
    }

    /// True when the answer reaches the client only with the rest of its
    /// batch, so sending it does not put it on the wire.
    public var isHeldInBatch: Bool { collector != nil }

    /// The batch whose array carries the answer, told apart from every
    /// other batch at least until what waits for its array
    /// (`afterAnswerIsSent`) has run; nil for a request sent alone.
    public var batch: Batch? { collector.map { Batch(collector: ObjectIdentifier($0)) } }

    /// A batch of requests, as `batch` names it.
    public struct Batch: Hashable, Sendable {
        fileprivate let collector: ObjectIdentifier
    }

    /// Runs `action` when nothing sent after it can reach the client before
    /// this answer: at once for a request sent alone (its answer, given
    /// next, goes straight out), right after the batch's array is sent for
    /// one in a batch (whatever else that array waits for). Call it before
    /// answering.
    public func afterAnswerIsSent(_ action: @escaping @Sendable () -> Void) {
        if let collector, collector.afterSent(action) { return }
        action()
    }

    public func success(_ result: JSON) {
        send(Self.response(id: id, estimate: result.estimatedEncodedCount) { $0.set("result", result) })
    }

    /// Answers with the object `result` writes (see `JSONObjectWriter`)
    /// from values it holds, about `estimate` bytes long: no `JSON` value
    /// is made for it.
    public func success(estimate: Int, _ result: @escaping @Sendable (JSONObjectWriter) -> Void) {
        send(Self.objectResponse(id: id, estimate: estimate, members: result))
    }

    /// `success(estimate:_:)`, whose `result` may write the text of
    /// `shared` by reference (`JSONObjectWriter.set(_:sharedMembers:or:)`).
    public func success(estimate: Int, sharing shared: SharedJSON?, _ result: @escaping @Sendable (JSONObjectWriter) -> Void) {
        send(Self.objectResponse(id: id, estimate: estimate, sharing: shared, members: result))
    }

    public func failure(_ error: RPCError) {
        send(Self.failure(id: id, error))
    }

    public func callAsFunction(_ result: Result<JSON, RPCError>) {
        switch result {
        case .success(let value): success(value)
        case .failure(let error): failure(error)
        }
    }

    public var isAnswered: Bool { answered.load(ordering: .acquiring) }

    /// A success response to the request `id`, `{"id", "jsonrpc", "result"}`
    /// in the order the text sorts them: `result` writes the last member.
    private static func response(
        id: JSON, estimate: Int, sharing shared: SharedJSON? = nil, _ result: @escaping @Sendable (JSONObjectWriter) -> Void
    ) -> JSONMessage {
        let members: @Sendable (JSONObjectWriter) -> Void = { message in
            message.set("id", id)
            message.set("jsonrpc", "2.0")
            result(message)
        }
        return message(of: members, estimate: estimate + id.estimatedEncodedCount + 30, sharing: shared)
    }

    /// A success response to the request `id` whose `result` is the object
    /// `members` writes: one closure for the message, not one around
    /// another.
    private static func objectResponse(
        id: JSON, estimate: Int, sharing shared: SharedJSON? = nil, members: @escaping @Sendable (JSONObjectWriter) -> Void
    ) -> JSONMessage {
        let write: @Sendable (JSONObjectWriter) -> Void = { message in
            message.set("id", id)
            message.set("jsonrpc", "2.0")
            message.set("result", object: members)
        }
        return message(of: write, estimate: estimate + id.estimatedEncodedCount + 30, sharing: shared)
    }

    /// The message `members` writes, about `estimate` bytes long.
    private static func message(
        of members: @escaping @Sendable (JSONObjectWriter) -> Void, estimate: Int, sharing shared: SharedJSON?
    ) -> JSONMessage {
        shared.map { JSONMessage(estimate: estimate, sharing: $0, object: members) } ?? JSONMessage(estimate: estimate, object: members)
    }

    /// An error response to the request `id`, `{"error", "id", "jsonrpc"}`.
    private static func failure(id: JSON, _ error: RPCError) -> JSONMessage {
        let error = error.json
        return JSONMessage(estimate: error.estimatedEncodedCount + id.estimatedEncodedCount + 30) { message in
            message.set("error", error)
            message.set("id", id)
            message.set("jsonrpc", "2.0")
        }
    }

    private func send(_ response: JSONMessage) {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else {
            assertionFailure("request \(id) (\(method)) was answered twice")
            return
        }
        sink(response)
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            sink(Self.failure(id: id, RPCError(.internalError, "\(method) finished without a reply")))
        }
    }
}
