import Dispatch
import Foundation
import JSON
import JSONRPC
import Logging
import Testing
import Locking

/// Counts the requests a handler has seen and signals each one.
private final class Handled: Sendable {
    private let count = Locked(0)
    private let arrived = DispatchSemaphore(value: 0)

    func add() {
        count.withLock { $0 += 1 }
        arrived.signal()
    }

    var value: Int { count.withLock { $0 } }

    /// Waits for one more request; false when none comes within `timeout` seconds.
    func waitForOne(timeout: Double) -> Bool {
        arrived.wait(timeout: .now() + timeout) == .success
    }
}

@Suite("Connection: no request is read while the client leaves its answers unread", .timeLimit(.minutes(1)))
struct ConnectionBackpressureTests {
    @Test("reading pauses above the high-water mark and resumes once the client reads")
    func pausesAndResumes() throws {
        signal(SIGPIPE, SIG_IGN)
        // Given a connection whose answers are 16 KiB each, with marks at 64 and 16 KiB
        let input = Pipe(capacity: 64 << 10)
        let output = Pipe(capacity: 4096)
        defer {
            input.close()
            output.close()
        }
        let handled = Handled()
        let dispatcher = Dispatcher(logger: Logger(label: "courier.tests.backpressure"))
        let answer = String(repeating: "x", count: 16 << 10)
        dispatcher.register("big") { _, reply in
            handled.add()
            reply.success(.string(answer))
        }
        let connection = Connection(
            input: input.readEnd, output: output.writeEnd, mode: .ndjson, maxMessageBytes: 1 << 20,
            outputHighWater: 64 << 10, outputLowWater: 16 << 10, logger: Logger(label: "courier.tests.backpressure"))
        let ended = DispatchSemaphore(value: 0)
        connection.start(dispatcher: dispatcher) { ended.signal() }

        // When the client sends 64 requests and reads nothing
        let total = 64
        let requests = (1...total).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"big"}"# + "\n" }.joined()
        let written = requests.utf8.withContiguousStorageIfAvailable { write(input.writeEnd, $0.baseAddress, $0.count) }
        #expect(written == requests.utf8.count)

        // Then courier answers only until more than 64 KiB wait (four answers), then stops reading
        for _ in 0..<4 { #expect(handled.waitForOne(timeout: 10)) }
        #expect(!handled.waitForOne(timeout: 0.5))
        #expect(handled.value == 4)
        #expect(connection.queuedOutputBytes > 64 << 10)

        // When the client reads every answer
        var lines: [JSON] = []
        var buffer: [UInt8] = []
        while lines.count < total {
            let chunk = output.readSome(1 << 16)
            if chunk.isEmpty { break }
            buffer += chunk
            while let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(try JSONCodec.decode(Array(buffer[..<end])))
                buffer.removeSubrange(...end)
            }
        }

        // Then every request was answered, in order
        #expect(handled.value == total)
        #expect(lines.map { $0["id"] } == (1...total).map { Optional(JSON.integer(Int64($0))) })
        #expect(lines.allSatisfy { $0["result"] == .string(answer) })
        #expect(connection.flush(timeout: 10))
        #expect(connection.queuedOutputBytes == 0)

        // When the client closes its input, the connection ends
        input.closeWriteEnd()
        #expect(ended.wait(timeout: .now() + 10) == .success)
    }
}
