import Curl
import Foundation
import Testing

@testable import Courier

/// The engine's throttle over real transfers, on a clock the test moves:
/// what it hands out follows what the client did to a transfer, even
/// before the transfer began.
@Suite struct ThrottleTests {
    private final class Ignoring: TransferObserver {
        func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool { true }
        func transferDidReceiveData(_ transfer: Transfer, received: Int64, textLength: Int64?, expected: Int64?) -> Bool {
            true
        }
        func transferDidComplete(_ transfer: Transfer, _ result: TransferResult) {}
    }

    private final class Clock {
        var now = 100.0
        /// Times the throttle asked for the time.
        var reads = 0

        func read() -> Double {
            reads += 1
            return now
        }
    }

    private static let MiB = 1 << 20

    /// A transfer of task number `task`: the throttle tells transfers apart
    /// by their ids.
    private func transfer(_ name: String, task: Int = 1, in directory: DirectoryHandle, maxRate: Int64? = nil) -> Transfer {
        Transfer(
            id: TransferID(task: TaskID(task), attempt: 1), options: EasyOptions(url: "http://127.0.0.1:9/\(name)"),
            body: BodyTarget(directory: directory, name: "\(name).part", mode: 0o600), maxRate: maxRate,
            observer: Ignoring())
    }

    private func withDirectory(_ body: (DirectoryHandle) throws -> Void) throws {
        let path = NSTemporaryDirectory() + "courier-throttle-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try body(try DirectoryHandle(opening: path))
    }

    @Test func aTransferSuspendedBeforeItBeganTakesNoShareUntilResumed() throws {
        try withDirectory { directory in try suspendedBeforeItBegan(in: directory) }
    }

    private func suspendedBeforeItBegan(in directory: DirectoryHandle) throws {
        let clock = Clock()
        let throttle = Throttle(clock: { clock.now })
        throttle.setTotalRate(Int64(Self.MiB), running: [])

        // Given a transfer the client suspended before the engine began it,
        // and another that runs
        let suspended = transfer("suspended", in: directory)
        suspended.pause()
        let running = transfer("running", task: 2, in: directory)
        throttle.add(suspended)
        throttle.add(running)

        // When a second goes by, refilled every tenth
        for _ in 0..<10 {
            clock.now += 0.1
            _ = throttle.refill()
        }

        // Then the suspended one has no credit, and the other may keep a
        // tenth of a second of the whole rate, not of half of it
        #expect(throttle.credit(of: suspended) == 0)
        let credit = try #require(throttle.credit(of: running))
        #expect(abs(credit - Double(Self.MiB) * RateLimiter<ObjectIdentifier>.burst) < 1, "\(credit)")
        #expect(!throttle.admit(suspended, bytes: 1), "a suspended transfer takes nothing")

        // When it is resumed, it shares again
        suspended.resume()
        throttle.resume(suspended)
        clock.now += 0.1
        _ = throttle.refill()
        let shares = [suspended, running].map { throttle.credit(of: $0) }
        #expect(shares.allSatisfy { $0 != nil && $0! > 0 }, "\(shares)")
    }

    @Test func aRateChangedBeforeTheTransferBeganIsTheOneItTakes() throws {
        try withDirectory { directory in
            let clock = Clock()
            let throttle = Throttle(clock: { clock.now })
            // Given a transfer made without a rate of its own, given one (as
            // the engine does when a receipt joins) before it began
            let capped = transfer("capped", in: directory)
            capped.maxRate = Int64(Self.MiB / 4)
            throttle.add(capped)
            // When a second goes by, refilled every tenth
            for _ in 0..<10 {
                clock.now += 0.1
                _ = throttle.refill()
            }
            // Then it is counted at that rate
            let credit = try #require(throttle.credit(of: capped))
            #expect(abs(credit - Double(Self.MiB / 4) * RateLimiter<ObjectIdentifier>.burst) < 1, "\(credit)")
        }
    }

    @Test func withoutAnyLimitATransferIsNeitherCountedNorTimed() throws {
        try withDirectory { directory in
            let clock = Clock()
            let throttle = Throttle(clock: clock.read)
            let readsAtStart = clock.reads
            // Given no limit at all, when a transfer begins, takes body,
            // and ends, with the engine's turns between
            let free = transfer("free", in: directory)
            throttle.add(free)
            for _ in 0..<3 {
                #expect(throttle.admit(free, bytes: 8192))
                #expect(throttle.refill().isEmpty)
                #expect(throttle.millisecondsToRefill == nil)
            }
            throttle.suspend(free)
            throttle.resume(free)
            // Then it was never counted, and the clock never read
            #expect(throttle.credit(of: free) == nil)
            throttle.remove(free)
            #expect(clock.reads == readsAtStart, "\(clock.reads - readsAtStart) clock reads")
        }
    }

    @Test func aTotalRateSetWhileTransfersRunCountsThemFromThen() throws {
        try withDirectory { directory in
            let clock = Clock()
            let throttle = Throttle(clock: clock.read)
            // Given two transfers that began without any limit, one of them
            // suspended by the client
            let running = transfer("running", in: directory)
            let suspended = transfer("suspended", task: 2, in: directory)
            suspended.pause()
            throttle.add(running)
            throttle.add(suspended)
            // When a rate for all of them is set, and a second goes by
            throttle.setTotalRate(Int64(Self.MiB), running: [running, suspended])
            for _ in 0..<10 {
                clock.now += 0.1
                _ = throttle.refill()
            }
            // Then the running one is counted at the whole rate, the
            // suspended one takes no share
            let credit = try #require(throttle.credit(of: running))
            #expect(abs(credit - Double(Self.MiB) * RateLimiter<ObjectIdentifier>.burst) < 1, "\(credit)")
            #expect(throttle.credit(of: suspended) == 0)
            #expect(!throttle.admit(suspended, bytes: 1))
        }
    }

    @Test func aRateGivenToATransferThatBeganFreeCountsIt() throws {
        try withDirectory { directory in
            let clock = Clock()
            let throttle = Throttle(clock: clock.read)
            // Given a transfer that began without any limit
            let capped = transfer("capped", in: directory)
            throttle.add(capped)
            // When it is given a rate of its own (a receipt with a maxRate
            // joined), and a second goes by
            capped.maxRate = Int64(Self.MiB / 4)
            throttle.setRate(capped.maxRate, of: capped, isRunning: true)
            for _ in 0..<10 {
                clock.now += 0.1
                _ = throttle.refill()
            }
            // Then it is counted at that rate
            let credit = try #require(throttle.credit(of: capped))
            #expect(abs(credit - Double(Self.MiB / 4) * RateLimiter<ObjectIdentifier>.burst) < 1, "\(credit)")
        }
    }
}
