#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON
import Locking
import SystemPackage

/// Writes framed messages to a file descriptor from a thread of its own, so
/// no sender ever blocks on a client that reads slowly. Messages are written
/// whole and in the order they were sent; nothing is dropped unless the
/// reader has gone away, or a newer message with the same coalescing key
/// supersedes one still waiting.
///
/// A sender may hold back the wake-up (`enqueue(_:wake: false)`, then
/// `wake()`), or hold back all it sends inside `batching`: the connection's
/// reading thread does so while it answers one read's worth of requests,
/// so a pipelined client's answers leave in one write instead of one
/// thread hand-off each. Messages from other threads join the same queue,
/// so the order is kept either way.
///
/// Messages are queued as values (`Payload`): the parts of a notification,
/// a `JSONMessage`, a batch's encoded answers; the writer encodes and frames
/// them, so queueing one costs its sender no more than the lock.
///
/// Backpressure (swift-nio's writability): the channel counts the bytes
/// queued and not yet written. Once they exceed `highWater` it is no longer
/// writable, and it becomes writable again when they fall to `lowWater` or
/// below. Senders are never blocked; the connection's reading thread waits
/// in `waitUntilWritable()` before each request, so a client that does not
/// read its answers stops being read from.
///
/// A message may also be queued unencoded (`enqueue(estimate:_:)`): the
/// writer thread encodes it just before writing it, so a sender that
/// produces many messages (the reading thread answering a pipelined batch)
/// shares the work with the writer instead of doing all of it. Such a
/// message counts as its estimated size until it is encoded, and as its
/// real size from then on.
///
/// Coalescing: a message enqueued with a key replaces an older message with
/// the same key that is still queued and not yet handed to the writer. The
/// older one is dropped and the newer one joins the end of the queue, where
/// it happened: nothing is reordered, only superseded states are skipped.
///
/// Held output: answers that wait for the rest of their batch take room
/// (`hold(_:within:)`) before they are enqueued, and count against
/// `highWater` with the queue from then on, so a client whose batches wait
/// is read from no faster than one whose answers wait unread.
final class OutputChannel: Sendable {
    /// One message waiting for the writer, or what makes it: a value, so
    /// that queueing a message made elsewhere allocates nothing more.
    enum Payload: Sendable {
        /// Framed bytes.
        case bytes([UInt8])
        /// Appends the framed message to the writer's buffer.
        case encode(@Sendable (inout [UInt8]) -> Void)
        /// A message, framed as `framing`.
        case message(JSONMessage, Framing)
        /// `{"jsonrpc", "method", "params"}`, framed as `framing`;
        /// `sharing` as `JSONMessage(estimate:sharing:object:)`.
        case notification(method: String, params: NotificationParams, sharing: SharedJSON?, Framing)
        /// Encoded values, as one framed JSON array.
        case array([[UInt8]], Framing)
        /// Work that must run even when nothing is written any more
        /// (`perform`): it appends nothing.
        case work(@Sendable () -> Void)
    }

    /// A notification's params: a value, or the object a closure writes.
    enum NotificationParams: Sendable {
        case value(JSON)
        case object(@Sendable (JSONObjectWriter) -> Void)
    }

    private struct Entry {
        var payload: Payload
        /// What stands for the entry's size in `queued` until it is
        /// encoded: its size for `bytes`, an estimate for the others.
        var counted: Int
        var key: CoalescingKey?

        static let dropped = Entry(payload: .bytes([]), counted: 0, key: nil)

        var mustRun: Bool {
            if case .work = payload { return true }
            return false
        }

        /// Runs the entry's work, if it is work.
        func runWork() {
            if case .work(let work) = payload { work() }
        }
    }

    /// What the senders, the writer and the waiters share.
    private struct State {
        var pending: [Entry] = []
        /// The room of the writer's last chunk, emptied: `pending` takes it
        /// when the writer takes the entries, so a steady stream of messages
        /// appends without growing a new array each time.
        var spare: [Entry] = []
        /// Index in `pending` of the entry holding each coalescing key.
        var keyed: [CoalescingKey: Int] = [:]
        /// Bytes in `pending` plus the bytes the writer holds and has not written.
        var queued = 0
        /// Bytes held for answers not yet enqueued (`hold(_:within:)`).
        var held = 0
        var writable = true
        /// The writer waits for work and nobody has woken it yet (true from
        /// the start, so a message held back is not written before its
        /// wake-up).
        var idle = true
        var writing = false
        var broken = false
        var coalesced = 0
        /// The threads inside `batching`, whose messages wake nobody.
        var batching: [UInt] = []

