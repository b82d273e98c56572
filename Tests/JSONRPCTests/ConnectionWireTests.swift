import Foundation
import JSON
@testable import JSONRPC
import Logging
import Testing

@Suite("Connection: the bytes each kind of message is written as", .timeLimit(.minutes(1)))
struct ConnectionWireTests {
    /// What `send` writes on a connection forced to `framing`, read back
    /// once the connection has flushed it.
    private static func written(in framing: Framing, _ send: (Connection) -> Void) -> [UInt8] {
        withPipedConnection(mode: framing == .lsp ? .lsp : .ndjson, label: "courier.tests.wire") { connection, output in
            send(connection)
            #expect(connection.flush(timeout: 10))
            var bytes: [UInt8] = []
            while output.isReadable(within: 0) {
                let got = output.readSome(64 << 10)
                if got.isEmpty { break }
                bytes += got
            }
            return bytes
        }
    }

    private static let params: JSON = ["received": 10, "headers": ["b": "2", "a": "1"], "text": "é\"\n"]

    @Test("notifications, answers and batch arrays are their JSON values' text, framed, in the order sent",
          arguments: [Framing.ndjson, .lsp])
    func everyKind(framing: Framing) {
        // Given a notification from a value, one written by a closure, one
        // sharing text, an answer and a batch's array, sent in turn
        let shared = SharedJSON(strings: ["b": "2", "a": "1"])
        let bytes = Self.written(in: framing) { connection in
            connection.batchingOutput {
                connection.send(notification: "first", params: Self.params)
                connection.send(notification: "second", estimate: 1, coalescingKey: "k") { object in
                    object.set("headers", strings: ["b": "2", "a": "1"])
                    object.set("received", 10)
                    object.set("text", "é\"\n")
                }
                connection.send(notification: "third", estimate: 1, sharing: shared) { object in
                    object.set("headers", shared: shared, or: [:])
                    object.set("received", 10)
                    object.set("text", "é\"\n")
                }
            }
            connection.send(["id": 7, "jsonrpc": "2.0", "result": Self.params])
            connection.sendBatch([Array(#"{"id":1}"#.utf8), Array(#"{"id":2}"#.utf8)], held: 0)
        }

        // Then each is the text its JSON value encodes to, framed
        let expected: [[UInt8]] =
            ["first", "second", "third"].map { method in
                JSONCodec.encode(["jsonrpc": "2.0", "method": .string(method), "params": Self.params])
            } + [
                JSONCodec.encode(["id": 7, "jsonrpc": "2.0", "result": Self.params]),
                Array(#"[{"id":1},{"id":2}]"#.utf8),
            ]
        #expect(String(decoding: bytes, as: UTF8.self) == String(decoding: expected.flatMap(framing.frame), as: UTF8.self))
    }
}
