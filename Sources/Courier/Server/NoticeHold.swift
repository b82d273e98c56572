import JSONRPC
import Locking
import Synchronization

/// Keeps a notice back while the answer that introduces what it names waits
/// in a batch not yet written: protocol/ promises that a `download` answer
/// comes before any notification naming its receipt, and a `bind` answer
/// before its view's state, for requests in a batch as for requests alone.
/// A batch's array is written only once every request in it is answered,
/// and a download may finish before that.
///
/// Notices about anything else go out at once; a progress or retrying
/// notice naming both kinds of receipt is split, so no receipt's notices
/// change order.
final class NoticeHold: Sendable {
    enum Subject: Hashable, Sendable {
        case receipt(ReceiptID)
        case view(String)

        /// Where a hash table puts the subject: a receipt where its id would
        /// go (its number mixed with the table's seed, see `NumberHash`),
        /// not through SipHash, as every download's answer holds one back
        /// and releases it again.
        func _rawHashValue(seed: Int) -> Int {
            switch self {
            case .receipt(let id): id._rawHashValue(seed: seed)
            case .view(let name): name._rawHashValue(seed: seed)
            }
        }
    }

    /// A subject whose notices are held: how many answers naming it are
    /// not written yet, and its notices, in the order they happened.
    private struct Held {
        var answers = 0
        var notices: [Notice] = []
    }

    private struct State {
        /// Each held subject, found with one look-up whether an answer,
        /// a notice or a release names it.
        var held: [Subject: Held] = [:]
        /// The subjects of each batch's answers, in the order they came.
        var batches: [Reply.Batch: [Subject]] = [:]
    }

    private let state = Locked(State())
    /// Answers pending, as `state.held` counts them: changed under the
    /// lock, read without it, so that a notice goes out without taking the
    /// lock while no answer waits. It falls to zero only once the released
    /// notices are sent, so a notice that reads zero follows them.
    private let pendingAnswers = Atomic(0)
    private let emit: @Sendable (consuming Notice) -> Void

    init(emit: @escaping @Sendable (consuming Notice) -> Void) {
        self.emit = emit
    }

    /// Call before answering `reply` with an answer about `subject`.
    func answering(_ reply: Reply, about subject: Subject?) {
        guard let subject, let batch = reply.batch else { return }
        // One action per batch releases the subjects of all its answers.
        let first = state.withLock { state in
            state.held[subject, default: Held()].answers += 1
            pendingAnswers.add(1, ordering: .releasing)
            let batches = state.batches.count
            state.batches[batch, default: []].append(subject)
            return state.batches.count > batches
        }
        if first { reply.afterAnswerIsSent { [self] in release(batch) } }
    }

    func notify(_ notice: Notice) {
        guard pendingAnswers.load(ordering: .acquiring) > 0 else { return emit(notice) }
        // Sent under the lock while anything is held, so that a release
        // running meanwhile cannot put older notices after newer ones.
        state.withLock { state in
            guard !state.held.isEmpty else { return emit(notice) }
            switch notice {
            case .progress, .retrying:
                let receipts = notice.receipts
                var free: [ReceiptID] = []
                for receipt in receipts {
                    if let index = state.held.index(forKey: .receipt(receipt)) {
                        state.held.values[index].notices.append(notice.naming([receipt]))
                    } else {
                        free.append(receipt)
                    }
                }
                if !free.isEmpty { emit(free.count == receipts.count ? notice : notice.naming(free)) }
            case .finished(let receipt, _, _):
                hold(notice, about: .receipt(receipt), in: &state)
            case .view(let view):
                hold(notice, about: .view(view.view), in: &state)
            }
        }
    }

    private func hold(_ notice: Notice, about subject: Subject, in state: inout State) {
        if let index = state.held.index(forKey: subject) {
            state.held.values[index].notices.append(notice)
        } else {
            emit(notice)
        }
    }

    /// Releases the subjects of `batch`'s answers, now sent, in turn.
    private func release(_ batch: Reply.Batch) {
        state.withLock { state in
            for subject in state.batches.removeValue(forKey: batch) ?? [] {
                guard let index = state.held.index(forKey: subject) else { continue }
                defer { pendingAnswers.subtract(1, ordering: .releasing) }
                if state.held.values[index].answers > 1 {
                    state.held.values[index].answers -= 1
                    continue
                }
                var notices = state.held.remove(at: index).value.notices
                // A subject's one notice (a hit's `download/finished`) moves
                // out of the list; several are each lent to `emit` where
                // they lie, oldest first, neither copied out nor moved within.
                if notices.count == 1 { emit(notices.removeLast()) }
                notices.withUnsafeBufferPointer { notices in
                    for index in notices.indices { emit(notices[index]) }
                }
            }
        }
    }
}

extension Answer {
    /// What the answer introduces to the client, which notices must follow.
    var subject: NoticeHold.Subject? {
        switch self {
        case .download(let reply): .receipt(reply.receipt)
        case .bound(let view, _): .view(view)
        case .cancelled, .task, .tasks, .receipt: nil
        }
    }
}

extension Notice {
    /// The receipts it names.
    var receipts: [ReceiptID] {
        switch self {
        case .progress(_, let receipts): receipts
        case .retrying(let retry): retry.receipts
        case .finished(let receipt, _, _): [receipt]
        case .view: []
        }
    }

    /// A task's notice (progress, retrying) naming only `receipts` of its
    /// receipts; any other notice as it is.
    func naming(_ receipts: [ReceiptID]) -> Notice {
        switch self {
        case .progress(let figures, _):
            return .progress(figures, receipts: receipts)
        case .retrying(var retry):
            retry.receipts = receipts
            return .retrying(retry)
        case .finished, .view:
            return self
        }
    }
}

extension ViewNotice {
    var view: String {
        switch self {
        case .animating(let view, _), .progress(let view, _, _): view
        }
    }
}
