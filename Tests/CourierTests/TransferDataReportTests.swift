import Curl
import Dispatch
import Foundation
import JSON
import Locking
import Testing

@testable import Courier

/// How a transfer tells its observer about the bytes it wrote: at once for
/// the first piece, then once per turn of the engine and every
/// `Transfer.reportStride` bytes rather than once per 16 KiB piece libcurl
/// hands over, with the whole count known before the transfer completes.
@Suite(.timeLimit(.minutes(1)))
struct TransferDataReportTests {
    /// Records what a transfer reports; says stop to data when `stops`.
    private final class Recorder: TransferObserver {
        struct Seen {
            var reports: [Int64] = []
            var textLengths: [Int64?] = []
            var receivedAtCompletion: Int64?
            var result: TransferResult?
        }

        let seen = Locked(Seen())
        let stops: Bool

        init(stops: Bool) { self.stops = stops }

        func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool { true }

        func transferDidReceiveData(_ transfer: Transfer, received: Int64, textLength: Int64?, expected: Int64?) -> Bool {
            seen.withLock { seen in
                seen.reports.append(received)
                seen.textLengths.append(textLength)
            }
            return !stops
        }

        func transferDidComplete(_ transfer: Transfer, _ result: TransferResult) {
            seen.withLock { seen in
                seen.receivedAtCompletion = seen.reports.last
                seen.result = result
            }
        }
    }

    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-transfer-report-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    /// Transfers the file at `source` (through `file://`) into `directory`.
    private func transfer(
        _ source: String, into directory: String, countsText: Bool = false, copyLimit: Int = 0, observer: Recorder
    ) throws -> Recorder.Seen {
        var options = EasyOptions(url: "file://" + source)
        options.protocols = "file"
        let target = BodyTarget(directory: try DirectoryHandle(opening: directory), name: "body.part", mode: 0o600)
        // The test's thread is the engine's: it turns the engine until the
        // transfer completes, taking the body writer's word that a file is
        // closed as the engine's thread takes it from its inbox.
        let flushes = EngineInbox<(TransferID, TransferFailure?, UInt64)>()
        let engine = TransferEngine(waker: flushes.waker, logger: .init(label: "test")) { flushes.send(($0, $1, $2)) }
        defer { engine.cleanup() }
        engine.start(
            Transfer(
                id: TransferID(task: TaskID(1), attempt: 1), options: options, body: target, copyLimit: copyLimit,
                countsText: countsText, observer: observer))
        let deadline = MonotonicClock.now() + 20
        while observer.seen.withLock({ $0.result == nil }), MonotonicClock.now() < deadline {
            for (id, failure, checksum) in flushes.take() { engine.flushed(id, failure: failure, checksum: checksum) }
            engine.turn()
            engine.poll()
        }
        #expect(observer.seen.withLock { $0.result != nil }, "the transfer completes within 20 s")
        return observer.seen.withLock { $0 }
    }

    @Test func aBodyIsReportedPerTurnAndWhollyBeforeItCompletes() throws {
        try withDirectory { directory in
            // Given a 1 MiB body, which libcurl hands over in 64 pieces of 16 KiB
            let size = 1 << 20
            let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            try Data(body).write(to: URL(fileURLWithPath: directory + "/source"))

            // When it is transferred
            let seen = try transfer(directory + "/source", into: directory, observer: Recorder(stops: false))

            // Then the observer heard of it in fewer reports than pieces, the counts growing
            #expect(!seen.reports.isEmpty && seen.reports.count < size / (16 << 10))
            #expect(seen.reports == seen.reports.sorted() && Set(seen.reports).count == seen.reports.count)
            // And the last report, made before completion, is the whole body
            #expect(seen.receivedAtCompletion == Int64(size))
            let result = try #require(seen.result)
            #expect(result.failure == nil, "\(String(describing: result.failure))")
            #expect(result.size == Int64(size) && result.checksum == XXH3.hash(body))
            #expect(try Data(contentsOf: URL(fileURLWithPath: directory + "/body.part")) == Data(body))
        }
    }

