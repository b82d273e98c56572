import JSON
import JSONRPC

extension DownloadRequest {
    /// The params of a `download`, which the document has checked (names,
    /// types, ranges), read and checked as every download is.
    init(_ params: Params, defaults: Configuration) throws(RPCError) {
        let named = try params.byName()
        let url = try named.string("url")
        var headers: [(name: String, value: String)] = []
        for (name, value) in try named.optionalObject("headers") ?? [:] {
            guard let text = value.stringValue else {
                throw .invalidParams("header '\(name)' must have a string value", param: "headers")
            }
            headers.append((name, text))
        }
        let slot = try named.optionalString("slot")
        let priority = try named.optionalChoice("priority", as: Priority.self) ?? .normal
        let cachePolicy = try named.optionalChoice("cachePolicy", as: CachePolicy.self) ?? .default
        let accept = try named.optionalStringArray("accept")
        let body = try named.optionalChoice("body", as: BodyKind.self) ?? .none
        let textEncoding = try named.optionalString("textEncoding")
        let destination = try named.optionalString("destination")
        let maxBytes = try named.optionalInteger("maxBytes")
        let timeout = try named.optionalNumber("timeout")
        let cacheKey = try named.optionalString("cacheKey")
        let wait = try named.optionalBool("wait") ?? false
        let retries = try named.optionalInteger("retries").map { Int($0) }
        let mirrors = try named.optionalStringArray("mirrors") ?? []
        let integrity = try named.optionalString("integrity")
        let maxRate = try named.optionalInteger("maxRate")
        do throws(Refusal) {
            try self.init(
                url: url, headers: headers, slot: slot, priority: priority, cachePolicy: cachePolicy, accept: accept,
                body: body, textEncoding: textEncoding, destination: destination, maxBytes: maxBytes, timeout: timeout,
                cacheKey: cacheKey, wait: wait, retries: retries, mirrors: mirrors, integrity: integrity,
                maxRate: maxRate, defaults: defaults)
        } catch {
            throw .invalidParams(error.description, param: error.field)
        }
    }
}
