import FoundationEssentials

/// The binary form of a disk cache entry's stored head (the `head` column
/// of its row in `Cache.db`): its fields length-prefixed, written with a
/// few appends into one buffer of the exact size and read back by bounds-
/// checked slicing, where JSON cost an escape pass over every string, a
/// dump and a parse per store and per hit.
///
/// All integers are little-endian. The head is the magic `00 43 48 01`
/// (NUL, "CH", version 1), then:
/// - the status, 2 bytes;
/// - `requestTime`, `responseTime` and `storedAt`, 8 bytes each: the
///   IEEE 754 bits of seconds since 2001-01-01 (`Date`'s own form, so a
///   time reads back exactly as it was);
/// - the key and the URL, each a string;
/// - the header lines in arrival order: a count, then each name and value;
/// - the `Vary` values: a count, then each name and value;
/// - the bytes of the validator fields that are not UTF-8: a count, then
///   each name and bytes;
/// - the recorded digests: a count, then each algorithm's name and digest;
///
/// where a count is 4 bytes, and a string or bytes a 4-byte length and
/// that many bytes. Nothing may follow.
///
/// The bytes are hostile input (any process may write the cache
/// directory): every length and count is checked against what is left
/// before anything is sliced or reserved, strings must be UTF-8, names
/// tokens, values free of CR, LF and NUL, the status within 100...999, the
/// times finite and within 1970 through 9999, a validator's bytes ones
/// `HTTPField.isSendableValidator` accepts, a digest of its algorithm's
/// length, and no name twice in one map; anything else reads as no entry.
enum StoredHead {
    /// The first bytes of every binary head. A JSON head (the form earlier
    /// couriers wrote) begins with `{`, and no JSON text holds a NUL.
    static let magic: [UInt8] = [0x00, 0x43, 0x48, 0x01]

    /// Whether `bytes` claim the binary form.
    static func isBinary(_ bytes: [UInt8]) -> Bool {
        bytes.first == 0x00
    }

    // MARK: - Writing

