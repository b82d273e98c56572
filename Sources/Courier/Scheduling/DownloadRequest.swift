enum Priority: String, Sendable, Comparable, CaseIterable {
    case high
    case normal
    case low

    var rank: Int {
        switch self {
        case .high: 0
        case .normal: 1
        case .low: 2
        }
    }

    static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rank > rhs.rank }
}

enum BodyKind: String, Sendable {
    case none
    case text
    case base64
}

enum CachePolicy: String, Sendable {
    case `default`
    case reload
    case cacheElseLoad
    case cacheOnly
}

/// The params of one `download`, checked.
struct DownloadRequest: Sendable {
    var url: String
    var scheme: String
    /// The URL carries a user name or password.
    var hasUserInfo: Bool
    /// Names as the client gave them; compared without case.
    var headers: [(name: String, value: String)]
    var slot: String?
    var priority: Priority
    var cachePolicy: CachePolicy
    var accept: [String]?
    var body: BodyKind
    var textEncoding: String?
    var destination: String?
    var maxBytes: Int64?
    var timeout: Double
    var cacheKey: String?
    var wait: Bool
    /// How many attempts may follow the first after transient failures.
    var retries = Configuration.defaultRetries
    /// More http or https URLs of the same resource, asked in turn after
    /// `url` when attempts fail. Not part of the request's identity.
    var mirrors: [String] = []
    /// What the body must hash to; checked per receipt, so receipts of one
    /// task may expect different digests.
    var integrity: Integrity? = nil
    /// Bytes per second its transfer may take; nil for no limit of its own.
    var maxRate: Int64?

    /// Header names whose values identify the user: a response to a request
    /// carrying one is never stored, and none follows a redirect to another
    /// origin.
    static let credentialHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// Whether the request carries credentials: a user name or password in
    /// its URL, or a credential header.
    var hasCredentials: Bool {
        hasUserInfo || headers.contains { Self.credentialHeaders.contains($0.name.lowercased()) }
    }

    /// Whether a response's Content-Type is one `accept` allows.
    func accepts(contentType: String?) -> Bool {
        guard let accept, !accept.isEmpty else { return true }
        guard let contentType else { return false }
        let media = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingBlanks.lowercased()
        } ?? ""
        let type = media.split(separator: "/").first.map(String.init) ?? media
        return accept.contains { pattern in
            let pattern = pattern.split(separator: ";", maxSplits: 1).first.map {
                $0.trimmingBlanks
            } ?? pattern
            return pattern == "*/*" || pattern == media || pattern == "\(type)/*"
        }
    }

    /// Why a response cannot satisfy this request, if it cannot.
    func refusal(of response: ResponseHead, size: Int64?, memoryBodyLimit: Int64) -> TransferFailure? {
        // Status 0: a scheme without status lines (file://, with --allow-scheme).
        if response.status != 0, !(200...299).contains(response.status) {
            return TransferFailure(code: .httpStatus, message: "the origin answered HTTP \(response.status)")
        }
        if !accepts(contentType: response.contentType) {
            return TransferFailure(
                code: .unacceptableContentType,
                message: "content type \(response.contentType ?? "(none)") is not among \(accept ?? [])")
        }
        return size.flatMap { limitRefusal(received: $0, memoryBodyLimit: memoryBodyLimit) }
    }

    /// Why a body of `received` bytes is more than this receipt takes, if it
    /// is: more than its `maxBytes`; for a body held in memory (`text` or
    /// `base64`), more than `memoryBodyLimit` (`--max-memory-body`) either
    /// as the decoded bytes, which are read back into memory, or as the
    /// JSON string the receipt's outcome carries: base64 takes four bytes
    /// for every three, and text what its escapes take, `textLength` (at
    /// least `received` when unknown). Decoded (decompressed) bytes count,
    /// so a small gzip cannot expand into gigabytes of memory. Other
    /// receipts of its task have their own limits.
    func limitRefusal(received: Int64, textLength: Int64? = nil, memoryBodyLimit: Int64) -> TransferFailure? {
        if let maxBytes, received > maxBytes {
            return TransferFailure(code: .tooLarge, message: "the body exceeds maxBytes (\(maxBytes) bytes)")
        }
        guard body != .none else { return nil }
        if received > memoryBodyLimit {
            return TransferFailure(
                code: .tooLarge, message: "the body exceeds maxMemoryBody (\(memoryBodyLimit) bytes), the limit of text and base64 bodies")
        }
        let jsonLength = body == .base64 ? Self.base64Length(of: received) : max(textLength ?? received, received)
        return jsonLength > memoryBodyLimit ? Self.tooLargeAsJSON(body, limit: memoryBodyLimit) : nil
    }

    /// The failure of a body whose JSON string takes more than `limit`.
    static func tooLargeAsJSON(_ body: BodyKind, limit: Int64) -> TransferFailure {
        TransferFailure(
            code: .tooLarge, message: "the body takes more than maxMemoryBody (\(limit) bytes) as the JSON string of its \(body.rawValue)")
    }

    /// The characters base64 writes for `count` bytes.
    static func base64Length(of count: Int64) -> Int64 {
        let (length, overflow) = (count / 3 + (count % 3 == 0 ? 0 : 1)).multipliedReportingOverflow(by: 4)
        return overflow ? .max : length
    }

    /// The charset a `text` body is decoded from: `textEncoding`, else the
    /// response's `charset`, else none (UTF-8).
    func textCharset(contentType: String?) -> String? {
        textEncoding ?? TextDecoding.charset(ofContentType: contentType)
    }
}
