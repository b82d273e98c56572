import JSON
import Logging
import Locking

/// Checks incoming messages against the JSON-RPC 2.0 specification and hands
/// valid ones to the handler registered for their method.
public final class Dispatcher: Sendable {
    public typealias RequestHandler = @Sendable (Params, Reply) throws -> Void
    public typealias NotificationHandler = @Sendable (Params) -> Void

    private struct Handlers {
        var requests: [String: RequestHandler] = [:]
        /// The method handled last and its handler: requests come in runs
        /// of one method (a batch of downloads), and a name compared costs
        /// less than one hashed. Forgotten when a handler is registered.
        var lastRequest: (method: String, handler: RequestHandler)?
        var notifications: [String: NotificationHandler] = [:]
        /// When set, every request is answered with this error.
        var refusal: RPCError?
    }

    private let handlers = Locked(Handlers())
    private let limits: MessageLimits
    private let logger: Logger

    public init(limits: MessageLimits = MessageLimits(), logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    public func register(_ method: String, _ handler: @escaping RequestHandler) {
        handlers.withLock {
            $0.requests[method] = handler
            $0.lastRequest = nil
        }
    }

    public func registerNotification(_ method: String, _ handler: @escaping NotificationHandler) {
        handlers.withLock { $0.notifications[method] = handler }
    }

    /// From now on answer every request with `error` (after `shutdown`).
    public func refuseRequests(with error: RPCError?) {
        handlers.withLock { $0.refusal = error }
    }

    public var methods: [String] { handlers.withLock { $0.requests.keys.sorted() } }

    public var notificationMethods: [String] { handlers.withLock { $0.notifications.keys.sorted() } }

    /// Handles one message's bytes; answers go to `sink`, a batch's as one
    /// array once every request in it is answered. A message of more values
    /// or a batch of more entries than `limits` allow is answered with one
    /// -32600 and nothing in it runs.
    public func receive(_ bytes: [UInt8], to sink: some AnswerSink) {
        if limits.holdsTooManyValues(bytes) {
            let error = RPCError.invalidRequest(
                "Invalid Request: a message may hold at most \(limits.maxValues) values",
                data: ["limit": .integer(Int64(limits.maxValues))])
            sink.send(Self.errorResponse(id: .null, error))
            return
        }
        // A batch's entries are classified and run one after another while
        // jansson's tree lives: the first runs before the last is copied.
        let single: Incoming?
        do {
            single = try JSONCodec.decode(bytes) { root in receive(root, to: sink) }
        } catch {
            let text: String
            switch error.reason {
            case .invalidUTF8: text = "Parse error: invalid UTF-8 (\(error))"
            case .integerOverflow: text = "Parse error: integer out of 64-bit range (\(error))"
            case .realOverflow: text = "Parse error: number out of a double's range (\(error))"
            default: text = "Parse error: \(error)"
            }
            logger.debug("\(text)")
            sink.send(Self.errorResponse(id: .null, RPCError(.parseError, text)))
            return
        }
        if let single { handle(single, send: { sink.send($0) }) }
    }

    /// Runs a parsed batch, or returns the one message that is no batch.
    private func receive(_ root: ParsedJSON, to sink: some AnswerSink) -> Incoming? {
        guard root.isArray else { return Incoming(root) }
        let count = root.count
        guard count > 0 else {
            sink.send(Self.errorResponse(id: .null, .invalidRequest("Invalid Request: empty batch")))
            return nil
        }
        guard count <= limits.maxBatchLength else {
            let error = RPCError.invalidRequest(
                "Invalid Request: a batch may hold at most \(limits.maxBatchLength) entries, not \(count)",
                data: ["limit": .integer(Int64(limits.maxBatchLength)), "size": .integer(Int64(count))])
            sink.send(Self.errorResponse(id: .null, error))
            return nil
        }
        // Every entry has its place; a notification's and a response's stay
        // empty, and a batch of only those is answered with nothing.
        let batch = BatchCollector(count: count, sink: sink)
        for index in 0..<count {
            let element = Incoming(root[index])
            guard element.expectsResponse else {
                batch.skip(index)
                handle(element, send: { _ in })
                continue
            }
            if batch.isFull {
                batch.refuse(index, id: element.id)
            } else {
                batch.running(index) {
                    handle(element, batch: batch, send: { [id = element.id] in batch.fill(index, id: id, with: $0) })
                }
            }
        }
        return nil
    }

    private func handle(
        _ incoming: Incoming, batch: BatchCollector? = nil, send: @escaping @Sendable (JSONMessage) -> Void
    ) {
        switch incoming {
        case .invalid(let id, let error):
            send(JSONMessage(Self.errorResponse(id: id, error)))
        case .response(let message):
            logger.debug("ignoring a response from the client: \(message)")
        case .notification(let method, let params):
            guard let handler = handlers.withLock({ $0.notifications[method] }) else {
                logger.debug("ignoring notification \(method)")
                return
            }
            handler(Params(params))
        case .request(let id, let method, let params):
            let (handler, refusal) = handlers.withLock { handlers -> (RequestHandler?, RPCError?) in
                if let last = handlers.lastRequest, last.method == method { return (last.handler, handlers.refusal) }
                let handler = handlers.requests[method]
                if let handler { handlers.lastRequest = (method, handler) }
                return (handler, handlers.refusal)
            }
            let reply = Reply(id: id, method: method, batch: batch, sink: send)
            if let refusal {
                reply.failure(refusal)
            } else if let handler {
                do {
                    try handler(Params(params), reply)
                } catch {
                    let rpcError = error as? RPCError ?? RPCError(.internalError, "\(method) failed: \(error)")
                    if !reply.isAnswered { reply.failure(rpcError) }
                }
            } else {
                reply.failure(RPCError(.methodNotFound, "Method not found: \(method)", data: ["method": .string(method)]))
            }
        }
    }

    public static func errorResponse(id: JSON, _ error: RPCError) -> JSON {
        ["jsonrpc": "2.0", "id": id, "error": error.json]
    }
}

/// One element of what a client sent, classified.
enum Incoming {
    case request(id: JSON, method: String, params: JSON?)
    case notification(method: String, params: JSON?)
    case response(JSON)
    case invalid(id: JSON, RPCError)

