import CLibcurl

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
        self.hasUserInfo = Self.has(handle, CURLUPART_USER) || Self.has(handle, CURLUPART_PASSWORD)
    }

    /// What a download's check reads of `string`, parsed as `init?(_:)`
    /// parses it, without the parts it does not read (path, port): the
    /// scheme, the host, and whether a user name or password is given.
    public static func checked(_ string: String) -> (scheme: String, host: String?, hasUserInfo: Bool)? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        let flags = UInt32(CURLU_NON_SUPPORT_SCHEME)
        // Handed over where the string holds its bytes, with their NUL (a
        // native string has one): a `String` given for a C string is copied
        // into an array first. A NUL inside the string ends the text
        // libcurl reads either way.
        guard string.withCString({ curl_url_set(handle, CURLUPART_URL, $0, flags) }) == CURLUE_OK,
            let scheme = part(handle, CURLUPART_SCHEME)
        else { return nil }
        return (scheme.lowercased(), part(handle, CURLUPART_HOST), has(handle, CURLUPART_USER) || has(handle, CURLUPART_PASSWORD))
    }

    /// How many of the first bytes of `string`, an http or https URL that
    /// `checked(_:)` takes, decide what it finds: the scheme, its colon,
    /// the slashes after it, the authority (user, password, host, port),
    /// and the `/`, `?` or `#` that ends the authority. Nil when no such
    /// byte ends it (the URL is all authority) or `string` does not start
    /// so.
    ///
    /// libcurl's parse (`parseurl` in `urlapi.c`) reads the scheme up to
    /// its colon, skips the slashes, takes the authority up to the first
    /// of `/`, `?` and `#`, and checks only that; without
    /// `CURLU_URLENCODE` the path, query and fragment after it are copied
    /// as they come. The rest of the text is checked only as a whole: its
    /// length (at most 8,000,000 bytes) and no control byte, DEL or space
    /// anywhere. So another URL that starts with these same bytes, no
    /// longer than that and free of those bytes, has the same scheme, host
    /// and credentials.
    public static func decidingPrefixLength(of string: String) -> Int? {
        var string = string
        return string.withUTF8 { bytes -> Int? in
            var index = 0
            while index < bytes.count, isSchemeByte(bytes[index]) { index += 1 }
            guard index > 0, index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            while index < bytes.count, bytes[index] == UInt8(ascii: "/") { index += 1 }
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"): return index + 1
                default: index += 1
                }
            }
            return nil
        }
    }

    /// A byte of a scheme's name: a letter, a digit, `+`, `-` or `.`.
    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }

    /// The text of the URL libcurl goes to when it follows a redirect to
    /// `bytes` itself (the bytes of `CURLINFO_REDIRECT_URL`, which need not be
    /// UTF-8): parsed by libcurl's URL API as `curl -L` parses a `Location`,
    /// spaces allowed, with every space, control or byte that is not ASCII
    /// in the path and query written `%xx` (`CURLU_URLENCODE`). The user
    /// name, password and fragment (which curl decodes before use, or never
    /// sends) are escaped alike, so the text is UTF-8. The next hop thus asks
    /// for exactly what curl would, never for a lossy decoding of the bytes
    /// (`%ef%bf%bd` for a lone 0xC3). Nil when libcurl does not take the
    /// bytes as a URL, or what stays unescaped (a host name) is not UTF-8.
    public static func redirectTarget(_ bytes: [UInt8]) -> String? {
        guard !bytes.contains(0), let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        let flags = UInt32(CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE | CURLU_ALLOW_SPACE)
        let parsed = (bytes + [0]).withUnsafeBufferPointer { text in
            text.withMemoryRebound(to: CChar.self) { curl_url_set(handle, CURLUPART_URL, $0.baseAddress, flags) }
        }
        guard parsed == CURLUE_OK else { return nil }
        for part in [CURLUPART_USER, CURLUPART_PASSWORD, CURLUPART_FRAGMENT] {
            guard let escaped = partBytes(handle, part, flags: UInt32(CURLU_URLENCODE)) else { continue }
            (escaped + [0]).withUnsafeBufferPointer { text in
                text.withMemoryRebound(to: CChar.self) { _ = curl_url_set(handle, part, $0.baseAddress, 0) }
            }
        }
        return partBytes(handle, CURLUPART_URL).flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// A part as text; nil when it is missing or its bytes are not UTF-8.
    private static func part(_ handle: OpaquePointer, _ part: CURLUPart, flags: UInt32 = 0) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(validatingCString: value)
    }

    /// Whether the URL has `part`.
    private static func has(_ handle: OpaquePointer, _ part: CURLUPart) -> Bool {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &value, 0) == CURLUE_OK, let value else { return false }
        curl_free(value)
        return true
    }

    private static func partBytes(_ handle: OpaquePointer, _ part: CURLUPart, flags: UInt32 = 0) -> [UInt8]? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return Array(UnsafeRawBufferPointer(start: value, count: strlen(value)))
    }
}
