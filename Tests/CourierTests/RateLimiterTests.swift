import Testing

@testable import Courier

private let MiB = 1 << 20
private let piece = 100 << 10

/// Flows driven through a `RateLimiter` on a clock the test moves, the way
/// the transfer engine drives it: at each turn the limiter refills, and
/// every flow that may go on hands over pieces until it is refused (a
/// paused transfer) or has nothing more (its origin is slower).
private struct Simulation {
    var limiter: RateLimiter<String>
    var now = 0.0
    /// Body bytes each flow took.
    var received: [String: Int] = [:]
    /// Flows whose origin sends as fast as they take, in pieces of `piece`
    /// bytes.
    var greedy: [String] = []
    /// Flows whose origin sends `rate` bytes per second: what has arrived
    /// and was not taken yet waits.
    var supplied: [String: (rate: Double, backlog: Double)] = [:]
    /// Flows refused a piece and not released since: paused transfers.
    var paused: Set<String> = []
    /// Suspended by the client: they offer nothing, whatever the limiter says.
    var suspended: Set<String> = []
    /// Every flow `refill` released, in order.
    var released: [String] = []
    /// Pieces a flow no limit holds back takes in one turn.
    let freePieces = 50

    init(totalRate: Int64? = nil) {
        limiter = RateLimiter(totalRate: totalRate, now: 0)
    }

    mutating func addGreedy(_ key: String, rate: Int64? = nil) {
        limiter.add(key, rate: rate, now: now)
        greedy.append(key)
    }

    mutating func addSupplied(_ key: String, rate: Double, ownRate: Int64? = nil) {
        limiter.add(key, rate: ownRate, now: now)
        supplied[key] = (rate, 0)
    }

    /// Turns of `step` seconds until `seconds` have passed.
    mutating func run(for seconds: Double, step: Double = RateLimiter<String>.refillInterval) {
        let end = now + seconds
        while now < end - 1e-9 {
            now = min(end, now + step)
            turn(elapsed: step)
        }
    }

    private mutating func turn(elapsed: Double) {
        let released = limiter.refill(now: now)
        self.released += released
        paused.subtract(released)
        for key in greedy where !paused.contains(key) && !suspended.contains(key) {
            for _ in 0..<freePieces {
                guard take(key, piece) else { break }
            }
        }
        for key in supplied.keys.sorted() where !suspended.contains(key) {
            supplied[key]!.backlog += supplied[key]!.rate * elapsed
            while !paused.contains(key), supplied[key]!.backlog >= 1 {
                let bytes = Int(min(supplied[key]!.backlog, Double(piece)))
                guard take(key, bytes) else { break }
                supplied[key]!.backlog -= Double(bytes)
            }
        }
    }

    private mutating func take(_ key: String, _ bytes: Int) -> Bool {
        guard limiter.admit(key, bytes: bytes) else {
            paused.insert(key)
            return false
        }
        received[key, default: 0] += bytes
        return true
    }

    /// Bytes each flow takes from now for `seconds`.
    mutating func measure(for seconds: Double) -> [String: Int] {
        let before = received
        run(for: seconds)
        return received.reduce(into: [:]) { taken, flow in taken[flow.key] = flow.value - (before[flow.key] ?? 0) }
    }
}

/// Whether `value` is within `tolerance` (a fraction) of `expected`.
private func near(_ value: Int, _ expected: Double, _ tolerance: Double) -> Bool {
    abs(Double(value) - expected) <= expected * tolerance
}

@Suite struct RateLimiterTests {
    // MARK: rates