    /// Read from jansson's tree: only the id, the method's name and the
    /// params are copied, and a response whole.
    init(_ message: ParsedJSON) {
        guard message.isObject else {
            self = .invalid(id: .null, .invalidRequest("Invalid Request: a message must be an object, not \(message.typeName)"))
            return
        }
        // One pass over the members, comparing names' bytes: every request
        // costs this.
        var givenID: ParsedJSON?
        var givenMethod: ParsedJSON?
        var givenParams: ParsedJSON?
        var version: ParsedJSON?
        var answers = false
        // By length first: each name is compared with the one or two of
        // its length.
        message.forEachMember { name, value in
            switch name.count {
            case 2 where name.holdsExactly("id"): givenID = value
            case 5 where name.holdsExactly("error"): answers = true
            case 6 where name.holdsExactly("method"): givenMethod = value
            case 6 where name.holdsExactly("params"): givenParams = value
            case 6 where name.holdsExactly("result"): answers = true
            case 7 where name.holdsExactly("jsonrpc"): version = value
            default: break
            }
        }
        var id = JSON.null
        if let givenID {
            guard givenID.isIDScalar else {
                self = .invalid(id: .null, .invalidRequest("Invalid Request: id must be a string, a number or null, not \(givenID.typeName)"))
                return
            }
            id = givenID.json
        }
        if givenMethod == nil, answers {
            self = .response(message.json)
            return
        }
        guard version?.isString("2.0") == true else {
            self = .invalid(id: id, .invalidRequest("Invalid Request: \"jsonrpc\" must be \"2.0\""))
            return
        }
        guard let method = givenMethod?.stringValue else {
            self = .invalid(id: id, .invalidRequest("Invalid Request: \"method\" must be a string"))
            return
        }
        var params: JSON?
        if let givenParams, !givenParams.isNull {
            guard givenParams.isArray || givenParams.isObject else {
                self = .invalid(id: id, .invalidRequest("Invalid Request: \"params\" must be an object or an array, not \(givenParams.typeName)"))
                return
            }
            params = givenParams.json
        }
        self = givenID == nil ? .notification(method: method, params: params) : .request(id: id, method: method, params: params)
    }

    var expectsResponse: Bool {
        switch self {
        case .request, .invalid: true
        case .notification, .response: false
        }
    }

    /// The id an answer echoes.
    var id: JSON {
        switch self {
        case .request(let id, _, _), .invalid(let id, _): id
        case .notification, .response: .null
        }
    }
}
