import CJanssonShim
import CLibjansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a buffer is not a JSON text.
public struct JSONDecodeError: Error, Sendable, CustomStringConvertible {
    public enum Reason: Sendable {
        case invalidUTF8
        /// An integer beyond 64 bits.
        case integerOverflow
        /// A real beyond a double's range (`1e400`).
        case realOverflow
        case tooDeep
        case syntax
    }

    public var reason: Reason
    public var message: String
    /// Byte offset where jansson stopped.
    public var position: Int

    public var description: String { "\(message) at byte \(position)" }
}

/// Reads and writes JSON text through jansson.
public enum JSONCodec {
    /// Parses one JSON text of any type (a scalar at the top level too).
    /// Strings may hold `\u0000`, object keys may not (jansson refuses a
    /// NUL in a key); integers beyond 64 bits are an error.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(JSONDecodeError) -> JSON {
        try decode(bytes, reading: \.json)
    }

    /// Parses one JSON text, as `decode(_:)` does, and hands `read` the
    /// root of jansson's tree, which lives only while `read` runs: it
    /// copies what it keeps (`ParsedJSON.json`).
    public static func decode<Read>(
        _ bytes: UnsafeRawBufferPointer, reading read: (ParsedJSON) -> Read
    ) throws(JSONDecodeError) -> Read {
        var error = json_error_t()
        let flags = Int(JSON_DECODE_ANY | JSON_ALLOW_NUL)
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONDecodeError(reason: .syntax, message: "empty message", position: 0)
        }
        // The tree lives only while it is read: one arena for all of it. A
        // long batch is parsed in two halves at once; a text that does not
        // parse so is parsed whole, which says where it is wrong.
        let text = base.assumingMemoryBound(to: CChar.self)
        var parsed = courier_json_loadb_arena_halves(text, bytes.count, flags)
        if parsed.root == nil { parsed = courier_json_loadb_arena(text, bytes.count, flags, &error) }
        defer { courier_json_parsed_drop(parsed) }
        guard let root = parsed.root else { throw JSONDecodeError(error) }
        return read(ParsedJSON(root))
    }

    /// `decode(_:reading:)` of the bytes of an array.
    public static func decode<Read>(_ bytes: [UInt8], reading read: (ParsedJSON) -> Read) throws(JSONDecodeError) -> Read {
        let result: Result<Read, JSONDecodeError> = bytes.withUnsafeBytes { buffer in
            do throws(JSONDecodeError) { return .success(try decode(buffer, reading: read)) }
            catch { return .failure(error) }
        }
        return try result.get()
    }

    public static func decode(_ bytes: some Collection<UInt8>) throws(JSONDecodeError) -> JSON {
        let result: Result<JSON, JSONDecodeError>? = bytes.withContiguousStorageIfAvailable { buffer in
            do throws(JSONDecodeError) { return .success(try decode(UnsafeRawBufferPointer(buffer))) }
            catch { return .failure(error) }
        }
        if let result { return try result.get() }
        return try decode(ContiguousArray(bytes))
    }

    public static func decode(_ text: String) throws(JSONDecodeError) -> JSON {
        try decode(Array(text.utf8))
    }

    /// Compact JSON text, keys sorted. Reals are written with the fewest
    /// significant digits (at most 17) that round-trip every real in the
    /// value, so `0.1` is written `0.1`. Non-finite reals become `null`.
    public static func encode(_ value: JSON) -> [UInt8] {
        var text: [UInt8] = []
        encode(value, into: &text)
        return text
    }

    /// Appends `value`'s text, as `encode(_:)` writes it, to `text`.
    public static func encode(_ value: JSON, into text: inout [UInt8]) {
        var precision = 1
        let root = makeJSONT(value, precision: &precision)
        dump(root, precision: precision, into: &text, sizeHint: value.estimatedEncodedCount)
    }

    /// Appends the text of the object `members` writes to `text`: what
    /// `encode(_:)` writes for the same members, with no `JSON` value made
    /// on the way. `members` must give keys in byte order, as `encode`
    /// sorts them. `sizeHint` is about how long the text is.
    public static func encodeObject(
        into text: inout [UInt8], sizeHint: Int = 1024, _ members: (JSONObjectWriter) -> Void
    ) {
        guard !encodeRecorded(into: &text, sizeHint: sizeHint, sharing: nil, members) else { return }
        encodeObject(into: &text, sizeHint: sizeHint, shared: nil, members)
    }

    /// `encodeObject(into:sizeHint:_:)`, whose `members` may write the
    /// text of `shared` (`JSONObjectWriter.set(_:shared:or:)`), which the
    /// message copies where they do.
    public static func encodeObject(
        into text: inout [UInt8], sizeHint: Int = 1024, sharing shared: SharedJSON,
        _ members: @Sendable (JSONObjectWriter) -> Void
    ) {
        guard !encodeRecorded(into: &text, sizeHint: sizeHint, sharing: shared, members) else { return }
        encodeObjectAsTree(into: &text, sizeHint: sizeHint, sharing: shared, members)
    }

    /// `encodeObject(into:sizeHint:sharing:_:)` through one jansson tree of
    /// the message: jansson writes a placeholder string where the text of
    /// `shared` goes, which the text replaces. Should the message hold that
    /// string as a value more often than placeholders were written (a
    /// string of the client's or an origin's equal to it), the message is
    /// written again with no text copied.
    static func encodeObjectAsTree(
        into text: inout [UInt8], sizeHint: Int, sharing shared: SharedJSON, _ members: (JSONObjectWriter) -> Void
    ) {
        let start = text.count
        var placeholders = 0
        withUnsafeMutablePointer(to: &placeholders) { placeholders in
            encodeObject(into: &text, sizeHint: sizeHint, shared: (ObjectIdentifier(shared), placeholders), members)
        }
        guard placeholders > 0, !shared.replace(placeholders, in: &text, from: start) else { return }
        text.removeSubrange(start...)
        encodeObject(into: &text, sizeHint: sizeHint, shared: nil, members)
    }

    /// Writes the message `members` writes through the template of its
    /// shape (`JSONTemplate`): jansson's text of its keys and structure,
    /// made once, around jansson's text of each value. False, with nothing
    /// written, when the message is to be written as a tree: its shape
    /// puts a key twice in an object, or a message of this thread is being
    /// written already (by the closure of another).
    private static func encodeRecorded(
        into text: inout [UInt8], sizeHint: Int, sharing shared: SharedJSON?, _ members: (JSONObjectWriter) -> Void
    ) -> Bool {
        let templates = JSONTemplates.current
        guard !templates.busy else { return false }
        templates.busy = true
        let recording = templates.recording
        defer {
            recording.reset()
            templates.busy = false
        }
        recording.owner = shared.map(ObjectIdentifier.init)
        members(JSONObjectWriter(recording: recording))
        let template = templates.template(for: recording)
        guard template.isWritable else { return false }
        template.write(recording, into: &text, sizeHint: sizeHint)
        return true
    }

    private static func encodeObject(
        into text: inout [UInt8], sizeHint: Int, shared: (owner: ObjectIdentifier, placeholders: UnsafeMutablePointer<Int>)?,
        _ members: (JSONObjectWriter) -> Void
    ) {
        var precision = 1
        let root = json_object()!
        withUnsafeMutablePointer(to: &precision) { precision in
            members(JSONObjectWriter(object: root, precision: precision, shared: shared))
        }
        dump(root, precision: precision, into: &text, sizeHint: sizeHint)
    }

    /// Room made at the end of a buffer for a text to be dumped into:
    /// appended by copying, so making it is one `memcpy` in any build.
    private static let zeros = [UInt8](repeating: 0, count: 16 << 10)

    /// Dumps the tree `root`, whose reference it takes, onto the end of
    /// `text`, about `sizeHint` bytes: a text expected within `zeros` goes
    /// straight into room made at the end of `text`, which jansson fills in
    /// one pass; a longer one (or one longer than expected, dumped again)
    /// through jansson's callback, which appends it piece by piece. Never
    /// into a C string that would be measured and copied.
    static func dump(
        _ root: UnsafeMutablePointer<json_t>, precision: Int, into text: inout [UInt8], sizeHint: Int
    ) {
        defer { courier_json_decref(root) }
        // Keys go in sorted as the tree is built and jansson keeps insertion
        // order, so JSON_SORT_KEYS (a sort and a look-up per key, in every
        // object, on every dump) is not needed for sorted output.
        let flags = flags(precision: precision)
        let start = text.count
        let hint = max(sizeHint, 0)
        let room = hint + hint / 8 + 64
        if room <= zeros.count {
            text.append(contentsOf: zeros[..<room])
            let size = text.withUnsafeMutableBufferPointer { buffer in
                (buffer.baseAddress! + start).withMemoryRebound(to: CChar.self, capacity: room) {
                    json_dumpb(root, $0, room, flags)
                }
            }
            text.removeLast(size <= room ? room - size : room)
            guard size > room else { return }
        }
        withUnsafeMutablePointer(to: &text) { text in
            _ = json_dump_callback(root, { chunk, size, context in
                guard let chunk, let context else { return -1 }
                // Typed, so that appending is one copy rather than a loop
                // over the bytes.
                chunk.withMemoryRebound(to: UInt8.self, capacity: size) { bytes in
                    context.assumingMemoryBound(to: [UInt8].self).pointee
                        .append(contentsOf: UnsafeBufferPointer(start: bytes, count: size))
                }
                return 0
            }, text, flags)
        }
    }

    /// Runs `body` with the blocks jansson makes meanwhile on this thread
    /// taken from `byteCount` bytes of scratch room on the stack, and from
    /// blocks freed on return once those are taken
    /// (`courier_json_scratch_begin`, as `JSONTemplate` lends its own
    /// room): for a tree made, dumped and dropped inside `body`, which
    /// must keep nothing jansson made.
    static func withScratch<Result>(byteCount: Int, _ body: () -> Result) -> Result {
        withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 16) { scratch in
            let began = courier_json_scratch_begin(scratch.baseAddress, scratch.count)
            defer { courier_json_scratch_end(began, scratch.baseAddress) }
            return body()
        }
    }

    /// What `json_dumpb` is told: compact, any value at the top, reals
    /// with `precision` significant digits.
    static func flags(precision: Int) -> Int {
        Int(JSON_COMPACT | JSON_ENCODE_ANY) | courier_json_real_precision(Int32(precision))
    }

    /// Builds a jansson tree holding a new reference, and raises `precision`
    /// to what the reals in it need.
    static func makeJSONT(_ value: JSON, precision: inout Int) -> UnsafeMutablePointer<json_t> {
        switch value {
        case .null:
            return json_null()
        case .bool(let flag):
            return flag ? json_true() : json_false()
        case .integer(let number):
            return json_integer(number)
        case .double(let number):
            guard number.isFinite, let real = json_real(number) else { return json_null() }
            precision = max(precision, significantDigits(number))
            return real
        case .string(let text):
            return withChars(text) { chars, count in json_stringn_nocheck(chars, count) }
        case .array(let elements):
            let array = json_array()!
            for element in elements {
                json_array_append_new(array, makeJSONT(element, precision: &precision))
            }
            return array
        case .object(let members):
            let object = json_object()!
            // By bytes, as jansson's JSON_SORT_KEYS compares them.
            for (key, member) in members.sorted(by: { precedes($0.key, $1.key) }) {
                let child = makeJSONT(member, precision: &precision)
                _ = withChars(key) { chars, count in json_object_setn_new_nocheck(object, chars, count, child) }
            }
            return object
        }
    }

    /// Whether `a`'s UTF-8 bytes sort before `b`'s: the order of keys in
    /// the text, as jansson's JSON_SORT_KEYS compares them.
    static func precedes(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { a in
            b.withUTF8 { b in
                let common = min(a.count, b.count)
                if common > 0, let left = a.baseAddress, let right = b.baseAddress {
                    let order = memcmp(left, right, common)
                    if order != 0 { return order < 0 }
                }
                return a.count < b.count
            }
        }
    }

    /// Calls `body` with the UTF-8 bytes of `text` (which may hold NUL) and
    /// their count.
    static func withChars<R>(_ text: String, _ body: (UnsafePointer<CChar>, Int) -> R) -> R {
        var text = text
        return text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress, utf8.count > 0 else { return body("", 0) }
            return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) { body($0, utf8.count) }
        }
    }

    /// Digits `%.Ng` needs to print `number` so that it reads back the same
    /// and keeps its integer digits (so 100.0 stays `100.0`, not `1e+02`).
    ///
    /// The shortest digits Swift prints lie within the interval of decimals
    /// that read back as `number`; `%.Ng` rounds to the nearest N-digit
    /// decimal instead, which is as good only when that interval is
    /// symmetric. At a power of two it is not (the next lower double is
    /// nearer), so `2^-383` printed with its 16 shortest digits reads back
    /// as another double: those get 17.
    static func significantDigits(_ number: Double) -> Int {
        let magnitude = number.magnitude
        if magnitude < 1e15, magnitude.rounded(.towardZero) == magnitude {
            var digits = 1
            var value = UInt64(magnitude)
            while value >= 10 {
                value /= 10
                digits += 1
            }
            return digits
        }
        var digits = 0
        var trailingZeros = 0
        var leading = true
        for byte in magnitude.description.utf8 {
            if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { break }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { continue }
            if leading, byte == UInt8(ascii: "0") { continue }
            leading = false
            digits += 1
            trailingZeros = byte == UInt8(ascii: "0") ? trailingZeros + 1 : 0
        }
        if number.significandBitPattern == 0, number.isNormal { return 17 }
        var needed = max(digits - trailingZeros, 1)
        if magnitude >= 1, magnitude < 1e17 {
            needed = max(needed, Int(magnitude).description.utf8.count)
        }
        return min(needed, 17)
    }

}

