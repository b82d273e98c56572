import Foundation
import JSONRPC

/// What makes two requests the same task: only fields that change what the
/// origin is asked.
struct TaskKey: Hashable, Sendable {
    var method: String
    /// As the client sent it, compared as bytes.
    var url: ExactString
    /// `name: value` lines, names in lower case, sorted, compared as bytes.
    var headers: [ExactString]
    var timeout: Double

    init(_ request: DownloadRequest) {
        method = "GET"
        url = ExactString(request.url)
        headers = request.headers.map { "\($0.name.lowercased()): \($0.value)" }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            .map(ExactString.init)
        timeout = request.timeout
    }
}

/// One transfer from the origin, shared by every receipt that asked for it.
/// Its state is guarded by the downloader's lock.
final class DownloadTask: @unchecked Sendable {
    enum State: String {
        case queued
        case running
        case suspended
        /// Completed, failed or cancelled: no longer in the downloader's maps.
        case finished
    }

    let id: String
    let key: TaskKey
    let request: DownloadRequest
    var receipts: [Receipt] = []
    var state = State.queued
    /// Whether the transfer has been handed to the engine.
    var started = false
    var priority: Priority
    /// Bumped whenever the task's place in the run queue changes, so older
    /// queue entries are skipped.
    var queueGeneration = 0
    var transfer: Transfer?
    /// The stored response this task asks the origin to validate.
    var revalidation: ResponseCache.Stale?
    /// When the request was sent, for the stored response's age.
    var requestDate = Date()

    var received: Int64 = 0
    var expected: Int64?
    /// Seconds spent running (not suspended) before `runningSince`.
    var activeSeconds = 0.0
    var runningSince: Double?
    var lastProgressAt = -Double.infinity
    var lastProgressReceived: Int64 = -1

    init(id: String, request: DownloadRequest) {
        self.id = id
        self.key = TaskKey(request)
        self.request = request
        self.priority = request.priority
    }

    func bytesPerSecond(now: Double) -> Double {
        let seconds = activeSeconds + (runningSince.map { now - $0 } ?? 0)
        return seconds > 0 ? Double(received) / seconds : 0
    }

    var fraction: Double? {
        guard let expected, expected > 0 else { return nil }
        return min(1, Double(received) / Double(expected))
    }
}

/// One client's claim on a task's result: it ends with exactly one
/// `download/finished`.
/// Its state is guarded by the downloader's lock.
final class Receipt: @unchecked Sendable {
    enum Phase {
        case active
        /// Its task has ended and its outcome is being prepared.
        case completing
        case finished
    }

    let id: String
    let request: DownloadRequest
    let createdAt: Double
    let taskID: String
    var task: DownloadTask?
    var phase = Phase.active
    /// The replies of `download`s with `wait: true` that made or reused
    /// this receipt: each is answered with the outcome when it finishes.
    var waiters: [(reply: Reply, reused: Bool)] = []

    init(id: String, taskID: String, request: DownloadRequest, createdAt: Double) {
        self.id = id
        self.taskID = taskID
        self.request = request
        self.createdAt = createdAt
    }
}