    @Test func theTotalRateIsKeptAndSharedEquallyAmongFlowsThatTakeAll() {
        // Given four flows under 8 MiB/s, each able to take all it gets
        var sim = Simulation(totalRate: Int64(8 * MiB))
        for key in ["a", "b", "c", "d"] { sim.addGreedy(key) }
        // When they run for four seconds
        let taken = sim.measure(for: 4)
        // Then together they took 32 MiB, give or take a piece each, and
        // each a quarter of it
        let total = taken.values.reduce(0, +)
        #expect(abs(total - 32 * MiB) <= 4 * piece, "\(total)")
        for (key, bytes) in taken { #expect(near(bytes, Double(8 * MiB), 0.02), "\(key): \(bytes)") }
    }

    @Test func aFlowsOwnRateCapsItAloneAndFreeFlowsCountForNothing() {
        var sim = Simulation()
        sim.addGreedy("capped", rate: Int64(MiB))
        sim.addGreedy("free")
        let taken = sim.measure(for: 2)
        #expect(abs(taken["capped"]! - 2 * MiB) <= piece, "\(taken)")
        #expect(taken["free"]! >= 199 * sim.freePieces * piece, "a free flow is never held back: \(taken)")
        #expect(!sim.released.contains("free"))
    }

    @Test func aFlowThatNeedsLessThanItsShareLeavesTheRestToTheOthers() {
        // Given a slow origin (1 MiB/s) beside two fast ones under 8 MiB/s
        var sim = Simulation(totalRate: Int64(8 * MiB))
        sim.addSupplied("slow", rate: Double(MiB))
        sim.addGreedy("fast1")
        sim.addGreedy("fast2")
        sim.run(for: 0.5)
        // When they run
        let taken = sim.measure(for: 4)
        // Then the slow one gets all it can, and the fast ones share the rest
        #expect(near(taken["slow"]!, Double(4 * MiB), 0.02), "\(taken)")
        #expect(near(taken["fast1"]!, Double(14 * MiB), 0.03), "\(taken)")
        #expect(near(taken["fast2"]!, Double(14 * MiB), 0.03), "\(taken)")
        #expect(taken.values.reduce(0, +) <= 32 * MiB + 3 * piece)
    }

    @Test func aFlowWhoseOwnRateIsBelowItsShareLeavesTheRestToTheOthers() {
        var sim = Simulation(totalRate: Int64(8 * MiB))
        sim.addGreedy("capped", rate: Int64(MiB))
        sim.addGreedy("open")
        sim.run(for: 0.5)
        let taken = sim.measure(for: 4)
        #expect(near(taken["capped"]!, Double(4 * MiB), 0.03), "\(taken)")
        #expect(near(taken["open"]!, Double(28 * MiB), 0.03), "\(taken)")
    }

    @Test func aLateRefillHandsOutTheWholeTimeSinceTheLastOne() {
        // A loaded machine wakes the engine late: the rate holds over time.
        var sim = Simulation(totalRate: Int64(4 * MiB))
        sim.addGreedy("a")
        sim.addGreedy("b")
        sim.run(for: 4, step: 0.25)
        let total = sim.received.values.reduce(0, +)
        #expect(abs(total - 16 * MiB) <= 2 * piece, "\(total)")
    }

    @Test func aFlowKeepsNoMoreThanABurstOfItsShareWhileItsOriginPauses() {
        // Given a flow whose origin sent nothing for five seconds
        var sim = Simulation(totalRate: Int64(8 * MiB))
        sim.addSupplied("bursty", rate: 0)
        sim.addGreedy("other")
        sim.run(for: 5)
        // Then what it kept is at most a burst of its equal share
        let share = Double(8 * MiB) / 2
        #expect(sim.limiter.credit(of: "bursty")! <= share * RateLimiter<String>.burst + 1)
        #expect(sim.limiter.credit(of: "bursty")! > 0, "it may take a short burst at once")
    }

    @Test func aNewFlowStartsWithoutCredit() {
        var limiter = RateLimiter<String>(totalRate: 1000, now: 100)
        limiter.add("a", rate: nil, now: 200)
        let admitted = limiter.admit("a", bytes: 1)
        #expect(!admitted)
        #expect(limiter.isWaiting("a"))
        #expect(limiter.nextRefill == 200 + RateLimiter<String>.refillInterval)
        let released = limiter.refill(now: 200.001)
        #expect(released == ["a"], "the time before it existed is not its")
        #expect(limiter.credit(of: "a")! <= 1 + 1e-9)
    }

    // MARK: changes at run time

    @Test func aNewTotalRateIsFeltAtTheNextRefill() {
        var sim = Simulation(totalRate: Int64(8 * MiB))
        sim.addGreedy("a")
        sim.addGreedy("b")
        sim.run(for: 1)
        sim.limiter.setTotalRate(Int64(2 * MiB), now: sim.now)
        // What the flows kept at the old rate is spent within a tenth of a second.
        sim.run(for: 0.1)
        let slower = sim.measure(for: 2)
        #expect(abs(slower.values.reduce(0, +) - 4 * MiB) <= 2 * piece, "\(slower)")
        sim.limiter.setTotalRate(Int64(16 * MiB), now: sim.now)
        sim.run(for: 0.1)
        let faster = sim.measure(for: 1)
        #expect(abs(faster.values.reduce(0, +) - 16 * MiB) <= 2 * piece, "\(faster)")
    }

    @Test func liftingTheLastLimitReleasesEveryWaitingFlowAtOnce() {
        var sim = Simulation(totalRate: Int64(MiB))
        sim.addGreedy("a")
        sim.addGreedy("b", rate: Int64(MiB / 2))
        sim.run(for: 0.5)
        #expect(sim.limiter.isWaiting("a") || sim.limiter.isWaiting("b"))
        sim.limiter.setTotalRate(nil, now: sim.now)
        sim.limiter.setRate(nil, of: "b", now: sim.now)
        #expect(!sim.limiter.isLimiting)
        let released = Set(sim.limiter.refill(now: sim.now))
        #expect(released == Set(["a", "b"].filter { sim.paused.contains($0) }))
        #expect(sim.limiter.nextRefill == nil)
        let admitted = [sim.limiter.admit("a", bytes: 1 << 30), sim.limiter.admit("b", bytes: 1 << 30)]
        #expect(admitted == [true, true])
    }

    @Test func aLimitSetOnFreeFlowsCountsFromNothing() {
        var limiter = RateLimiter<String>(now: 0)
        limiter.add("a", rate: nil, now: 0)
        let free = (0..<100).map { _ in limiter.admit("a", bytes: MiB) }
        #expect(free.allSatisfy { $0 })
        limiter.setTotalRate(Int64(MiB), now: 10)
        let underTotal = limiter.admit("a", bytes: 1)
        #expect(!underTotal, "ten seconds without a limit are no credit")
        limiter.setTotalRate(nil, now: 10)
        limiter.setRate(Int64(MiB), of: "a", now: 10)
        let underOwn = limiter.admit("a", bytes: 1)
        #expect(!underOwn)
    }

    @Test func aFlowsOwnRateChangesAtRunTime() {
        var sim = Simulation()
        sim.addGreedy("a", rate: Int64(MiB))
        sim.run(for: 1)
        sim.limiter.setRate(Int64(4 * MiB), of: "a", now: sim.now)
        let taken = sim.measure(for: 1)
        #expect(abs(taken["a"]! - 4 * MiB) <= 2 * piece, "\(taken)")
    }

    // MARK: suspended flows

    @Test func aSuspendedFlowIsNeverReleasedAndTakesNoShare() {
        var sim = Simulation(totalRate: Int64(8 * MiB))
        sim.addGreedy("a")
        sim.addGreedy("b")
        sim.run(for: 1)
        sim.suspended.insert("a")
        sim.limiter.suspend("a", now: sim.now)
        sim.released = []
        let taken = sim.measure(for: 2)
        #expect(!sim.released.contains("a"), "a suspended transfer stays paused whatever the limiter says")
        #expect(!sim.limiter.isWaiting("a"))
        let admitted = sim.limiter.admit("a", bytes: 1)
        #expect(!admitted, "a suspended flow takes nothing")
        #expect(!sim.limiter.isWaiting("a"))
        #expect(near(taken["b"]!, Double(16 * MiB), 0.03), "the other takes the whole rate: \(taken)")
        // Resumed, it shares again.
        sim.suspended.remove("a")
        sim.paused.remove("a")
        sim.limiter.resume("a", now: sim.now)
        sim.run(for: 0.5)
        let shared = sim.measure(for: 2)
        #expect(near(shared["a"]!, Double(8 * MiB), 0.03) && near(shared["b"]!, Double(8 * MiB), 0.03), "\(shared)")
    }

    // MARK: no limit

    @Test func withoutAnyLimitNothingIsCountedOrAwaited() {
        var limiter = RateLimiter<Int>(now: 0)
        #expect(!limiter.isLimiting && !limiter.isEngaged)
        limiter.add(1, rate: nil, now: 0)
        limiter.add(2, rate: 0, now: 0)
        limiter.add(3, rate: -5, now: 0)
        #expect(!limiter.isLimiting, "a rate below 1 is none")
        let admitted = (1...3).map { limiter.admit($0, bytes: Int.max) }
        #expect(admitted == [true, true, true])
        #expect(limiter.credit(of: 1) == 0)
        #expect(limiter.nextRefill == nil)
        let released = limiter.refill(now: 1000)
        #expect(released == [])
        let unknown = limiter.admit(99, bytes: 1)
        #expect(unknown, "an unknown flow is free")
    }

    @Test func aRemovedFlowNoLongerWaitsOrCounts() {
        var limiter = RateLimiter<String>(now: 0)
        limiter.add("a", rate: 10, now: 0)
        let admitted = limiter.admit("a", bytes: 1)
        #expect(!admitted)
        limiter.remove("a")
        #expect(!limiter.isLimiting && !limiter.isEngaged)
        #expect(limiter.nextRefill == nil)
        let released = limiter.refill(now: 1)
        #expect(released == [])
    }

    @Test func aClockThatGoesBackHandsOutNothing() {
        var limiter = RateLimiter<String>(totalRate: 1000, now: 10)
        limiter.add("a", rate: nil, now: 10)
        let early = limiter.refill(now: 5)
        #expect(early == [])
        #expect(limiter.credit(of: "a") == 0)
        let later = limiter.refill(now: 10.5)
        #expect(later == [])
        #expect(limiter.credit(of: "a")! > 0 && limiter.credit(of: "a")! <= 500)
    }
}
