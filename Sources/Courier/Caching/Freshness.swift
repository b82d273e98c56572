/// Whether a stored response may be served without asking the origin.
enum Freshness: Equatable, Sendable {
    /// Serve it.
    case fresh
    /// Its freshness lifetime has passed: revalidate with these validators
    /// (none: fetch it again).
    case stale(Validators)
    /// `no-cache` in the stored response or in the request (or the request's
    /// `Pragma: no-cache` or `max-age=0`): validate before every use.
    case mustRevalidate(Validators)

    var isFresh: Bool { self == .fresh }
}
