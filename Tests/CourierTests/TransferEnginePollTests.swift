import Curl
import Foundation
import Locking
import Testing

@testable import Courier

/// The engine's poll asks the system only when there is something to wait
/// for: right after a transfer starts libcurl has work due, and the next
/// turn does it at once.
@Suite(.timeLimit(.minutes(1)))
struct TransferEnginePollTests {
    private final class Observer: TransferObserver {
        let result = Locked<TransferResult?>(nil)
        func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool { true }
        func transferDidReceiveData(_ transfer: Transfer, received: Int64, textLength: Int64?, expected: Int64?) -> Bool { true }
        func transferDidComplete(_ transfer: Transfer, _ result: TransferResult) { self.result.withLock { $0 = result } }
    }

    @Test func aTransferJustStartedIsTurnedAgainWithoutAPoll() throws {
        let directory = NSTemporaryDirectory() + "courier-engine-poll-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: directory + "/source"))
        let engine = TransferEngine(logger: .init(label: "test")) { _, _, _ in }
        defer { engine.cleanup() }

        // Given an idle engine, whose poll waits (a millisecond here)
        #expect(engine.poll(until: MonotonicClock.now() + 0.001))

        // When a transfer starts
        var options = EasyOptions(url: "file://" + directory + "/source")
        options.protocols = "file"
        let observer = Observer()
        let body = BodyTarget(directory: try DirectoryHandle(opening: directory), name: "body.part", mode: 0o600)
        engine.start(Transfer(id: TransferID(task: TaskID(1), attempt: 1), options: options, body: body, observer: observer))

        // Then the poll returns without waiting, however far its deadline
        #expect(!engine.poll(until: MonotonicClock.now() + 30))
        // And the next turn runs the transfer to its end
        engine.turn()
        let result = try #require(observer.result.withLock { $0 })
        #expect(result.failure == nil && result.size == 100)
    }
}
