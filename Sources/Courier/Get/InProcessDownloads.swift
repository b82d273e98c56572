import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
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
        /// The file's name; with `nameFromResponse`, the name it takes when
        /// the response gives none.
        public var name: String
        /// Name the file after its response's `Content-Disposition`
        /// filename, when it has one (`--remote-header-name`).
        public var nameFromResponse: Bool
        /// What to do with a file that has the name already.
        public var existing: ExistingFile
        /// The body's expected digests, in Subresource Integrity form (the
        /// `integrity` param).
        public var integrity: String?

        public init(
            url: String, directory: OutputDirectory, name: String, nameFromResponse: Bool = false,
            existing: ExistingFile = .refuse, integrity: String? = nil
        ) {
            self.url = url
            self.directory = directory
            self.name = name
            self.nameFromResponse = nameFromResponse
            self.existing = existing
            self.integrity = integrity
        }
    }

    /// What `start` did with a request.
    public enum Start: Sendable {
        /// Under way as request `number`, towards the file `name` (a
        /// request named by its response may end under another).
        case started(number: Int, name: String)
        /// Not fetched: the file `name` exists and the request said to skip
        /// it.
        case skipped(name: String)
    }

    /// Where a running request stands (`download/progress`).
    public struct Progress: Sendable {
        public var received: Int64
        public var expected: Int64?
    }

    /// A request's attempt failed and the next waits (`download/retrying`).
    public struct Retry: Sendable {
        /// The number of the attempt to come: 2 for the first retry.
        public var attempt: Int
        /// Seconds until it starts.
        public var delay: Double
        /// The failed attempt's error code (`http_status`, `network`, …).
        public var errorCode: String
        public var errorMessage: String
        /// The failed response's status, for `http_status`.
        public var httpStatus: Int?
    }

    /// How a request ended (the outcome of `download/finished`).
    public struct Completion: Sendable {
        public var url: String
        public var path: String?
        public var size: Int64
        public var source: String
        public var durationMs: Double
        /// Requests to origins the download took: 0 for a cache hit.
        public var attempts: Int
        /// The byte offset a kept partial body was continued from.
        public var resumedFrom: Int64?
        /// The file's name in its directory; nil when no file was made.
        public var name: String?
        /// The body came, and a file with its name was there and stays
        /// (`ExistingFile.skip`).
        public var skipped: Bool
        /// A file had the name and holds the body the cache has for the
        /// URL: it stays, and the download counts as done
        /// (`ExistingFile.refuse`).
        public var alreadyComplete: Bool
        /// One of the outcome error codes (`http_status`, `cancelled`, …),
        /// or `file_exists` when a file had the name and the request said
        /// to keep it (`ExistingFile.refuse`), or another URL of the run
        /// had claimed it.
        public var errorCode: String?
        public var errorMessage: String?
        /// With `integrity_mismatch`: the digests asked for and the body's.
        public var expected: String?
        public var actual: String?
        /// With a failure: the seconds an origin's `Retry-After` asked for
        /// when waiting that long is why no attempt followed.
        public var retryAfter: Int64?
        /// Why the name was taken, with `file_exists`.
        public var conflict: NameConflict?
        /// The outcome as the downloader gave it, with the path of the
        /// file placed.
        let outcome: Outcome

        public var ok: Bool { errorCode == nil }

        /// Served by a cache tier without asking the origin.
        public var fromCache: Bool { source == "memory" || source == "disk" }

        init(_ outcome: Outcome, name: String?, skipped: Bool = false, alreadyComplete: Bool = false) {
            self.name = name
            self.skipped = skipped
            self.alreadyComplete = alreadyComplete
            url = outcome.url
            path = outcome.path
            size = outcome.size
            source = outcome.source.rawValue
            durationMs = outcome.durationMs
            attempts = outcome.attempts
            resumedFrom = outcome.resumedFrom.flatMap { $0 > 0 ? $0 : nil }
            errorCode = outcome.error?.code.rawValue
            errorMessage = outcome.error?.message
            expected = outcome.error?.expected
            actual = outcome.error?.actual
            retryAfter = outcome.error == nil ? nil : outcome.retryAfter
            self.outcome = outcome
        }

        /// A download whose body came and was dropped: its name was taken.
        static func nameTaken(_ outcome: Outcome, _ conflict: NameConflict) -> Completion {
            var completion = Completion(outcome, name: nil)
            completion.path = nil
            completion.errorCode = fileExists
            completion.errorMessage = conflict.description
            completion.conflict = conflict
            return completion
        }
    }

    /// The error code of a download whose name a file or another URL of the
    /// run has.
    public static let fileExists = "file_exists"

    /// Why a download may not have its name.
    public enum NameConflict: Sendable, CustomStringConvertible {
        /// Something in the directory has the name.
        case exists(name: String)
        /// Another URL of this run is saved under the name.
        case claimed(name: String)

        public var name: String {
            switch self {
            case .exists(let name), .claimed(let name): name
            }
        }

        public var description: String {
            switch self {
            case .exists(let name): "\(name) exists"
            case .claimed(let name): "another URL of this run is saved as \(name)"
            }
        }
    }

    /// Events name requests by the number `start` returned.
    public enum Event: Sendable {
        case progress(request: Int, Progress)
        case retrying(request: Int, Retry)
        case finished(request: Int, Completion)
    }

    /// A request refused before any transfer: by the downloader
    /// (`invalid_request`), or because its name is taken (`file_exists`).
    public struct RequestError: Error, Sendable, CustomStringConvertible {
        public var code: String
        public var message: String
        /// Why the name was taken, with `file_exists`.
        public var conflict: NameConflict?
        public var description: String { "\(code): \(message)" }

        init(code: String, message: String) {
            self.code = code
            self.message = message
        }

        init(_ conflict: NameConflict) {
            self.init(code: fileExists, message: conflict.description)
            self.conflict = conflict
        }
    }

    /// Where a started request's body goes: delivered as `staged`, then
    /// placed under its name; or, for a name a file has, the cache's body
    /// for the request, delivered as `staged` to be compared with that file.
    private struct Placement: Sendable {
        var request: Request
        var staged: String
        /// The request asks the cache alone whether the file at its name is
        /// its body.
        var checksExisting = false

        /// The completion once the staged file has its name, or the reason
        /// it has none.
        func finish(_ outcome: Outcome) -> Completion {
            var outcome = outcome
            let directory = request.directory
            var name = request.name
            if checksExisting {
                let same = outcome.ok && outcome.path != nil && directory.sameContents(staged, name)
                directory.remove(staged)
                guard same else { return .nameTaken(outcome, .exists(name: name)) }
                outcome.path = directory.path + "/" + name
                return Completion(outcome, name: name, alreadyComplete: true)
            }
            guard outcome.ok, outcome.path != nil else { return Completion(outcome, name: nil) }
            if request.nameFromResponse {
                name = outcome.headers["content-disposition"].flatMap(RemoteFileName.forContentDisposition) ?? name
                guard directory.claim(name) else {
                    directory.remove(staged)
                    return .nameTaken(outcome, .claimed(name: name))
                }
            }
            do throws(Destination.Failure) {
                switch try directory.place(staged, as: name, existing: request.existing) {
                case .placed:
                    outcome.path = directory.path + "/" + name
                    return Completion(outcome, name: name)
                case .exists:
                    // A name learnt from the response could not be checked
                    // before the transfer: the file there is compared now.
                    let same = request.existing == .refuse && directory.sameContents(staged, name)
                    directory.remove(staged)
                    outcome.path = directory.path + "/" + name
                    if same { return Completion(outcome, name: name, alreadyComplete: true) }
                    guard request.existing == .skip else { return .nameTaken(outcome, .exists(name: name)) }
                    return Completion(outcome, name: name, skipped: true)
                }
            } catch {
                directory.remove(staged)
                outcome.error = error.transferFailure
                outcome.path = nil
                return Completion(outcome, name: nil)
            }
        }
    }

    private struct State {
        var next = 0
        var placements: [Int: Placement] = [:]
        var requestsByReceipt: [ReceiptID: Int] = [:]
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
                    handler(.finished(request: request, placement?.finish(outcome) ?? Completion(outcome, name: nil)))
                    unfinished.leave()
                }
            case .retrying(let notice):
                let requests = state.withLock { state in notice.receipts.compactMap { state.requestsByReceipt[$0] } }
                let retry = Retry(
                    attempt: notice.attempt, delay: notice.delay, errorCode: notice.error.code.rawValue,
                    errorMessage: notice.error.message, httpStatus: notice.httpStatus)
                events.async { for request in requests { handler(.retrying(request: request, retry)) } }
            case .view:
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
    /// directory, which takes the request's name once complete. A name
    /// another URL of this run has claimed stops it here (`file_exists`),
    /// as does a file with the name under `ExistingFile.skip` (`skipped`).
    /// Under `ExistingFile.refuse` such a file is compared with the body
    /// the cache holds for the request, without asking any origin: the
    /// same bytes finish it `alreadyComplete`, anything else (or nothing
    /// stored) `file_exists`. Every call takes the next number, a refused
    /// request too, so numbers follow the order of calls.
    public func start(_ request: Request) throws(RequestError) -> Start {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        let staged = OutputDirectory.stagingName(for: request.name)
        let checked: DownloadRequest
        let checksExisting = !request.nameFromResponse && request.existing != .replace
            && request.directory.exists(request.name)
        do throws(DownloadRequest.Refusal) {
            checked = try DownloadRequest(
                url: request.url, cachePolicy: checksExisting && request.existing == .refuse ? .cacheOnly : .default,
                destination: request.directory.path + "/" + staged, integrity: request.integrity,
                defaults: configuration)
        } catch {
            throw RequestError(code: "invalid_request", message: error.description)
        }
        if checksExisting, request.existing == .skip { return .skipped(name: request.name) }
        if !request.nameFromResponse {
            guard request.directory.claim(request.name) else { throw RequestError(.claimed(name: request.name)) }
        }
        state.withLock { state in
            state.placements[id] = Placement(request: request, staged: staged, checksExisting: checksExisting)
        }
        unfinished.enter()
        downloader.download(checked, waiter: id)
        return .started(number: id, name: request.name)
    }

    /// Ends every unfinished request with `cancelled`; their partial files go.
    public func cancelAll() {
        downloader.cancel(.all, waiter: 0)
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
}
