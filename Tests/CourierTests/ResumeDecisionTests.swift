import Testing

@testable import Courier

/// `Content-Range` is read from bytes with range checks, and a response
/// continues a kept body only when it carries exactly its rest.
@Suite(.timeLimit(.minutes(1)))
struct ResumeDecisionTests {
    private let kept = KeptBody(offset: 1000, completeLength: 5000, validator: .entityTag(Array("\"v1\"".utf8)))

    private func response(_ status: Int, _ headers: [(String, String)]) -> ResponseHead {
        ResponseHead(status: status, headers: headers.map { (name: $0.0, value: $0.1) })
    }

    private func rest(_ headers: [(String, String)] = []) -> ResponseHead {
        response(206, [("etag", "\"v1\""), ("content-range", "bytes 1000-4999/5000"), ("content-length", "4000")] + headers)
    }

    // MARK: - Content-Range

    @Test(arguments: [
        ("bytes 0-499/1234", ContentRange(first: 0, last: 499, completeLength: 1234)),
        ("bytes 1000-4999/5000", ContentRange(first: 1000, last: 4999, completeLength: 5000)),
        ("BYTES  7-7/8", ContentRange(first: 7, last: 7, completeLength: 8)),
        ("bytes 0-9/*", ContentRange(first: 0, last: 9, completeLength: nil)),
        (" bytes 0-0/1 ", ContentRange(first: 0, last: 0, completeLength: 1)),
        ("bytes 0-9223372036854775806/9223372036854775807", ContentRange(first: 0, last: 9_223_372_036_854_775_806, completeLength: .max)),
    ])
    func byteRangesAreRead(value: String, expected: ContentRange) {
        #expect(ContentRange(value) == expected)
    }

    @Test(arguments: [
        "", "bytes", "bytes ", "bytes */1000", "items 0-1/2", "bytes 0-1", "bytes -1-2/3", "bytes 0--2/3", "bytes 5-4/10",
        "bytes 0-10/10", "bytes 20-30/10", "bytes 0-1/+2", "bytes 0x1-2/3", "bytes 0-1/2/3", "bytes 1 -2/3",
        "bytes 9223372036854775808-9223372036854775809/18446744073709551616", "bytes 0-1/9223372036854775808",
        "bytes 0-1/99999999999999999999999999", "bytes 0-1/٣",
    ])
    func anythingElseIsNotARange(value: String) {
        #expect(ContentRange(value) == nil)
    }

    // MARK: - Validators

