import JSON
import JSONRPC
import Locking
import Logging
import Testing

@testable import Courier

/// What a batch's answers and the notices a `NoticeHold` lets go become, in
/// the order they go out: `array`, or the view a notice names.
private final class Wire: AnswerSink {
    private let events = Locked<[String]>([])

    func note(_ event: String) { events.withLock { $0.append(event) } }

    var all: [String] { events.withLock { $0 } }

    func send(_ message: JSONMessage) { note("message") }
    var batchRoom: Int { .max }
    func holdBatchAnswer(_ count: Int) -> Bool { true }
    func sendBatch(_ answers: [[UInt8]], held: Int) { note("array of \(answers.count)") }
    func whenWriting(estimate: Int, _ work: @escaping @Sendable () -> Void) { work() }
}

@Suite("NoticeHold: notices wait for the batch that introduces what they name", .timeLimit(.minutes(1)))
struct NoticeHoldTests {
    /// The replies of one batch of `count` requests, not answered yet.
    private static func batch(of count: Int, to wire: Wire) -> [Reply] {
        let dispatcher = Dispatcher(logger: Logger(label: "courier.tests.hold"))
        let replies = Locked<[Reply]>([])
        dispatcher.register("bind") { _, reply in replies.withLock { $0.append(reply) } }
        let requests = (1...count).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"bind"}"# }
        dispatcher.receive(Array("[\(requests.joined(separator: ","))]".utf8), to: wire)
        return replies.withLock { $0 }
    }

    private static func animating(_ view: String, _ on: Bool) -> Notice {
        .view(.animating(view: view, animating: on))
    }

    @Test("a batch's subjects are released together, in order, once its array is sent; others go out at once")
    func releasedWithTheArray() throws {
        // Given a hold and a batch of three requests
        let wire = Wire()
        let hold = NoticeHold { notice in
            guard case .view(.animating(let view, let on)) = notice else { return }
            wire.note("\(view) \(on)")
        }
        let replies = Self.batch(of: 3, to: wire)
        try #require(replies.count == 3)

        // When two answers introduce views a and b, and notices name a, b and c
        hold.answering(replies[0], about: .view("a"))
        replies[0].success(.null)
        hold.notify(Self.animating("a", true))
        hold.answering(replies[1], about: .view("b"))
        replies[1].success(.null)
        hold.notify(Self.animating("c", true))
        hold.notify(Self.animating("b", true))
        hold.notify(Self.animating("a", false))

        // Then only the notice about c goes out before the array
        #expect(wire.all == ["c true"])

        // When the last answer completes the batch
        hold.answering(replies[2], about: nil)
        replies[2].success(.null)

        // Then the array goes out, then a's notices, then b's
        #expect(wire.all == ["c true", "array of 3", "a true", "a false", "b true"])

        // And notices about a go out at once from then on
        hold.notify(Self.animating("a", true))
        #expect(wire.all.last == "a true")
        #expect(wire.all.count == 6)
    }

    @Test("a subject two batches introduce waits for both")
    func twoBatches() throws {
        // Given two batches whose first answers both introduce view a
        let wire = Wire()
        let hold = NoticeHold { notice in
            guard case .view(.animating(let view, let on)) = notice else { return }
            wire.note("\(view) \(on)")
        }
        let first = Self.batch(of: 2, to: wire)
        let second = Self.batch(of: 1, to: wire)
        try #require(first.count == 2 && second.count == 1)
        hold.answering(first[0], about: .view("a"))
        first[0].success(.null)
        hold.answering(second[0], about: .view("a"))
        hold.notify(Self.animating("a", true))

        // When the second batch's array is sent
        second[0].success(.null)

        // Then the notice still waits for the first batch
        #expect(wire.all == ["array of 1"])

        // When the first one is sent too
        first[1].success(.null)

        // Then it goes out after it
        #expect(wire.all == ["array of 1", "array of 2", "a true"])
    }
}
