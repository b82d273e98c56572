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

    /// Closes `stream` and waits for the writer to say it is closed: the
    /// failure it reports and the checksum.
    private func close(_ stream: BodyWriter.Stream, on writer: BodyWriter) -> (TransferFailure?, UInt64)? {
        let closed = Locked<(TransferFailure?, UInt64)?>(nil)
        let done = DispatchSemaphore(value: 0)
        writer.close(stream) { failure, checksum in
            closed.withLock { $0 = (failure, checksum) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 20) == .success else { return nil }
        return closed.withLock { $0 }
    }

    @Test func piecesAreWrittenInTheOrderTheyWereHandedOverAndHashedAfterWhatCameBefore() throws {
        try withFile { path in
            // Given a writer whose queue holds less than what will be handed over
            let writer = BodyWriter(queueLimit: 64 << 10)
            defer { writer.stop(waiting: 5) }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            try #require(fd >= 0)
            // And a body whose first bytes the engine wrote and hashed itself
            let first: [UInt8] = Array("the engine's own bytes".utf8)
            try #require(write(fd, first, first.count) == first.count)
            let hashed = XXH3()
            hashed.update(first)
            let digests = try #require(BodyHasher([.sha256, .sha512]))
            digests.update(first)
            let stream = BodyWriter.Stream(fd: fd, path: path, hashed: hashed.state, digesting: digests)

            // When pieces of different sizes and contents are handed over, some filling the queue
            var expected: [UInt8] = first
            for index in 0..<60 {
                var piece = writer.buffer()
                piece.append(contentsOf: repeatElement(UInt8(index), count: 1 + (index * 7919) % (40 << 10)))
                expected += piece
                writer.write(piece, to: stream)
            }

            // Then once the stream is closed the file holds them all, in order, after the first bytes
            let (failure, checksum) = try #require(close(stream, on: writer))
            #expect(failure == nil)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(expected))
            // And the checksum and the digests are the whole body's
            #expect(checksum == XXH3.hash(expected))
            #expect(stream.finalizeDigests() == BodyDigests.of(expected, [.sha256, .sha512]))
        }
    }

    @Test func aFailedWriteIsReportedWithThePathAndNothingAfterItIsWritten() throws {
        try withFile { path in
            // Given a stream over a file opened only for reading
            let writer = BodyWriter()
            defer { writer.stop(waiting: 5) }
            FileManager.default.createFile(atPath: path, contents: Data())
            let fd = open(path, O_RDONLY)
            try #require(fd >= 0)
            let stream = BodyWriter.Stream(fd: fd, path: path)

            // When bytes are handed over for it
            writer.write([1, 2, 3], to: stream)
            writer.write([4, 5, 6], to: stream)

            // Then closing it reports an `io` failure naming the file, and the file stays empty
            let (closed, _) = try #require(close(stream, on: writer))
            let failure = try #require(closed)
            #expect(failure.code == .io)
            #expect(failure.message.contains(path))
            #expect(stream.failure?.code == .io)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).isEmpty)
        }
    }

    @Test func checkpointsComeAtEachIntervalWithTheChecksumOfTheBytesUpToThem() throws {
        try withFile { path in
            // Given a stream over a file that holds 10 bytes already, checkpointing every 64 KiB
            let writer = BodyWriter()
            defer { writer.stop(waiting: 5) }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            try #require(fd >= 0)
            let first = [UInt8](repeating: 1, count: 10)
            try #require(write(fd, first, first.count) == first.count)
            let hashed = XXH3()
            hashed.update(first)
            let reached = Locked<[(Int64, UInt64)]>([])
            let stream = BodyWriter.Stream(
                fd: fd, path: path, hashed: hashed.state, written: 10, checkpointInterval: 64 << 10,
                checkpoint: { length, checksum in reached.withLock { $0.append((length, checksum)) } })

            // When 200 KiB are handed over in pieces of 40 KiB
            var body = first
            for index in 0..<5 {
                let piece = [UInt8](repeating: UInt8(index + 2), count: 40 << 10)
                body += piece
                writer.write(piece, to: stream)
            }
            _ = try #require(close(stream, on: writer))

            // Then a checkpoint came at the first piece past each 64 KiB, with the checksum of everything up to it
            let checkpoints = reached.withLock { $0 }
            let kib: Int64 = 1 << 10
            let expected: [Int64] = [10 + 80 * kib, 10 + 160 * kib, 10 + 200 * kib]
            #expect(checkpoints.map(\.0) == expected)
            for (length, checksum) in checkpoints {
                #expect(checksum == XXH3.hash(Array(body[..<Int(length)])))
            }
            // And the stream knows how much it wrote
            #expect(stream.snapshot().written == Int64(body.count))
        }
    }
}