    @Test func aStrongEntityTagIsPreferredThenADateCourierCanRead() {
        #expect(ResumeValidator(of: response(200, [("etag", "\"a\""), ("last-modified", "Mon, 14 Sep 2020 12:26:40 GMT")])) == .entityTag(Array("\"a\"".utf8)))
        #expect(ResumeValidator(of: response(200, [("etag", "W/\"a\""), ("last-modified", "Mon, 14 Sep 2020 12:26:40 GMT")]))
            == .lastModified(Array("Mon, 14 Sep 2020 12:26:40 GMT".utf8)))
        #expect(ResumeValidator(of: response(200, [("etag", "W/\"a\"")])) == nil)
        #expect(ResumeValidator(of: response(200, [("etag", "a")])) == nil)
        #expect(ResumeValidator(of: response(200, [("etag", "\"a\"b\"")])) == nil)
        #expect(ResumeValidator(of: response(200, [("last-modified", "yesterday")])) == nil)
        #expect(ResumeValidator(of: response(200, [])) == nil)
    }

    /// An entity tag is opaque: bytes that are not UTF-8 are taken as they
    /// came, a tag too long to send back is not, and a 206 continues only
    /// under the same bytes (two tags that show the same U+FFFD text differ).
    @Test func entityTagsAreTheirBytes() {
        func tagged(_ bytes: [UInt8], _ status: Int = 200) -> ResponseHead {
            var head = rest()
            head.status = status
            head.headers[0].value = String(decoding: bytes, as: UTF8.self)
            head.rawValues = ["etag": bytes]
            return head
        }
        let e9: [UInt8] = [0x22, 0x61, 0xE9, 0x22]
        let e8: [UInt8] = [0x22, 0x61, 0xE8, 0x22]
        #expect(ResumeValidator(of: tagged(e9)) == .entityTag(e9))
        let long = [0x22] + [UInt8](repeating: 0x61, count: HTTPField.maximumValidatorLength - 1) + [0x22]
        #expect(ResumeValidator(of: tagged(long)) == nil)
        let longest = [0x22] + [UInt8](repeating: 0x61, count: HTTPField.maximumValidatorLength - 2) + [0x22]
        #expect(ResumeValidator(of: tagged(longest)) == .entityTag(longest))
        let keptRaw = KeptBody(offset: 1000, completeLength: 5000, validator: .entityTag(e9))
        #expect(keptRaw.rangeHeaders.last?.value == e9)
        #expect(ResumeDecision.decide(kept: keptRaw, response: tagged(e9, 206)) == .resume(offset: 1000, end: 5000, completeLength: 5000))
        guard case .reject = ResumeDecision.decide(kept: keptRaw, response: tagged(e8, 206)) else {
            Issue.record("a 206 under other bytes continued the kept body")
            return
        }
    }

    // MARK: - Decisions

    @Test func onlyTheExactRestContinues() {
        #expect(ResumeDecision.decide(kept: kept, response: rest()) == .resume(offset: 1000, end: 5000, completeLength: 5000))
        // A range that stops short continues too, and the transfer asks again for the rest
        let short = response(206, [("content-range", "bytes 1000-2999/5000")])
        #expect(ResumeDecision.decide(kept: kept, response: short) == .resume(offset: 1000, end: 3000, completeLength: 5000))
    }

    @Test func a200StartsAnew() {
        #expect(ResumeDecision.decide(kept: kept, response: response(200, [("etag", "\"v2\"")])) == .startAnew)
        #expect(ResumeDecision.decide(kept: nil, response: response(200, [])) == .startAnew)
    }

    @Test(arguments: [
        [("content-range", "bytes 1001-4999/5000")],
        [("content-range", "bytes 999-4999/5000")],
        [("content-range", "bytes 1000-4999/5001")],
        [("content-range", "bytes 1000-4999/*")],
        [("content-range", "bytes */5000")],
        [("content-range", "bytes 9223372036854776808-9223372036854779807/18446744073709551616")],
        [("content-range", "bytes 6000-7000/5000")],
        [("content-range", "bytes 1000-4999/5000"), ("content-length", "4001")],
        [("content-range", "bytes 1000-4999/5000"), ("etag", "\"v2\"")],
        [("content-range", "bytes 1000-4999/5000"), ("content-encoding", "gzip")],
        [],
    ])
    func anyOtherPartialContentIsRejected(headers: [(String, String)]) {
        guard case .reject = ResumeDecision.decide(kept: kept, response: response(206, headers)) else {
            Issue.record("\(headers) was not rejected")
            return
        }
    }

    @Test func a206ToARequestWithoutRangeIsRejectedUnlessTheClientAskedOne() {
        let whole = response(206, [("content-range", "bytes 0-9/10")])
        #expect(ResumeDecision.decide(kept: nil, response: whole)
            == .reject("the origin answered 206 Partial Content to a request without Range"))
        #expect(ResumeDecision.decide(kept: nil, clientAskedRange: true, response: whole) == .startAnew)
    }

    @Test func errorStatusesLeaveTheKeptBytesUnlessTheRangeCannotBeSatisfied() {
        #expect(ResumeDecision.decide(kept: kept, response: response(503, [])) == .errorStatus(dropsKept: false))
        #expect(ResumeDecision.decide(kept: kept, response: response(404, [])) == .errorStatus(dropsKept: false))
        #expect(ResumeDecision.decide(kept: kept, response: response(416, [])) == .errorStatus(dropsKept: true))
        guard case .reject = ResumeDecision.decide(kept: kept, response: response(204, [])) else {
            Issue.record("a 204 to a range request was not rejected")
            return
        }
    }

    @Test func aBodyKeptFromAnotherURLNeedsItsEntityTag() {
        let untagged = response(206, [("content-range", "bytes 1000-4999/5000")])
        #expect(ResumeDecision.decide(kept: kept, sameEntityTagRequired: false, response: untagged)
            == .resume(offset: 1000, end: 5000, completeLength: 5000))
        guard case .reject = ResumeDecision.decide(kept: kept, sameEntityTagRequired: true, response: untagged) else {
            Issue.record("a 206 without an entity tag continued a body kept from another URL")
            return
        }
        #expect(ResumeDecision.decide(kept: kept, sameEntityTagRequired: true, response: rest())
            == .resume(offset: 1000, end: 5000, completeLength: 5000))
    }

    @Test func aDateValidatorMustNotChange() {
        let dated = KeptBody(offset: 10, completeLength: 20, validator: .lastModified(Array("Mon, 14 Sep 2020 12:26:40 GMT".utf8)))
        let same = response(206, [("content-range", "bytes 10-19/20"), ("last-modified", "Mon, 14 Sep 2020 12:26:40 GMT")])
        let later = response(206, [("content-range", "bytes 10-19/20"), ("last-modified", "Tue, 15 Sep 2020 12:26:40 GMT")])
        #expect(ResumeDecision.decide(kept: dated, response: same) == .resume(offset: 10, end: 20, completeLength: 20))
        guard case .reject = ResumeDecision.decide(kept: dated, response: later) else {
            Issue.record("a 206 of a later date continued the kept bytes")
            return
        }
    }

    @Test func theWholeOfAContinued206IsA200OfTheCompleteLength() {
        let whole = rest([("content-type", "application/octet-stream")]).whole(length: 5000)
        #expect(whole.status == 200)
        #expect(whole.header("content-length") == "5000" && whole.announcedLength == 5000)
        #expect(whole.header("content-range") == nil)
        #expect(whole.header("etag") == "\"v1\"" && whole.contentType == "application/octet-stream")
    }

    @Test func rangeHeadersAskForTheRestIfStillTheSame() {
        #expect(kept.rangeHeaders.map { "\($0.name): " + String(decoding: $0.value, as: UTF8.self) } == ["Range: bytes=1000-", "If-Range: \"v1\""])
    }
}