        /// The writer has work and was woken to it.
        var hasWork: Bool { !pending.isEmpty && !idle }

        /// Marks the writer woken when it waits with work queued; true when
        /// it must be signalled.
        mutating func wakeWriter() -> Bool {
            guard idle, !pending.isEmpty else { return false }
            idle = false
            return true
        }
    }

    let highWater: Int
    let lowWater: Int
    /// Bytes handed to `write(2)` at once: small enough for the queued count
    /// to follow the client's reading closely, large enough to cost few calls.
    let writeSlice: Int
    private let fd: Int32
    /// The most entries whose room the queue keeps from one chunk to the next.
    private static let keptEntries = 1024
    private let state = Monitor(State())

    /// `lowWater` defaults to half of `highWater`.
    init(fd: Int32, highWater: Int = 16 << 20, lowWater: Int? = nil, writeSlice: Int = 64 << 10) {
        precondition(highWater > 0 && writeSlice > 0, "the high-water mark and the slice must be positive")
        self.fd = fd
        self.highWater = highWater
        self.lowWater = min(lowWater ?? highWater / 2, highWater)
        self.writeSlice = writeSlice
        // The writer thread keeps the channel alive until the reader goes
        // away: it may still hold messages when every sender is gone.
        startThread(named: "courier.output") { [self] in self.writeLoop() }
    }

    /// Queues `bytes`; with `coalescingKey`, an older queued message with the
    /// same key that the writer has not taken yet is dropped.
    func enqueue(_ bytes: [UInt8], coalescingKey: CoalescingKey? = nil, wake: Bool = true) {
        append(Entry(payload: .bytes(bytes), counted: bytes.count, key: coalescingKey), wake: wake)
    }

    /// Queues a message that `encode` appends, framed, to the writer's
    /// buffer on the writer's thread; until then it counts as `estimate`
    /// bytes. `encode` runs outside the channel's lock: what it enqueues
    /// is written after the messages queued before it. `releasingHeld`
    /// gives back room `hold` took for it.
    func enqueue(
        estimate: Int, coalescingKey: CoalescingKey? = nil, releasingHeld: Int = 0, wake: Bool = true,
        _ encode: @escaping @Sendable (inout [UInt8]) -> Void
    ) {
        enqueue(.encode(encode), estimate: estimate, coalescingKey: coalescingKey, releasingHeld: releasingHeld, wake: wake)
    }

    /// Queues what `payload` writes, encoded on the writer's thread as
    /// `enqueue(estimate:_:)` is.
    func enqueue(
        _ payload: Payload, estimate: Int, coalescingKey: CoalescingKey? = nil, releasingHeld: Int = 0, wake: Bool = true
    ) {
        let entry = Entry(payload: payload, counted: max(estimate, 1), key: coalescingKey)
        append(entry, releasingHeld: releasingHeld, wake: wake)
    }

    /// Runs `work` on the writer's thread, after the messages queued before
    /// it, counting it as `estimate` bytes until then. Once the reader is
    /// gone it runs all the same (at once, on this thread, or on the
    /// writer's as it stops): what it completes, such as a batch whose
    /// array others wait for, is never dropped with the messages.
    func perform(estimate: Int, wake: Bool = true, _ work: @escaping @Sendable () -> Void) {
        if !append(Entry(payload: .work(work), counted: max(estimate, 1), key: nil), wake: wake) { work() }
    }

    /// Runs `body` with what this thread enqueues meanwhile held back, then
    /// starts the writer on it: one hand-off for a burst of messages. Other
    /// threads' messages wake the writer as usual, and take what is held
    /// with them, in order. Inside another `batching` of the same thread,
    /// only the outermost one wakes the writer.
    func batching<T>(_ body: () throws -> T) rethrows -> T {
        let thread = currentThread()
        let outermost = state.withLock(wake: false) { state in
            guard !state.batching.contains(thread) else { return false }
            state.batching.append(thread)
            return true
        }
        guard outermost else { return try body() }
        defer {
            state.withLock(wakingIf: { $0 }) { state in
                if let index = state.batching.firstIndex(of: thread) { state.batching.remove(at: index) }
                return state.wakeWriter()
            }
        }
        return try body()
    }

