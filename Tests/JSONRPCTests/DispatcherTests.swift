import Dispatch
import Foundation
import JSON
import JSONRPC
import Logging
import Testing
import Locking

/// Collects what a dispatcher sends, from any thread, and signals each one;
/// a batch's array is decoded again. Answers waiting for their batch may
/// take `batchRoom` bytes.
///
/// Work for the writer (`whenWriting`) runs at once, or, with
/// `defersWriting`, waits until the test calls `runWriter()`: a writer
/// that has not reached it yet.
final class Collector: AnswerSink {
    private let sent = Locked<[JSON]>([])
    private let arrived = DispatchSemaphore(value: 0)
    private let observe: @Sendable (JSON) -> Void
    let batchRoom: Int
    /// Bytes held for answers waiting for their batch.
    let held = Locked(0)
    private let defersWriting: Bool
    /// Work for the writer not run yet, with the bytes it counts as meanwhile.
    private let writerWork = Locked<[(estimate: Int, work: @Sendable () -> Void)]>([])

    init(batchRoom: Int = .max, defersWriting: Bool = false, observe: @escaping @Sendable (JSON) -> Void = { _ in }) {
        self.batchRoom = batchRoom
        self.defersWriting = defersWriting
        self.observe = observe
    }

    func send(_ message: JSONMessage) {
        let message = try! JSONCodec.decode(message.encoded)
        observe(message)
        sent.withLock { $0.append(message) }
        arrived.signal()
    }

    func holdBatchAnswer(_ count: Int) -> Bool {
        held.withLock { held in
            guard held <= batchRoom - count else { return false }
            held += count
            return true
        }
    }

    func sendBatch(_ answers: [[UInt8]], held count: Int) {
        held.withLock { $0 -= count }
        send(.array(answers.map { try! JSONCodec.decode($0) }))
    }

    func whenWriting(estimate: Int, _ work: @escaping @Sendable () -> Void) {
        guard defersWriting else { return work() }
        writerWork.withLock { $0.append((estimate, work)) }
    }

    /// Bytes of output counted for work the writer has not run.
    var waitingEstimate: Int { writerWork.withLock { $0.reduce(0) { $0 + $1.estimate } } }

    /// Runs the writer's work, in the order it was asked for, on this thread.
    func runWriter() {
        while let next = writerWork.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { next.work() }
    }

    var messages: [JSON] { sent.withLock { $0 } }

    /// Waits until one more message has arrived; false after 10 seconds.
    func waitForOne() -> Bool {
        arrived.wait(timeout: .now() + 10) == .success
    }
}

/// Keeps replies that handlers answer later.
final class ReplyStash: Sendable {
    private let replies = Locked<[Reply]>([])

    func add(_ reply: Reply) { replies.withLock { $0.append(reply) } }

    func takeAll() -> [Reply] {
        replies.withLock { stored in
            defer { stored = [] }
            return stored
        }
    }
}

/// Counts calls and remembers the params a notification handler got.
final class Calls: Sendable {
    private let state = Locked<[JSON?]>([])

    func record(_ params: Params) { state.withLock { $0.append(params.raw) } }

    var count: Int { state.withLock { $0.count } }
    var params: [JSON?] { state.withLock { $0 } }
}

private struct NotAnRPCError: Error {}

/// A dispatcher with a small set of methods for the tests.
private func makeDispatcher(stash: ReplyStash = ReplyStash(), notes: Calls = Calls()) -> Dispatcher {
    let dispatcher = Dispatcher(logger: Logger(label: "courier.tests.dispatcher"))
    dispatcher.register("ping") { _, reply in reply.success("pong") }
    dispatcher.register("echo") { params, reply in reply.success(params.raw ?? "no params") }
    dispatcher.register("sum") { params, reply in
        guard case .array(let numbers)? = params.raw else { throw RPCError.invalidParams("positional numbers expected") }
        reply.success(.integer(numbers.compactMap(\.integerValue).reduce(0, +)))
    }
    dispatcher.register("subtract") { params, reply in
        guard case .array(let numbers)? = params.raw, numbers.count == 2, let a = numbers[0].integerValue,
            let b = numbers[1].integerValue
        else { throw RPCError.invalidParams("two numbers expected") }
        reply.success(.integer(a - b))
    }
    dispatcher.register("get_data") { _, reply in reply.success(["hello", 5]) }
    dispatcher.register("named") { params, reply in
        let named = try params.byName(allowed: ["name", "count"])
        reply.success(["name": JSON(try named.optionalString("name")), "count": (try named.optionalInteger("count")).map(JSON.integer) ?? nil])
    }
    dispatcher.register("typed") { params, reply in
        let named = try params.byName()
        _ = try named.string("text")
        _ = try named.optionalInteger("count", range: 0...10)
        _ = try named.optionalNumber("ratio", range: 0...1)
        _ = try named.optionalBool("flag")
        _ = try named.optionalObject("object")
        _ = try named.optionalStringArray("list")
        reply.success(true)
    }
    dispatcher.register("invalid") { _, _ in throw RPCError.invalidParams("no good", param: "thing") }
    dispatcher.register("crash") { _, _ in throw NotAnRPCError() }
    dispatcher.register("answerThenThrow") { _, reply in
        reply.success("answered")
        throw RPCError.invalidParams("too late")
    }
    dispatcher.register("drop") { _, _ in }
    dispatcher.register("later") { _, reply in stash.add(reply) }
    dispatcher.registerNotification("note") { params in notes.record(params) }
    dispatcher.registerNotification("strictNote") { params in
        notes.record(params)
        _ = try? params.byName()
    }
    return dispatcher
}

