@testable import JSONRPC
import Testing

/// `MessageLimits` counts the values of a message without parsing it: a
/// string's bytes count for nothing however its quotes are escaped.
@Suite(.timeLimit(.minutes(1)))
struct MessageLimitsTests {
    /// The count a byte-by-byte reading makes: one more than the `,`, `[`
    /// and `{` outside strings, a backslash in a string escaping the next byte.
    private static func counted(_ bytes: [UInt8]) -> Int {
        var count = 1
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                count += 1
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            }
        }
        return count
    }

    @Test func theLimitFallsWhereAByteByByteCountPutsIt() {
        // Given texts of the bytes that matter (quotes, runs of backslashes,
        // the counted bytes, others), unterminated strings among them
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"\\\\\"",[{x"#.utf8)
        for _ in 0..<2000 {
            let text = (0..<Int.random(in: 0...60, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            let count = Self.counted(text)

            // Then a limit one below the count is passed, and the count itself is not
            for limit in [count - 1, count] where limit >= 1 {
                let expected = count > limit && text.count >= limit
                #expect(
                    MessageLimits(maxValues: limit).holdsTooManyValues(text) == expected,
                    "\(String(decoding: text, as: UTF8.self)) with \(limit)")
            }
        }
    }
}
