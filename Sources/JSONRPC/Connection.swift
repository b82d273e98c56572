#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON
import Logging
import Locking
import Synchronization
import SystemPackage

/// A JSON-RPC connection over a pair of file descriptors (stdin and stdout
/// for a stdio server). It reads and frames on a thread of its own, hands
/// messages to a `Dispatcher`, and answers in the framing the client chose.
///
/// Memory stays bounded whatever the client does: when more than
/// `outputHighWater` bytes wait for a client that does not read, the
/// connection reads no further request until the backlog has fallen to
/// `outputLowWater`; a notification sent with a coalescing key replaces
/// an older one with the same key that is still waiting; and answers that
/// wait for the rest of their batch count with the backlog, and together
/// take at most `outputLowWater` bytes (so they alone never keep reading
/// paused).
public final class Connection: AnswerSink {
    /// The default `outputHighWater`: 16 MiB.
    public static let defaultOutputHighWater = 16 << 20

    public let maxMessageBytes: Int
    private let input: Int32
    private let outputFD: Int32
    private let output: OutputChannel
    private let mode: FramingMode
    /// The framing in use (`FramingCode`), read on every message.
    private let detected: Atomic<UInt8>
    private let logger: Logger

    /// `outputLowWater` defaults to half of `outputHighWater`.
    public init(
        input: Int32, output: Int32, mode: FramingMode, maxMessageBytes: Int,
        outputHighWater: Int = Connection.defaultOutputHighWater, outputLowWater: Int? = nil, logger: Logger
    ) {
        self.input = input
        self.outputFD = output
        self.output = OutputChannel(fd: output, highWater: outputHighWater, lowWater: outputLowWater)
        self.mode = mode
        self.detected = Atomic(FramingCode.of(mode.forced))
        self.maxMessageBytes = maxMessageBytes
        self.logger = logger
    }

    /// The framing in use: forced, or detected from the first bytes; nil
    /// until the client has sent something.
    public var framing: Framing? { FramingCode.framing(detected.load(ordering: .acquiring)) }

    /// Starts reading. Each message is handled inside `around` (on the
    /// reading thread, never while it waits for room in the output), so
    /// what its requests share can be set up once for the message.
    /// `onEndOfInput` runs on the reading thread once the input is closed
    /// and every message before it has been handled.
    public func start(
        dispatcher: Dispatcher, handlingEachMessage around: @escaping @Sendable (() -> Void) -> Void = { $0() },
        onEndOfInput: @escaping @Sendable () -> Void
    ) {
        startThread(named: "courier.input", stackSize: 16 << 20) { [self] in
            readLoop(dispatcher: dispatcher, around: around)
            onEndOfInput()
        }
    }

    /// Calls `body` once, on a thread of its own, when nobody can read the
    /// output any more: its reading end is closed (`POLLERR` on a pipe, as a
    /// write would fail with `EPIPE`), or hung up (`POLLHUP` on a socket or a
    /// terminal). A file, which can always be written, never calls it.
    public func whenOutputCloses(_ body: @escaping @Sendable () -> Void) {
        startThread(named: "courier.output-watch") { [outputFD] in
            // No event asked for: poll reports only the errors and hang-ups
            // it always reports.
            var watch = pollfd(fd: outputFD, events: 0, revents: 0)
            while true {
                let ready = poll(&watch, 1, -1)
                if ready < 0, errno == EINTR { continue }
                if ready != 0 { break }
            }
            body()
        }
    }

    /// The output backlog above which no further request is read.
    public var outputHighWater: Int { output.highWater }

    /// The output backlog at or below which reading resumes.
    public var outputLowWater: Int { output.lowWater }

    /// Bytes sent and not yet written to the client.
    public var queuedOutputBytes: Int { output.queuedBytes }

    /// Sends a notification. With a `coalescingKey`, the notification
    /// replaces an older one with the same key that is still waiting to be
    /// written: the older one is dropped and this one takes its turn at the
    /// end of the queue. Use a key only for notifications that describe a
    /// current state (such as progress), where the newest makes the older
    /// ones redundant.
    public func send(notification method: String, params: JSON, coalescingKey: CoalescingKey? = nil) {
        send(notificationOf: method, estimate: params.estimatedEncodedCount, coalescingKey: coalescingKey, .value(params))
    }

    /// Sends a notification whose params are the object `params` writes
    /// (see `JSONObjectWriter`), about `estimate` bytes long, from values it
    /// holds: no `JSON` value is made for them. `coalescingKey` as above;
    /// with `sharing`, the message is made under its lock, so `params` may
    /// write it by reference (`JSONObjectWriter.set(_:shared:or:)`).
    public func send(
        notification method: String, estimate: Int, coalescingKey: CoalescingKey? = nil, sharing: SharedJSON? = nil,
        params: @escaping @Sendable (JSONObjectWriter) -> Void
    ) {
        send(notificationOf: method, estimate: estimate, coalescingKey: coalescingKey, sharing: sharing, .object(params))
    }

