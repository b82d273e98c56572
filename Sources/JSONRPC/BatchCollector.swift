import JSON
import Locking

/// Gathers a batch's answers, each encoded, and sends them as one array, in
/// request order, when the last arrives; then runs what waited for the
/// array to be sent.
///
/// An answer takes room from the sink (`AnswerSink.holdBatchAnswer`), its
/// encoded bytes, for as long as it waits. Once one finds none, the batch
/// is full: that answer is replaced by -32002 (its request ran), and every
/// request of the batch not yet run gets -32002 without being run. Those
/// stand-ins are a hundred bytes or so each, and a batch has at most
/// `MessageLimits.maxBatchLength` entries, so a batch's array stays bounded
/// whatever its requests answer.
///
/// An answer made while its request's handler runs is encoded at once, so
/// that the dispatcher sees a full batch before it runs the next request.
/// One made later, from another thread (the downloader answers a batch of
/// downloads from its own), is encoded where the sink writes
/// (`AnswerSink.whenWriting`), counted as output until then: the thread
/// that made it goes on with its own work.
final class BatchCollector: Sendable {
    private struct State {
        var answers: [[UInt8]]
        var remaining: Int
        /// Room taken from the sink for the answers kept.
        var held = 0
        var isFull = false
        var afterSent: [@Sendable () -> Void] = []
        /// The request whose handler runs, when one does.
        var running: Int?

        /// Puts `answer` at `index`: when it is the last, what is then to
        /// be sent (the answers given, in order) and done.
        mutating func put(_ index: Int, _ answer: [UInt8]) -> Complete? {
            answers[index] = answer
            remaining -= 1
            guard remaining == 0 else { return nil }
            defer { (answers, afterSent) = ([], []) }
            return (answers.filter { !$0.isEmpty }, held, afterSent)
        }
    }

    private typealias Complete = (answers: [[UInt8]], held: Int, actions: [@Sendable () -> Void])

    private let state: Locked<State>
    private let sink: any AnswerSink

    init(count: Int, sink: any AnswerSink) {
        self.state = Locked(State(answers: Array(repeating: [], count: count), remaining: count))
        self.sink = sink
    }

    /// True once an answer found no room: requests not yet run are not run.
    var isFull: Bool { state.withLock { $0.isFull } }

    /// Runs the handler of the request at `index`: answers it makes meanwhile
    /// are kept (or found no room) by the time it returns.
    func running(_ index: Int, _ handler: () -> Void) {
        state.withLock { $0.running = index }
        handler()
        state.withLock { $0.running = nil }
    }

    /// Keeps the answer at `index` to the request `id`, or its stand-in
    /// when there is no room.
    func fill(_ index: Int, id: JSON, with response: JSONMessage) {
        guard state.withLock({ $0.running != index }) else { return keep(index, id: id, response.encoded) }
        sink.whenWriting(estimate: response.estimate) { [self] in keep(index, id: id, response.encoded) }
    }

    /// An answer kept takes its room and its place under one lock.
    private func keep(_ index: Int, id: JSON, _ encoded: [UInt8]) {
        let (kept, complete) = state.withLock { state -> (Bool, Complete?) in
            guard !state.isFull, sink.holdBatchAnswer(encoded.count + 1) else {
                state.isFull = true
                return (false, nil)
            }
            state.held += encoded.count + 1
            return (true, state.put(index, encoded))
        }
        guard kept else { return store(index, tooLarge(id: id, ran: true)) }
        if let complete { send(complete) }
    }

    /// The entry at `index` is answered with nothing: a notification, or
    /// a response from the client.
    func skip(_ index: Int) {
        store(index, [])
    }

    /// Answers the request at `index`, which is not run, with -32002.
    func refuse(_ index: Int, id: JSON) {
        store(index, tooLarge(id: id, ran: false))
    }

    /// Keeps `action` for right after the array is sent: false when it has
    /// been sent already.
    func afterSent(_ action: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard state.remaining > 0 else { return false }
            state.afterSent.append(action)
            return true
        }
    }

    private func store(_ index: Int, _ answer: [UInt8]) {
        guard let complete = state.withLock({ $0.put(index, answer) }) else { return }
        send(complete)
    }

    /// Sends the batch's array, then runs what waited for it.
    private func send(_ complete: Complete) {
        if !complete.answers.isEmpty { sink.sendBatch(complete.answers, held: complete.held) }
        for action in complete.actions { action() }
    }

    private func tooLarge(id: JSON, ran: Bool) -> [UInt8] {
        let error = RPCError(
            .batchTooLarge, "Batch too large: its answers passed \(sink.batchRoom) bytes",
            data: ["limit": .integer(Int64(sink.batchRoom)), "ran": .bool(ran)])
        return JSONCodec.encode(Dispatcher.errorResponse(id: id, error))
    }
}
