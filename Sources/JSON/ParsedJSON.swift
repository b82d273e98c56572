import CJanssonShim
import CLibjansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value of the tree jansson parsed a text into, read where it lies:
/// `JSONCodec.decode(_:reading:)` hands the root to its closure, which
/// copies into `JSON` only the values it keeps. A message's envelope (a
/// batch's array, each request's `jsonrpc`, `method` and `id`) is read so,
/// without a dictionary made for every request. Valid only inside that
/// closure.
public struct ParsedJSON {
    private let pointer: UnsafeMutablePointer<json_t>

    init(_ pointer: UnsafeMutablePointer<json_t>) { self.pointer = pointer }

    /// The value, copied.
    public var json: JSON { JSON(borrowing: pointer) }

    public var isObject: Bool { courier_json_typeof(pointer) == JSON_OBJECT }

    public var isArray: Bool { courier_json_typeof(pointer) == JSON_ARRAY }

    public var isNull: Bool { courier_json_typeof(pointer) == JSON_NULL }

    public var isString: Bool { courier_json_typeof(pointer) == JSON_STRING }

    /// A string, an integer, a real or null: what a request's id may be.
    public var isIDScalar: Bool {
        switch courier_json_typeof(pointer) {
        case JSON_STRING, JSON_INTEGER, JSON_REAL, JSON_NULL: true
        default: false
        }
    }

    /// The string's text; nil for any other value.
    public var stringValue: String? {
        guard isString else { return nil }
        return json.stringValue
    }

    /// Whether the value is a string of exactly the bytes of `text`.
    public func isString(_ text: StaticString) -> Bool {
        guard isString else { return false }
        return UnsafeRawBufferPointer(start: json_string_value(pointer), count: json_string_length(pointer)).holdsExactly(text)
    }

    /// The JSON type's name, as `JSON.typeName` gives it.
    public var typeName: String {
        switch courier_json_typeof(pointer) {
        case JSON_OBJECT: "object"
        case JSON_ARRAY: "array"
        case JSON_STRING: "string"
        case JSON_INTEGER: "integer"
        case JSON_REAL: "number"
        case JSON_TRUE, JSON_FALSE: "boolean"
        default: "null"
        }
    }

    /// An array's elements; 0 for any other value.
    public var count: Int { isArray ? json_array_size(pointer) : 0 }

    /// The array's element at `index`, which must be below `count`.
    public subscript(index: Int) -> ParsedJSON { ParsedJSON(json_array_get(pointer, index)) }

    /// Calls `body` with each member's name (its UTF-8 bytes) and value,
    /// in the order of the text; nothing for a value that is no object.
    public func forEachMember(_ body: (UnsafeRawBufferPointer, ParsedJSON) -> Void) {
        guard isObject else { return }
        var iterator = json_object_iter(pointer)
        while let current = iterator {
            let name = UnsafeRawBufferPointer(start: json_object_iter_key(current), count: json_object_iter_key_len(current))
            body(name, ParsedJSON(json_object_iter_value(current)))
            iterator = json_object_iter_next(pointer, current)
        }
    }
}

@available(*, unavailable) extension ParsedJSON: Sendable {}

extension UnsafeRawBufferPointer {
    /// Whether the bytes are exactly those of `text`.
    public func holdsExactly(_ text: StaticString) -> Bool {
        text.withUTF8Buffer { bytes in
            guard count == bytes.count else { return false }
            guard let base = baseAddress, let other = bytes.baseAddress, count > 0 else { return true }
            return memcmp(base, other, count) == 0
        }
    }
}