/// Sends `text` to `dispatcher` and returns everything it sent back
/// synchronously.
private func exchange(_ text: String, _ dispatcher: Dispatcher = makeDispatcher()) -> [JSON] {
    exchange(Array(text.utf8), dispatcher)
}

private func exchange(_ bytes: [UInt8], _ dispatcher: Dispatcher = makeDispatcher()) -> [JSON] {
    let collector = Collector()
    dispatcher.receive(bytes, to: collector)
    return collector.messages
}

private func text(_ value: JSON) -> String { String(decoding: JSONCodec.encode(value), as: UTF8.self) }

private func errorCode(_ response: JSON?) -> Int64? { response?["error"]?["code"]?.integerValue }

/// Checks the shape every response must have.
private func expectWellFormed(_ response: JSON, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(response["jsonrpc"] == "2.0", sourceLocation: sourceLocation)
    #expect(response["id"] != nil, sourceLocation: sourceLocation)
    #expect((response["result"] == nil) != (response["error"] == nil), sourceLocation: sourceLocation)
    if let error = response["error"] {
        #expect(error["code"]?.integerValue != nil, sourceLocation: sourceLocation)
        #expect(error["message"]?.stringValue != nil, sourceLocation: sourceLocation)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DispatcherHandlerLookupTests {
    @Test func eachRequestOfARunOfMethodsReachesItsOwnHandler() {
        // Given a batch where methods repeat and alternate
        let batch = #"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"},"#
            + #"{"jsonrpc":"2.0","id":3,"method":"get_data"},{"jsonrpc":"2.0","id":4,"method":"ping"},"#
            + #"{"jsonrpc":"2.0","id":5,"method":"pong"},{"jsonrpc":"2.0","id":6,"method":"ping"}]"#

        // When it is handled
        let answers = exchange(batch).first?.arrayValue ?? []

        // Then each answer is its own method's
        #expect(answers.map { $0["result"] } == ["pong", "pong", ["hello", 5], "pong", nil, "pong"])
        #expect(errorCode(answers.count == 6 ? answers[4] : nil) == -32601)
    }

    @Test func aHandlerRegisteredAgainTakesOverAtOnce() {
        // Given a method answered once
        let dispatcher = makeDispatcher()
        let request = #"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
        #expect(exchange(request, dispatcher).first?["result"] == "pong")

        // When another handler is registered for it
        dispatcher.register("ping") { _, reply in reply.success("pong again") }

        // Then the next request of it reaches the new one
        #expect(exchange(request, dispatcher).first?["result"] == "pong again")
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DispatcherRequestTests {
    @Test func requestGetsItsResult() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        #expect(sent == [["jsonrpc": "2.0", "id": 1, "result": "pong"]])
        #expect(text(sent[0]) == #"{"id":1,"jsonrpc":"2.0","result":"pong"}"#)
    }

    @Test(arguments: [
        #""abc""#, #""""#, "1", "0", "-7", "0.1", "-2.5", "1.0", "1.5e300", "null", "9007199254740993",
        "9223372036854775807", "-9223372036854775808", #""é😀\u0000""#,
    ])
    func idsAreEchoedUnchanged(idText: String) throws {
        // Given a request with this id
        let id = try JSONCodec.decode(idText)
        let sent = exchange(#"{"jsonrpc":"2.0","method":"ping","id":\#(idText)}"#)

        // Then the response carries the same id, as a value and as text
        try #require(sent.count == 1)
        #expect(sent[0]["id"] == id)
        #expect(sent[0]["result"] == "pong")
        #expect(text(sent[0]) == #"{"id":\#(text(id)),"jsonrpc":"2.0","result":"pong"}"#)
        if !idText.contains("\\") {
            #expect(text(id) == idText)
        }
    }

    @Test func idsKeepTheirTypes() {
        let integer = exchange(#"{"jsonrpc":"2.0","method":"ping","id":9007199254740993}"#)
        #expect(integer.first?["id"] == .integer(9_007_199_254_740_993))
        let real = exchange(#"{"jsonrpc":"2.0","method":"ping","id":3.0}"#)
        #expect(real.first?["id"] == .double(3))
        let string = exchange(#"{"jsonrpc":"2.0","method":"ping","id":"3"}"#)
        #expect(string.first?["id"] == .string("3"))
    }

    @Test(arguments: ["true", "false", "{}", "[]", #"{"a":1}"#, "[1]"])
    func idsOfOtherTypesAreInvalid(idText: String) {
        let sent = exchange(#"{"jsonrpc":"2.0","method":"ping","id":\#(idText)}"#)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32600)
        #expect(sent.first?["id"] == .null)
    }

    @Test(arguments: [
        #"{"id":1,"jsonrpc":"2.0","method""#,
        #"{"id":1,"jsonrpc":"2.0","method":"ping"} x"#,
        "",
        "   ",
        "nope",
        #"[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method"]"#,
        #"{"jsonrpc":"2.0","method":"ping","id":99999999999999999999}"#,
    ])
    func invalidJSONIsAParseError(input: String) {
        let sent = exchange(input)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32700)
        #expect(sent.first?["id"] == .null)
        sent.forEach { expectWellFormed($0) }
    }

    @Test(arguments: [
        [UInt8]([0x7B, 0x22, 0x69, 0x64, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D]),
        Array(#"{"jsonrpc":"2.0","id":1,"method":"p"#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8),
        [0xFE, 0xFF],
    ])
    func invalidUTF8IsAParseError(bytes: [UInt8]) {
        let sent = exchange(bytes)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32700)
        #expect(sent.first?["id"] == .null)
        #expect(sent.first?["error"]?["message"]?.stringValue?.contains("UTF-8") == true)
    }

    @Test(arguments: [
        #"{"id":1,"method":"ping"}"#,
        #"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        #"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
        #"{"jsonrpc":"2.0","id":1}"#,
        #"{"jsonrpc":"2.0","id":1,"method":7}"#,
        #"{"jsonrpc":"2.0","id":1,"method":null}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":5}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":"text"}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"echo","params":true}"#,
        #"{"jsonrpc":"2.0\u0000","id":1,"method":"ping"}"#,
        #"{"jsonrpc":"2.","id":1,"method":"ping"}"#,
        #"{"jsonrpc":"2.00","id":1,"method":"ping"}"#,
        #"{"jsonrpc2":"2.0","id":1,"method":"ping"}"#,
    ])
    func invalidRequestsKeepTheirId(input: String) {
        let sent = exchange(input)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32600)
        #expect(sent.first?["id"] == 1)
        sent.forEach { expectWellFormed($0) }
    }

    @Test func envelopeNamesAreMatchedWholeAndARepeatedOneKeepsItsLastValue() {
        // Given a request with members whose names start like the
        // envelope's, or hold one, and naming its method twice
        let sent = exchange(
            #"{"i":0,"ids":1,"jsonrpc":"2.0","method":"nope","methods":"x","param":5,"id":7,"method":"echo","params_":true,"":"","resulted":1}"#
        )

        // Then only whole names count, and the later method is the one run
        #expect(sent == [["jsonrpc": "2.0", "id": 7, "result": "no params"]])
    }

    @Test(arguments: ["1", #""text""#, "null", "true"])
    func scalarMessagesAreInvalidRequests(input: String) {
        let sent = exchange(input)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32600)
        #expect(sent.first?["id"] == .null)
    }

    @Test func specificationsInvalidRequestExample() {
        // From the JSON-RPC 2.0 specification: no id, but not a valid request
        let sent = exchange(#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32600)
        #expect(sent.first?["id"] == .null)
    }

    @Test func unknownMethodIsMethodNotFound() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":"x","method":"nope"}"#)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32601)
        #expect(sent.first?["id"] == "x")
        #expect(sent.first?["error"]?["message"]?.stringValue?.contains("nope") == true)
    }

    @Test func handlerThrowingInvalidParams() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":2,"method":"invalid","params":{}}"#)
        #expect(sent == [["jsonrpc": "2.0", "id": 2, "error": ["code": -32602, "message": "no good", "data": ["param": "thing"]]]])
    }

    @Test func handlerThrowingAnotherErrorIsInternal() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":3,"method":"crash"}"#)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32603)
        #expect(sent.first?["id"] == 3)
    }

    @Test func aThrowAfterAnsweringSendsNothingMore() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":4,"method":"answerThenThrow"}"#)
        #expect(sent == [["jsonrpc": "2.0", "id": 4, "result": "answered"]])
    }

    @Test func positionalParamsToANamedMethodAreInvalidParams() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":5,"method":"named","params":["a",1]}"#)
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32602)
        #expect(sent.first?["id"] == 5)
    }

    @Test func namedParamsReachTheHandler() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":6,"method":"named","params":{"name":"n","count":3}}"#)
        #expect(sent.first?["result"] == ["name": "n", "count": 3])
    }

    @Test func unknownNamedParamIsInvalidParams() {
        let sent = exchange(#"{"jsonrpc":"2.0","id":6,"method":"named","params":{"name":"n","colour":3}}"#)
        #expect(errorCode(sent.first) == -32602)
        #expect(sent.first?["error"]?["data"] == ["param": "colour"])
    }

    @Test(arguments: [#","params":null"#, ""])
    func nullOrMissingParamsAreNoParams(params: String) {
        // Given a request with "params": null, or none
        let echo = exchange(#"{"jsonrpc":"2.0","id":7,"method":"echo"\#(params)}"#)
        let named = exchange(#"{"jsonrpc":"2.0","id":8,"method":"named"\#(params)}"#)

        // Then the handler sees no params, and a by-name method reads them as empty
        #expect(echo.first?["result"] == "no params")
        #expect(named.first?["result"] == ["name": nil, "count": nil])
    }

    @Test func droppedReplyIsAnsweredWithInternalError() {
        // Given a handler that returns without answering and keeps no reply
        let sent = exchange(#"{"jsonrpc":"2.0","id":9,"method":"drop"}"#)

        // Then the request is still answered, with -32603
        #expect(sent.count == 1)
        #expect(errorCode(sent.first) == -32603)
        #expect(sent.first?["id"] == 9)
        #expect(sent.first?["error"]?["message"]?.stringValue?.contains("drop") == true)
    }

    @Test func replyFromAnotherThreadLater() throws {
        // Given a handler that keeps its reply
        let stash = ReplyStash()
        let dispatcher = makeDispatcher(stash: stash)
        let collector = Collector()
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","id":"slow","method":"later"}"#.utf8), to: collector)
        #expect(collector.messages.isEmpty)

        // When another thread answers it
        let replies = stash.takeAll()
        try #require(replies.count == 1)
        let reply = replies[0]
        #expect(!reply.isAnswered)
        Thread.detachNewThread { reply.success(["done": true]) }

        // Then the response arrives once
        #expect(collector.waitForOne())
        #expect(collector.messages == [["jsonrpc": "2.0", "id": "slow", "result": ["done": true]]])
        #expect(reply.isAnswered)
    }

    @Test func clientResponsesAreIgnored() {
        #expect(exchange(#"{"jsonrpc":"2.0","id":1,"result":2}"#).isEmpty)
        #expect(exchange(#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#).isEmpty)
    }

    @Test func methodsAreListed() {
        let dispatcher = Dispatcher(logger: Logger(label: "courier.tests.dispatcher"))
        dispatcher.register("b") { _, reply in reply.success(nil) }
        dispatcher.register("a") { _, reply in reply.success(nil) }
        dispatcher.registerNotification("n") { _ in }
        #expect(dispatcher.methods == ["a", "b"])
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DispatcherNotificationTests {
    @Test func notificationsReachTheirHandlerAndGetNoAnswer() {
        let notes = Calls()
        let sent = exchange(#"{"jsonrpc":"2.0","method":"note","params":{"a":1}}"#, makeDispatcher(notes: notes))
        #expect(sent.isEmpty)
        #expect(notes.params == [["a": 1]])
    }

    @Test func notificationWithNullParams() {
        let notes = Calls()
        let sent = exchange(#"{"jsonrpc":"2.0","method":"note","params":null}"#, makeDispatcher(notes: notes))
        #expect(sent.isEmpty)
        #expect(notes.count == 1)
        #expect(notes.params == [nil])
    }

    @Test func notificationsAreNeverAnswered() {
        // Given notifications for unknown methods, request-only methods, or with params the handler refuses
        let notes = Calls()
        let dispatcher = makeDispatcher(notes: notes)
        let inputs = [
            #"{"jsonrpc":"2.0","method":"unknown"}"#,
            #"{"jsonrpc":"2.0","method":"invalid","params":{}}"#,
            #"{"jsonrpc":"2.0","method":"crash"}"#,
            #"{"jsonrpc":"2.0","method":"drop"}"#,
            #"{"jsonrpc":"2.0","method":"strictNote","params":[1,2]}"#,
            #"{"jsonrpc":"2.0","method":"named","params":[1,2]}"#,
        ]

        // Then none is answered
        for input in inputs {
            #expect(exchange(input, dispatcher).isEmpty, "\(input)")
        }
        // And the notification handler still ran
        #expect(notes.params == [[1, 2]])
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DispatcherBatchTests {
    @Test func workAfterAnAnswerRunsOnceItIsOnTheWire() {
        // Given a dispatcher whose `later` requests are answered by the test
        let log = Locked<[String]>([])
        let replies = Locked<[Reply]>([])
        let dispatcher = Dispatcher(logger: Logger(label: "test"))
        dispatcher.register("later") { _, reply in replies.withLock { $0.append(reply) } }
        let sink = Collector { message in
            log.withLock { $0.append(message.arrayValue != nil ? "array" : "answer \(message["id"]!)") }
        }

        // When a request alone and a batch of two are received, and each
        // answer's follow-up work is asked for before it is given
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","id":1,"method":"later"}"#.utf8), to: sink)
        dispatcher.receive(
            Array(#"[{"jsonrpc":"2.0","id":2,"method":"later"},{"jsonrpc":"2.0","id":3,"method":"later"}]"#.utf8),
            to: sink)
        let (alone, first, second) = replies.withLock { ($0[0], $0[1], $0[2]) }
        #expect(!alone.isHeldInBatch)
        #expect(first.isHeldInBatch && second.isHeldInBatch)
        alone.afterAnswerIsSent { log.withLock { $0.append("after 1") } }
        alone.success(.null)
        first.afterAnswerIsSent { log.withLock { $0.append("after 2") } }
        first.success(.null)
        #expect(log.withLock { $0 } == ["after 1", "answer 1"])
        second.afterAnswerIsSent { log.withLock { $0.append("after 3") } }
        second.success(.null)

        // Then a lone answer's work runs at once, and a batch's after its array
        #expect(log.withLock { $0 } == ["after 1", "answer 1", "array", "after 2", "after 3"])
    }

    @Test func emptyBatchIsOneInvalidRequest() {
        let sent = exchange("[]")
        #expect(sent.count == 1)
        #expect(sent.first?.arrayValue == nil)
        #expect(errorCode(sent.first) == -32600)
        #expect(sent.first?["id"] == .null)
    }

    @Test func batchOfInvalidEntries() {
        // Given a batch of three numbers
        let sent = exchange("[1,2,3]")

        // Then one array with three invalid-request errors comes back
        try? #require(sent.count == 1)
        let responses = sent.first?.arrayValue ?? []
        #expect(responses.count == 3)
        for response in responses {
            expectWellFormed(response)
            #expect(errorCode(response) == -32600)
            #expect(response["id"] == .null)
        }
    }

    @Test func aBatchIsAnsweredBeforeItsTrailingNotificationRuns() {
        // Given a batch of a request and then a notification, as
        // `[shutdown, exit]` is: the notification ends the output
        let log = Locked<[String]>([])
        let dispatcher = Dispatcher(logger: Logger(label: "test"))
        dispatcher.register("ping") { _, reply in reply.success("pong") }
        dispatcher.registerNotification("end") { _ in log.withLock { $0.append("end ran") } }
        let sink = Collector { message in log.withLock { $0.append(message.arrayValue != nil ? "array" : "answer") } }

        // When it is received
        dispatcher.receive(Array(#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"end"}]"#.utf8), to: sink)

        // Then the array, of the request's answer alone, is sent before the notification runs
        #expect(log.withLock { $0 } == ["array", "end ran"])
        #expect(sink.messages.first?.arrayValue?.count == 1)
    }

    @Test func aLongBatchRunsEveryEntryInOrder() throws {
        // Given a batch of 3,000 entries, some 150 KiB: requests, and a
        // notification after every tenth
        let notes = Calls()
        let entries = (0..<3000).map { index in
            index % 10 == 9
                ? #"{"jsonrpc":"2.0","method":"note","params":[\#(index)]}"#
                : #"{"jsonrpc":"2.0","id":\#(index),"method":"echo","params":{"entry":\#(index),"pad":"0123456789abcdef"}}"#
        }
        let text = "[" + entries.joined(separator: ",") + "]"

        // When it is received
        let sent = exchange(text, makeDispatcher(notes: notes))

        // Then one array answers the requests in order, and each notification ran in order
        let answers = try #require(sent.first?.arrayValue)
        #expect(sent.count == 1)
        let requests: [JSON?] = (0..<3000).filter { $0 % 10 != 9 }.map { JSON.integer(Int64($0)) }
        let noted: [JSON?] = (0..<3000).filter { $0 % 10 == 9 }.map { JSON.array([.integer(Int64($0))]) }
        #expect(answers.map { $0["id"] } == requests)
        #expect(answers.map { $0["result"]?["entry"] } == requests)
        #expect(notes.params == noted)
    }

    @Test func batchOfNotificationsGetsNothing() {
        let notes = Calls()
        let sent = exchange(
            #"[{"jsonrpc":"2.0","method":"note","params":[1]},{"jsonrpc":"2.0","method":"unknown"},{"jsonrpc":"2.0","method":"note"}]"#,
            makeDispatcher(notes: notes))
        #expect(sent.isEmpty)
        #expect(notes.params == [[1], nil])
    }

    @Test func specificationsMixedBatch() throws {
        // Given the JSON-RPC specification's batch example
        let notes = Calls()
        let dispatcher = makeDispatcher(notes: notes)
        dispatcher.registerNotification("notify_hello") { params in notes.record(params) }
        let input = """
            [
                {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
                {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
                {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
                {"foo": "boo"},
                {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
                {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
            ]
            """

        // When it is received
        let sent = exchange(input, dispatcher)

        // Then one array answers every request, and not the notification
        try #require(sent.count == 1)
        let responses = try #require(sent[0].arrayValue)
        #expect(responses.count == 5)
        responses.forEach { expectWellFormed($0) }
        #expect(responses.map { $0["id"] } == ["1", "2", JSON.null, "5", "9"])
        #expect(responses[0]["result"] == 7)
        #expect(responses[1]["result"] == 19)
        #expect(errorCode(responses[2]) == -32600)
        #expect(errorCode(responses[3]) == -32601)
        #expect(responses[4]["result"] == ["hello", 5])
        #expect(notes.params == [[7]])
    }

    @Test func batchIdsAreEchoedUnchanged() {
        let sent = exchange(
            #"[{"jsonrpc":"2.0","method":"ping","id":0.1},{"jsonrpc":"2.0","method":"ping","id":9007199254740993},{"jsonrpc":"2.0","method":"ping","id":null},{"jsonrpc":"2.0","method":"ping","id":-3}]"#)
        #expect(sent.count == 1)
        #expect(sent.first?.arrayValue?.map { $0["id"] } == [0.1, .integer(9_007_199_254_740_993), JSON.null, -3])
        #expect(sent.first.map(text) == #"[{"id":0.1,"jsonrpc":"2.0","result":"pong"},{"id":9007199254740993,"jsonrpc":"2.0","result":"pong"},{"id":null,"jsonrpc":"2.0","result":"pong"},{"id":-3,"jsonrpc":"2.0","result":"pong"}]"#)
    }

    @Test func batchWithClientResponsesAnswersOnlyRequests() {
        let sent = exchange(#"[{"jsonrpc":"2.0","id":1,"result":0},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#)
        #expect(sent == [[["jsonrpc": "2.0", "id": 2, "result": "pong"]]])
    }

    @Test func batchWithADroppedReply() {
        let sent = exchange(#"[{"jsonrpc":"2.0","id":1,"method":"drop"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#)
        let responses = sent.first?.arrayValue ?? []
        #expect(sent.count == 1)
        #expect(responses.count == 2)
        #expect(errorCode(responses.first) == -32603)
        #expect(responses.last?["result"] == "pong")
    }

    @Test func batchWaitsForALateReply() throws {
        // Given a batch where one request is answered later
        let stash = ReplyStash()
        let dispatcher = makeDispatcher(stash: stash)
        let collector = Collector()
        let input = #"[{"jsonrpc":"2.0","id":1,"method":"later"},{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#
        dispatcher.receive(Array(input.utf8), to: collector)

        // Then nothing is sent while that reply is outstanding
        #expect(collector.messages.isEmpty)

        // When another thread answers it
        let replies = stash.takeAll()
        try #require(replies.count == 1)
        let reply = replies[0]
        Thread.detachNewThread { reply.success("late") }

        // Then the whole batch arrives as one array, in request order
        #expect(collector.waitForOne())
        #expect(collector.messages == [[["jsonrpc": "2.0", "id": 1, "result": "late"], ["jsonrpc": "2.0", "id": 2, "result": "pong"]]])
    }

    @Test func batchesNestedInBatchesAreInvalid() {
        let sent = exchange(#"[[{"jsonrpc":"2.0","id":1,"method":"ping"}],{"jsonrpc":"2.0","id":2,"method":"ping"}]"#)
        let responses = sent.first?.arrayValue ?? []
        #expect(responses.count == 2)
        #expect(errorCode(responses.first) == -32600)
        #expect(responses.first?["id"] == .null)
        #expect(responses.last?["result"] == "pong")
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DispatcherLimitTests {
    private static func batch(_ count: Int, method: String = "ping") -> String {
        "[" + (0..<count).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"\#(method)"}"# }.joined(separator: ",") + "]"
    }

    /// A dispatcher whose `count` method counts its calls and answers `size` bytes of text.
    private static func counting(_ calls: Calls, limits: MessageLimits = MessageLimits(), size: Int = 100) -> Dispatcher {
        let dispatcher = Dispatcher(limits: limits, logger: Logger(label: "courier.tests.dispatcher"))
        dispatcher.register("count") { params, reply in
            calls.record(params)
            reply.success(.string(String(repeating: "x", count: size)))
        }
        dispatcher.registerNotification("note") { params in calls.record(params) }
        return dispatcher
    }

    @Test func aBatchLongerThanTheLimitIsRefusedWholeAndNothingInItRuns() throws {
        // Given a dispatcher that allows batches of three
        let calls = Calls()
        let dispatcher = Self.counting(calls, limits: MessageLimits(maxBatchLength: 3))

        // When batches of three and four arrive
        let three = exchange(Self.batch(3, method: "count"), dispatcher)
        let four = exchange(Self.batch(4, method: "count"), dispatcher)

        // Then three are answered, and four get one -32600 naming the limit
        #expect(three.first?.arrayValue?.count == 3)
        try #require(four.count == 1)
        #expect(four[0].arrayValue == nil)
        #expect(errorCode(four[0]) == -32600)
        #expect(four[0]["id"] == .null)
        #expect(four[0]["error"]?["data"] == ["limit": 3, "size": 4])
        #expect(calls.count == 3)
    }

    @Test func aMessageOfMoreValuesThanTheLimitIsRefusedBeforeItIsParsed() throws {
        let calls = Calls()
        let dispatcher = Self.counting(calls, limits: MessageLimits(maxValues: 20))
        // 1 + 1 + 9: the object, its params array and its nine elements
        let fits = #"{"jsonrpc":"2.0","id":1,"method":"count","params":[1,2,3,4,5,6,7,8,9]}"#
        let passes = #"{"jsonrpc":"2.0","id":2,"method":"count","params":[[],[],[],[],[],[],[],[],[],[]]}"#
        // Commas, brackets and braces inside strings are not values
        let strings = #"{"jsonrpc":"2.0","id":3,"method":"count","params":["[{,,,,,,,,,,,,,,,,,,,,,,,,\",\\"]}"#

        #expect(exchange(fits, dispatcher).first?["result"] != nil)
        let refused = exchange(passes, dispatcher)
        #expect(exchange(strings, dispatcher).first?["result"] != nil)
        let garbage = exchange(String(repeating: ",", count: 40), dispatcher)

        try #require(refused.count == 1)
        #expect(errorCode(refused[0]) == -32600)
        #expect(refused[0]["id"] == .null)
        #expect(refused[0]["error"]?["data"] == ["limit": 20])
        #expect(errorCode(garbage.first) == -32600)
        #expect(calls.count == 2)
    }

    @Test func answersPastTheRoomAreReplacedAndLaterRequestsAreNotRun() throws {
        // Given room for two answers of some 140 bytes each
        let calls = Calls()
        let dispatcher = Self.counting(calls)
        let sink = Collector(batchRoom: 300)
        let input = "[" + (0..<5).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"count"}"# }.joined(separator: ",")
            + #",{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":"bad"}]"#

        // When a batch of five such requests, a notification and an invalid entry arrives
        dispatcher.receive(Array(input.utf8), to: sink)

        // Then the first two are answered; the third ran and its answer was
        // dropped; the rest did not run; every entry is answered in order
        let answers = try #require(sink.messages.first?.arrayValue)
        #expect(answers.map { $0["id"] } == [0, 1, 2, 3, 4, "bad"])
        #expect(answers[0]["result"]?.stringValue?.count == 100)
        #expect(answers[1]["result"]?.stringValue?.count == 100)
        for (index, answer) in answers.enumerated().dropFirst(2) {
            expectWellFormed(answer)
            #expect(errorCode(answer) == -32002)
            #expect(answer["error"]?["data"] == ["limit": 300, "ran": .bool(index == 2)])
        }
        // And the notification still ran, the room is given back
        #expect(calls.count == 4)
        #expect(sink.held.withLock { $0 } == 0)
    }

    @Test func anAnswerThatComesLateIntoAFullBatchIsReplaced() throws {
        // Given a batch whose first request is answered later, and room for one answer
        let stash = ReplyStash()
        let dispatcher = makeDispatcher(stash: stash)
        let sink = Collector(batchRoom: 60)
        dispatcher.receive(
            Array(#"[{"jsonrpc":"2.0","id":1,"method":"later"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#.utf8), to: sink)
        #expect(sink.messages.isEmpty)
        #expect(sink.held.withLock { $0 } > 0)

        // When the late answer is larger than the room left
        stash.takeAll()[0].success(.string(String(repeating: "y", count: 100)))

        // Then it is replaced by -32002, which says its request ran
        let answers = try #require(sink.messages.first?.arrayValue)
        #expect(answers.map { $0["id"] } == [1, 2])
        #expect(answers[0]["error"]?["data"] == ["limit": 60, "ran": true])
        #expect(answers[1]["result"] == "pong")
        #expect(sink.held.withLock { $0 } == 0)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DispatcherRefusalTests {
    @Test func refusedRequestsGetTheErrorWhileNotificationsRun() {
        // Given a dispatcher that refuses requests
        let notes = Calls()
        let dispatcher = makeDispatcher(notes: notes)
        let refusal = RPCError(.invalidRequest, "server is shutting down", data: ["reason": "shutdown"])
        dispatcher.refuseRequests(with: refusal)

        // Then every request, known or not, gets that error
        for method in ["ping", "nope", "drop"] {
            let sent = exchange(#"{"jsonrpc":"2.0","id":"r","method":"\#(method)"}"#, dispatcher)
            #expect(sent == [Dispatcher.errorResponse(id: "r", refusal)], "\(method)")
        }
        let batch = exchange(#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"note","params":[2]}]"#, dispatcher)
        #expect(batch == [[Dispatcher.errorResponse(id: 1, refusal)]])

        // And notifications still reach their handlers
        #expect(exchange(#"{"jsonrpc":"2.0","method":"note","params":[1]}"#, dispatcher).isEmpty)
        #expect(notes.params == [[2], [1]])
    }

    @Test func refusalCanBeLifted() {
        let dispatcher = makeDispatcher()
        dispatcher.refuseRequests(with: RPCError(.invalidRequest, "no"))
        #expect(errorCode(exchange(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, dispatcher).first) == -32600)
        dispatcher.refuseRequests(with: nil)
        #expect(exchange(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, dispatcher).first?["result"] == "pong")
    }
}

@Suite(.timeLimit(.minutes(1)))
struct ParamsTests {
    /// The error a reader throws, checked to be -32602 naming `param`.
    private func expectInvalid(
        param: String?, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws(RPCError) -> Void
    ) {
        do {
            try body()
            Issue.record("no error thrown", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .invalidParams, sourceLocation: sourceLocation)
            #expect(error.data == param.map { ["param": .string($0)] }, sourceLocation: sourceLocation)
            #expect(error.json["code"] == -32602, sourceLocation: sourceLocation)
        }
    }

    @Test func byNameReadsObjectsAndNothing() throws {
        #expect(try Params(nil).byName().members.isEmpty)
        #expect(try Params(["a": 1]).byName().members == ["a": 1])
        #expect(try Params(["a": 1]).byName(allowed: ["a", "b"])["a"] == 1)
    }

    @Test func byNameRefusesPositionalParams() {
        expectInvalid(param: nil) { () throws(RPCError) in _ = try Params([1, 2]).byName() }
        expectInvalid(param: nil) { () throws(RPCError) in _ = try Params([]).byName() }
    }

    @Test func byNameRefusesUnknownNames() {
        expectInvalid(param: "b") { () throws(RPCError) in _ = try Params(["a": 1, "c": 2, "b": 3]).byName(allowed: ["a", "c"]) }
    }

    @Test func readersReturnValuesOfTheRightType() throws {
        let params = NamedParams([
            "s": "text", "b": false, "i": 7, "r": 0.5, "whole": 3.0, "o": ["k": 1], "l": ["x", "y"], "n": nil, "choice": "high",
        ])
        #expect(try params.string("s") == "text")
        #expect(try params.optionalString("s") == "text")
        #expect(try params.optionalBool("b") == false)
        #expect(try params.optionalInteger("i") == 7)
        #expect(try params.optionalInteger("whole") == 3)
        #expect(try params.optionalNumber("r") == 0.5)
        #expect(try params.optionalNumber("i") == 7)
        #expect(try params.optionalObject("o") == ["k": 1])
        #expect(try params.optionalStringArray("l") == ["x", "y"])
        #expect(try params.optionalChoice("choice", as: Priority.self) == .high)
        #expect(params["s"] == "text")
    }

    @Test func missingAndNullOptionalParamsAreNil() throws {
        let params = NamedParams(["n": nil])
        #expect(try params.optionalString("n") == nil)
        #expect(try params.optionalInteger("absent") == nil)
        #expect(try params.optionalBool("n") == nil)
        #expect(try params.optionalChoice("n", as: Priority.self) == nil)
        #expect(!params.has("n"))
        #expect(!params.has("absent"))
        #expect(NamedParams(["x": 0]).has("x"))
    }

    @Test func requiredStringMissingOrNull() {
        expectInvalid(param: "s") { () throws(RPCError) in _ = try NamedParams([:]).string("s") }
        expectInvalid(param: "s") { () throws(RPCError) in _ = try NamedParams(["s": nil]).string("s") }
    }

    @Test func typeErrorsNameTheParam() {
        let params = NamedParams([
            "s": 1, "b": "yes", "i": 1.5, "big": 1e19, "r": "0.5", "o": [1], "l": ["x", 2], "notList": "x", "choice": "urgent",
            "choiceType": 3,
        ])
        expectInvalid(param: "s") { () throws(RPCError) in _ = try params.string("s") }
        expectInvalid(param: "s") { () throws(RPCError) in _ = try params.optionalString("s") }
        expectInvalid(param: "b") { () throws(RPCError) in _ = try params.optionalBool("b") }
        expectInvalid(param: "i") { () throws(RPCError) in _ = try params.optionalInteger("i") }
        expectInvalid(param: "big") { () throws(RPCError) in _ = try params.optionalInteger("big") }
        expectInvalid(param: "r") { () throws(RPCError) in _ = try params.optionalNumber("r") }
        expectInvalid(param: "o") { () throws(RPCError) in _ = try params.optionalObject("o") }
        expectInvalid(param: "l") { () throws(RPCError) in _ = try params.optionalStringArray("l") }
        expectInvalid(param: "notList") { () throws(RPCError) in _ = try params.optionalStringArray("notList") }
        expectInvalid(param: "choice") { () throws(RPCError) in _ = try params.optionalChoice("choice", as: Priority.self) }
        expectInvalid(param: "choiceType") { () throws(RPCError) in _ = try params.optionalChoice("choiceType", as: Priority.self) }
    }

    @Test func rangesAreEnforced() throws {
        let params = NamedParams(["count": 11, "ratio": 1.5, "ok": 10, "edge": 0])
        expectInvalid(param: "count") { () throws(RPCError) in _ = try params.optionalInteger("count", range: 0...10) }
        expectInvalid(param: "ratio") { () throws(RPCError) in _ = try params.optionalNumber("ratio", range: 0...1) }
        #expect(try params.optionalInteger("ok", range: 0...10) == 10)
        #expect(try params.optionalNumber("edge", range: 0...1) == 0)
    }

    @Test func typeErrorsThroughTheDispatcherCarryTheParam() {
        // Given requests whose params have the wrong types
        let cases: [(params: String, param: String)] = [
            (#"{"count":1}"#, "text"),
            (#"{"text":5}"#, "text"),
            (#"{"text":"t","count":"3"}"#, "count"),
            (#"{"text":"t","count":11}"#, "count"),
            (#"{"text":"t","count":2.5}"#, "count"),
            (#"{"text":"t","ratio":2}"#, "ratio"),
            (#"{"text":"t","flag":"yes"}"#, "flag"),
            (#"{"text":"t","object":[]}"#, "object"),
            (#"{"text":"t","list":[1]}"#, "list"),
        ]
        let dispatcher = makeDispatcher()
        for (params, param) in cases {
            // When each is received
            let sent = exchange(#"{"jsonrpc":"2.0","id":1,"method":"typed","params":\#(params)}"#, dispatcher)

            // Then the answer is -32602 naming the param
            #expect(errorCode(sent.first) == -32602, "\(params)")
            #expect(sent.first?["error"]?["data"] == ["param": .string(param)], "\(params)")
            #expect(sent.first?["id"] == 1)
        }
        let good = exchange(
            #"{"jsonrpc":"2.0","id":1,"method":"typed","params":{"text":"t","count":10,"ratio":0.5,"flag":true,"object":{},"list":["a"]}}"#,
            dispatcher)
        #expect(good.first?["result"] == true)
    }

    @Test func errorObjectsEncode() {
        #expect(RPCError(.methodNotFound, "m").json == ["code": -32601, "message": "m"])
        #expect(RPCError.invalidRequest("bad", data: [1]).json == ["code": -32600, "message": "bad", "data": [1]])
        #expect(ErrorCode(rawValue: -32000).description == "-32000")
        #expect(Dispatcher.errorResponse(id: 5, RPCError(.parseError, "p")) == ["jsonrpc": "2.0", "id": 5, "error": ["code": -32700, "message": "p"]])
    }
}

private enum Priority: String {
    case high, normal, low
}

/// `NamedParams` finds a param by name whether it compares the names given
/// (a few) or hashes the one asked for (many).
@Suite(.timeLimit(.minutes(1)))
struct NamedParamsTests {
    @Test(arguments: [1, 2, 8, 9, 40])
    func everyGivenParamIsFoundAndNoOther(count: Int) {
        let members = Dictionary(uniqueKeysWithValues: (0..<count).map { ("p\($0)", JSON.integer(Int64($0))) })
        let named = NamedParams(members)
        for index in 0..<count { #expect(named["p\(index)"] == .integer(Int64(index))) }
        #expect(named["p\(count)"] == nil)
        #expect(named["P0"] == nil)
        #expect(!named.has("absent"))
    }

    @Test func namesAreComparedAsStringsAre() {
        // "é" precomposed and decomposed are one name to a dictionary.
        let named = NamedParams(["caf\u{E9}": .bool(true)])
        #expect(named["cafe\u{301}"] == .bool(true))
    }
}
