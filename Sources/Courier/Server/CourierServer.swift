import Curl
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON
import JSONRPC
import Logging
import Locking

/// courier's JSON-RPC server: registers every method on a dispatcher and runs
/// the lifecycle (`initialize`, `shutdown`, `exit`, end of input).
public final class CourierServer: Sendable {
    private let connection: Connection
    let dispatcher: Dispatcher
    let configuration: Locked<Configuration>
    private let logger: Logger
    private let phase = Locked(Phase.running)
    private let finishing = Locked(false)
    private let terminate: @Sendable (Int32) -> Never
    let downloader: Downloader<Reply>
    let indicator: ActivityIndicator
    let cache: ResponseCache

    enum Phase {
        case running
        case shutDown
    }

    public init(
        configuration: Configuration,
        connection: Connection,
        logger: Logger,
        scheduler: any IndicatorScheduler = DispatchIndicatorScheduler(),
        terminate: @escaping @Sendable (Int32) -> Never = { exit($0) }
    ) throws {
        self.connection = connection
        self.configuration = Locked(configuration)
        self.logger = logger
        self.dispatcher = Dispatcher(logger: logger)
        self.terminate = terminate
        let indicatorChanged: @Sendable (ActivityIndicator.VisibilityChange) -> Void = { change in
            let (method, params) = change.notification
            connection.send(notification: method, params: params, coalescingKey: Self.coalescingKey(method, params))
        }
        let hold = NoticeHold { (notice: consuming Notice) in Self.send(notice, on: connection) }
        let root = try CacheRoot(opening: configuration.cacheDir, logger: logger)
        self.cache = ResponseCache(configuration: configuration, root: root, logger: logger)
        let indicator = ActivityIndicator(
            enabled: configuration.indicatorEnabled, activationDelay: configuration.activationDelay,
            completionDelay: configuration.completionDelay, scheduler: scheduler, emit: indicatorChanged)
        self.indicator = indicator
        self.downloader = try Downloader(
            settings: configuration, root: root, cache: cache, indicator: indicator,
            answer: { reply, answer in
                hold.answering(reply, about: answer.subject)
                Self.send(answer, to: reply)
            },
            refuse: { reply, error in reply.failure(Self.rpcError(error)) },
            notify: { notice in hold.notify(notice) },
            batch: { connection.batchingOutput($0) }, awaitOutputRoom: { connection.waitForOutputRoom() }, logger: logger)
        registerLifecycle()
        registerDownloads()
        registerActivity()
        registerCache()
    }

    /// Starts serving; returns at once.
    public func start() {
        // The lookups of one message (a batch of downloads) share a read
        // transaction of the disk tier.
        connection.start(dispatcher: dispatcher, handlingEachMessage: { [cache] in cache.readingTogether($0) }) { [self] in
            finishAfterEndOfInput()
        }
    }

    /// End of input means no more requests, not the end of the work asked
    /// for: downloads that run or wait in the queue go on to their end and
    /// their notifications and answers are written, then what is left
    /// (suspended downloads, which no request can resume now) ends with
    /// `shutdown` and courier exits with 0. A client that can no longer
    /// read its output ends everything with `shutdown` at once.
    private func finishAfterEndOfInput() -> Never {
        logger.debug("end of input: finishing the downloads under way")
        let finished = DispatchSemaphore(value: 0)
        connection.whenOutputCloses { [logger] in
            logger.debug("the client closed its end of the output")
            finished.signal()
        }
        downloader.whenSettled { finished.signal() }
        finished.wait()
        finish(code: 0)
    }

    public var currentConfiguration: Configuration { configuration.withLock { $0 } }

    private func registerLifecycle() {
        // Every param is checked before any option is applied.
        dispatcher.register(checked: "initialize") { [self] params, reply in
            let named = try params.byName()
            let options = try named.optionalObject("options") ?? [:]
            let effective = try configuration.withLock { config throws(RPCError) in
                try config.apply(options: options)
                return config
            }
            downloader.update(settings: effective)
            indicator.configure(
                enabled: effective.indicatorEnabled, activationDelay: effective.activationDelay,
                completionDelay: effective.completionDelay)
            if let client = try named.optionalObject("clientInfo"), let name = client["name"]?.stringValue {
                logger.info("client: \(name) \(client["version"]?.stringValue ?? "")")
            }
            reply.success(initializeResult(effective))
        }
        dispatcher.register(checked: "shutdown") { [self] _, reply in
            shutDown()
            reply.success(.null)
        }
        // Parsed once, in the background: taken when asked, so that setting
        // up does not wait for the parse.
        dispatcher.register(checked: "rpc.discover") { _, reply in
            reply(OpenRPCDocument.load())
        }
        dispatcher.registerNotification("exit") { [self] _ in
            let code: Int32 = phase.withLock { $0 == .shutDown } ? 0 : 1
            finish(code: code)
        }
    }

    private func initializeResult(_ configuration: Configuration) -> JSON {
        let curl = CurlLibrary.current
        return [
            "serverInfo": ["name": "courier", "version": .string(Configuration.version)],
            "protocolVersion": .string(Configuration.protocolVersion),
            "capabilities": [
                "methods": .array((dispatcher.methods + dispatcher.notificationMethods).sorted().map(JSON.string)),
                "notifications": .array(Self.notifications.map(JSON.string)),
                "framings": .array(Framing.allCases.map { .string($0.rawValue) }),
                "framing": JSON(connection.framing?.rawValue),
                "maxMessageBytes": JSON(connection.maxMessageBytes),
            ],
            "config": configuration.json,
            "libraries": [
                "curl": [
                    "version": .string(curl.version),
                    "ssl": JSON(curl.ssl),
                    "features": .array(curl.features.map(JSON.string)),
                    "protocols": .array(curl.protocols.map(JSON.string)),
                ],
                "jansson": ["version": .string(JSONCodec.libraryVersion)],
            ],
        ]
    }

    /// Notifications that tell a current state: for a client that reads
    /// slowly, a newer one for the same task and receipts (see
    /// `send(_:on:)`), or view, replaces the one still waiting. The kept one
    /// leaves where it happened, so it never follows the receipt's
    /// `download/finished`.
    static func coalescingKey(_ method: String, _ params: JSON) -> CoalescingKey? {
        switch method {
        case "view/progress": params["view"]?.stringValue.map { CoalescingKey("view/progress " + $0) }
        default: nil
        }
    }

    static let notifications = [
        "download/progress", "download/finished", "indicator/visibility", "view/animating", "view/progress",
        "download/retrying",
    ]

    /// Ends every unfinished piece of work and refuses requests from now on.
    private func shutDown() {
        let first = phase.withLock { phase in
            defer { phase = .shutDown }
            return phase == .running
        }
        guard first else { return }
        dispatcher.refuseRequests(with: .invalidRequest("Invalid Request: the server has shut down"))
        downloader.shutdown()
        logger.debug("shut down")
    }

    /// Ends the session as `shutdown` followed by `exit` would, with code 0:
    /// what a termination signal does. Does not return.
    public func shutDownAndExit() -> Never {
        shutDown()
        finish(code: 0)
    }

    private func finish(code: Int32) -> Never {
        shutDown()
        // A client that reads slowly still gets every message; one that has
        // gone away breaks the pipe, which ends the wait.
        connection.flush(timeout: .infinity)
        // End of input, `exit` and a signal may race here: the first ends the
        // process, the others wait for it to go.
        let first = finishing.withLock { finishing in
            defer { finishing = true }
            return !finishing
        }
        if first { terminate(code) }
        while true { pause() }
    }
}
