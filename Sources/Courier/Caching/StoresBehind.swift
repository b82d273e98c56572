#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking

/// Stores of finished downloads written behind their outcomes, as
/// NSURLCache writes its disk entries: on a thread of their own at the
/// lowest priority, so that they take the CPU time the transfers, their
/// deliveries and the output leave over rather than theirs. On two busy
/// cores the stores of many small downloads otherwise hold a core the
/// engine's thread then waits for.
///
/// What this process asks of the cache still sees every store at once:
/// `ResponseCache` settles the waiting stores of a key before it reads or
/// writes that key, and all of them before any other operation
/// (`settle`), running them on the caller's thread. Other processes sharing
/// the cache directory see a store once it is made: within moments, and at
/// the latest when this process shuts down, which settles them all.
///
/// Stores are made in order, in write transactions of at most
/// `storesPerTransaction` that `commit` opens: the writer takes its stores
/// inside the transaction, and a settling caller takes what is left inside
/// its own, so the transaction lock that keeps writes apart also keeps a
/// later store of a key from being overtaken by an earlier one.
final class StoresBehind: Sendable {
    /// A descriptor of a body's file, shared by the delivery that names the
    /// file at its destination and the store that links it into the disk
    /// tier, and closed when both are done with it.
    final class OpenFile: Sendable {
        let descriptor: Int32

        /// Takes `descriptor` over: it is closed when the last holder lets go.
        init(owning descriptor: Int32) {
            self.descriptor = descriptor
        }

        deinit { close(descriptor) }
    }

    /// One deferred store and the keys it writes.
    struct Store: Sendable {
        var keys: [String]
        var make: @Sendable () -> Void
    }

    private struct State {
        var waiting: [Store] = []
        /// How many waiting or running stores write each key.
        var keys: [String: Int] = [:]
        /// The writer has been started.
        var started = false
        /// No more stores come: the writer ends once the waiting ones are made.
        var closed = false

        mutating func take(atMost count: Int) -> [Store] {
            let taken = Array(waiting.prefix(count))
            waiting.removeFirst(taken.count)
            return taken
        }

        mutating func made(_ stores: [Store]) {
            for store in stores {
                for key in store.keys {
                    if let count = keys[key], count > 1 { keys[key] = count - 1 } else { keys[key] = nil }
                }
            }
        }
    }

    /// At most this many stores wait: past it `add` declines, and the caller
    /// stores at once. Each holds a descriptor of its body's file open (not
    /// the body). Few, so that what is left when the work ends is made
    /// within a millisecond or two (at shutdown, if the writer has had no
    /// CPU time to spare), and stores never pile up behind a busy machine.
    static let limit = 64
    /// The most stores the writer makes in one transaction: what a settling
    /// caller may wait for while the writer, at its low priority, makes them.
    static let storesPerTransaction = 8

    private let state = Monitor(State())
    /// Runs its argument inside one write transaction of the disk tier.
    private let commit: @Sendable (() -> Void) -> Void
    /// Whether a writer's thread makes the stores; without one they wait
    /// until they are settled.
    private let writes: Bool

    init(writes: Bool = true, commit: @escaping @Sendable (() -> Void) -> Void) {
        self.writes = writes
        self.commit = commit
    }

    /// Queues `stores` behind the caller; false, and nothing queued, when
    /// that would take more than `limit` waiting.
    func add(_ stores: [Store]) -> Bool {
        guard !stores.isEmpty else { return true }
        let start = state.withLock { state -> Bool? in
            guard !state.closed, state.waiting.count + stores.count <= Self.limit else { return nil }
            state.waiting.append(contentsOf: stores)
            for store in stores {
                for key in store.keys { state.keys[key, default: 0] += 1 }
            }
            defer { state.started = true }
            return writes && !state.started
        }
        guard let start else { return false }
        if start { startThread(named: "courier.cache.w") { [self] in write() } }
        return true
    }

    /// Makes, on the calling thread, the waiting stores, once those the
    /// writer is making are made, when one of them writes `key` (any key
    /// when nil). Returns at once when none does.
    func settle(_ key: String? = nil) {
        let pending = state.withLock(wake: false) { state in
            if let key { state.keys[key] != nil } else { !state.keys.isEmpty }
        }
        guard pending else { return }
        makeWaiting(atMost: Int.max)
    }

    /// Lets the writer end once the waiting stores are made.
    func end() {
        state.withLock { $0.closed = true }
    }

    /// The writer's loop, at nice 19: the lowest priority of a thread
    /// that shares the CPU in turn with the others.
    private func write() {
        #if os(Linux)
        // On Linux a nice value is a thread's own: 0 names the caller.
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
        #endif
        while true {
            let more = state.wait(until: { !$0.waiting.isEmpty || $0.closed }, wake: false) { !$0.waiting.isEmpty }
            guard more else { return }
            makeWaiting(atMost: Self.storesPerTransaction)
        }
    }

    /// Makes at most `count` of the waiting stores in one transaction,
    /// taken inside it, so that it waits for the one another thread has
    /// open; their keys count as made once it commits.
    private func makeWaiting(atMost count: Int) {
        var taken: [Store] = []
        commit {
            taken = state.withLock(wake: false) { $0.take(atMost: count) }
            for store in taken { store.make() }
        }
        state.withLock(wake: false) { $0.made(taken) }
    }
}
