import CLibcurl

/// A URL as libcurl parses it (its URL API), so what courier accepts is what
/// its transfers will fetch.
public struct CurlURL: Sendable {
    public var scheme: String
    public var host: String?
    public var path: String
    /// The port, the scheme's default when the URL names none.
    public var port: Int?
    /// Whether the URL carries a user name or password (`user:pw@host`).
    public var hasUserInfo: Bool

    /// Scheme, host and port: what a redirect must keep for credentials to
    /// follow it.
    public var origin: String { "\(scheme)://\(host ?? ""):\(port.map(String.init) ?? "")" }

    /// Nil when libcurl does not take `string` as an absolute URL. Schemes
    /// libcurl does not know are accepted here (the caller decides what is
    /// allowed).
    public init?(_ string: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        let flags = UInt32(CURLU_NON_SUPPORT_SCHEME)
        guard curl_url_set(handle, CURLUPART_URL, string, flags) == CURLUE_OK,
            let scheme = Self.part(handle, CURLUPART_SCHEME)
        else { return nil }
        self.scheme = scheme.lowercased()
        self.host = Self.part(handle, CURLUPART_HOST)
        self.path = Self.part(handle, CURLUPART_PATH) ?? "/"
        self.port = Self.part(handle, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)).flatMap { Int($0) }
        self.hasUserInfo = Self.part(handle, CURLUPART_USER) != nil || Self.part(handle, CURLUPART_PASSWORD) != nil
    }

    private static func part(_ handle: OpaquePointer, _ part: CURLUPart, flags: UInt32 = 0) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }
}
