import Testing

@testable import Courier

/// An outcome's members sit behind one shared reference: a copy must still
/// behave as a value, unchanged by changes made to another copy.
@Suite struct OutcomeTests {
    @Test func aChangedCopyLeavesTheOtherAsItWas() {
        var first = Outcome(url: "http://origin/a")
        first.size = 8
        first.path = "/downloads/a"
        var second = first
        second.size = 9
        second.error = TransferFailure(code: .io, message: "gone")
        second.update { $0.path = nil; $0.text = "t" }
        second.durationMs = 5
        second.attempts = 2
        #expect(first.size == 8 && first.path == "/downloads/a" && first.text == nil && first.ok)
        #expect(first.durationMs == 0 && first.attempts == 0)
        #expect(second.size == 9 && second.path == nil && second.text == "t" && !second.ok)
        #expect(second.durationMs == 5 && second.attempts == 2 && second.url == "http://origin/a")
    }

    @Test func aChangeKeepsTheMembersBesideTheBox() {
        var outcome = Outcome(url: "http://origin/a")
        outcome.durationMs = 3
        outcome.attempts = 1
        outcome.finalURL = "http://origin/b"
        #expect(outcome.durationMs == 3 && outcome.attempts == 1 && outcome.finalURL == "http://origin/b")
    }
}
