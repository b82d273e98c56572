/// A task's figures: the params of `download/progress`, and what `progress`
/// answers.
struct TaskProgress: Hashable, Sendable {
    var task: TaskID
    var received: Int64
    var expected: Int64?
    var bytesPerSecond: Double

    var fraction: Double? {
        guard let expected, expected > 0 else { return nil }
        return min(1, Double(received) / Double(expected))
    }

    static func none(task: TaskID) -> TaskProgress {
        TaskProgress(task: task, received: 0, expected: nil, bytesPerSecond: 0)
    }
}

/// `progress {receipt}`'s answer, also kept for finished receipts.
struct ReceiptProgress: Hashable, Sendable {
    var receipt: ReceiptID
    var figures: TaskProgress
    var state: ReplyState
}

/// Where a receipt's task stands, as answers tell it.
enum ReplyState: Hashable, Sendable {
    case queued
    case running
    case suspended
    case retrying
    /// The task has ended (its receipts' outcomes may still be prepared).
    case finished
}

/// One task in `progress {}`'s answer.
struct TaskReport: Hashable, Sendable {
    var figures: TaskProgress
    var receipts: [ReceiptID]
    var state: ReplyState
}

/// The answer to `download`: the receipt, and its outcome when it has
/// finished and was waited for.
struct DownloadReply: Sendable {
    var receipt: ReceiptID
    var task: TaskID
    /// `queued`, `running` or `finished`.
    var state: ReplyState
    var reused: Bool
    var source: OutcomeSource?
    var outcome: Outcome?
}

/// What a request is answered with, in the order it happened among the
/// notifications.
enum Answer: Sendable {
    case download(DownloadReply)
    case bound(view: String, Bool)
    case cancelled(count: Int)
    /// `suspend` and `resume`: the task and its state now.
    case task(id: TaskID, state: ReplyState)
    case tasks([TaskReport])
    case receipt(ReceiptProgress)
}

/// Notifications, in the order they happened.
enum Notice: Sendable {
    case progress(TaskProgress, receipts: [ReceiptID])
    case finished(receipt: ReceiptID, task: TaskID, outcome: Outcome)
    case view(ViewNotice)
    case retrying(RetryNotice)
}

/// `download/retrying`: a task's attempt failed, and its receipts wait
/// `delay` seconds for attempt number `attempt`.
struct RetryNotice: Sendable {
    var task: TaskID
    /// The receipts that wait; those whose budget was spent have finished.
    var receipts: [ReceiptID]
    var attempt: Int
    var delay: Double
    var error: TransferFailure
    /// The failed response's status, for an `http_status` error.
    var httpStatus: Int?
}

/// What a started transfer needs.
struct TransferOrder: Sendable {
    var id: TransferID
    var request: DownloadRequest
    /// What this attempt asks: the request's `url`, or one of its task's
    /// mirrors.
    var url: String
    /// The stored response this attempt asks the origin to validate.
    var revalidating: Revalidation?
    /// The first receipt's destination, beside which the body may stream.
    var destination: String?
    /// A receipt asks for the body as text: the transfer counts what the
    /// body takes as a JSON string as it arrives.
    var countsText = false
    /// The algorithms the receipts' `integrity` decides by: the transfer
    /// takes those digests as the body arrives.
    var digestAlgorithms: Set<HashAlgorithm> = []
    /// Bytes per second the transfer may take (`TaskRecord.maxRate`).
    var maxRate: Int64?
}

/// A finished transfer and the receipts it answers, for delivery.
struct DeliveryOrder: Sendable {
    var id: TransferID
    var request: DownloadRequest
    /// The stored response the transfer asked the origin to validate.
    var revalidating: Revalidation?
    var receipts: [(id: ReceiptID, request: DownloadRequest)]
    var result: TransferResult
}

/// A stored response a task asks the origin to validate, held by
/// reference: task records, and the orders and actions made of them, are
/// copied and moved at every step of every task, and the response held
/// inline made each of them some 250 bytes larger, for the few tasks that
/// revalidate.
final class Revalidation: Sendable {
    let stale: ResponseCache.Stale

    init(_ stale: ResponseCache.Stale) { self.stale = stale }
}

/// What the scheduler asks of the world, in order.
enum SchedulerAction<Waiter> {
    case answer(Waiter, Answer)
    case notify(Notice)
    case start(TransferOrder)
    /// Stops a transfer; its partial body goes, or stays in the partial
    /// store when it may be resumed.
    case stop(TransferID)
    case pause(TransferID)
    case resume(TransferID)
    /// A started transfer's rate limit changed as receipts joined or left
    /// its task: bytes per second, nil for none.
    case limit(TransferID, maxRate: Int64?)
    case deliver(DeliveryOrder)
    /// A body file nobody will read.
    case discard(path: String)
    /// For the network activity indicator.
    case transferStarted(task: TaskID)
    case transferStopped(task: TaskID)
    /// Call `tick(now:)` once the clock reaches this moment: a task's wait
    /// before its next attempt ends then. Asking again for a later moment
    /// does not put off an earlier one.
    case wake(at: Double)
}

extension SchedulerAction: Sendable where Waiter: Sendable {}

/// Why an event names nothing the scheduler knows.
enum SchedulerError: Error, Equatable {
    case unknownReceipt(ReceiptID)
    case unknownTask(TaskID)
}