    @Test(arguments: [100 << 10, 256 << 10, (256 << 10) + 1, 3 << 20 + 12345])
    func bodiesOnEitherSideOfTheWritersLimitLandWhole(size: Int) throws {
        try withDirectory { directory in
            // Given a body written by the engine's thread (up to the limit) or by the body writer
            let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }
            try Data(body).write(to: URL(fileURLWithPath: directory + "/source"))

            // When it is transferred
            let seen = try transfer(directory + "/source", into: directory, observer: Recorder(stops: false))

            // Then the file holds it whole, and the result's size and checksum are its own
            let result = try #require(seen.result)
            #expect(result.failure == nil, "\(String(describing: result.failure))")
            #expect(result.size == Int64(size) && result.checksum == XXH3.hash(body))
            #expect(try Data(contentsOf: URL(fileURLWithPath: directory + "/body.part")) == Data(body))
        }
    }

    @Test(arguments: [0, 100, 64 << 10, (64 << 10) + 1, 100 << 10, 300 << 10])
    func theFirstBytesComeWithTheBodyHeldInMemoryOrWithout(size: Int) throws {
        try withDirectory { directory in
            // Given a body within a 64 KiB copy limit, or past it
            let limit = 64 << 10
            let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 9) }
            try Data(body).write(to: URL(fileURLWithPath: directory + "/source"))

            // When it is transferred
            let seen = try transfer(directory + "/source", into: directory, copyLimit: limit, observer: Recorder(stops: false))

            // Then the result holds its first bytes, and the whole body when it stayed within the limit
            let result = try #require(seen.result)
            #expect(result.failure == nil, "\(String(describing: result.failure))")
            #expect(result.head == Array(body.prefix(ImageInfo.sniffLength)))
            #expect(result.bytes == (size <= limit ? body : nil))
            // And its checksum is the body's, whether hashed whole at the end or as it came
            #expect(result.size == Int64(size) && result.checksum == XXH3.hash(body))
        }
    }

    @Test func theFirstBytesAndEveryStrideAreReportedAtOnceSoAStopLandsNearItsLimit() throws {
        try withDirectory { directory in
            // Given a 4 MiB body, more than one report stride, and an observer that stops it
            try Data(repeating: 2, count: 4 << 20).write(to: URL(fileURLWithPath: directory + "/source"))

            // When it is transferred
            let seen = try transfer(directory + "/source", into: directory, observer: Recorder(stops: true))

            // Then the observer heard of the first piece alone, and nothing after it said stop
            #expect(seen.reports == [16 << 10])
            #expect(seen.result?.failure?.code == .cancelled)
        }
    }

    @Test func aLongTurnIsReportedEveryStride() throws {
        try withDirectory { directory in
            let size = 4 << 20
            try Data(repeating: 3, count: size).write(to: URL(fileURLWithPath: directory + "/source"))
            let seen = try transfer(directory + "/source", into: directory, observer: Recorder(stops: false))
            // Reports come at least once per stride and piece (libcurl's pieces are at most 16 KiB)
            let steps = zip(seen.reports.dropFirst(), seen.reports).map { $0 - $1 }
            #expect(seen.reports.first == 16 << 10)
            #expect(steps.allSatisfy { $0 > 0 && $0 < Transfer.reportStride + (16 << 10) }, "\(steps)")
            #expect(seen.reports.last == Int64(size))
        }
    }

    @Test func aTransferAskedToCountTextReportsWhatItsBodyTakesAsAJSONString() throws {
        try withDirectory { directory in
            // Given a body of controls, quotes and a character cut between pieces
            let body = [UInt8](repeating: 1, count: 100_000) + Array(#""é✓""#.utf8) + [UInt8](repeating: 0x41, count: 200_000)
            try Data(body).write(to: URL(fileURLWithPath: directory + "/source"))

            // When it is transferred with and without counting
            let counted = try transfer(directory + "/source", into: directory, countsText: true, observer: Recorder(stops: false))
            let plain = try transfer(directory + "/source", into: directory, observer: Recorder(stops: false))

            // Then every report carries the length so far, the last that of the whole
            #expect(counted.textLengths.last == JSONStringLength(of: body).count)
            #expect(counted.textLengths.allSatisfy { $0 != nil })
            #expect(plain.textLengths.allSatisfy { $0 == nil })
        }
    }

    @Test func anObserverThatSaysStopFailsTheTransfer() throws {
        try withDirectory { directory in
            // Given an observer that stops the transfer when it hears of data
            try Data(repeating: 1, count: 300_000).write(to: URL(fileURLWithPath: directory + "/source"))

            // When the body is transferred
            let seen = try transfer(directory + "/source", into: directory, observer: Recorder(stops: true))

            // Then it ends cancelled, without a body file
            let result = try #require(seen.result)
            #expect(result.failure?.code == .cancelled)
            #expect(result.bodyPath == nil)
            #expect(!FileManager.default.fileExists(atPath: directory + "/body.part"))
        }
    }
}
