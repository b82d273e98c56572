/// Bytes per second shared among transfers, as a value: a rate for all of
/// them together (`--max-download-rate`), shared fairly among those that
/// run, and a rate of each one's own (`maxRate`). It keeps no time of its
/// own: every change names the moment it happens (seconds of a monotonic
/// clock).
///
/// Each flow holds credit, the bytes it may still take. A piece of body is
/// taken whole while credit is left (libcurl hands over pieces it cannot
/// split), so credit may go below zero by one piece: the flow owes it, and
/// waits (its transfer paused) until refills have paid it back. A refill
/// hands out what the time since the last one allows: to each flow, at most
/// its own rate × that time; of the total rate × that time, equal parts to
/// the flows that take them. A flow that needs less than its share (its
/// origin is slower) keeps no more than `burst` seconds of it and takes
/// nothing more, so what it leaves goes to the others; a waiting flow takes
/// all it is given. So the total stays under its rate, and every flow gets
/// the larger of its equal share and what the others leave (max-min
/// fairness).
///
/// Flows that no limit applies to are free: `admit` lets them through
/// without counting, and while no limit is set at all nothing is counted.
struct RateLimiter<Key: Hashable> {
    /// Seconds of its share a flow that takes less than it may keep as
    /// credit: its largest burst after a pause of its origin.
    static var burst: Double { 0.1 }
    /// Seconds between refills while a flow waits for one.
    static var refillInterval: Double { 0.01 }

    private struct Flow {
        /// Its own rate, bytes per second; nil for none.
        var rate: Int64?
        /// Bytes it may take before it waits; below zero, what it owes.
        var credit = 0.0
        /// Suspended by the client: it takes no share and is never released.
        var isSuspended = false
    }

    /// Bytes per second for all flows together; nil for none.
    private(set) var totalRate: Int64?
    private var flows: [Key: Flow] = [:]
    /// Flows refused bytes since their last release, which their transfer
    /// holds until `refill` names them.
    private var waiting: Set<Key> = []
    /// Flows with a rate of their own, so that `isLimiting` costs nothing.
    private var ownRates = 0
    /// Flows suspended by the client.
    private var suspended = 0
    /// When credit was last handed out.
    private var refilledAt: Double

    /// `totalRate` of nil or less than 1 is none.
    init(totalRate: Int64? = nil, now: Double) {
        self.totalRate = Self.rate(totalRate)
        refilledAt = now
    }

    /// Whether any limit applies: when none does, `admit` counts nothing.
    var isLimiting: Bool { totalRate != nil || ownRates > 0 }

    /// Whether `refill` has anything to do: a limit applies, or a flow
    /// waits to be released.
    var isEngaged: Bool { isLimiting || !waiting.isEmpty }

    /// When the next refill is due: while a flow waits, `refillInterval`
    /// after the last one; nil while none waits.
    var nextRefill: Double? { waiting.isEmpty ? nil : refilledAt + Self.refillInterval }

    /// Whether any flow is counted.
    var isCounting: Bool { !flows.isEmpty }

    /// Whether `key` is counted; no look-up while no flow is.
    func counts(_ key: Key) -> Bool { !flows.isEmpty && flows[key] != nil }

    /// Whether `key` waits for a refill.
    func isWaiting(_ key: Key) -> Bool { waiting.contains(key) }

    /// Bytes `key` may take before it waits (below zero: what it owes).
    func credit(of key: Key) -> Double? { flows[key]?.credit }

    /// A new flow with its own `rate` (nil or less than 1: none), starting
    /// without credit.
    mutating func add(_ key: Key, rate: Int64?, now: Double) {
        distribute(until: now)
        remove(key)
        let rate = Self.rate(rate)
        flows[key] = Flow(rate: rate)
        if rate != nil { ownRates += 1 }
    }

    mutating func remove(_ key: Key) {
        guard let flow = flows.removeValue(forKey: key) else { return }
        if flow.rate != nil { ownRates -= 1 }
        if flow.isSuspended { suspended -= 1 }
        waiting.remove(key)
    }

    /// Changes `key`'s own rate (nil or less than 1: none) from `now` on.
    mutating func setRate(_ rate: Int64?, of key: Key, now: Double) {
        guard let index = flows.index(forKey: key) else { return }
        distribute(until: now)
        let rate = Self.rate(rate)
        let previous = flows.values[index].rate
        ownRates += (rate != nil ? 1 : 0) - (previous != nil ? 1 : 0)
        // A flow that was free starts counting from nothing.
        if totalRate == nil, previous == nil { flows.values[index].credit = 0 }
        flows.values[index].rate = rate
    }

