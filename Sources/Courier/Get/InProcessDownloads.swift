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
        /// Where the file goes.
        public var directory: OutputDirectory
        /// The file's name before any numbering (`report.pdf`).
        public var name: String

        public init(url: String, directory: OutputDirectory, name: String) {
            self.url = url
            self.directory = directory
            self.name = name
        }
    }

    /// A request under way: its number, which its events carry, and the
    /// name it has in its directory for now.
    public struct Started: Sendable {
        public var number: Int
        public var name: String
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
        /// The file's name in its directory: the one `start` gave, or the
        /// next free one when a file took that name during the download;
        /// nil when no file was made.
        public var name: String?
        /// One of the outcome error codes (`http_status`, `cancelled`, …).
        public var errorCode: String?
        public var errorMessage: String?
        /// The outcome as `download/finished` carries it.
        public var json: JSON

        public var ok: Bool { errorCode == nil }

        init(outcome: JSON, name: String?) {
            self.name = name
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

    /// Where a started request's body goes: delivered as `staged`, then
    /// placed as `name` (or the next free name from `base`).
    private struct Placement: Sendable {
        var directory: OutputDirectory
        var base: String
        var name: String
        var staged: String

        /// The outcome once the staged file has its own name, or the failure
        /// to give it one.
        func finish(_ outcome: Outcome) -> (Outcome, name: String?) {
            var outcome = outcome
            guard outcome.ok, outcome.path != nil else { return (outcome, nil) }
            do throws(Destination.Failure) {
                let placed = try directory.place(staged, as: name, base: base)
                outcome.path = directory.path + "/" + placed
                return (outcome, placed)
            } catch {
                directory.remove(staged)
                outcome.error = error.transferFailure
                outcome.path = nil
                return (outcome, nil)
            }
        }
    }

    private struct State {
        var next = 0
        var placements: [Int: Placement] = [:]
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
                guard let (request, placement) = state.withLock({ state -> (Int, Placement?)? in
                    guard let request = state.requestsByReceipt.removeValue(forKey: receipt) else { return nil }
                    return (request, state.placements.removeValue(forKey: request))
                }) else { return }
                events.async {
                    let (placed, name) = placement?.finish(outcome) ?? (outcome, nil)
                    handler(.finished(request: request, Completion(outcome: placed.json, name: name)))
                    unfinished.leave()
                }
            case .view, .retrying:
                break
            }
        }
        let root = try CacheRoot(opening: configuration.cacheDir, logger: logger)
        let cache = ResponseCache(configuration: configuration, root: root, logger: logger)
        downloader = try Downloader(
            settings: configuration, root: root, cache: cache, answer: answer, notify: notify, logger: logger)
        self.configuration = configuration
        self.state = state
        self.events = events
        self.unfinished = unfinished
    }

    /// Starts a request: its body goes to a hidden file in the request's
    /// directory, which takes the first free name from `request.name` once
    /// complete. Every call takes the next number, a refused request too, so
    /// numbers follow the order of calls.
    public func start(_ request: Request) throws(RequestError) -> Started {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        let staged = OutputDirectory.stagingName(for: request.name)
        let checked: DownloadRequest
        do throws(RPCError) {
            checked = try DownloadRequest(
                Params(["url": .string(request.url), "destination": .string(request.directory.path + "/" + staged)]),
                defaults: configuration)
        } catch {
            throw RequestError(code: "invalid_request", message: error.message)
        }
        let name = request.directory.reserve(request.name)
        state.withLock { state in
            state.placements[id] = Placement(directory: request.directory, base: request.name, name: name, staged: staged)
        }
        unfinished.enter()
        downloader.download(checked, waiter: id)
        return Started(number: id, name: name)
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
