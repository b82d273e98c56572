import Dispatch
import Foundation
import JSON
import JSONRPC
import Logging
import Testing
import Locking

/// Text JSON writes six bytes a character for (`\u0001`), while an answer's
/// estimate counts one: an answer counted by its estimate would take a
/// sixth of its room.
private func controls(_ count: Int) -> JSON { .string(String(repeating: "\u{01}", count: count)) }

/// The room a success answer takes while it waits for its batch: its text
/// and the comma after it.
private func room(id: JSON, result: JSON) -> Int {
    JSONCodec.encode(["id": id, "jsonrpc": "2.0", "result": result]).count + 1
}

/// A batch of requests: `(id, method)`.
private func batch(_ requests: [(Int, String)]) -> [UInt8] {
    Array(("[" + requests.map { #"{"jsonrpc":"2.0","id":\#($0.0),"method":"\#($0.1)"}"# }.joined(separator: ",") + "]").utf8)
}

/// A dispatcher whose `now` requests are counted and answered with `now`
/// before their handler returns, and whose `later` requests are kept in
/// `stash` for the test to answer.
private func dispatcher(stash: ReplyStash, calls: Calls, now: JSON) -> Dispatcher {
    let dispatcher = Dispatcher(logger: Logger(label: "courier.tests.late-answers"))
    dispatcher.register("now") { params, reply in
        calls.record(params)
        reply.success(now)
    }
    dispatcher.register("later") { _, reply in stash.add(reply) }
    return dispatcher
}

private func batchTooLarge(_ answer: JSON, limit: Int, ran: Bool) -> Bool {
    answer["error"]?["code"] == -32002 && answer["error"]?["data"] == ["limit": .integer(Int64(limit)), "ran": .bool(ran)]
}

/// Answers made after their request's handler returned (as the downloader
/// makes a batch's `download` answers) are encoded by the writer and take
/// their exact encoded size from the batch's room there, as answers made at
/// once do.
@Suite(.timeLimit(.minutes(1)))
struct BatchLateAnswerTests {
    @Test func lateAnswersThatFindTheRoomTakenAreReplaced() throws {
        // Given room for exactly the two answers a batch makes at once
        let (stash, calls) = (ReplyStash(), Calls())
        let now = JSON.string(String(repeating: "x", count: 100))
        let filled = room(id: 0, result: now) + room(id: 1, result: now)
        let sink = Collector(batchRoom: filled, defersWriting: true)
        dispatcher(stash: stash, calls: calls, now: now)
            .receive(batch([(0, "now"), (1, "now"), (2, "later"), (3, "later")]), to: sink)
        #expect(sink.held.withLock { $0 } == filled)

        // When both late answers are made, and the writer has not reached them yet
        let late = stash.takeAll()
        try #require(late.count == 2)
        for reply in late { reply.success("y") }
        #expect(sink.messages.isEmpty)
        #expect(sink.waitingEstimate > 0)

        // Then once it does, each is replaced by -32002 saying its request
        // ran, in request order, and the room is given back
        sink.runWriter()
        try #require(sink.messages.count == 1)
        let answers = try #require(sink.messages[0].arrayValue)
        #expect(answers.map { $0["id"] } == [0, 1, 2, 3])
        #expect(answers[0]["result"] == now && answers[1]["result"] == now)
        #expect(batchTooLarge(answers[2], limit: filled, ran: true))
        #expect(batchTooLarge(answers[3], limit: filled, ran: true))
        #expect(sink.held.withLock { $0 } == 0)
        #expect(sink.waitingEstimate == 0)
        #expect(calls.count == 2)
    }

    /// `slack` 0: the late answer fills the room to the byte; -1: it misses
    /// by one byte, though its estimate would fit many times.
    @Test(arguments: [0, -1])
    func aLateAnswerTakesItsEncodedBytesNotItsEstimate(slack: Int) throws {
        // Given a batch whose answer made at once leaves room for the first
        // late answer's encoded bytes plus `slack`
        let (stash, calls) = (ReplyStash(), Calls())
        let now = JSON.string("now")
        let large = controls(40)
        let limit = room(id: 1, result: now) + room(id: 0, result: large) + slack
        let sink = Collector(batchRoom: limit, defersWriting: true)
        dispatcher(stash: stash, calls: calls, now: now)
            .receive(batch([(0, "later"), (1, "now"), (2, "later")]), to: sink)

        // When the late answers are made, the large one first, and the
        // writer reaches them
        let late = stash.takeAll()
        try #require(late.count == 2)
        late[0].success(large)
        late[1].success("ok")
        sink.runWriter()

        // Then the large one is kept only when its encoded bytes fit, and
        // the one after it, with no room left either way, is replaced
        let answers = try #require(sink.messages.first?.arrayValue)
        #expect(answers.map { $0["id"] } == [0, 1, 2])
        if slack >= 0 {
            #expect(answers[0]["result"] == large)
        } else {
            #expect(batchTooLarge(answers[0], limit: limit, ran: true))
        }
        #expect(answers[1]["result"] == now)
        #expect(batchTooLarge(answers[2], limit: limit, ran: true))
        #expect(sink.held.withLock { $0 } == 0)
    }

    @Test func aLateAnswerThatOverflowsWhileTheBatchIsReadStopsTheRequestsNotYetRun() throws {
        // Given a batch whose second request's handler makes the first's
        // late answer, one byte too large for the room, and lets the
        // writer run before it answers itself
        let (stash, calls) = (ReplyStash(), Calls())
        let large = controls(40)
        let limit = room(id: 0, result: large) - 1
        let sink = Collector(batchRoom: limit, defersWriting: true)
        let dispatcher = dispatcher(stash: stash, calls: calls, now: "now")
        dispatcher.register("meanwhile") { _, reply in
            for late in stash.takeAll() { late.success(large) }
            sink.runWriter()
            reply.success("ok")
        }

        // When the batch is read
        dispatcher.receive(batch([(0, "later"), (1, "meanwhile"), (2, "now"), (3, "now")]), to: sink)

        // Then the late answer and the one made after it are replaced, and
        // the requests after them are not run
        let answers = try #require(sink.messages.first?.arrayValue)
        #expect(answers.map { $0["id"] } == [0, 1, 2, 3])
        #expect(batchTooLarge(answers[0], limit: limit, ran: true))
        #expect(batchTooLarge(answers[1], limit: limit, ran: true))
        #expect(batchTooLarge(answers[2], limit: limit, ran: false))
        #expect(batchTooLarge(answers[3], limit: limit, ran: false))
        #expect(calls.count == 0)
        #expect(sink.held.withLock { $0 } == 0)
    }

    @Test func answersMadeOnOtherThreadsWhileTheWriterWritesFillTheRoomExactly() throws {
        signal(SIGPIPE, SIG_IGN)
        // Given a connection with room for ten and a half answers of one
        // size, each made on another thread once its handler has returned
        let input = Pipe(capacity: 64 << 10)
        let output = Pipe(capacity: 4096)
        defer {
            input.close()
            output.close()
        }
        let result = controls(20)
        let each = room(id: 10, result: result)
        let limit = 10 * each + each / 2
        let dispatcher = Dispatcher(logger: Logger(label: "courier.tests.late-answers"))
        dispatcher.register("later") { _, reply in DispatchQueue.global().async { reply.success(result) } }
        let connection = Connection(
            input: input.readEnd, output: output.writeEnd, mode: .ndjson, maxMessageBytes: 1 << 20,
            outputHighWater: 1 << 20, outputLowWater: limit, logger: Logger(label: "courier.tests.late-answers"))
        #expect(connection.batchRoom == limit)
        let ended = DispatchSemaphore(value: 0)
        connection.start(dispatcher: dispatcher) { ended.signal() }

        // When a batch of forty such requests arrives
        let ids = Array(10..<50)
        let message = batch(ids.map { ($0, "later") }) + [UInt8(ascii: "\n")]
        #expect(message.withUnsafeBytes { write(input.writeEnd, $0.baseAddress, $0.count) } == message.count)
        var received: [UInt8] = []
        while !received.contains(UInt8(ascii: "\n")) {
            let chunk = output.readSome(1 << 16)
            try #require(!chunk.isEmpty)
            received += chunk
        }

        // Then each request is answered once, in order; exactly ten answers
        // are kept, whichever the writer reached first; the others say
        // their request ran, but for the requests the batch was full
        // before they were read, which did not run
        let answers = try #require(try JSONCodec.decode(received).arrayValue)
        #expect(answers.map { $0["id"] } == ids.map { .integer(Int64($0)) })
        #expect(answers.filter { $0["result"] == result }.count == 10)
        let ran = answers.filter { batchTooLarge($0, limit: limit, ran: true) }.count
        let notRun = answers.reversed().prefix { batchTooLarge($0, limit: limit, ran: false) }.count
        #expect(ran + notRun == 30)
        // And the estimates and the room held are all given back
        #expect(connection.flush(timeout: 10))
        #expect(connection.queuedOutputBytes == 0)

        input.closeWriteEnd()
        #expect(ended.wait(timeout: .now() + 10) == .success)
    }

    @Test func aBatchWhoseClientStopsReadingStillCompletes() throws {
        signal(SIGPIPE, SIG_IGN)
        // Given a batch of two requests answered later, and a client that
        // reads nothing, whose pipe a large message fills
        let output = Pipe(capacity: 4096)
        defer { output.close() }
        let connection = Connection(
            input: -1, output: output.writeEnd, mode: .ndjson, maxMessageBytes: 1 << 20,
            logger: Logger(label: "courier.tests.late-answers"))
        let stash = ReplyStash()
        let dispatcher = dispatcher(stash: stash, calls: Calls(), now: "now")
        dispatcher.receive(batch([(1, "later"), (2, "later")]), to: connection)
        let late = stash.takeAll()
        try #require(late.count == 2)
        let sent = DispatchSemaphore(value: 0)
        late[0].afterAnswerIsSent { sent.signal() }
        connection.send(notification: "fill", params: .string(String(repeating: "x", count: 64 << 10)))

        // When the first answer is made while the writer waits on the
        // client, the client closes its end, and the second answer is made
        // after the writer found it gone
        late[0].success("first")
        output.closeReadEnd()
        #expect(connection.flush(timeout: 10))
        late[1].success("second")

        // Then the batch completes all the same: what waits for its array runs
        #expect(sent.wait(timeout: .now() + 10) == .success)
    }
}
