import JSON
import Testing

@testable import Courier

/// The wire form of what downloads answer and notify, written straight from
/// domain values, against the value it stands for: every member, in the
/// order the text sorts them.
@Suite struct WireFormatTests {
    private func text(_ members: (JSONObjectWriter) -> Void) -> String {
        var text: [UInt8] = []
        JSONCodec.encodeObject(into: &text, members)
        return String(decoding: text, as: UTF8.self)
    }

    private func text(_ value: JSON) -> String { String(decoding: JSONCodec.encode(value), as: UTF8.self) }

    /// An outcome with every optional member set.
    private var fullOutcome: Outcome {
        var outcome = Outcome(url: "http://o/a", finalURL: "http://o/b")
        outcome.status = 503
        outcome.httpVersion = "1.1"
        outcome.headers = ["retry-after": "120", "content-type": "text/plain", "Z": "z", "é": "e"]
        outcome.contentType = "text/plain"
        outcome.size = 12
        outcome.path = "/p/r1-b"
        outcome.text = "hello\u{0}"
        outcome.base64 = "aGVsbG8="
        outcome.source = .revalidated
        outcome.durationMs = 1.23456
        outcome.image = ImageInfo(format: "png", width: 3, height: 4)
        outcome.error = TransferFailure(
            code: .httpStatus, message: "503", curlCode: 22, expected: "sha256-x", actual: "sha256-y")
        outcome.attempts = 2
        outcome.retryAfter = 120
        outcome.resumedFrom = 5
        return outcome
    }

    @Test func anOutcomeIsWrittenWithEveryMemberInOrder() {
        let expected: JSON = [
            "ok": false, "url": "http://o/a", "finalUrl": "http://o/b", "status": 503, "httpVersion": "1.1",
            "headers": ["retry-after": "120", "content-type": "text/plain", "Z": "z", "é": "e"],
            "contentType": "text/plain", "size": 12, "source": "revalidated", "durationMs": 1.235, "attempts": 2,
            "path": "/p/r1-b", "text": "hello\u{0}", "base64": "aGVsbG8=",
            "image": ["format": "png", "width": 3, "height": 4], "resumedFrom": 5,
            "error": [
                "code": "http_status", "message": "503", "httpStatus": 503, "curlCode": 22, "expected": "sha256-x",
                "actual": "sha256-y", "retryAfter": 120,
            ],
        ]
        #expect(text(fullOutcome.write) == text(expected))
        #expect(fullOutcome.json == expected)
        #expect(fullOutcome.estimatedEncodedCount >= text(expected).utf8.count / 2)
    }

    @Test(arguments: [false, true])
    func aMemoryHitsOutcomeCopyingItsEntrysTextIsTheOneWrittenPlainly(_ everyMember: Bool) throws {
        // Given a stored response, the text its hits share, and a hit's
        // outcome with members of its own (another URL, a path, an image,
        // text, an error, a real)
        let response = CachedResponse(
            status: 200, headers: [("Content-Type", "text/plain"), ("x-\u{1}", "a\"b\\c/é")],
            url: "http://o/b?q=\u{7f}\u{2028}", requestTime: .now, responseTime: .now)
        let shared = try #require(Outcome.sharedText(response: response, size: 12))
        var outcome = Outcome(url: "http://o/a", response: response.head, headers: response.headerObject)
        outcome.sharedHeaders = shared
        outcome.size = 12
        outcome.source = .memory
        outcome.durationMs = 0.1
        if everyMember {
            outcome.path = "/p/\"é"
            outcome.image = ImageInfo(format: "png", width: 3, height: 4)
            outcome.text = "hello"
            outcome.error = TransferFailure(code: .io, message: "cannot read the body back")
        }

        // When it is written in a message sharing the text, and plainly
        let hit = outcome
        let copied = JSONMessage(estimate: 64, sharing: shared) { $0.set("outcome", object: hit.write) }.encoded
        var plain: [UInt8] = []
        JSONCodec.encodeObject(into: &plain) { $0.set("outcome", object: hit.write) }

        // Then the bytes are the same
        #expect(String(decoding: copied, as: UTF8.self) == String(decoding: plain, as: UTF8.self))
        #expect(copied == plain)
        #expect(JSONCodec.encode(outcome.json) == Array(plain.dropFirst(#"{"outcome":"#.utf8.count).dropLast()))
    }

    @Test func aBareOutcomeWritesNullsForWhatIsUnknown() {
        let outcome = Outcome(url: "http://o/a")
        let expected: JSON = [
            "ok": true, "url": "http://o/a", "finalUrl": "http://o/a", "status": nil, "httpVersion": nil, "headers": [:],
            "contentType": nil, "size": 0, "source": "network", "durationMs": 0.0, "attempts": 0,
        ]
        #expect(text(outcome.write) == text(expected))
    }

    @Test func aDownloadAnswerIsWrittenWithItsOutcome() {
        let reply = DownloadReply(
            receipt: ReceiptID(7), task: TaskID(3), state: .finished, reused: true, source: .memory, outcome: fullOutcome)
        let expected: JSON = [
            "receipt": "r7", "task": "t3", "state": "finished", "reused": true, "source": "memory",
            "outcome": fullOutcome.json,
        ]
        #expect(text(reply.write) == text(expected))
        #expect(CourierServer.json(.download(reply)) == expected)
    }

    @Test func progressIsWrittenWithItsReceiptsAndState() {
        let figures = TaskProgress(task: TaskID(2), received: 5, expected: 10, bytesPerSecond: 1.5)
        let receipts = [ReceiptID(1), ReceiptID(4)]
        let fields: [String: JSON] = [
            "task": "t2", "received": 5, "expected": 10, "fraction": 0.5, "bytesPerSecond": 1.5,
        ]
        var notice = fields
        notice["receipts"] = ["r1", "r4"]
        #expect(text({ figures.write(to: $0, receipts: receipts) }) == text(.object(notice)))
        var answer = fields
        answer["receipt"] = "r4"
        answer["state"] = "running"
        #expect(
            text({ figures.write(to: $0, receipt: ReceiptID(4), state: .running) }) == text(.object(answer)))
        let unknown = TaskProgress.none(task: TaskID(9))
        #expect(
            text({ unknown.write(to: $0) })
                == #"{"bytesPerSecond":0.0,"expected":null,"fraction":null,"received":0,"task":"t9"}"#)
    }
}
