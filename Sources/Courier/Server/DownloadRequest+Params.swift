import Curl
import JSON
import JSONRPC

extension DownloadRequest {
    /// The params of a `download`, which the document has checked (names,
    /// types, ranges), read and checked as every download is.
    init(_ params: Params, defaults: some Defaults) throws(RPCError) {
        var given = GivenDownloadParams()
        for (name, value) in try params.byName().members { given.take(name, value) }
        let url = try NamedParam("url", given.url).string()
        guard given.givesOthers else {
            // Most downloads of a batch give a URL and a destination alone:
            // every other param is left out, and reads as the defaults.
            let destination = try NamedParam("destination", given.destination).optionalString()
            do throws(Refusal) {
                try self.init(url: url, destination: destination, defaults: defaults)
            } catch {
                throw .invalidParams(error.description, param: error.field)
            }
            return
        }
        var headers: [(name: String, value: String)] = []
        for (name, value) in try NamedParam("headers", given.headers).optionalObject() ?? [:] {
            guard let text = value.stringValue else {
                throw .invalidParams("header '\(name)' must have a string value", param: "headers")
            }
            headers.append((name, text))
        }
        let slot = try NamedParam("slot", given.slot).optionalString()
        let priority = try NamedParam("priority", given.priority).optionalChoice(as: Priority.self) ?? .normal
        let cachePolicy = try NamedParam("cachePolicy", given.cachePolicy).optionalChoice(as: CachePolicy.self) ?? .default
        let accept = try NamedParam("accept", given.accept).optionalStringArray()
        let body = try NamedParam("body", given.body).optionalChoice(as: BodyKind.self) ?? .none
        let textEncoding = try NamedParam("textEncoding", given.textEncoding).optionalString()
        let destination = try NamedParam("destination", given.destination).optionalString()
        let maxBytes = try NamedParam("maxBytes", given.maxBytes).optionalInteger()
        let timeout = try NamedParam("timeout", given.timeout).optionalNumber()
        let cacheKey = try NamedParam("cacheKey", given.cacheKey).optionalString()
        let wait = try NamedParam("wait", given.wait).optionalBool() ?? false
        let retries = try NamedParam("retries", given.retries).optionalInteger().map { Int($0) }
        let mirrors = try NamedParam("mirrors", given.mirrors).optionalStringArray() ?? []
        let integrity = try NamedParam("integrity", given.integrity).optionalString()
        let maxRate = try NamedParam("maxRate", given.maxRate).optionalInteger()
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

/// The values a `download`'s params give, found in one pass over them: a
/// request gives a few of the many, and looking each up by name would
/// compare every given name once per param. A name not read here (the
/// document's check refuses those first) is passed over.
private struct GivenDownloadParams {
    var url, headers, slot, priority, cachePolicy, accept, body, textEncoding, destination: JSON?
    var maxBytes, timeout, cacheKey, wait, retries, mirrors, integrity, maxRate: JSON?
    /// Whether a name other than `url` and `destination` was given.
    var givesOthers = false

    mutating func take(_ name: String, _ value: JSON) {
        // The names of the name's length first, compared as bytes: most
        // requests give `url` and `destination`, which a walk through the
        // names in order would compare with eight others.
        switch name.utf8.count {
        case 3 where name.isExactly("url"): url = value
        case 11 where name.isExactly("destination"): destination = value
        default: takeByName(name, value)
        }
    }

    /// `take(_:_:)` for any name, compared as Swift strings.
    private mutating func takeByName(_ name: String, _ value: JSON) {
        givesOthers = givesOthers || !(name == "url" || name == "destination")
        switch name {
        case "url": url = value
        case "headers": headers = value
        case "slot": slot = value
        case "priority": priority = value
        case "cachePolicy": cachePolicy = value
        case "accept": accept = value
        case "body": body = value
        case "textEncoding": textEncoding = value
        case "destination": destination = value
        case "maxBytes": maxBytes = value
        case "timeout": timeout = value
        case "cacheKey": cacheKey = value
        case "wait": wait = value
        case "retries": retries = value
        case "mirrors": mirrors = value
        case "integrity": integrity = value
        case "maxRate": maxRate = value
        default: break
        }
    }
}
