@testable import Courier
import Testing

struct NameSuffixTests {
    /// Suffixes are hashes of a counter, not the counter's steps: neither
    /// repeated nor a fixed distance apart.
    @Test func suffixesDifferAndDoNotStepByAConstant() {
        let suffixes = (0..<10_000).map { _ in NameSuffix.next() }
        #expect(Set(suffixes).count == suffixes.count)
        let steps = Set(zip(suffixes, suffixes.dropFirst()).map { $1 &- $0 })
        #expect(steps.count > 9_000)
    }
}