    /// Takes room for `count` bytes of output that is not ready to be
    /// enqueued, while the room taken so far leaves that much within `limit`:
    /// the bytes count against `highWater` until an `enqueue` releases them.
    func hold(_ count: Int, within limit: Int) -> Bool {
        state.withLock(wake: false) { state in
            guard state.held + count <= limit else { return false }
            state.held += count
            if state.queued + state.held > highWater { state.writable = false }
            return true
        }
    }

    /// False when the reader is gone and `entry` was dropped.
    @discardableResult
    private func append(_ entry: Entry, releasingHeld: Int = 0, wake: Bool) -> Bool {
        state.withLock(wakingIf: { $0.wakes }) { state in
            state.held -= releasingHeld
            guard !state.broken else { return (queued: false, wakes: false) }
            // One look-up for the key: a progress notice carries one.
            if let coalescingKey = entry.key,
                let older = state.keyed.updateValue(state.pending.count, forKey: coalescingKey)
            {
                state.queued -= state.pending[older].counted
                state.pending[older] = .dropped
                state.coalesced += 1
            }
            state.pending.append(entry)
            state.queued += entry.counted
            if state.queued + state.held > highWater { state.writable = false }
            let wakes = wake && (state.batching.isEmpty || !state.batching.contains(currentThread()))
            return (queued: true, wakes: wakes && state.wakeWriter())
        }.queued
    }

    /// Starts writing what was enqueued without a wake-up.
    func wake() {
        state.withLock(wakingIf: { $0 }) { $0.wakeWriter() }
    }

    /// Bytes queued and not yet written, and bytes held.
    var queuedBytes: Int {
        state.withLock(wake: false) { $0.queued + $0.held }
    }

    /// False from the moment the queued and held bytes exceed `highWater`
    /// until they fall to `lowWater`.
    var isWritable: Bool {
        state.withLock(wake: false) { $0.writable || $0.broken }
    }

    /// Messages dropped because a newer one with the same key replaced them.
    var coalescedCount: Int {
        state.withLock(wake: false) { $0.coalesced }
    }

    /// Starts the writer on anything held back, then waits until the channel
    /// is writable (or the reader is gone), at most `timeout` seconds. Returns
    /// false on time-out.
    @discardableResult
    func waitUntilWritable(timeout: Double = .infinity) -> Bool {
        wake()
        return wait(until: { $0.writable || $0.broken }, timeout: timeout)
    }

    /// Waits until everything enqueued so far has been written (or the reader
    /// is gone), at most `timeout` seconds (`.infinity`: no limit). Returns
    /// false on time-out.
    @discardableResult
    func flush(timeout: Double) -> Bool {
        wake()
        return wait(until: { ($0.pending.isEmpty && !$0.writing) || $0.broken }, timeout: timeout)
    }

    /// Waits until `ready` holds, at most `timeout` seconds: false on time-out.
    private func wait(until ready: (inout sending State) -> Bool, timeout: Double) -> Bool {
        guard timeout.isFinite else {
            state.wait(until: ready, wake: false) { _ in }
            return true
        }
        return state.wait(until: ready, deadline: Condition.Deadline(secondsFromNow: timeout), wake: false) { _ in } != nil
    }

    private func writeLoop() {
        /// What is encoded and not yet written; its room is kept from one
        /// chunk to the next, unless a large message grew it.
        var buffer: [UInt8] = []
        buffer.reserveCapacity(writeSlice * 2)
        while true {
            var chunk = state.wait(until: { $0.hasWork }, wake: false) { state in
                defer {
                    state.pending = state.spare
                    state.spare = []
                    state.keyed.removeAll(keepingCapacity: true)
                    state.writing = true
                }
                return state.pending
            }

            let unwritten = writeAll(&chunk, through: &buffer)
            if buffer.capacity > writeSlice * 4 { buffer = [] }
            buffer.removeAll(keepingCapacity: true)
            if unwritten == nil {
                chunk.removeAll(keepingCapacity: chunk.capacity <= Self.keptEntries)
            }

            let dropped: [Entry] = state.withLock { [chunk] state in
                state.writing = false
                defer { if state.pending.isEmpty { state.idle = true } }
                guard let unwritten else {
                    state.spare = chunk
                    return []
                }
                state.broken = true
                defer {
                    state.pending = []
                    state.keyed = [:]
                    state.queued = 0
                }
                return Array(chunk[unwritten...]) + state.pending
            }
            guard unwritten != nil else { continue }
            for entry in dropped where entry.mustRun { entry.runWork() }
            return
        }
    }

