import Curl
import JSON
import JSONRPC
import Locking

extension DownloadRequest {
    static let paramNames: Set<String> = [
        "url", "headers", "slot", "priority", "cachePolicy", "accept", "body", "textEncoding", "destination",
        "maxBytes", "timeout", "cacheKey", "wait",
        "retries", "mirrors",
        "integrity",
        "maxRate",
    ]

    /// The params of a `download`, checked.
    init(_ params: Params, defaults: Configuration) throws(RPCError) {
        let named = try params.byName(allowed: Self.paramNames)
        url = try named.string("url")
        let parsed = try Self.checkedURL(url)
        self.scheme = parsed.scheme
        hasUserInfo = parsed.hasUserInfo
        headers = []
        for (name, value) in try named.optionalObject("headers") ?? [:] {
            guard let text = value.stringValue else {
                throw .invalidParams("header '\(name)' must have a string value", param: "headers")
            }
            guard HTTPField.isValidName(name) else {
                throw .invalidParams("header name '\(name)' is not a valid HTTP token", param: "headers")
            }
            guard HTTPField.isValidValue(text) else {
                throw .invalidParams("header '\(name)' contains CR, LF, NUL or another control character", param: "headers")
            }
            headers.append((name, text))
        }
        headers.sort { $0.name.lowercased() < $1.name.lowercased() }
        slot = try named.optionalString("slot")
        priority = try named.optionalChoice("priority", as: Priority.self) ?? .normal
        cachePolicy = try named.optionalChoice("cachePolicy", as: CachePolicy.self) ?? .default
        accept = try named.optionalStringArray("accept").map { $0.map { $0.lowercased().trimmingBlanks } }
        if let accept, !accept.allSatisfy(HTTPField.isValidValue) {
            throw .invalidParams("an 'accept' entry contains CR, LF, NUL or another control character", param: "accept")
        }
        if let accept, !headers.contains(where: { $0.name.lowercased() == "accept" }), !accept.isEmpty {
            headers.append(("Accept", accept.joined(separator: ", ")))
            headers.sort { $0.name.lowercased() < $1.name.lowercased() }
        }
        body = try named.optionalChoice("body", as: BodyKind.self) ?? .none
        textEncoding = try named.optionalString("textEncoding")
        if let textEncoding, !TextDecoding.isSupported(textEncoding) {
            throw .invalidParams("unknown text encoding '\(textEncoding)'", param: "textEncoding")
        }
        destination = try named.optionalString("destination")
        if let destination, !destination.isAbsolutePath {
            throw .invalidParams("param 'destination' must be an absolute path", param: "destination")
        }
        if let destination, destination.utf8.contains(0) {
            throw .invalidParams("param 'destination' contains a NUL byte", param: "destination")
        }
        maxBytes = try named.optionalInteger("maxBytes", range: 0...Int64.max) ?? defaults.maxBytes
        timeout = try named.optionalNumber("timeout", range: Configuration.timeoutRange) ?? defaults.timeout
        cacheKey = try named.optionalString("cacheKey")
        wait = try named.optionalBool("wait") ?? false
        retries = Int(try named.optionalInteger("retries", range: Configuration.retriesRange) ?? Int64(defaults.retries))
        mirrors = try named.optionalStringArray("mirrors") ?? []
        for mirror in mirrors { try Self.checkMirror(mirror) }
        if let text = try named.optionalString("integrity") {
            do throws(Integrity.Malformed) {
                integrity = try Integrity(parsing: text)
            } catch {
                throw .invalidParams(error.message, param: "integrity")
            }
        }
        // 0, as for `maxDownloadRate`, is no limit.
        maxRate = try named.optionalInteger("maxRate", range: Configuration.rateRange).flatMap { $0 > 0 ? $0 : nil }
    }

    /// What `download` needs of a URL it has checked.
    struct CheckedURL: Sendable {
        var url: String
        var scheme: String
        var hasUserInfo: Bool
    }

    /// The last URL checked: clients often ask for one URL many times in a
    /// row (a pipelined run of cache hits), and libcurl's parse is the
    /// dearest part of the check. Compared as bytes, as URLs are.
    private static let lastURL = Locked<CheckedURL?>(nil)

    /// `url` checked: no blanks or control bytes, an absolute URL libcurl
    /// takes, with a host for http and https.
    static func checkedURL(_ url: String) throws(RPCError) -> CheckedURL {
        if let last = lastURL.withLock({ $0 }), last.url.isExactly(url) { return last }
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }), let parsed = CurlURL(url) else {
            throw .invalidParams("param 'url' is not a valid absolute URL", param: "url")
        }
        if parsed.scheme == "http" || parsed.scheme == "https", (parsed.host ?? "").isEmpty {
            throw .invalidParams("param 'url' has no host", param: "url")
        }
        let checked = CheckedURL(url: url, scheme: parsed.scheme, hasUserInfo: parsed.hasUserInfo)
        lastURL.withLock { $0 = checked }
        return checked
    }

    /// A `mirrors` entry checked as `url` is, and http or https whatever
    /// `--allow-scheme` allows.
    static func checkMirror(_ mirror: String) throws(RPCError) {
        let scheme: String
        do throws(RPCError) {
            scheme = try checkedURL(mirror).scheme
        } catch {
            throw .invalidParams("a 'mirrors' entry is not a valid absolute URL with a host", param: "mirrors")
        }
        guard scheme == "http" || scheme == "https" else {
            throw .invalidParams("a 'mirrors' entry must be an http or https URL", param: "mirrors")
        }
    }

}
