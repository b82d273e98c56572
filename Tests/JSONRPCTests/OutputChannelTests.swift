import Dispatch
import Foundation
@testable import JSONRPC
import Testing
import Locking

/// Linux's `F_SETPIPE_SZ` (not exported to Swift): the pipe's capacity.
let setPipeSize: Int32 = 1031

/// A pipe whose write end an `OutputChannel` writes to and whose read end
/// the test reads, or leaves unread to play a client that does not read.
final class Pipe: Sendable {
    let readEnd: Int32
    let writeEnd: Int32

    /// `capacity`: bytes the pipe holds before a writer blocks (one page at
    /// least; writes of up to one page are atomic).
    init(capacity: Int32 = 4096) {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0, "pipe failed")
        readEnd = fds[0]
        writeEnd = fds[1]
        _ = fcntl(writeEnd, setPipeSize, capacity)
    }

    /// Reads exactly `count` bytes (fewer only at end of file).
    func read(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = bytes.withUnsafeMutableBytes { Foundation.read(readEnd, $0.baseAddress! + offset, count - offset) }
            if got < 0, errno == EINTR { continue }
            if got <= 0 { break }
            offset += got
        }
        return Array(bytes[..<offset])
    }

    /// What one `read(2)` of at most `limit` bytes returns (empty at end of file).
    func readSome(_ limit: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: limit)
        while true {
            let got = bytes.withUnsafeMutableBytes { Foundation.read(readEnd, $0.baseAddress, limit) }
            if got < 0, errno == EINTR { continue }
            return Array(bytes[..<max(got, 0)])
        }
    }

    /// Reads `count` bytes on another thread; `wait` returns them.
    func readInBackground(_ count: Int) -> BackgroundRead {
        let result = BackgroundRead()
        let thread = Thread { result.finish(self.read(count)) }
        thread.start()
        return result
    }

    /// True when something can be read within `timeout` seconds.
    func isReadable(within timeout: Double) -> Bool {
        var entry = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(timeout * 1000)) == 1
    }

    /// Which ends are closed: each is closed once.
    private let closed = Locked((read: false, write: false))

    /// Closes the write end, so the reader sees the end of the input.
    func closeWriteEnd() {
        if closed.withLock({ ends in defer { ends.write = true }; return !ends.write }) { Self.retire(writeEnd) }
    }

    /// Closes the read end: the client has gone, and writes fail.
    func closeReadEnd() {
        if closed.withLock({ ends in defer { ends.read = true }; return !ends.read }) { Self.retire(readEnd) }
    }

    /// Closes the pipe's end at `fd` and keeps the number, which then
    /// refers to /dev/null: a connection's or a channel's thread that
    /// outlives its test and still writes to it (a late answer) or reads
    /// from it writes nothing anywhere and reads the end of a file, where a
    /// freed number could by then be another test's pipe, running at the
    /// same time, whose bytes it would mix with its own. The pipe sees the
    /// end closed as with `close`: its writers get `EPIPE`, its reader the
    /// end of the input.
    private static func retire(_ fd: Int32) {
        if dup2(devNull, fd) < 0 { Foundation.close(fd) }
    }

    private static let devNull = open("/dev/null", O_RDWR | O_CLOEXEC)

    func close() {
        closeReadEnd()
        closeWriteEnd()
    }
}

final class BackgroundRead: Sendable {
    private let bytes = Locked<[UInt8]?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func finish(_ read: [UInt8]) {
        bytes.withLock { $0 = read }
        done.signal()
    }

    /// The bytes read, or nil when they have not all come within 10 seconds.
    func wait() -> [UInt8]? {
        guard done.wait(timeout: .now() + 10) == .success else { return nil }
        return bytes.withLock { $0 }
    }
}

private func message(_ tag: String, size: Int) -> [UInt8] {
    let head = Array("\(tag):".utf8)
    return head + [UInt8](repeating: UInt8(ascii: "x"), count: size - head.count - 1) + [UInt8(ascii: "\n")]
}

