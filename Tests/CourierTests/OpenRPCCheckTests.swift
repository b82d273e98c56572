import JSON
import JSONRPC
import Testing

@testable import Courier

/// The check of a request's params against the document: what passes, and
/// which param a refusal names when several are wrong, whatever order the
/// params' dictionary holds them in.
@Suite(.timeLimit(.minutes(1)))
struct OpenRPCCheckTests {
    /// The refusal's message, or nil when the params pass.
    private func refusal(_ method: String, _ params: [String: JSON]) -> String? {
        do throws(RPCError) {
            try OpenRPCDocument.check(method, Params(.object(params)))
            return nil
        } catch {
            return error.message
        }
    }

    @Test func aDownloadOfTheCommonShapePasses() {
        #expect(refusal("download", ["url": "http://127.0.0.1/a", "body": "none"]) == nil)
        #expect(refusal("download", ["url": "http://127.0.0.1/a", "wait": true, "maxBytes": 10]) == nil)
    }

    @Test func aMissingRequiredParamIsNamedBesideValidOnes() {
        #expect(refusal("download", ["body": "none"]) == "missing param 'url'")
    }

    @Test func ofSeveralWrongParamsTheOneTheDocumentListsFirstIsNamed() {
        // `url` comes before `body`, and `body` before `wait`, in the document.
        #expect(refusal("download", ["wait": "yes", "body": "nope", "url": 5])?.hasPrefix("param 'url' must be") == true)
        #expect(refusal("download", ["wait": "yes", "body": "nope", "url": "http://127.0.0.1/a"])?
            .hasPrefix("param 'body' must be") == true)
    }

    @Test func anUnknownParamIsNamedBeforeAWrongOne() {
        #expect(refusal("download", ["zzz": 1, "body": "nope", "url": "http://127.0.0.1/a"]) == "unknown param 'zzz'")
        #expect(refusal("download", ["yyy": 1, "zzz": 1, "url": "http://127.0.0.1/a"]) == "unknown param 'yyy'")
    }

    @Test func aMinimumLengthCountsCharactersNotBytes() {
        // Given strings of one- to four-byte characters around a minimum length
        let cases: [(text: String, least: Int64, passes: Bool)] = [
            ("", 1, false), ("", 0, true), ("a", 1, true), ("é", 1, true), ("😀", 1, true),
            ("abcd", 1, true), ("éé", 3, false), ("ééé", 3, true), ("😀", 2, false), ("😀😀", 2, true),
            ("a😀", 2, true), ("é😀", 3, false), ("e\u{301}", 2, true),
        ]

        // Then each has as many characters (Unicode scalars) as it holds
        for (text, least, passes) in cases {
            #expect(OpenRPCDocument.hasScalars(text, atLeast: least) == passes, "\(text.debugDescription) \(least)")
        }
        #expect(refusal("download", ["url": ""]) == "param 'url' must have at least 1 character(s)")
        #expect(refusal("download", ["url": "é"]) == nil)
    }
}