extension JSON {
    /// Copies a jansson value the caller keeps ownership of.
    init(borrowing pointer: UnsafeMutablePointer<json_t>) {
        switch courier_json_typeof(pointer) {
        case JSON_OBJECT:
            var members = [String: JSON](minimumCapacity: json_object_size(pointer))
            var iterator = json_object_iter(pointer)
            while let current = iterator {
                let keyLength = json_object_iter_key_len(current)
                let key = json_object_iter_key(current).withMemoryRebound(to: UInt8.self, capacity: keyLength) {
                    String(decoding: UnsafeBufferPointer(start: $0, count: keyLength), as: UTF8.self)
                }
                members[key] = JSON(borrowing: json_object_iter_value(current))
                iterator = json_object_iter_next(pointer, current)
            }
            self = .object(members)
        case JSON_ARRAY:
            let count = json_array_size(pointer)
            var elements: [JSON] = []
            elements.reserveCapacity(count)
            for index in 0..<count {
                elements.append(JSON(borrowing: json_array_get(pointer, index)))
            }
            self = .array(elements)
        case JSON_STRING:
            let length = json_string_length(pointer)
            let text = json_string_value(pointer).withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
            }
            self = .string(text)
        case JSON_INTEGER:
            self = .integer(json_integer_value(pointer))
        case JSON_REAL:
            self = .double(json_real_value(pointer))
        case JSON_TRUE:
            self = .bool(true)
        case JSON_FALSE:
            self = .bool(false)
        default:
            self = .null
        }
    }
}

extension JSONDecodeError {
    init(_ error: json_error_t) {
        var error = error
        let text = withUnsafeBytes(of: &error.text) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        let reason: Reason
        switch json_error_code(&error) {
        case json_error_invalid_utf8: reason = .invalidUTF8
        // jansson reports both with one code; its real number's text says so.
        case json_error_numeric_overflow: reason = text.utf8.starts(with: "real number".utf8) ? .realOverflow : .integerOverflow
        case json_error_stack_overflow: reason = .tooDeep
        default: reason = .syntax
        }
        self.init(reason: reason, message: text, position: Int(error.position))
    }
}

extension JSONCodec {
    /// The version of jansson in use, as it reports it at run time.
    public static var libraryVersion: String { String(cString: jansson_version_str()) }
}
