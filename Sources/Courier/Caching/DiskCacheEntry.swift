import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON

/// One disk cache entry as a lookup finds it, and the stored head that
/// holds its response: a JSON object in the `head` column of its row in
/// `Cache.db` (see `DiskCache`).
///
/// The object holds `key`, `url`, `status`, `headers` (an array of
/// `[name, value]`), `vary` (an object), `requestTime`, `responseTime`,
/// `storedAt` in seconds since 1970, and `digests`, an object from `sha256`,
/// `sha384` or `sha512` to the body's digest in base64, for the algorithms
/// taken when it was stored or when a read proved it since (the row's
/// digest columns, which content addressing looks up, hold the same).
/// JSON strings are UTF-8, so a validator field (`ETag`, `Last-Modified`)
/// whose value is not keeps its bytes in `bytes`, an object from the
/// field's name to its value in base64, beside the lossy text in
/// `headers`; the member is left out when there are none, and an entry
/// without it reads as it did.
struct DiskCacheEntry: Sendable, Equatable {
    var key: String
    var response: CachedResponse
    var bodyLength: Int64
    /// Which write stored it.
    var write: ResponseStore.Write

    /// The metadata JSON for `response` stored under `key`, written straight
    /// into jansson's tree, keys in byte order (the text `JSONCodec.encode`
    /// writes for the same object), and dumped once: into room made for
    /// about as many bytes as it takes.
    static func metadata(key: String, response: CachedResponse) -> [UInt8] {
        var text: [UInt8] = []
        JSONCodec.encodeObject(into: &text, sizeHint: metadataLength(key: key, response: response)) { object in
            if !response.rawValues.isEmpty {
                object.set("bytes", strings: response.rawValues.mapValues { Data($0).base64EncodedString() })
            }
            object.set("digests", strings: Self.base64(response.digests))
            object.set("headers", .array(response.headers.map { .array([.string($0.name), .string($0.value)]) }))
            object.set("key", key)
            object.set("requestTime", response.requestTime.timeIntervalSince1970)
            object.set("responseTime", response.responseTime.timeIntervalSince1970)
            object.set("status", response.status)
            object.set("storedAt", response.storedAt.timeIntervalSince1970)
            object.set("url", response.url)
            object.set("vary", strings: response.varyValues)
        }
        return text
    }

    /// About how many bytes `metadata` takes: its strings, their quotes and
    /// separators, the member names and three times of up to 20 characters.
    private static func metadataLength(key: String, response: CachedResponse) -> Int {
        var length = 200 + key.utf8.count + response.url.utf8.count + response.digests.algorithms.count * 100
        for (name, value) in response.headers { length += name.utf8.count + value.utf8.count + 8 }
        for (name, value) in response.varyValues { length += name.utf8.count + value.utf8.count + 6 }
        for (name, value) in response.rawValues { length += name.utf8.count + value.count * 4 / 3 + 10 }
        return length
    }

    /// `digests` in base64, by their algorithms' names.
    private static func base64(_ digests: BodyDigests) -> [String: String] {
        guard !digests.isEmpty else { return [:] }
        return Dictionary(uniqueKeysWithValues: digests.algorithms.map { ($0.rawValue, BodyDigests.base64(digests[$0] ?? [])) })
    }

    /// The key and response `bytes` describe, or nil when they are not
    /// metadata courier could have written: any process may write the cache
    /// directory, so every field is checked before it is believed. The
    /// status must be within 100...999, the times finite and within 1970
    /// through 9999, field names tokens and field values free of CR, LF and
    /// NUL (RFC 9110 §5.1, §5.5), each digest the canonical base64 of
    /// one of its algorithm's length, and the bytes of a validator a value
    /// `HTTPField.isSendableValidator` accepts.
    static func parseMetadata(_ bytes: [UInt8]) -> (key: String, response: CachedResponse)? {
        guard let object = try? JSONCodec.decode(bytes), let key = object["key"]?.stringValue,
            let url = object["url"]?.stringValue, let status = object["status"]?.integerValue,
            (100...999).contains(status), let headerList = object["headers"]?.arrayValue,
            let vary = object["vary"]?.objectValue, let requestTime = time(object["requestTime"]),
            let responseTime = time(object["responseTime"]), let storedAt = time(object["storedAt"])
        else { return nil }
        var headers: [(name: String, value: String)] = []
        for item in headerList {
            guard let pair = item.arrayValue, pair.count == 2, let name = pair[0].stringValue,
                let value = pair[1].stringValue, isFieldName(name), isFieldValue(value)
            else { return nil }
            headers.append((name, value))
        }
        var varyValues: [String: String] = [:]
        for (name, value) in vary {
            guard let value = value.stringValue, isFieldName(name), isFieldValue(value) else { return nil }
            varyValues[name] = value
        }
        var rawValues: [String: [UInt8]] = [:]
        if let stored = object["bytes"] {
            guard let stored = stored.objectValue else { return nil }
            for (name, value) in stored {
                guard Validators.fieldNames.contains(name), let text = value.stringValue,
                    let bytes = Data(base64Encoded: text).map(Array.init), HTTPField.isSendableValidator(bytes)
                else { return nil }
                rawValues[name] = bytes
            }
        }
        var digests = BodyDigests()
        if let stored = object["digests"] {
            guard let stored = stored.objectValue else { return nil }
            for (name, value) in stored {
                guard let algorithm = HashAlgorithm(rawValue: name), let text = value.stringValue,
                    let digest = BodyDigests.digest(base64: text, of: algorithm)
                else { return nil }
                digests[algorithm] = digest
            }
        }
        let response = CachedResponse(
            status: Int(status), headers: headers, url: url, requestTime: requestTime, responseTime: responseTime,
            storedAt: storedAt, varyValues: varyValues, digests: digests, rawValues: rawValues)
        return (key, response)
    }

    /// Seconds since 1970 as a date, when finite and no later than 9999.
    private static func time(_ value: JSON?) -> Date? {
        guard let seconds = value?.doubleValue, seconds.isFinite, (0...Double(HTTPDate.latest)).contains(seconds)
        else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// Whether `name` is a token (RFC 9110 §5.6.2).
    static func isFieldName(_ name: String) -> Bool {
        !name.utf8.isEmpty && name.utf8.allSatisfy(isTokenByte)
    }

    /// Whether `value` holds no CR, LF or NUL (RFC 9110 §5.5).
    static func isFieldValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
