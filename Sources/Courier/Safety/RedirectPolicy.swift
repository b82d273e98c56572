import Curl

/// What a redirect may do: at most `limit` hops, to http or https only,
/// from https down to http only when `allowsInsecure`.
struct RedirectPolicy: Sendable {
    static let schemes: Set<String> = ["http", "https"]
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    var limit = 10
    var allowsInsecure = false

    /// Why the hop from `current` to `target` may not be taken, if it may not.
    func refusal(from current: CurlURL?, to target: CurlURL, hop: Int) -> TransferFailure? {
        if hop > limit {
            return TransferFailure(
                code: .tooManyRedirects, message: "Maximum (\(limit)) redirects followed",
                curlCode: Int32(CurlFailure.tooManyRedirectsCode))
        }
        if !Self.schemes.contains(target.scheme) {
            return TransferFailure(code: .schemeNotAllowed, message: "a redirect to a \(target.scheme) URL is not allowed")
        }
        if current?.scheme == "https", target.scheme == "http", !allowsInsecure {
            return TransferFailure(code: .insecureRedirect, message: "a redirect from https down to http is not allowed")
        }
        return nil
    }

    /// The request headers of the next hop: credential headers stay behind
    /// when the target is another origin (scheme, host or port).
    static func headers<Value>(
        _ headers: [(name: String, value: Value)], from current: CurlURL?, to target: CurlURL
    ) -> [(name: String, value: Value)] {
        guard current?.origin != target.origin else { return headers }
        return headers.filter { !DownloadRequest.credentialHeaders.contains($0.name.lowercased()) }
    }
}