@Suite("OutputChannel: accounting, water marks and coalescing", .timeLimit(.minutes(1)))
struct OutputChannelTests {
    @Test("counts queued bytes until the client reads them")
    func countsQueuedBytes() throws {
        // Given a channel whose messages are held back
        let pipe = Pipe()
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 1 << 20)
        let messages = (0..<10).map { message("m\($0)", size: 1000 + $0) }

        // When they are queued
        for bytes in messages { channel.enqueue(bytes, wake: false) }

        // Then every byte counts until written
        let total = messages.reduce(0) { $0 + $1.count }
        #expect(channel.queuedBytes == total)
        #expect(!pipe.isReadable(within: 0))

        // When the writer is woken and the client reads everything
        channel.wake()
        let read = pipe.readInBackground(total)

        // Then the bytes arrive whole and in order, and nothing is left queued
        #expect(channel.flush(timeout: 10))
        #expect(read.wait() == messages.flatMap { $0 })
        #expect(channel.queuedBytes == 0)
    }

    @Test("stops being writable above the high-water mark and becomes writable again only at the low-water mark")
    func waterMarks() throws {
        // Given 128 KiB for a client that reads nothing, with marks at 64 and 16 KiB
        let pipe = Pipe(capacity: 4096)
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 64 << 10, lowWater: 16 << 10, writeSlice: 4096)
        let piece = 4096
        var sent: [UInt8] = []
        for index in 0..<32 {
            let bytes = message("m\(index)", size: piece)
            sent += bytes
            channel.enqueue(bytes, wake: false)
            // Then the channel is writable up to the high-water mark, and not above it
            #expect(channel.isWritable == (sent.count <= 64 << 10), "after \(sent.count) bytes")
        }
        channel.wake()
        #expect(!channel.waitUntilWritable(timeout: 0.2))

        // When the client reads half: the backlog is below the high-water mark
        // but above the low-water mark
        var received = pipe.read(64 << 10)
        // Then the channel stays unwritable (at most one more page is written)
        #expect(!channel.isWritable)
        #expect(channel.queuedBytes > 16 << 10)

        // When the client reads down to 16 KiB left
        received += pipe.read(48 << 10)
        // Then the channel becomes writable, and the waiter hears of it
        #expect(channel.waitUntilWritable(timeout: 10))
        #expect(channel.queuedBytes <= 16 << 10)

        // When the client reads the rest
        received += pipe.read(sent.count - received.count)
        #expect(channel.flush(timeout: 10))
        #expect(received == sent)
        #expect(channel.queuedBytes == 0)
    }

    @Test("held bytes count against the high-water mark until the enqueue that releases them, and stop at their limit")
    func heldBytes() throws {
        // Given a channel with marks at 64 and 16 KiB for a client that reads nothing
        let pipe = Pipe(capacity: 4096)
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 64 << 10, lowWater: 16 << 10, writeSlice: 4096)

        // When 16 KiB are held, then 60 KiB queued
        #expect(channel.hold(10 << 10, within: 16 << 10))
        #expect(channel.hold(6 << 10, within: 16 << 10))
        // Then nothing more may be held past the limit
        #expect(!channel.hold(1, within: 16 << 10))
        #expect(channel.queuedBytes == 16 << 10)
        #expect(channel.isWritable)
        channel.enqueue(message("queued", size: 60 << 10), wake: false)
        // And held and queued bytes together pass the high-water mark
        #expect(!channel.isWritable)
        #expect(channel.queuedBytes == 76 << 10)

        // When what was held is enqueued, releasing its room
        let held = message("held", size: 16 << 10)
        channel.enqueue(estimate: held.count, releasingHeld: 16 << 10, wake: true) { $0 += held }
        // (the woken writer may already have put one slice into the pipe,
        // all its 4 KiB capacity takes)
        #expect(((76 << 10) - 4096...(76 << 10)).contains(channel.queuedBytes))
        #expect(channel.hold(16 << 10, within: 16 << 10))
        #expect(!channel.hold(1, within: 16 << 10))

        // Then the client reads both messages, and only the new held bytes are left
        let read = pipe.readInBackground(76 << 10)
        #expect(channel.flush(timeout: 10))
        #expect(read.wait() == message("queued", size: 60 << 10) + held)
        #expect(channel.queuedBytes == 16 << 10)
        #expect(channel.isWritable)
    }

    @Test("a keyed message replaces the older one with its key that is still queued, and takes its turn at the end")
    func coalescing() throws {
        // Given a writer blocked on a message the client has not read (one
        // write of 16 KiB into a pipe of 4 KiB: nothing counts as written yet)
        let pipe = Pipe(capacity: 4096)
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 1 << 20)
        let blocker = message("blocker", size: 16 << 10)
        channel.enqueue(blocker)
        #expect(pipe.isReadable(within: 10))

        // When notifications are queued behind it, some sharing a key
        let progress1 = Array("progress t1 10\n".utf8)
        let finishedOther = Array("finished r9\n".utf8)
        let progress2 = Array("progress t1 20\n".utf8)
        let otherTask = Array("progress t2 5\n".utf8)
        let progress3 = Array("progress t1 30\n".utf8)
        channel.enqueue(progress1, coalescingKey: "t1")
        channel.enqueue(finishedOther)
        channel.enqueue(progress2, coalescingKey: "t1")
        channel.enqueue(otherTask, coalescingKey: "t2")
        channel.enqueue(progress3, coalescingKey: "t1")

        // Then the older ones of key t1 are dropped and no longer counted
        #expect(channel.coalescedCount == 2)
        let kept = finishedOther + otherTask + progress3
        #expect(channel.queuedBytes == blocker.count + kept.count)

        // When the client reads
        let read = pipe.readInBackground(blocker.count + kept.count)

        // Then the newest of t1 arrives after everything queued before it
        #expect(channel.flush(timeout: 10))
        #expect(read.wait() == blocker + kept)
        #expect(channel.queuedBytes == 0)
    }

    @Test("a message already handed to the writer is never replaced")
    func noCoalescingOnceTaken() throws {
        // Given a keyed message the writer has taken and is writing
        let pipe = Pipe(capacity: 4096)
        defer { pipe.close() }
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 1 << 20)
        let first = message("progress t1 first", size: 16 << 10)
        channel.enqueue(first, coalescingKey: "t1")
        #expect(pipe.isReadable(within: 10))

        // When a newer one with the same key comes
        let second = Array("progress t1 second\n".utf8)
        channel.enqueue(second, coalescingKey: "t1")

        // Then both are written
        let read = pipe.readInBackground(first.count + second.count)
        #expect(channel.flush(timeout: 10))
        #expect(read.wait() == first + second)
        #expect(channel.coalescedCount == 0)
    }

    @Test("a reader that has gone away makes the channel writable and drops what is queued")
    func brokenPipe() throws {
        // Given a backlog above the high-water mark
        let pipe = Pipe(capacity: 4096)
        let channel = OutputChannel(fd: pipe.writeEnd, highWater: 8 << 10, writeSlice: 4096)
        for index in 0..<8 { channel.enqueue(message("m\(index)", size: 4096)) }
        #expect(!channel.isWritable)

        // When the client closes its end (SIGPIPE is ignored, so write fails with EPIPE)
        signal(SIGPIPE, SIG_IGN)
        close(pipe.readEnd)

        // Then nobody waits for it any more
        #expect(channel.waitUntilWritable(timeout: 10))
        #expect(channel.flush(timeout: 10))
        #expect(channel.queuedBytes == 0)
        close(pipe.writeEnd)
    }
}