    /// Writes the entries in slices of about `writeSlice` bytes, gathered
    /// in `buffer`, encoding those that wait for it into it as it reaches
    /// them, and counting each slice off `queued` as soon as it is written.
    /// A ready message of a slice or more is written from where it is.
    /// Returns nil once all is written, or, when the reader is gone, the
    /// index of the first entry not reached. What each entry reached holds
    /// is taken out of `entries` (leaving it empty bytes) rather than
    /// copied, so it is let go once, here.
    private func writeAll(_ entries: inout [Entry], through buffer: inout [UInt8]) -> Int? {
        /// Real sizes minus estimates of the entries encoded and not yet
        /// counted in `queued`.
        var correction = 0
        for index in entries.indices {
            var payload = Entry.dropped.payload
            swap(&payload, &entries[index].payload)
            let counted = entries[index].counted
            var isBytes = false
            let start = buffer.count
            switch consume payload {
            case .bytes(let bytes) where bytes.count >= writeSlice:
                guard buffer.isEmpty || writeSlices(buffer, correction: &correction) else { return index }
                buffer.removeAll(keepingCapacity: true)
                guard writeSlices(bytes, correction: &correction) else { return index + 1 }
                continue
            case .bytes(let bytes):
                isBytes = true
                buffer.append(contentsOf: bytes)
            case .encode(let encode):
                encode(&buffer)
            case .message(let message, let framing):
                framing.frame(into: &buffer, message.encode)
            case .notification(let method, let params, let sharing, let framing):
                framing.frame(into: &buffer) { text in
                    Self.encode(notification: method, params, sharing: sharing, estimate: counted, into: &text)
                }
            case .array(let elements, let framing):
                framing.frame(array: elements, into: &buffer)
            case .work(let work):
                work()
            }
            if !isBytes { correction += buffer.count - start - counted }
            if buffer.count >= writeSlice {
                guard writeSlices(buffer, correction: &correction) else { return index + 1 }
                buffer.removeAll(keepingCapacity: true)
            }
        }
        guard buffer.isEmpty || writeSlices(buffer, correction: &correction) else { return entries.count }
        if correction != 0 { countWritten(0, correction: correction) }
        return nil
    }

    /// `{"jsonrpc", "method", "params"}`, in the order the text sorts them.
    private static func encode(
        notification method: String, _ params: NotificationParams, sharing: SharedJSON?, estimate: Int,
        into text: inout [UInt8]
    ) {
        let members: @Sendable (JSONObjectWriter) -> Void = { object in
            object.set("jsonrpc", "2.0")
            object.set("method", method)
            switch params {
            case .value(let value): object.set("params", value)
            case .object(let write): object.set("params", object: write)
            }
        }
        if let sharing {
            JSONCodec.encodeObject(into: &text, sizeHint: estimate, sharing: sharing, members)
        } else {
            JSONCodec.encodeObject(into: &text, sizeHint: estimate, members)
        }
    }

    private func writeSlices(_ bytes: [UInt8], correction: inout Int) -> Bool {
        let output = FileDescriptor(rawValue: fd)
        return bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let slice = UnsafeRawBufferPointer(rebasing: buffer[offset..<min(buffer.count, offset + writeSlice)])
                let written: Int
                do {
                    written = try output.write(slice)
                } catch Errno.resourceTemporarilyUnavailable {
                    // A non-blocking output that is full: try again.
                    continue
                } catch {
                    return false
                }
                offset += written
                countWritten(written, correction: correction)
                correction = 0
            }
            return true
        }
    }

    /// Counts `count` written bytes off the queue, after replacing estimates
    /// by real sizes (`correction`); wakes waiters when the channel becomes
    /// writable again.
    private func countWritten(_ count: Int, correction: Int = 0) {
        state.withLock(wakingIf: { $0 }) { state in
            state.queued += correction - count
            if state.writable, state.queued + state.held > highWater { state.writable = false }
            guard !state.writable, state.queued + state.held <= lowWater else { return false }
            state.writable = true
            return true
        }
    }
}

/// The calling thread, as a number `OutputChannel.batching` tells threads by.
private func currentThread() -> UInt {
    #if canImport(Glibc)
    UInt(pthread_self())
    #else
    UInt(bitPattern: pthread_self())
    #endif
}
