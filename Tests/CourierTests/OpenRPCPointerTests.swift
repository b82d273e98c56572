import Foundation
import Testing

@testable import Courier

/// `OpenRPCDocument.unescaped` reads a JSON Pointer reference token as RFC
/// 6901 says and as Foundation's two replacements (`~1`, then `~0`) did.
@Suite(.timeLimit(.minutes(1)))
struct OpenRPCPointerTests {
    static let tokens = [
        "", "plain", "a~1b", "a~0b", "~01", "~10", "~~1", "~~0", "~", "~~", "a~", "~x", "~2", "~1~0~1", "ü~1ß", "a/b",
    ]

    @Test(arguments: tokens)
    func matchesTheTwoReplacements(_ token: String) {
        let expected = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        #expect(OpenRPCDocument.unescaped(Array(token.utf8)) == expected)
    }

    @Test func decodesBothEscapes() {
        #expect(OpenRPCDocument.unescaped(Array("components~1schemas~0x".utf8)) == "components/schemas~x")
        #expect(OpenRPCDocument.unescaped(Array("~01".utf8)) == "~1")
    }
}
