import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON

/// One disk cache entry's metadata, and the file format that holds it.
///
/// An entry is two files in the cache's `http/` directory: the entry file,
/// named by the hex SHA-256 of the key, holding a 48-byte header and the
/// metadata as JSON; and the body file it names, `<entry name>.<body id>`
/// with the body id as 16 lower-case hex digits, holding the body's bytes
/// and nothing else (so it can be a hard link of a downloaded file):
///
///     offset  size  field
///          0     8  magic "CRCH\r\n\u{1A}\n"
///          8     4  format version, little-endian (3)
///         12     4  metadata length
///         16     8  body length
///         24     8  XXH3-64 of the metadata
///         32     8  XXH3-64 of the body
///         40     8  body id
///
/// The metadata object holds `key`, `url`, `status`, `headers` (an array of
/// `[name, value]`), `vary` (an object), `requestTime`, `responseTime`,
/// `storedAt` in seconds since 1970, and `digests`, an object from `sha256`,
/// `sha384` or `sha512` to the body's digest in base64, for the algorithms
/// taken when it was stored or when a read proved it since (absent from
/// entries written before digests were kept); `DiskCache` indexes entries
/// by them for content addressing. A pair of files is an entry only if the
/// entry file's size is exactly header + metadata length, the metadata's
/// checksum matches, the body file is a regular file of exactly the body
/// length, and (checked whenever the body is read) the body's checksum
/// matches.
struct DiskCacheEntry: Sendable, Equatable {
    var key: String
    var response: CachedResponse
    var bodyLength: Int64
    /// The entry file this was read from, and the body file it names.
    /// Another process may replace or remove them at any moment, and a body
    /// file may share its inode with a client's destination: read the body
    /// through `DiskCache`, which verifies it, rather than from here.
    var path: String
    var bodyPath: String

    static let magic: [UInt8] = [0x43, 0x52, 0x43, 0x48, 0x0D, 0x0A, 0x1A, 0x0A]
    static let version: UInt32 = 3
    static let headerLength = 48
    /// Larger metadata is taken for corruption.
    static let metadataLimit = 1 << 20

    /// The name of the body file `bodyID` names beside the entry file
    /// `entryName`.
    static func bodyName(entryName: String, bodyID: UInt64) -> String {
        let digits = String(bodyID, radix: 16)
        return entryName + "." + String(repeating: "0", count: 16 - digits.utf8.count) + digits
    }

    /// The fixed header's fields.
    struct Header: Equatable {
        var metadataLength: Int
        var bodyLength: Int64
        var metadataChecksum: UInt64
        var bodyChecksum: UInt64
        var bodyID: UInt64

        var bytes: [UInt8] {
            var bytes = DiskCacheEntry.magic
            bytes.reserveCapacity(DiskCacheEntry.headerLength)
            append(DiskCacheEntry.version, to: &bytes)
            // Clamped, not trapping: a length out of range makes a file
            // whose size disagrees with its header, which no reader takes.
            append(UInt32(clamping: metadataLength), to: &bytes)
            append(UInt64(clamping: bodyLength), to: &bytes)
            append(metadataChecksum, to: &bytes)
            append(bodyChecksum, to: &bytes)
            append(bodyID, to: &bytes)
            return bytes
        }

        /// The header at the start of `bytes`, or nil when they do not
        /// start with one.
        init?(_ bytes: ArraySlice<UInt8>) {
            guard bytes.count >= DiskCacheEntry.headerLength,
                bytes.prefix(8).elementsEqual(DiskCacheEntry.magic),
                Self.read(UInt32.self, bytes, at: 8) == DiskCacheEntry.version
            else { return nil }
            metadataLength = Int(Self.read(UInt32.self, bytes, at: 12))
            let body = Self.read(UInt64.self, bytes, at: 16)
            guard metadataLength <= DiskCacheEntry.metadataLimit, body <= UInt64(Int64.max / 2) else { return nil }
            bodyLength = Int64(body)
            metadataChecksum = Self.read(UInt64.self, bytes, at: 24)
            bodyChecksum = Self.read(UInt64.self, bytes, at: 32)
            bodyID = Self.read(UInt64.self, bytes, at: 40)
        }

        init(metadataLength: Int, bodyLength: Int64, metadataChecksum: UInt64, bodyChecksum: UInt64, bodyID: UInt64) {
            self.metadataLength = metadataLength
            self.bodyLength = bodyLength
            self.metadataChecksum = metadataChecksum
            self.bodyChecksum = bodyChecksum
            self.bodyID = bodyID
        }

        /// The size of the entry file: header and metadata.
        var fileLength: Int64 { Int64(DiskCacheEntry.headerLength + metadataLength) }

        private func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }

        private static func read<T: FixedWidthInteger>(_: T.Type, _ bytes: ArraySlice<UInt8>, at offset: Int) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        }
    }

    /// The metadata JSON for `response` stored under `key`.
    static func metadata(key: String, response: CachedResponse) -> [UInt8] {
        let object: JSON = [
            "key": .string(key),
            "url": .string(response.url),
            "status": JSON(response.status),
            "headers": .array(response.headers.map { .array([.string($0.name), .string($0.value)]) }),
            "vary": .object(response.varyValues.mapValues(JSON.string)),
            "requestTime": .double(response.requestTime.timeIntervalSince1970),
            "responseTime": .double(response.responseTime.timeIntervalSince1970),
            "storedAt": .double(response.storedAt.timeIntervalSince1970),
            "digests": .object(Dictionary(uniqueKeysWithValues: response.digests.algorithms.map { algorithm in
                (algorithm.rawValue, JSON.string(BodyDigests.base64(response.digests[algorithm] ?? [])))
            })),
        ]
        return JSONCodec.encode(object)
    }

    /// The key and response `bytes` describe, or nil when they are not
    /// metadata courier could have written: any process may write the cache
    /// directory, so every field is checked before it is believed. The
    /// status must be within 100...999, the times finite and within 1970
    /// through 9999, field names tokens and field values free of CR, LF and
    /// NUL (RFC 9110 §5.1, §5.5), and each digest the canonical base64 of
    /// one of its algorithm's length.
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
            storedAt: storedAt, varyValues: varyValues, digests: digests)
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
