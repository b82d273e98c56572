import CLibcurl

/// Why libcurl ended a transfer, in the terms courier reports.
public enum CurlFailure: String, Sendable {
    case timeout
    case dnsFailed = "dns_failed"
    case connectFailed = "connect_failed"
    case tlsFailed = "tls_failed"
    case tooManyRedirects = "too_many_redirects"
    case schemeNotAllowed = "scheme_not_allowed"
    case tooLarge = "too_large"
    /// The write callback refused the data; the caller knows why.
    case aborted
    case network

    /// The code libcurl gives when it stops following redirects, which
    /// courier gives too when it stops following them itself.
    public static let tooManyRedirectsCode = Int(CURLE_TOO_MANY_REDIRECTS.rawValue)

    /// Maps a result code, with the text curl left in the error buffer.
    public init(code: Int32) {
        switch CURLcode(UInt32(code)) {
        case CURLE_OPERATION_TIMEDOUT:
            self = .timeout
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            self = .dnsFailed
        case CURLE_COULDNT_CONNECT:
            self = .connectFailed
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_USE_SSL_FAILED, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE:
            self = .tlsFailed
        case CURLE_TOO_MANY_REDIRECTS:
            self = .tooManyRedirects
        case CURLE_UNSUPPORTED_PROTOCOL:
            self = .schemeNotAllowed
        case CURLE_FILESIZE_EXCEEDED:
            self = .tooLarge
        case CURLE_WRITE_ERROR, CURLE_ABORTED_BY_CALLBACK:
            self = .aborted
        default:
            self = .network
        }
    }
}
