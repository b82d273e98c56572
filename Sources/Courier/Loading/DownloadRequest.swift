import Curl
import Foundation
import JSON
import JSONRPC

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

    static let paramNames: Set<String> = [
        "url", "headers", "slot", "priority", "cachePolicy", "accept", "body", "textEncoding", "destination",
        "maxBytes", "timeout", "cacheKey", "wait",
    ]

    init(_ params: Params, defaults: Configuration) throws(RPCError) {
        let named = try params.byName(allowed: Self.paramNames)
        url = try named.string("url")
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }), let parsed = CurlURL(url) else {
            throw .invalidParams("param 'url' is not a valid absolute URL", param: "url")
        }
        if parsed.scheme == "http" || parsed.scheme == "https", (parsed.host ?? "").isEmpty {
            throw .invalidParams("param 'url' has no host", param: "url")
        }
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
        if let destination, !destination.hasPrefix("/") {
            throw .invalidParams("param 'destination' must be an absolute path", param: "destination")
        }
        if let destination, destination.utf8.contains(0) {
            throw .invalidParams("param 'destination' contains a NUL byte", param: "destination")
        }
        maxBytes = try named.optionalInteger("maxBytes", range: 0...Int64.max) ?? defaults.maxBytes
        timeout = try named.optionalNumber("timeout", range: Configuration.timeoutRange) ?? defaults.timeout
        cacheKey = try named.optionalString("cacheKey")
        wait = try named.optionalBool("wait") ?? false
    }

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
}
