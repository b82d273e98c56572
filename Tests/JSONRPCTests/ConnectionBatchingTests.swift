import Dispatch
import Foundation
import JSON
import JSONRPC
import Logging
import Testing

/// Reads until `count` lines have come, or none comes for five seconds.
private func lines(_ count: Int, from pipe: Pipe) -> [String] {
    var bytes: [UInt8] = []
    while bytes.count(where: { $0 == UInt8(ascii: "\n") }) < count, pipe.isReadable(within: 5) {
        let got = pipe.readSome(4096)
        if got.isEmpty { break }
        bytes += got
    }
    return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
}

@Suite("Connection: a thread's output held back inside batchingOutput", .timeLimit(.minutes(1)))
struct ConnectionBatchingTests {
    /// Runs `body` with a connection and the pipe its output goes to.
    private static func withConnection(_ body: (Connection, Pipe) -> Void) {
        withPipedConnection(label: "courier.tests.batching", body)
    }

    @Test("messages wait for the end of the outermost batchingOutput, not of a nested one")
    func heldUntilOutermostEnds() {
        Self.withConnection { connection, output in
            // Given a thread that sends inside a batchingOutput and a nested one
            connection.batchingOutput {
                connection.send(notification: "first", params: .null)
                connection.batchingOutput { connection.send(notification: "second", params: .null) }
                // Then nothing is written while the outer one runs
                #expect(!output.isReadable(within: 0.3))
            }
            // When it ends, both are written, in order
            let written = lines(2, from: output)
            #expect(written.count == 2)
            #expect(written.first?.contains(#""method":"first""#) == true)
            #expect(written.last?.contains(#""method":"second""#) == true)
        }
    }

    @Test("another thread's message goes out at once, and the held ones with it, in order")
    func otherThreadsAreNotHeld() {
        Self.withConnection { connection, output in
            connection.batchingOutput {
                // Given a message held back by this thread
                connection.send(notification: "held", params: .null)
                // When another thread sends one meanwhile
                let sent = DispatchSemaphore(value: 0)
                DispatchQueue.global().async {
                    connection.send(notification: "other", params: .null)
                    sent.signal()
                }
                #expect(sent.wait(timeout: .now() + 5) == .success)
                // Then both are written before this thread's batch ends
                let written = lines(2, from: output)
                #expect(written.count == 2)
                #expect(written.first?.contains(#""method":"held""#) == true)
                #expect(written.last?.contains(#""method":"other""#) == true)
            }
        }
    }
}
