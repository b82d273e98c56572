import FoundationEssentials
import Testing

@testable import Courier

private func failure(_ code: OutcomeErrorCode, status: Int? = nil, retryAfter: Int64? = nil) -> AttemptFailure {
    AttemptFailure(code: code, httpStatus: status, retryAfter: retryAfter)
}

private func budget(retries: Int = 3, attempts: Int = 1, elapsed: Double = 0) -> RetryBudget {
    RetryBudget(retries: retries, attempts: attempts, elapsed: elapsed)
}

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(delay: 0.5, maxDelay: 30, maxTime: 60)

    // MARK: what is transient

    @Test func exactlyTheContractsFailuresAreTransient() {
        let transientCodes: Set<OutcomeErrorCode> = [.timeout, .connectFailed, .network]
        for code in OutcomeErrorCode.allCases where code != .httpStatus && code != .integrityMismatch {
            #expect(RetryPolicy.isTransient(failure(code)) == transientCodes.contains(code), "\(code)")
        }
        let transientStatuses = [408, 429, 500, 502, 503, 504, 522, 524]
        for status in 100...599 {
            #expect(
                RetryPolicy.isTransient(failure(.httpStatus, status: status)) == transientStatuses.contains(status), "\(status)")
        }
        #expect(!RetryPolicy.isTransient(failure(.httpStatus)), "a status error without a status")
    }

    @Test func oneIntegrityMismatchFromTheNetworkIsTransient() {
        var mismatch = failure(.integrityMismatch)
        #expect(RetryPolicy.isTransient(mismatch))
        mismatch.followsIntegrityMismatch = true
        #expect(!RetryPolicy.isTransient(mismatch), "a second one means the origin serves another body")
        mismatch = failure(.integrityMismatch)
        mismatch.fromNetwork = false
        #expect(!RetryPolicy.isTransient(mismatch))
    }

    // MARK: how long to wait

    @Test func theWaitDoublesIsScaledAndCapped() {
        let waits = (1...8).map { policy.backoff(after: $0, random: 1) }
        #expect(waits == [0.5, 1, 2, 4, 8, 16, 30, 30])
        #expect(policy.backoff(after: 3, random: 0.5) == 1)
        #expect(policy.backoff(after: 3, random: 0.8) == 1.6)
    }

    @Test(arguments: [Int.min, -1, 0, 65, 1000, Int.max])
    func anyAttemptNumberGivesAFiniteWait(_ attempt: Int) {
        let wait = policy.backoff(after: attempt, random: 1)
        #expect(wait.isFinite && wait >= 0 && wait <= 30)
        #expect(RetryPolicy(delay: 0, maxDelay: 30, maxTime: 60).backoff(after: attempt, random: 1) == 0)
    }

    @Test(arguments: [-1.0, 0, 0.2, 2, .infinity])
    func theRandomFactorStaysWithinHalfAndOne(_ random: Double) {
        let wait = policy.backoff(after: 2, random: random)
        #expect(wait >= 0.5 && wait <= 1)
    }

    // MARK: decisions

    @Test func aTransientFailureWithinTheBudgetWaits() {
        #expect(policy.decision(after: failure(.network), budget: budget(attempts: 2), random: 1) == .retry(after: 1))
    }

    @Test func aFailureThatIsNotTransientEndsAtOnce() {
        #expect(policy.decision(after: failure(.dnsFailed), budget: budget(), random: 1) == .fail(retryAfter: nil))
        #expect(
            policy.decision(after: failure(.httpStatus, status: 404, retryAfter: 1), budget: budget(), random: 1)
                == .fail(retryAfter: nil))
    }

    @Test func theBudgetCountsAttemptsAfterTheFirst() {
        #expect(policy.decision(after: failure(.timeout), budget: budget(retries: 0), random: 1) == .fail(retryAfter: nil))
        #expect(policy.decision(after: failure(.timeout), budget: budget(retries: 2, attempts: 2), random: 1) != .fail(retryAfter: nil))
        #expect(policy.decision(after: failure(.timeout), budget: budget(retries: 2, attempts: 3), random: 1) == .fail(retryAfter: nil))
    }

    @Test func retryAfterIsAFloorOnTheWait() {
        let asked = failure(.httpStatus, status: 503, retryAfter: 7)
        #expect(policy.decision(after: asked, budget: budget(), random: 1) == .retry(after: 7))
        let shorter = failure(.httpStatus, status: 503, retryAfter: 1)
        #expect(policy.decision(after: shorter, budget: budget(retries: 5, attempts: 4), random: 1) == .retry(after: 4))
    }

    @Test func aRetryAfterBeyondTheLongestWaitIsNotWaitedFor() {
        let asked = failure(.httpStatus, status: 429, retryAfter: 31)
        #expect(policy.decision(after: asked, budget: budget(), random: 1) == .fail(retryAfter: 31))
        let largest = failure(.httpStatus, status: 503, retryAfter: RetryAfter.largest)
        #expect(policy.decision(after: largest, budget: budget(), random: 1) == .fail(retryAfter: RetryAfter.largest))
        let exactly = failure(.httpStatus, status: 503, retryAfter: 30)
        #expect(policy.decision(after: exactly, budget: budget(elapsed: 10), random: 1) == .retry(after: 30))
    }

    @Test func noAttemptStartsAfterTheMaxTime() {
        // A Retry-After that passes it is named; a backoff that passes it is not.
        let asked = failure(.httpStatus, status: 503, retryAfter: 11)
        #expect(policy.decision(after: asked, budget: budget(elapsed: 50), random: 1) == .fail(retryAfter: 11))
        #expect(policy.decision(after: asked, budget: budget(elapsed: 49), random: 1) == .retry(after: 11))
        let backedOff = failure(.timeout)
        #expect(policy.decision(after: backedOff, budget: budget(retries: 9, attempts: 6, elapsed: 45), random: 1) == .fail(retryAfter: nil))
        let noTime = RetryPolicy(delay: 0, maxDelay: 30, maxTime: 0)
        #expect(noTime.decision(after: failure(.network), budget: budget(elapsed: 0.001), random: 1) == .fail(retryAfter: nil))
    }

    // MARK: the budget's window

    @Test func withoutAContinuationTheBudgetCountsFromTheFirstAttempt() {
        var window = RetryWindow()
        for (began, offset) in [(0.0, nil), (5, 0), (10, nil)] as [(Double, Int64?)] {
            window.attemptBegan(now: began)
            window.attemptContinued(from: offset)
        }
        #expect(window.budget(retries: 3, now: 12) == budget(retries: 3, attempts: 3, elapsed: 12))
        #expect(window.furthestResume == 0)
    }

    @Test func anAttemptThatContinuesFurtherStartsTheBudgetAgain() {
        // Given an attempt from 0 that kept 100 bytes, and one that continued from them
        var window = RetryWindow()
        window.attemptBegan(now: 0)
        window.attemptContinued(from: nil)
        window.attemptBegan(now: 50)
        window.attemptContinued(from: 100)
        // Then the budget counts from the second: attempts, wait and time
        #expect(window.budget(retries: 3, now: 70) == budget(retries: 3, attempts: 1, elapsed: 20))
        #expect(policy.decision(after: failure(.network), budget: window.budget(retries: 3, now: 70), random: 1) == .retry(after: 0.5))
        // When later attempts continue from no further (the same byte, a body started anew, an earlier byte)
        for (began, offset) in [(71.0, 100), (72, nil), (73, 40)] as [(Double, Int64?)] {
            window.attemptBegan(now: began)
            window.attemptContinued(from: offset)
        }
        // Then they count against it
        #expect(window.budget(retries: 3, now: 74) == budget(retries: 3, attempts: 4, elapsed: 24))
        #expect(policy.decision(after: failure(.network), budget: window.budget(retries: 3, now: 74), random: 1) == .fail(retryAfter: nil))
        // When one continues from further than any before, it starts it again
        window.attemptBegan(now: 80)
        window.attemptContinued(from: 101)
        #expect(window.budget(retries: 3, now: 81) == budget(retries: 3, attempts: 1, elapsed: 1))
        #expect(window.furthestResume == 101)
    }

    @Test func aBodyCutAgainAndAgainFinishesWithOneRetryAndNoLongerWait() {
        // Given a body of 1000 bytes whose every attempt is cut after 7 bytes more, and 1 retry
        var window = RetryWindow()
        var kept: Int64 = 0
        var attempts = 0
        var now = 0.0
        var waits: Set<Double> = []
        while true {
            attempts += 1
            window.attemptBegan(now: now)
            window.attemptContinued(from: kept > 0 ? kept : nil)
            kept = min(kept + 7, 1000)
            now += 1
            if kept == 1000 { break }
            // Then every attempt is retried after the first wait, well within the max time
            guard case .retry(let wait) = policy.decision(after: failure(.network), budget: window.budget(retries: 1, now: now), random: 1)
            else {
                Issue.record("attempt \(attempts) was not retried")
                return
            }
            waits.insert(wait)
            now += wait
        }
        #expect(attempts == 143 && waits == [0.5])
    }

    // MARK: Retry-After

    private static let now = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(arguments: [
        ("0", 0), ("1", 1), (" 120\t", 120), ("007", 7), ("9007199254740991", 9_007_199_254_740_991),
        ("9007199254740992", RetryAfter.largest), ("18446744073709551616", RetryAfter.largest),
        (String(repeating: "9", count: 10_000), RetryAfter.largest),
    ] as [(String, Int64)])
    func secondsAreReadAsBoundedDigits(_ value: String, _ seconds: Int64) {
        #expect(RetryAfter.seconds(value, now: Self.now) == seconds)
    }

    @Test func anHTTPDateIsReadAgainstNow() {
        #expect(RetryAfter.seconds(HTTPDate.format(Self.now.addingTimeInterval(90)), now: Self.now) == 90)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: Self.now) == 0, "a date past is no wait")
        let latest: Int64 = 253_402_300_799 - 1_700_000_000
        #expect(RetryAfter.seconds("Fri, 31 Dec 9999 23:59:59 GMT", now: Self.now) == latest)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:49:37 GMT", now: Self.now) == 0)
    }

    @Test(arguments: [
        "", " ", "-5", "+5", "1.5", "1e3", "0x10", "soon", "5 seconds", "Fri, 31 Dec 99999 23:59:59 GMT",
        "Mon, 32 Jan 2024 00:00:00 GMT", "\u{FF11}", "1\r\n2", "٣",
    ])
    func anythingElseIsIgnored(_ value: String) {
        #expect(RetryAfter.seconds(value, now: Self.now) == nil)
    }
}