    /// `{"jsonrpc", "method", "params"}`, queued as its parts and written
    /// on the writer's thread: a notification is sent for every step of
    /// every download.
    private func send(
        notificationOf method: String, estimate: Int, coalescingKey: CoalescingKey?, sharing: SharedJSON? = nil,
        _ params: OutputChannel.NotificationParams
    ) {
        output.enqueue(
            .notification(method: method, params: params, sharing: sharing, framing ?? .ndjson),
            estimate: estimate + method.utf8.count + 41, coalescingKey: coalescingKey)
    }

    /// The message is encoded on the writer's thread, straight into what it
    /// writes, so that a thread sending many messages (the reading thread
    /// answering pipelined requests, the engine's finishing downloads) and
    /// the writer share the work.
    public func send(_ message: JSONMessage) {
        output.enqueue(.message(message, framing ?? .ndjson), estimate: message.estimate + 1)
    }

    /// `outputLowWater`: what batches' answers may take while they wait.
    public var batchRoom: Int { output.lowWater }

    public func holdBatchAnswer(_ count: Int) -> Bool {
        output.hold(count, within: batchRoom)
    }

    /// The array is framed on the writer's thread.
    public func sendBatch(_ answers: [[UInt8]], held: Int) {
        output.enqueue(.array(answers, framing ?? .ndjson), estimate: Framing.arrayLength(answers) + 1, releasingHeld: held)
    }

    /// `work` runs on the writer's thread, in turn with the messages.
    public func whenWriting(estimate: Int, _ work: @escaping @Sendable () -> Void) {
        output.perform(estimate: estimate, work)
    }

    /// Runs `body` with the messages this thread sends held back, then hands
    /// them to the writer at once: one write for a burst of answers or
    /// notifications instead of a thread hand-off per message. Messages of
    /// other threads share the same queue, so the order is kept.
    public func batchingOutput<T>(_ body: () throws -> T) rethrows -> T {
        try output.batching(body)
    }

    /// Waits until every message sent so far is written, or `timeout` passes.
    @discardableResult
    public func flush(timeout: Double = 5) -> Bool {
        output.flush(timeout: timeout)
    }

    private func readLoop(dispatcher: Dispatcher, around: (() -> Void) -> Void) {
        var framer = MessageFramer(mode: mode, maxMessageBytes: maxMessageBytes)
        let reply: @Sendable (JSON) -> Void = { [self] in send($0) }
        let source = FileDescriptor(rawValue: input)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count: Int
            do {
                count = try chunk.withUnsafeMutableBytes { try source.read(into: $0) }
            } catch {
                logger.error("reading input failed: \(error)")
                count = 0
            }
            if count == 0 {
                let rest = framer.finish()
                noteFraming(framer.framing)
                for event in rest {
                    waitForOutputRoom()
                    around { handle(event, dispatcher: dispatcher, reply: reply) }
                }
                return
            }
            chunk.withUnsafeBytes { framer.push(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            batchingOutput {
                while let event = framer.next() {
                    noteFraming(framer.framing)
                    waitForOutputRoom()
                    around { handle(event, dispatcher: dispatcher, reply: reply) }
                }
            }
        }
    }

    /// Blocks the calling thread while the client leaves more than
    /// `outputHighWater` bytes unread, until it has read down to
    /// `outputLowWater`; the writer wakes it as soon as it gets there. The
    /// reading thread calls it before each request; a thread that makes
    /// large output may call it before making more. Never call it where the
    /// writer or the client's reading waits on the caller.
    public func waitForOutputRoom() {
        guard !output.isWritable else { return }
        logger.debug("output backlog of \(output.queuedBytes) bytes: waiting for the client to read")
        output.waitUntilWritable()
        logger.debug("output backlog down to \(output.queuedBytes) bytes: going on")
    }

    private func noteFraming(_ framing: Framing?) {
        guard let framing, detected.load(ordering: .acquiring) == FramingCode.none else { return }
        let (noted, _) = detected.compareExchange(
            expected: FramingCode.none, desired: FramingCode.of(framing), ordering: .acquiringAndReleasing)
        if noted { logger.debug("client framing: \(framing.rawValue)") }
    }

    private func handle(_ event: FramerEvent, dispatcher: Dispatcher, reply: @escaping @Sendable (JSON) -> Void) {
        switch event {
        case .message(let bytes):
            dispatcher.receive(bytes, to: self)
        case .tooLarge(let size):
            logger.warning("skipped a message of \(size) bytes: the limit is \(maxMessageBytes)")
            let error = RPCError.invalidRequest(
                "Invalid Request: message of \(size) bytes exceeds the limit of \(maxMessageBytes) bytes",
                data: ["limit": .integer(Int64(maxMessageBytes)), "size": .integer(Int64(size))])
            reply(Dispatcher.errorResponse(id: .null, error))
        case .malformed(let problem):
            logger.error("broken framing skipped: \(problem)")
        }
    }
}

/// A framing as `Connection` keeps it in an atomic byte: 0 for none yet.
private enum FramingCode {
    static let none: UInt8 = 0

    static func of(_ framing: Framing?) -> UInt8 {
        switch framing {
        case nil: none
        case .lsp: 1
        case .ndjson: 2
        }
    }

    static func framing(_ code: UInt8) -> Framing? {
        switch code {
        case 1: .lsp
        case 2: .ndjson
        default: nil
        }
    }
}