    /// The head of `response` stored under `key`: its length counted
    /// first, then every field copied into the one buffer of that size.
    static func write(key: String, response: CachedResponse) -> [UInt8] {
        // Most responses have no digest: no set to make and sort.
        let algorithms = response.digests.isEmpty ? [] : response.digests.algorithms.sorted()
        let count = length(key: key, response: response, algorithms: algorithms)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var head = Writer(into: UnsafeMutableRawBufferPointer(buffer))
            head.put(magic)
            head.put(UInt16(truncatingIfNeeded: response.status))
            head.put(response.requestTime.timeIntervalSinceReferenceDate.bitPattern)
            head.put(response.responseTime.timeIntervalSinceReferenceDate.bitPattern)
            head.put(response.storedAt.timeIntervalSinceReferenceDate.bitPattern)
            head.put(string: key)
            head.put(string: response.url)
            head.put(UInt32(response.headers.count))
            for (name, value) in response.headers {
                head.put(string: name)
                head.put(string: value)
            }
            head.put(UInt32(response.varyValues.count))
            for (name, value) in response.varyValues {
                head.put(string: name)
                head.put(string: value)
            }
            head.put(UInt32(response.rawValues.count))
            for (name, bytes) in response.rawValues {
                head.put(string: name)
                head.put(lengthPrefixed: bytes)
            }
            head.put(UInt32(algorithms.count))
            for algorithm in algorithms {
                head.put(string: algorithm.rawValue)
                head.put(lengthPrefixed: response.digests[algorithm] ?? [])
            }
            initialized = head.offset
        }
    }

    /// The bytes `write` takes for `response` under `key`, with the
    /// digests of `algorithms`.
    private static func length(key: String, response: CachedResponse, algorithms: [HashAlgorithm]) -> Int {
        var length = magic.count + 2 + 3 * 8 + 4 * 4 + 8 + key.utf8.count + response.url.utf8.count
        for (name, value) in response.headers { length += 8 + name.utf8.count + value.utf8.count }
        for (name, value) in response.varyValues { length += 8 + name.utf8.count + value.utf8.count }
        for (name, bytes) in response.rawValues { length += 8 + name.utf8.count + bytes.count }
        for algorithm in algorithms { length += 8 + algorithm.rawValue.utf8.count + (response.digests[algorithm]?.count ?? 0) }
        return length
    }

    /// Copies a head's fields into a buffer `length` counted them for, a
    /// whole field at a time: a copy of memory each, where appending to an
    /// array went through the bytes one by one. A field that would not fit
    /// (which `length` rules out) is left out, never written past the end.
    private struct Writer {
        let buffer: UnsafeMutableRawBufferPointer
        /// The bytes written so far.
        private(set) var offset = 0

        init(into buffer: UnsafeMutableRawBufferPointer) {
            self.buffer = buffer
        }

        /// `value`'s bytes, least significant first.
        mutating func put<Integer: FixedWidthInteger>(_ value: Integer) {
            withUnsafeBytes(of: value.littleEndian) { put($0) }
        }

        mutating func put(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count <= buffer.count - offset else { return }
            if let source = bytes.baseAddress, let target = buffer.baseAddress {
                (target + offset).copyMemory(from: source, byteCount: bytes.count)
            }
            offset += bytes.count
        }

        mutating func put(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { put($0) }
        }

        /// Bytes: their length, then them.
        mutating func put(lengthPrefixed bytes: [UInt8]) {
            put(UInt32(truncatingIfNeeded: bytes.count))
            put(bytes)
        }

        /// A string: its length, then its UTF-8, copied from its storage
        /// (a native string lends it as it is).
        mutating func put(string: String) {
            func put(bytes: UnsafeBufferPointer<UInt8>) {
                self.put(UInt32(truncatingIfNeeded: bytes.count))
                self.put(UnsafeRawBufferPointer(bytes))
            }
            if string.utf8.withContiguousStorageIfAvailable(put(bytes:)) == nil {
                var string = string
                string.withUTF8(put(bytes:))
            }
        }
    }

    // MARK: - Reading

    /// The key and response `bytes` hold, or nil when they are not a head
    /// courier could have written (see the type's comment).
    static func read(_ bytes: [UInt8]) -> (key: String, response: CachedResponse)? {
        var reader = Reader(bytes: bytes)
        guard reader.take(magic.count)?.elementsEqual(magic) == true, let status = reader.integer(UInt16.self),
            (100...999).contains(status), let requestTime = reader.time(), let responseTime = reader.time(),
            let storedAt = reader.time(), let key = reader.string(), let url = reader.string(),
            let headerCount = reader.count(ofItemsAtLeast: 8)
        else { return nil }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(headerCount)
        for _ in 0..<headerCount {
            guard let (name, value) = reader.field() else { return nil }
            headers.append((name, value))
        }
        guard let varyCount = reader.count(ofItemsAtLeast: 8) else { return nil }
        var varyValues: [String: String] = [:]
        for _ in 0..<varyCount {
            guard let (name, value) = reader.field(), varyValues.updateValue(value, forKey: name) == nil else { return nil }
        }
        guard let rawCount = reader.count(ofItemsAtLeast: 8) else { return nil }
        var rawValues: [String: [UInt8]] = [:]
        for _ in 0..<rawCount {
            guard let name = reader.string(), Validators.fieldNames.contains(name), let value = reader.lengthPrefixed(),
                HTTPField.isSendableValidator(Array(value)), rawValues.updateValue(Array(value), forKey: name) == nil
            else { return nil }
        }
        guard let digestCount = reader.count(ofItemsAtLeast: 8) else { return nil }
        var digests = BodyDigests()
        for _ in 0..<digestCount {
            guard let name = reader.string(), let algorithm = HashAlgorithm(rawValue: name), digests[algorithm] == nil,
                let digest = reader.lengthPrefixed(), digest.count == algorithm.digestLength
            else { return nil }
            digests[algorithm] = Array(digest)
        }
        guard reader.isAtEnd else { return nil }
        let response = CachedResponse(
            status: Int(status), headers: headers, url: url, requestTime: requestTime, responseTime: responseTime,
            storedAt: storedAt, varyValues: varyValues, digests: digests, rawValues: rawValues)
        return (key, response)
    }

    /// Reads a head front to back; each read is nil when what it asks for
    /// is not there, whole and of its form.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var isAtEnd: Bool { offset == bytes.count }

        /// The next `count` bytes.
        mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, count <= bytes.count - offset else { return nil }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }

        mutating func integer<Integer: FixedWidthInteger & UnsignedInteger>(_: Integer.Type) -> Integer? {
            guard let slice = take(MemoryLayout<Integer>.size) else { return nil }
            return slice.reversed().reduce(Integer.zero) { $0 << 8 | Integer($1) }
        }

        /// A count of items that each take at least `itemLength` bytes: no
        /// more than what is left could hold.
        mutating func count(ofItemsAtLeast itemLength: Int) -> Int? {
            guard let count = integer(UInt32.self), Int(count) <= (bytes.count - offset) / itemLength else { return nil }
            return Int(count)
        }

        /// Length-prefixed bytes.
        mutating func lengthPrefixed() -> ArraySlice<UInt8>? {
            guard let length = integer(UInt32.self) else { return nil }
            return take(Int(length))
        }

        /// A length-prefixed string, when it is UTF-8.
        mutating func string() -> String? {
            lengthPrefixed().flatMap { String(validating: $0, as: UTF8.self) }
        }

        /// A header line or `Vary` value: a token name and a value free of
        /// CR, LF and NUL.
        mutating func field() -> (name: String, value: String)? {
            guard let name = lengthPrefixed(), HTTPField.isValidName(name), let value = lengthPrefixed(),
                DiskCacheEntry.isFieldValue(value), let text = String(validating: value, as: UTF8.self)
            else { return nil }
            return (String(decoding: name, as: UTF8.self), text)
        }

        /// A time, when finite and within 1970 through 9999.
        mutating func time() -> Date? {
            guard let bits = integer(UInt64.self) else { return nil }
            let date = Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits))
            let seconds = date.timeIntervalSince1970
            guard seconds.isFinite, (0...Double(HTTPDate.latest)).contains(seconds) else { return nil }
            return date
        }
    }
}
