import Foundation
import Locking
import Testing

@testable import Courier

/// What courier does by hand now that it links FoundationEssentials alone
/// gives what Foundation's own methods gave.
@Suite(.timeLimit(.minutes(1)))
struct WithoutFoundationTests {
    static let sizes = [
        "512KiB", " 512KiB ", "\t2 GiB\t", "1\u{00A0}k", "\u{2003}10MB\u{3000}", "10MB\n", "\n10MB", "1.5 m", "", " ", "k",
    ]

    @Test(arguments: sizes)
    func byteSizesTrimAsFoundationDid(_ text: String) {
        // The parse as it was, with Foundation's trimming.
        func foundationParse(_ text: String) -> Int64? {
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            let digits = trimmed.prefix(while: { $0.isNumber || $0 == "." })
            guard !digits.isEmpty, let number = Double(digits) else { return nil }
            let unit = trimmed.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
            let multipliers: [String: Double] = [
                "": 1, "b": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": Double(1 << 20), "mib": Double(1 << 20),
                "mb": 1e6, "g": Double(1 << 30), "gib": Double(1 << 30), "gb": 1e9,
            ]
            return multipliers[unit].map { Int64((number * $0).rounded()) }
        }
        #expect(ByteSize.parse(text) == foundationParse(text))
    }

    @Test(arguments: [
        ("text/plain; charset=utf-8", "utf-8"), ("text/html; charset=\"ISO-8859-1\"", "ISO-8859-1"),
        ("text/html; charset='koi8-r'", "koi8-r"), ("text/html; charset=\"\"", ""), ("text/html; charset=\"'x'\"", "x"),
        ("text/html;  Charset = \"a b\" ", "a b"), ("text/html", nil),
    ] as [(String, String?)])
    func charsetLosesItsQuotes(_ contentType: String, _ charset: String?) {
        #expect(TextDecoding.charset(ofContentType: contentType) == charset)
    }

    @Test func aTimedWaitEndsAtItsDeadlineAndAWakeEndsItSooner() {
        let condition = Condition()
        let started = ContinuousClock.now
        condition.lock()
        let woken = condition.wait(until: .init(secondsFromNow: 0.05))
        condition.unlock()
        #expect(!woken)
        #expect(ContinuousClock.now - started >= .milliseconds(50))

        let flag = Locked(false)
        startThread(named: "test.waker") {
            condition.lock()
            flag.withLock { $0 = true }
            condition.broadcast()
            condition.unlock()
        }
        condition.lock()
        var inTime = true
        while !flag.withLock({ $0 }) && inTime {
            inTime = condition.wait(until: .init(secondsFromNow: 10))
        }
        condition.unlock()
        #expect(flag.withLock { $0 })
        #expect(inTime)
    }

    @Test func aDeadlineInThePastOrBeyondTheClockDoesNotTrap() {
        let condition = Condition()
        condition.lock()
        #expect(!condition.wait(until: .init(secondsFromNow: -5)))
        #expect(!condition.wait(until: .init(secondsFromNow: 0)))
        condition.unlock()
        _ = Condition.Deadline(secondsFromNow: .infinity)
        _ = Condition.Deadline(secondsFromNow: 1e300)
        _ = Condition.Deadline(secondsFromNow: .nan)
    }

    @Test func aStartedThreadRunsWithItsName() {
        let seen = Locked<String?>(nil)
        let done = Condition()
        startThread(named: "courier.a-long-thread-name") {
            let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "unreadable"
            done.lock()
            seen.withLock { $0 = name.trimmingCharacters(in: .newlines) }
            done.broadcast()
            done.unlock()
        }
        done.lock()
        while seen.withLock({ $0 }) == nil, done.wait(until: .init(secondsFromNow: 10)) {}
        done.unlock()
        #expect(seen.withLock { $0 } == "courier.a-long-")
    }
}
