import JSON

/// Where an outcome's body came from.
enum OutcomeSource: String, Sendable {
    case network
    case memory
    case disk
    case revalidated
}

/// What a receipt ended with: the `outcome` of `download/finished`.
///
/// Its members sit behind one reference, in a box that does not change: an
/// outcome passes by value through notices, answers, the scheduler's
/// actions and closures, and so moves and copies as one pointer, one
/// reference count and two numbers instead of some 300 bytes with eight
/// counted members. A change to a member makes a new box, so the members
/// are made whole first (`Fields`, as `Delivery` does) or changed together
/// (`update`).
struct Outcome: Sendable {
    /// The members, as the wire names them.
    struct Fields: Sendable {
        var url: String
        var finalURL: String
        var status: Int?
        var httpVersion: String?
        var headers: [String: String] = [:]
        /// For a memory hit, the text of the members its entry gives every
        /// hit's outcome alike (`headers`, `finalURL`, `size`, `status`, …),
        /// made once for the entry (`sharedText(response:size:)`), which the
        /// hit's `download/finished` copies.
        var sharedHeaders: SharedJSON?
        var contentType: String?
        var size: Int64 = 0
        var path: String?
        var text: String?
        var base64: String?
        var source = OutcomeSource.network
        var image: ImageInfo?
        var error: TransferFailure?
        /// With `error`: the seconds the origin's `Retry-After` asked for, when
        /// waiting that long is why courier did not try again.
        var retryAfter: Int64?
        /// The byte offset the last attempt continued a kept body from.
        var resumedFrom: Int64?
    }

    /// Holds the members; an outcome's copies share it.
    private final class Box: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private let box: Box
    /// Set by the scheduler as every receipt finishes, so kept beside the
    /// box, which finishing a receipt then leaves alone.
    var durationMs = 0.0
    /// Requests to origins this outcome took: 0 for a cache hit.
    var attempts = 0

    init(_ fields: Fields) {
        box = Box(fields)
    }

    /// Changes members in a new box: make several changes in one call.
    mutating func update(_ change: (inout Fields) -> Void) {
        var fields = box.fields
        change(&fields)
        self = Outcome(fields, durationMs: durationMs, attempts: attempts)
    }

    private init(_ fields: Fields, durationMs: Double, attempts: Int) {
        box = Box(fields)
        self.durationMs = durationMs
        self.attempts = attempts
    }

    var url: String {
        get { box.fields.url }
        set { update { $0.url = newValue } }
    }
    var finalURL: String {
        get { box.fields.finalURL }
        set { update { $0.finalURL = newValue } }
    }
    var status: Int? {
        get { box.fields.status }
        set { update { $0.status = newValue } }
    }
    var httpVersion: String? {
        get { box.fields.httpVersion }
        set { update { $0.httpVersion = newValue } }
    }
    var headers: [String: String] {
        get { box.fields.headers }
        set { update { $0.headers = newValue } }
    }
    var sharedHeaders: SharedJSON? {
        get { box.fields.sharedHeaders }
        set { update { $0.sharedHeaders = newValue } }
    }
    var contentType: String? {
        get { box.fields.contentType }
        set { update { $0.contentType = newValue } }
    }
    var size: Int64 {
        get { box.fields.size }
        set { update { $0.size = newValue } }
    }
    var path: String? {
        get { box.fields.path }
        set { update { $0.path = newValue } }
    }
    var text: String? {
        get { box.fields.text }
        set { update { $0.text = newValue } }
    }
    var base64: String? {
        get { box.fields.base64 }
        set { update { $0.base64 = newValue } }
    }
    var source: OutcomeSource {
        get { box.fields.source }
        set { update { $0.source = newValue } }
    }
    var image: ImageInfo? {
        get { box.fields.image }
        set { update { $0.image = newValue } }
    }
    var error: TransferFailure? {
        get { box.fields.error }
        set { update { $0.error = newValue } }
    }
    var retryAfter: Int64? {
        get { box.fields.retryAfter }
        set { update { $0.retryAfter = newValue } }
    }
    var resumedFrom: Int64? {
        get { box.fields.resumedFrom }
        set { update { $0.resumedFrom = newValue } }
    }

    var ok: Bool { error == nil }

    init(url: String, finalURL: String? = nil) {
        self.init(Fields(url: url, finalURL: finalURL))
    }

    init(url: String, failure: TransferFailure) {
        var fields = Fields(url: url)
        fields.error = failure
        self.init(fields)
    }

    /// An outcome carrying a response's status line and headers; `headers`
    /// is the response's `headerObject` when the caller holds it already.
    init(url: String, response: ResponseHead, headers: [String: String]? = nil) {
        self.init(Fields(url: url, response: response, headers: headers))
    }
}

extension Outcome.Fields {
    init(url: String, finalURL: String? = nil) {
        self.url = url
        self.finalURL = finalURL ?? url
    }

    /// The members of an outcome carrying a response's status line and
    /// headers; `headers` is the response's `headerObject` when the caller
    /// holds it already.
    init(url: String, response: ResponseHead, headers: [String: String]? = nil) {
        self.init(url: url, finalURL: response.finalURL)
        status = response.status == 0 ? nil : response.status
        httpVersion = response.httpVersion
        self.headers = headers ?? response.headerObject
        contentType = response.contentType
    }
}
