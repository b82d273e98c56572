import Dispatch
import Foundation
@testable import JSONRPC
import Testing
import Locking

private func message(_ tag: String, size: Int) -> [UInt8] {
    let head = Array("\(tag):".utf8)
    return head + [UInt8](repeating: UInt8(ascii: "x"), count: size - head.count - 1) + [UInt8(ascii: "\n")]
}

/// Which threads ran the encoders.
private final class EncoderThreads: Sendable {
    private let threads = Locked<Set<UInt>>([])

    func note() { threads.withLock { _ = $0.insert(UInt(pthread_self())) } }

    var all: Set<UInt> { threads.withLock { $0 } }
}

@Suite("OutputChannel: messages encoded on the writer's thread", .timeLimit(.minutes(1)))
struct OutputChannelDeferredTests {
    @Test("messages to encode keep their place among ready ones and are encoded off the sender's thread")
    func orderAndThread() throws {
        // Given ready and unencoded messages, interleaved and held back
        let pipe = Pipe()
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 1 << 20)
        let messages = (0..<20).map { message("m\($0)", size: 500 + $0) }
        let encoders = EncoderThreads()
        for (index, bytes) in messages.enumerated() {
            if index % 2 == 0 {
                channel.enqueue(bytes, wake: false)
            } else {
                channel.enqueue(estimate: 10, wake: false) { buffer in
                    encoders.note()
                    buffer += bytes
                }
            }
        }

        // Then nothing is encoded before the writer is woken
        #expect(encoders.all.isEmpty)

        // When the writer is woken and the client reads everything
        channel.wake()
        let total = messages.reduce(0) { $0 + $1.count }
        let read = pipe.readInBackground(total)

        // Then the bytes arrive in order, encoded on one thread that is not this one,
        // and the estimates were replaced by the real sizes
        #expect(channel.flush(timeout: 10))
        #expect(read.wait() == messages.flatMap { $0 })
        #expect(encoders.all.count == 1)
        #expect(!encoders.all.contains(UInt(pthread_self())))
        #expect(channel.queuedBytes == 0)
    }

    @Test("an unencoded message counts as its estimate toward the high-water mark")
    func estimateCounts() throws {
        // Given a client that reads nothing and a high-water mark of 64 KiB
        let pipe = Pipe(capacity: 4096)
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 64 << 10, lowWater: 16 << 10, writeSlice: 4096)
        let big = message("big", size: 80 << 10)

        // When a message estimated at 80 KiB is queued, held back
        channel.enqueue(estimate: big.count, wake: false) { $0 += big }

        // Then the channel stops being writable at once
        #expect(channel.queuedBytes == big.count)
        #expect(!channel.isWritable)

        // When the client reads it all
        let read = pipe.readInBackground(big.count)
        channel.wake()
        #expect(read.wait() == big)

        // Then nothing is left counted and the channel is writable again
        #expect(channel.flush(timeout: 10))
        #expect(channel.queuedBytes == 0)
        #expect(channel.isWritable)
    }

    @Test("a message that encodes larger than its estimate is counted at its real size")
    func underestimate() throws {
        // Given a client that reads nothing, and a message estimated at 1 byte that is 80 KiB
        let pipe = Pipe(capacity: 4096)
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 64 << 10, lowWater: 16 << 10, writeSlice: 4096)
        let big = message("big", size: 80 << 10)
        channel.enqueue(estimate: 1) { $0 += big }

        // When the writer has encoded it and written what the pipe holds
        let deadline = Date().addingTimeInterval(10)
        while channel.isWritable, Date() < deadline { usleep(1000) }

        // Then the channel counts the real size and is not writable
        #expect(!channel.isWritable)
        #expect(channel.queuedBytes > 64 << 10)

        // When the client reads it all, everything is counted off
        let read = pipe.readInBackground(big.count)
        #expect(read.wait() == big)
        #expect(channel.flush(timeout: 10))
        #expect(channel.queuedBytes == 0)
    }
}
