import Dispatch
import Foundation
import JSONRPC
import Logging
import Testing
import Locking

/// What `around` saw: how many times it ran, and whether every request
/// was handled inside it.
private struct Scopes: Sendable {
    var entered = 0
    var depth = 0
    var handledOutside = 0
    var handled = 0
}

/// Each message a connection reads is handled inside the `around` its
/// owner gives (the server's lookups of one message share a read there).
@Suite(.timeLimit(.minutes(1)))
struct ConnectionMessageScopeTests {
    @Test func eachMessageIsHandledInsideAroundOnce() throws {
        signal(SIGPIPE, SIG_IGN)
        let input = Pipe(capacity: 64 << 10)
        let output = Pipe(capacity: 64 << 10)
        defer {
            input.close()
            output.close()
        }
        let scopes = Locked(Scopes())
        let dispatcher = Dispatcher(logger: Logger(label: "courier.tests.message-scope"))
        dispatcher.register("probe") { _, reply in
            scopes.withLock { scopes in
                scopes.handled += 1
                if scopes.depth != 1 { scopes.handledOutside += 1 }
            }
            reply.success(.null)
        }
        let connection = Connection(
            input: input.readEnd, output: output.writeEnd, mode: .ndjson, maxMessageBytes: 1 << 20,
            logger: Logger(label: "courier.tests.message-scope"))
        let ended = DispatchSemaphore(value: 0)
        connection.start(
            dispatcher: dispatcher,
            handlingEachMessage: { body in
                scopes.withLock {
                    $0.entered += 1
                    $0.depth += 1
                }
                body()
                scopes.withLock { $0.depth -= 1 }
            }
        ) { ended.signal() }

        // When the client sends a batch of three requests, then one alone, and closes its end
        let probe = #"{"jsonrpc":"2.0","id":1,"method":"probe"}"#
        let messages = "[\(probe),\(probe),\(probe)]\n\(probe)\n"
        let written = messages.utf8.withContiguousStorageIfAvailable { write(input.writeEnd, $0.baseAddress, $0.count) }
        #expect(written == messages.utf8.count)
        input.closeWriteEnd()
        #expect(ended.wait(timeout: .now() + 10) == .success)

        // Then each message was handled inside `around`, once
        let seen = scopes.withLock { $0 }
        #expect(seen.entered == 2 && seen.handled == 4 && seen.handledOutside == 0 && seen.depth == 0)
    }
}