    /// Changes the total rate (nil or less than 1: none) from `now` on.
    mutating func setTotalRate(_ rate: Int64?, now: Double) {
        distribute(until: now)
        let rate = Self.rate(rate)
        if totalRate == nil, rate != nil {
            for index in flows.indices where flows.values[index].rate == nil { flows.values[index].credit = 0 }
        }
        totalRate = rate
    }

    /// The client suspended `key`'s transfer: it takes no share, and no
    /// refill releases it, until `resume`.
    mutating func suspend(_ key: Key, now: Double) {
        guard let index = flows.index(forKey: key), !flows.values[index].isSuspended else { return }
        distribute(until: now)
        flows.values[index].isSuspended = true
        suspended += 1
        waiting.remove(key)
    }

    mutating func resume(_ key: Key, now: Double) {
        guard let index = flows.index(forKey: key), flows.values[index].isSuspended else { return }
        distribute(until: now)
        flows.values[index].isSuspended = false
        suspended -= 1
    }

    /// Whether `key` may take `bytes` now. False when its credit is spent:
    /// it then waits, its transfer paused, until `refill` names it. A
    /// suspended flow takes nothing and does not wait: its transfer asks
    /// again once the client resumes it.
    mutating func admit(_ key: Key, bytes: Int) -> Bool {
        guard isLimiting, let index = flows.index(forKey: key) else { return true }
        let flow = flows.values[index]
        guard totalRate != nil || flow.rate != nil else { return true }
        guard flow.credit > 0, !flow.isSuspended else {
            if !flow.isSuspended { waiting.insert(key) }
            return false
        }
        flows.values[index].credit -= Double(bytes)
        return true
    }

    /// Hands out the credit due at `now`, and returns the waiting flows
    /// that may go on: those with credit again, and those no limit applies
    /// to any more.
    mutating func refill(now: Double) -> [Key] {
        distribute(until: now)
        guard !waiting.isEmpty else { return [] }
        var released: [Key] = []
        for key in waiting {
            guard let flow = flows[key] else { continue }
            if flow.credit > 0 || (totalRate == nil && flow.rate == nil) { released.append(key) }
        }
        for key in released { waiting.remove(key) }
        return released
    }

    /// The total shared equally among the flows that run.
    private var equalShare: Double? {
        guard let totalRate else { return nil }
        return Double(totalRate) / Double(max(1, flows.count - suspended))
    }

    /// Hands out the credit of the time from the last refill to `now`.
    private mutating func distribute(until now: Double) {
        let elapsed = now - refilledAt
        guard elapsed > 0 else { return }
        refilledAt = now
        guard isLimiting, !flows.isEmpty else { return }
        let share = equalShare
        // A late refill does not cut what a flow may keep below what the
        // time since the last one brought.
        let window = max(Self.burst, elapsed)
        var wants: [(index: Dictionary<Key, Flow>.Index, want: Double)] = []
        for index in flows.indices {
            let (key, flow) = flows[index]
            guard !flow.isSuspended, totalRate != nil || flow.rate != nil else { continue }
            var want =
                waiting.contains(key)
                ? Double.infinity : max(0, window * (Self.least(flow.rate.map(Double.init), share) ?? 0) - flow.credit)
            if let rate = flow.rate { want = min(want, Double(rate) * elapsed) }
            if totalRate == nil {
                flows.values[index].credit += want
            } else {
                wants.append((index, want))
            }
        }
        guard let totalRate, !wants.isEmpty else { return }
        // Water-filling: the smallest wants are met first, and each flow
        // after them gets an equal part of what is left.
        wants.sort { $0.want < $1.want }
        var budget = Double(totalRate) * elapsed
        for (index, entry) in wants.enumerated() {
            let grant = min(entry.want, budget / Double(wants.count - index))
            flows.values[entry.index].credit += grant
            budget -= grant
        }
    }

    private static func least(_ a: Double?, _ b: Double?) -> Double? {
        switch (a, b) {
        case (let a?, let b?): min(a, b)
        case (let a?, nil): a
        case (nil, let b): b
        }
    }

    private static func rate(_ rate: Int64?) -> Int64? {
        guard let rate, rate > 0 else { return nil }
        return rate
    }
}
