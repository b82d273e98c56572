import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON

/// One disk cache entry as a lookup finds it, and the stored head that
/// holds its response: the `head` column of its row in `Cache.db` (see
/// `DiskCache`), in the binary form `StoredHead` describes.
///
/// Courier before that form wrote the head as a JSON object, which it
/// still reads: `key`, `url`, `status`, `headers` (an array of
/// `[name, value]`), `vary` (an object), `requestTime`, `responseTime`,
/// `storedAt` in seconds since 1970, and `digests`, an object from `sha256`,
/// `sha384` or `sha512` to the body's digest in base64, and `bytes`, an
/// object from a validator field's name to its value in base64 when that
/// value is not UTF-8. The two forms cannot be taken for each other: a JSON
/// head begins with `{`, a binary one with a NUL byte, which no JSON text
/// holds, so a courier that reads JSON alone finds a binary head unreadable
/// and deletes its row, as it does any row it cannot read.
struct DiskCacheEntry: Sendable, Equatable {
    var key: String
    var response: CachedResponse
    var bodyLength: Int64
    /// Which write stored it.
    var write: ResponseStore.Write

    /// The stored head for `response` under `key`, in the binary form.
    static func metadata(key: String, response: CachedResponse) -> [UInt8] {
        StoredHead.write(key: key, response: response)
    }

    /// The key and response `bytes` describe, or nil when they are not
    /// metadata courier could have written: any process may write the cache
    /// directory, so every field is checked before it is believed. The
    /// status must be within 100...999, the times finite and within 1970
    /// through 9999, field names tokens and field values free of CR, LF and
    /// NUL (RFC 9110 §5.1, §5.5), each digest one of its algorithm's
    /// length (in the JSON form, its canonical base64), and the bytes of a
    /// validator a value `HTTPField.isSendableValidator` accepts.
    static func parseMetadata(_ bytes: [UInt8]) -> (key: String, response: CachedResponse)? {
        if StoredHead.isBinary(bytes) { return StoredHead.read(bytes) }
        return parseJSON(bytes)
    }

    /// The key and response of a head in the JSON form earlier couriers
    /// wrote, checked as `parseMetadata` says.
    private static func parseJSON(_ bytes: [UInt8]) -> (key: String, response: CachedResponse)? {
        guard let object = try? JSONCodec.decode(bytes), let key = object["key"]?.stringValue,
            let url = object["url"]?.stringValue, let status = object["status"]?.integerValue,
            (100...999).contains(status), let headerList = object["headers"]?.arrayValue,
            let vary = object["vary"]?.objectValue, let requestTime = time(object["requestTime"]),
            let responseTime = time(object["responseTime"]), let storedAt = time(object["storedAt"])
        else { return nil }
        var headers: [(name: String, value: String)] = []
        for item in headerList {
            guard let pair = item.arrayValue, pair.count == 2, let name = pair[0].stringValue,
                let value = pair[1].stringValue, HTTPField.isValidName(name), isFieldValue(value)
            else { return nil }
            headers.append((name, value))
        }
        var varyValues: [String: String] = [:]
        for (name, value) in vary {
            guard let value = value.stringValue, HTTPField.isValidName(name), isFieldValue(value) else { return nil }
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

    /// Whether `value` holds no CR, LF or NUL (RFC 9110 §5.5).
    static func isFieldValue(_ value: String) -> Bool {
        isFieldValue(value.utf8)
    }

    /// Whether `bytes` hold no CR, LF or NUL (RFC 9110 §5.5).
    static func isFieldValue(_ bytes: some Collection<UInt8>) -> Bool {
        !bytes.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }
}
