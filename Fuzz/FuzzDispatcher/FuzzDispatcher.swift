import CFuzzDriver
import Foundation
import JSON
import JSONRPC
import Logging
import Synchronization

/// A libFuzzer harness: the bytes are one message as the framer hands it over.
///
/// Properties, judged against the JSON-RPC 2.0 text rather than against the
/// dispatcher's own code: each response is a valid response object; a
/// notification or a client's response gets no answer; anything else one;
/// a valid request's answer carries its id; a batch is answered with one
/// array holding one response per element that is not a notification, or
/// not at all when every element is one.
@main
enum FuzzDispatcher {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            guard let data else { return 0 }
            return fuzzDispatcher(data, size)
        })
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDispatcher(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let sink = Sink()
    dispatcher.receive(bytes, to: sink)
    let sent = sink.messages
    let parsed = try? JSONCodec.decode(bytes)

    func fail(_ problem: String) -> Never {
        fatalError("\(problem); input \(String(decoding: bytes, as: UTF8.self)) (\(bytes)); sent \(sent)")
    }

    for message in sent {
        guard let text = try? JSONCodec.decode(JSONCodec.encode(message)), text == message else {
            fail("a response does not survive encoding")
        }
    }
    guard let parsed else {
        guard sent.count == 1, let problem = validResponse(sent[0]) == nil ? sent[0]["error"] : nil,
            problem["code"] == .integer(-32700), sent[0]["id"] == .null
        else { fail("a parse error must get one -32700 response with id null") }
        return 0
    }
    if case .array(let elements) = parsed, !elements.isEmpty {
        let answered = elements.filter { expectation($0) != .none }
        if answered.isEmpty {
            if !sent.isEmpty { fail("a batch of notifications must get no response") }
            return 0
        }
        guard sent.count == 1, case .array(let responses) = sent[0], responses.count == answered.count else {
            fail("a batch must get one array with \(answered.count) responses")
        }
        for (element, response) in zip(answered, responses) {
            check(response, answering: element, fail: fail)
        }
        return 0
    }
    if case .array = parsed {
        guard sent.count == 1, sent[0]["error"]?["code"] == .integer(-32600) else {
            fail("an empty batch must get one -32600 response")
        }
        return 0
    }
    if expectation(parsed) == .none {
        if !sent.isEmpty { fail("a notification or a response must get no answer") }
        return 0
    }
    guard sent.count == 1 else { fail("a request must get exactly one response") }
    check(sent[0], answering: parsed, fail: fail)
    return 0
}

/// Responses of a batch arrive in the order of its elements.
private func check(_ response: JSON, answering message: JSON, fail: (String) -> Never) {
    if let problem = validResponse(response) { fail(problem) }
    if case .id(let id) = expectation(message), response["id"] != id {
        fail("the response's id \(String(describing: response["id"])) is not the request's \(id)")
    }
}

private enum Expectation: Equatable {
    /// No response: a notification, or a response from the client.
    case none
    /// A response with this id.
    case id(JSON)
    /// A response whose id the spec leaves to the server (null, or the id
    /// when it could be read).
    case some
}

/// What JSON-RPC 2.0 asks of a server for one message.
private func expectation(_ message: JSON) -> Expectation {
    guard case .object(let members) = message else { return .some }
    let idIsValid: Bool
    switch members["id"] {
    case nil, .string?, .integer?, .double?, .null?: idIsValid = true
    default: idIsValid = false
    }
    if members["method"] == nil, members["result"] != nil || members["error"] != nil, idIsValid { return .none }
    let paramsValid: Bool
    switch members["params"] {
    case nil, .null?, .array?, .object?: paramsValid = true
    default: paramsValid = false
    }
    guard members["jsonrpc"] == "2.0", members["method"]?.stringValue != nil, paramsValid, idIsValid else {
        return .some
    }
    guard let id = members["id"] else { return .none }
    return .id(id)
}

/// Nil when `response` is a valid JSON-RPC 2.0 response object.
private func validResponse(_ response: JSON) -> String? {
    guard case .object(let members) = response else { return "a response must be an object" }
    guard members["jsonrpc"] == "2.0" else { return "a response must say jsonrpc 2.0" }
    switch members["id"] {
    case .string?, .integer?, .double?, .null?: break
    default: return "a response's id must be a string, a number or null"
    }
    switch (members["result"], members["error"]) {
    case (_?, nil):
        break
    case (nil, let error?):
        guard case .integer = error["code"], error["message"]?.stringValue != nil else {
            return "an error must have an integer code and a string message"
        }
    default:
        return "a response must have exactly one of result and error"
    }
    let known: Set<String> = ["jsonrpc", "id", "result", "error"]
    if let extra = members.keys.first(where: { !known.contains($0) }) { return "a response has a stray member \(extra)" }
    return nil
}

/// Keeps what the dispatcher sends. Answers waiting for their batch may take
/// 64 KiB, so large batches also reach the answers that stand in for those
/// past the room.
private final class Sink: AnswerSink {
    private let sent = Mutex<[JSON]>([])
    private let held = Mutex(0)
    let batchRoom = 64 << 10

    func send(_ message: JSONMessage) { sent.withLock { $0.append(try! JSONCodec.decode(message.encoded)) } }

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

    /// At once, on the thread that asks.
    func whenWriting(estimate: Int, _ work: @escaping @Sendable () -> Void) { work() }

    var messages: [JSON] { sent.withLock { $0 } }
}

private struct FuzzError: Error {}

/// Handlers of every kind a server has: answering at once, failing with an
/// RPC error, throwing another error, checking params, dropping the reply;
/// and a notification.
private let dispatcher: Dispatcher = {
    let dispatcher = Dispatcher(logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }))
    dispatcher.register("echo") { params, reply in reply.success(params.raw ?? .null) }
    dispatcher.register("initialize") { _, reply in reply.success(["capabilities": [:]]) }
    dispatcher.register("download") { params, reply in
        let named = try params.byName(allowed: ["url", "wait", "priority"])
        _ = try named.string("url")
        _ = try named.optionalBool("wait")
        _ = try named.optionalInteger("priority", range: -10...10)
        reply.success(["receipt": "r1"])
    }
    dispatcher.register("cancel") { _, _ in throw RPCError(.invalidParams, "no such receipt") }
    dispatcher.register("shutdown") { _, _ in throw FuzzError() }
    dispatcher.register("progress") { _, _ in }
    dispatcher.registerNotification("exit") { _ in }
    dispatcher.registerNotification("$/cancelRequest") { params in _ = params.raw }
    return dispatcher
}()
