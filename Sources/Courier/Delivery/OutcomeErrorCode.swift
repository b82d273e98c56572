import Curl

/// The `error.code` of a failed outcome.
enum OutcomeErrorCode: String, Sendable, CaseIterable {
    case cancelled
    case shutdown
    case httpStatus = "http_status"
    case unacceptableContentType = "unacceptable_content_type"
    case tooLarge = "too_large"
    case timeout
    case dnsFailed = "dns_failed"
    case connectFailed = "connect_failed"
    case tlsFailed = "tls_failed"
    case tooManyRedirects = "too_many_redirects"
    case schemeNotAllowed = "scheme_not_allowed"
    case insecureRedirect = "insecure_redirect"
    case notCached = "not_cached"
    case destinationNotAllowed = "destination_not_allowed"
    case io
    case integrityMismatch = "integrity_mismatch"
    case network

    init(_ failure: CurlFailure) {
        switch failure {
        case .timeout: self = .timeout
        case .dnsFailed: self = .dnsFailed
        case .connectFailed: self = .connectFailed
        case .tlsFailed: self = .tlsFailed
        case .tooManyRedirects: self = .tooManyRedirects
        case .schemeNotAllowed: self = .schemeNotAllowed
        case .tooLarge: self = .tooLarge
        case .aborted: self = .io
        case .network: self = .network
        }
    }
}
