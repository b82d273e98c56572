import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON
import JSONRPC
import Locking
import Logging

/// The server's downloader and cache driven from Swift in the same process,
/// for `courier get`: requests go in as values, and each request's progress
/// and outcome come back as events, in the order they happened, on a serial
/// queue of their own (so a slow handler never holds up a transfer).
public final class InProcessDownloads: Sendable {
    /// One file to fetch.
    public struct Request: Sendable {
        public var url: String
        /// Absolute path the body is renamed to once complete.
        public var destination: String

        public init(url: String, destination: String) {
            self.url = url
            self.destination = destination
        }
    }

    /// Where a running request stands (`download/progress`).
    public struct Progress: Sendable {
        public var received: Int64
        public var expected: Int64?
    }

    /// How a request ended (the outcome of `download/finished`).
    public struct Completion: Sendable {
        public var url: String
        public var path: String?
        public var size: Int64
        public var source: String
        public var durationMs: Double
        /// One of the outcome error codes (`http_status`, `cancelled`, …).
        public var errorCode: String?
        public var errorMessage: String?
        /// The outcome as `download/finished` carries it.
        public var json: JSON

        public var ok: Bool { errorCode == nil }

        init(outcome: JSON) {
            url = outcome["url"]?.stringValue ?? ""
            path = outcome["path"]?.stringValue
            size = outcome["size"]?.integerValue ?? 0
            source = outcome["source"]?.stringValue ?? ""
            durationMs = outcome["durationMs"]?.doubleValue ?? 0
            errorCode = outcome["error"]?["code"]?.stringValue
            errorMessage = outcome["error"]?["message"]?.stringValue
            json = outcome
        }
    }

    /// Events name requests by the number `start` returned.
    public enum Event: Sendable {
        case progress(request: Int, Progress)
        case finished(request: Int, Completion)
    }

    /// A request the downloader refused before starting it.
    public struct RequestError: Error, Sendable, CustomStringConvertible {
        public var code: String
        public var message: String
        public var description: String { "\(code): \(message)" }
    }

    private struct State {
        var next = 0
        var requestsByReceipt: [String: Int] = [:]
    }

    private let downloader: Downloader<Int>
    private let configuration: Configuration
    private let state: Locked<State>
    private let events: DispatchQueue
    /// Entered per started request, left once its `finished` event has run.
    private let unfinished: DispatchGroup

    public init(configuration: Configuration, logger: Logger, events handler: @escaping @Sendable (Event) -> Void) throws {
        let state = Locked(State())
        let events = DispatchQueue(label: "courier.in-process.events")
        let unfinished = DispatchGroup()
        // Called in the order things happened: a request's answer (naming
        // its receipt) before the receipt's notices. Only look-ups here, the
        // handler runs on `events`.
        let answer: @Sendable (Int, Answer) -> Void = { request, answer in
            guard case .download(let reply) = answer else { return }
            state.withLock { $0.requestsByReceipt[reply.receipt] = request }
        }
        let notify: @Sendable (Notice) -> Void = { notice in
            switch notice {
            case .progress(let figures, let receipts):
                let requests = state.withLock { state in receipts.compactMap { state.requestsByReceipt[$0] } }
                let progress = Progress(received: figures.received, expected: figures.expected)
                events.async { for request in requests { handler(.progress(request: request, progress)) } }
            case .finished(let receipt, _, let outcome):
                guard let request = state.withLock({ $0.requestsByReceipt.removeValue(forKey: receipt) }) else { return }
                let completion = Completion(outcome: outcome.json)
                events.async {
                    handler(.finished(request: request, completion))
                    unfinished.leave()
                }
            case .view:
                break
            }
        }
        let cache = ResponseCache(configuration: configuration, logger: logger)
        downloader = try Downloader(settings: configuration, cache: cache, answer: answer, notify: notify, logger: logger)
        self.configuration = configuration
        self.state = state
        self.events = events
        self.unfinished = unfinished
    }

    /// Starts a request and returns its number; its events follow.
    public func start(_ request: Request) throws(RequestError) -> Int {
        let checked: DownloadRequest
        do throws(RPCError) {
            checked = try DownloadRequest(
                Params(["url": .string(request.url), "destination": .string(request.destination)]), defaults: configuration)
        } catch {
            throw RequestError(code: "invalid_request", message: error.message)
        }
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        unfinished.enter()
        downloader.download(checked, waiter: id)
        return id
    }

    /// Ends every unfinished request with `cancelled`; their partial files go.
    public func cancelAll() {
        try? downloader.cancel(.all, waiter: 0)
    }

    /// Blocks until every started request's `finished` event has run.
    public func waitUntilFinished() {
        unfinished.wait()
    }

    /// Ends what is left with `shutdown`, stops the transfers and removes
    /// courier's own files; the cache stays.
    public func shutdown() {
        downloader.shutdown()
        events.sync {}
    }

    /// A safe file name from a URL's last path component, as the downloader
    /// names the files it keeps.
    public static func fileName(for url: String) -> String {
        Delivery.fileName(for: url)
    }
}
