import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking
import SystemPackage

/// Writes the bodies of large transfers to their files on a thread of its
/// own, so that the engine's thread spends its turns receiving: writing a
/// body into the page cache costs about as much as receiving it, and the
/// two now run on two cores. Bodies up to `directLimit` are still written
/// by the engine's thread as they arrive, where a hand-over would cost more
/// than the write.
///
/// The engine fills buffers of `pieceSize` and hands them over; they are
/// written in the order they were handed over. At most `queueLimit` bytes
/// wait: past that the engine's thread waits for the writer, as it would
/// have waited on a slow disk itself. A stream's file descriptor belongs to
/// the writer from the hand-over on and is closed by it, after the last
/// piece, when the engine closes the stream. The writer also takes the
/// body's checksum, and the digests its receipts' `integrity` needs, from
/// the bytes it writes, and tells a stream that asks
/// for them of checkpoints: the length written and the checksum of those
/// bytes, whenever another `checkpointInterval` bytes are written.
final class BodyWriter: Sendable {
    static let directLimit: Int64 = 256 << 10
    static let pieceSize = 256 << 10
    let queueLimit: Int

    /// One body file's writes.
    final class Stream: Sendable {
        let fd: Int32
        let path: String
        private let failed = Locked<TransferFailure?>(nil)
        /// Of the body so far: the engine's hash of what it wrote itself,
        /// continued here with every piece written, and the bytes in the
        /// file.
        fileprivate let progress: Locked<Progress>
        /// Hears of checkpoints, on the writer's thread.
        fileprivate let checkpoint: (@Sendable (_ length: Int64, _ checksum: UInt64) -> Void)?
        fileprivate let checkpointInterval: Int64

        fileprivate struct Progress {
            var hasher: XXH3
            /// The digests the engine began; nil when none was asked for.
            var digests: BodyHasher?
            var written: Int64
            var nextCheckpoint: Int64
        }

        /// The writes of `fd`, which holds `written` bytes hashed into
        /// `hashed` (and `digesting`) already; `checkpoint` hears of each
        /// multiple of `checkpointInterval` bytes the file passes.
        init(
            fd: Int32, path: String, hashed: XXH3.State? = nil, digesting digests: BodyHasher? = nil, written: Int64 = 0,
            checkpointInterval: Int64 = 8 << 20, checkpoint: (@Sendable (_ length: Int64, _ checksum: UInt64) -> Void)? = nil
        ) {
            self.fd = fd
            self.path = path
            self.checkpoint = checkpoint
            self.checkpointInterval = max(1, checkpointInterval)
            progress = Locked(Progress(
                hasher: hashed.map(XXH3.init(continuing:)) ?? XXH3(), digests: digests, written: written,
                nextCheckpoint: (written / self.checkpointInterval + 1) * self.checkpointInterval))
        }

        /// The digests of the body written, once the stream is closed.
        func finalizeDigests() -> BodyDigests? {
            progress.withLock { $0.digests?.finalize() }
        }

        /// The first write that failed; nothing more is written after it.
        var failure: TransferFailure? { failed.withLock { $0 } }

        /// The bytes in the file so far, and their hash state.
        func snapshot() -> (written: Int64, hashState: XXH3.State) {
            progress.withLock { ($0.written, $0.hasher.state) }
        }

        fileprivate func fail(_ failure: TransferFailure) { failed.withLock { $0 = $0 ?? failure } }
    }

    private enum Job {
        case write(Stream, [UInt8])
        case close(Stream, @Sendable (TransferFailure?, UInt64) -> Void)
        case stop
    }

    private struct State {
        var jobs: [Job] = []
        var queuedBytes = 0
        /// Emptied buffers, for the engine to fill again instead of
        /// allocating (and faulting in) new ones.
        var spare: [[UInt8]] = []
    }

    private let state = Monitor(State())
    /// Signalled when the thread ends.
    private let ended = DispatchSemaphore(value: 0)

    init(queueLimit: Int = 2 << 20) {
        self.queueLimit = queueLimit
        startThread(named: "courier.bodies") { [self] in run() }
    }

    /// An empty buffer with room for `pieceSize` bytes.
    func buffer() -> [UInt8] {
        if let spare = state.withLock(wake: false, { $0.spare.popLast() }) { return spare }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(Self.pieceSize)
        return buffer
    }

    /// Hands `bytes` over to be written to `stream`'s file, after what was
    /// handed over before; waits while the queue is full.
    func write(_ bytes: [UInt8], to stream: Stream) {
        guard !bytes.isEmpty else { return }
        let count = bytes.count
        state.wait(until: { $0.queuedBytes == 0 || $0.queuedBytes + count <= queueLimit }) { state in
            state.jobs.append(.write(stream, bytes))
            state.queuedBytes += count
        }
    }

    /// Closes `stream`'s file once everything handed over for it is
    /// written, then calls `then` on the writer's thread with the failure,
    /// if a write failed, and the checksum of the body.
    func close(_ stream: Stream, then: @escaping @Sendable (TransferFailure?, UInt64) -> Void) {
        state.withLock { $0.jobs.append(.close(stream, then)) }
    }

    /// Lets the thread end once the jobs handed over before are done, and
    /// waits up to `timeout` seconds for that: what they close may keep a
    /// partial body, which must be recorded before courier exits.
    func stop(waiting timeout: Double) {
        state.withLock { $0.jobs.append(.stop) }
        _ = ended.wait(timeout: .now() + timeout)
    }

    private func run() {
        while true {
            var jobs = state.wait(until: { !$0.jobs.isEmpty }) { state in
                defer { state.jobs = [] }
                return state.jobs
            }
            // Taken out one by one, so that a written buffer is held here
            // alone and is emptied in place for its next piece.
            jobs.reverse()
            while !jobs.isEmpty {
                switch jobs.removeLast() {
                case .write(let stream, var bytes):
                    Self.write(bytes, to: stream)
                    let count = bytes.count
                    bytes.removeAll(keepingCapacity: true)
                    state.withLock { state in
                        state.queuedBytes -= count
                        if state.spare.count < 4, bytes.capacity >= Self.pieceSize { state.spare.append(bytes) }
                    }
                case .close(let stream, let then):
                    closeFile(stream.fd)
                    then(stream.failure, stream.progress.withLock { $0.hasher.finalize() })
                case .stop:
                    ended.signal()
                    return
                }
            }
        }
    }

    private static func write(_ bytes: [UInt8], to stream: Stream) {
        guard stream.failure == nil else { return }
        bytes.withUnsafeBytes { bytes in
            if let failure = writeAll(bytes, to: stream.fd, path: stream.path) {
                stream.fail(failure)
                return
            }
            let interval = stream.checkpointInterval
            let span = bytes.bytes
            let reached = stream.progress.withLock { progress -> (Int64, UInt64)? in
                progress.hasher.update(span)
                progress.digests?.update(span)
                progress.written += Int64(bytes.count)
                guard stream.checkpoint != nil, progress.written >= progress.nextCheckpoint else { return nil }
                progress.nextCheckpoint = (progress.written / interval + 1) * interval
                return (progress.written, progress.hasher.finalize())
            }
            if let reached { stream.checkpoint?(reached.0, reached.1) }
        }
    }

    /// Writes every byte of `bytes` to `fd`, going on after short writes
    /// and interruptions: nil, or why it could not.
    static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32, path: String) -> TransferFailure? {
        do {
            try FileDescriptor(rawValue: fd).writeAll(bytes)
            return nil
        } catch {
            return TransferFailure(code: .io, message: "cannot write \(path): \(error)")
        }
    }
}

private func closeFile(_ fd: Int32) { close(fd) }
