/// What a kept body was taken under, and what `If-Range` sends back: the
/// response's strong entity tag, else its `Last-Modified`, as the bytes the
/// origin sent (an entity tag is opaque and need not be UTF-8).
enum ResumeValidator: Equatable, Sendable {
    /// A strong entity tag, with its quotes.
    case entityTag([UInt8])
    /// An HTTP date.
    case lastModified([UInt8])

    /// The validator of `response`: its `ETag` when that is a strong one
    /// (`"…"` of the bytes RFC 9110 allows, never `W/`), else its
    /// `Last-Modified` when that is a date courier can read; nil when it has
    /// neither. Either goes back to the origin in a header line, so one
    /// holding a byte a field value may not, or longer than
    /// `HTTPField.maximumValidatorLength`, is not taken.
    init?(of response: ResponseHead) {
        if let tag = response.headerBytes("etag").map({ Array(HTTPField.trimmingBlanks($0)) }), Self.isStrongEntityTag(tag) {
            self = .entityTag(tag)
        } else if let date = response.headerBytes("last-modified").map({ Array(HTTPField.trimmingBlanks($0)) }),
            HTTPField.isSendableValidator(date), HTTPDate.parse(String(decoding: date, as: UTF8.self)) != nil
        {
            self = .lastModified(date)
        } else {
            return nil
        }
    }

    /// The value `If-Range` carries.
    var value: [UInt8] {
        switch self {
        case .entityTag(let tag): tag
        case .lastModified(let date): date
        }
    }

    /// `"` *etagc `"`, etagc being `!`, `#` to `~`, or a byte past ASCII; no
    /// longer than `HTTPField.maximumValidatorLength`.
    static func isStrongEntityTag(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 2, bytes.count <= HTTPField.maximumValidatorLength, bytes.first == UInt8(ascii: "\""),
            bytes.last == UInt8(ascii: "\"")
        else { return false }
        return bytes.dropFirst().dropLast().allSatisfy { $0 == 0x21 || (0x23...0x7E).contains($0) || $0 >= 0x80 }
    }
}

/// The first `offset` bytes of a body of `completeLength`, kept under
/// `validator` for a later attempt to continue.
struct KeptBody: Equatable, Sendable {
    var offset: Int64
    var completeLength: Int64
    var validator: ResumeValidator

    /// The request headers that ask for the rest, and only if it is still
    /// the same representation.
    var rangeHeaders: [(name: String, value: [UInt8])] {
        [("Range", Array("bytes=\(offset)-".utf8)), ("If-Range", validator.value)]
    }
}

/// What a transfer does with a response's body, given the body it kept
/// (and asked the rest of) or not. Two versions of a resource are never
/// spliced: only a `206` that carries exactly the rest of the same
/// representation continues the kept bytes.
enum ResumeDecision: Equatable, Sendable {
    /// The response carries the kept body's bytes from `offset` up to `end`
    /// (exclusive) of its `completeLength`.
    case resume(offset: Int64, end: Int64, completeLength: Int64)
    /// The body starts at its first byte: a `200` (the resource changed,
    /// or the origin does not serve ranges), or any response when nothing
    /// was kept. Kept bytes, if any, are dropped.
    case startAnew
    /// The response is no right answer to the request: the attempt fails
    /// with `reason`, and kept bytes, if any, are dropped.
    case reject(String)
    /// An error status to a request for the rest: it fails as any error
    /// status does. The kept bytes stay for a later attempt, unless the
    /// origin said the range cannot be satisfied (`416`).
    case errorStatus(dropsKept: Bool)

    /// The decision for `response` (the final one, after redirects) to a
    /// request that asked for the rest of `kept` (nil: asked for no range
    /// of courier's own), whose client asked for a range itself when
    /// `clientAskedRange`. When `sameEntityTagRequired` (the bytes were kept
    /// from another URL, and nothing else proves the body), a `206`
    /// continues only with the entity tag the bytes were kept under.
    static func decide(
        kept: KeptBody?, clientAskedRange: Bool = false, sameEntityTagRequired: Bool = false, response: ResponseHead
    ) -> ResumeDecision {
        guard let kept else { return withoutKeptBody(status: response.status, clientAskedRange: clientAskedRange) }
        switch response.status {
        case 200:
            return .startAnew
        case 206:
            return continuation(of: kept, sameEntityTagRequired: sameEntityTagRequired, response: response)
        case 416:
            return .errorStatus(dropsKept: true)
        case 200...299:
            return .reject("the origin answered a request for bytes \(kept.offset)- with status \(response.status)")
        default:
            return .errorStatus(dropsKept: false)
        }
    }

    /// The decision for a response with `status` to a request that asked
    /// for no range of courier's own: it needs nothing else of the response.
    static func withoutKeptBody(status: Int, clientAskedRange: Bool) -> ResumeDecision {
        if status == 206, !clientAskedRange {
            return .reject("the origin answered 206 Partial Content to a request without Range")
        }
        return .startAnew
    }

    private static func continuation(of kept: KeptBody, sameEntityTagRequired: Bool, response: ResponseHead) -> ResumeDecision {
        if let coding = response.header("content-encoding"), coding.trimmingBlanks.lowercased() != "identity" {
            return .reject("the origin answered a range with a content coding (\(shown(coding)))")
        }
        guard let value = response.header("content-range") else {
            return .reject("the origin answered 206 Partial Content without Content-Range")
        }
        guard let range = ContentRange(value) else {
            return .reject("the origin's Content-Range '\(shown(value))' is not a byte range courier can read")
        }
        guard range.first == kept.offset else {
            return .reject("the origin's range starts at byte \(range.first), not at the \(kept.offset) asked")
        }
        guard range.completeLength == kept.completeLength else {
            let length = range.completeLength.map(String.init) ?? "unknown"
            return .reject("the origin's complete length (\(length)) is not the \(kept.completeLength) bytes of the body kept")
        }
        if let length = response.announcedLength, length != range.count {
            return .reject("the origin's Content-Length (\(length)) is not the \(range.count) bytes of its Content-Range")
        }
        switch kept.validator {
        case .entityTag(let tag):
            let sent = response.headerBytes("etag").map { HTTPField.trimmingBlanks($0) }
            if let sent, !sent.elementsEqual(tag) {
                return .reject("the origin's entity tag \(shown(sent)) is not the \(shown(tag[...])) the kept bytes came with")
            }
            if sent == nil, sameEntityTagRequired {
                return .reject("the origin sent no entity tag to prove its range continues the kept bytes")
            }
        case .lastModified(let date):
            if let sent = response.headerBytes("last-modified").map({ HTTPField.trimmingBlanks($0) }), !sent.elementsEqual(date) {
                return .reject("the origin's Last-Modified (\(shown(sent))) is not the \(shown(date[...])) the kept bytes came with")
            }
        }
        return .resume(offset: kept.offset, end: range.last + 1, completeLength: kept.completeLength)
    }

    /// An origin's text as a message quotes it: at most 100 characters.
    private static func shown(_ text: String) -> String {
        text.count > 100 ? String(text.prefix(100)) + "…" : text
    }

    /// A validator's bytes as a message quotes them: as text, at most 100
    /// characters.
    private static func shown(_ bytes: ArraySlice<UInt8>) -> String {
        shown(String(decoding: bytes, as: UTF8.self))
    }
}
