import Dispatch
import Foundation
import Locking
import Testing

@testable import Courier

/// The body writer writes what the engine hands over in order, waits when
/// its queue is full instead of failing, closes a file only after its last
/// piece, and reports the first failed write.
@Suite(.timeLimit(.minutes(1)))
struct BodyWriterTests {
    private func withFile(_ body: (String) throws -> Void) rethrows {
        let path = NSTemporaryDirectory() + "courier-body-writer-\(getpid())-\(UUID().uuidString)"
        defer { unlink(path) }
        try body(path)
    }

    /// Closes `stream` and waits for the writer to say it is closed.
    private func close(_ stream: BodyWriter.Stream, on writer: BodyWriter) -> TransferFailure?? {
        let closed = Locked<TransferFailure??>(nil)
        let done = DispatchSemaphore(value: 0)
        writer.close(stream) { failure in
            closed.withLock { $0 = .some(failure) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 20) == .success else { return nil }
        return closed.withLock { $0 }
    }

    @Test func piecesAreWrittenInTheOrderTheyWereHandedOver() throws {
        try withFile { path in
            // Given a writer whose queue holds less than what will be handed over
            let writer = BodyWriter(queueLimit: 64 << 10)
            defer { writer.stop() }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            try #require(fd >= 0)
            let stream = BodyWriter.Stream(fd: fd, path: path)

            // When pieces of different sizes and contents are handed over, some filling the queue
            var expected: [UInt8] = []
            for index in 0..<60 {
                var piece = writer.buffer()
                piece.append(contentsOf: repeatElement(UInt8(index), count: 1 + (index * 7919) % (40 << 10)))
                expected += piece
                writer.write(piece, to: stream)
            }

            // Then once the stream is closed the file holds them all, in order, and no failure is reported
            let closed = try #require(close(stream, on: writer))
            #expect(closed == nil)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(expected))
        }
    }

    @Test func aFailedWriteIsReportedWithThePathAndNothingAfterItIsWritten() throws {
        try withFile { path in
            // Given a stream over a file opened only for reading
            let writer = BodyWriter()
            defer { writer.stop() }
            FileManager.default.createFile(atPath: path, contents: Data())
            let fd = open(path, O_RDONLY)
            try #require(fd >= 0)
            let stream = BodyWriter.Stream(fd: fd, path: path)

            // When bytes are handed over for it
            writer.write([1, 2, 3], to: stream)
            writer.write([4, 5, 6], to: stream)

            // Then closing it reports an `io` failure naming the file, and the file stays empty
            let closed = try #require(close(stream, on: writer))
            let failure = try #require(closed)
            #expect(failure.code == .io)
            #expect(failure.message.contains(path))
            #expect(stream.failure?.code == .io)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).isEmpty)
        }
    }
}
