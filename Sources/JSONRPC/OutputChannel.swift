import Foundation

/// Writes framed messages to a file descriptor from a thread of its own, so
/// no sender ever blocks on a client that reads slowly. Messages are written
/// whole and in the order they were sent; nothing is dropped unless the
/// reader has gone away.
///
/// A sender may hold back the wake-up (`enqueue(_:wake: false)`, then
/// `wake()`): the connection's reading thread does so while it answers one
/// read's worth of requests, so a pipelined client's answers leave in one
/// write instead of one thread hand-off each. Messages from other threads
/// join the same queue, so the order is kept either way.
final class OutputChannel: @unchecked Sendable {
    private let fd: Int32
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var pending: [UInt8] = []
    /// The writer waits for work and nobody has woken it yet.
    private var idle = false
    private var writing = false
    private var broken = false

    init(fd: Int32) {
        self.fd = fd
        let thread = Thread { [unowned self] in self.writeLoop() }
        thread.name = "courier.output"
        thread.start()
    }

    func enqueue(_ bytes: [UInt8], wake: Bool = true) {
        condition.lock()
        if !broken {
            pending.append(contentsOf: bytes)
            if wake { wakeWriter() }
        }
        condition.unlock()
    }

    /// Starts writing what was enqueued without a wake-up.
    func wake() {
        condition.lock()
        wakeWriter()
        condition.unlock()
    }

    /// Waits until everything enqueued so far has been written (or the reader
    /// is gone), at most `timeout` seconds (`.infinity`: no limit). Returns
    /// false on time-out.
    @discardableResult
    func flush(timeout: Double) -> Bool {
        let deadline = timeout.isFinite ? Date(timeIntervalSinceNow: timeout) : nil
        condition.lock()
        defer { condition.unlock() }
        wakeWriter()
        while (!pending.isEmpty || writing) && !broken {
            if let deadline {
                if !condition.wait(until: deadline) { return false }
            } else {
                condition.wait()
            }
        }
        return true
    }

    /// Called with `condition` locked.
    private func wakeWriter() {
        guard idle, !pending.isEmpty else { return }
        idle = false
        condition.broadcast()
    }

    private func writeLoop() {
        while true {
            condition.lock()
            while pending.isEmpty || idle {
                idle = true
                condition.wait()
            }
            var chunk: [UInt8] = []
            swap(&chunk, &pending)
            writing = true
            condition.unlock()

            let ok = writeAll(chunk)

            condition.lock()
            writing = false
            if !ok {
                broken = true
                pending = []
            }
            condition.broadcast()
            condition.unlock()
            if !ok { return }
        }
    }

    private func writeAll(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }
}
