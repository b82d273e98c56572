/// A JSON value as courier's modules see it. Only this module talks to
/// jansson; everything above works with this type.
public enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    /// JSON integers are 64-bit, as jansson's `json_int_t`.
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])
}

extension JSON {
    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The value as an integer: integers, and reals with no fractional part.
    public var integerValue: Int64? {
        switch self {
        case .integer(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.2e18: return Int64(value)
        default: return nil
        }
    }

    /// The value as a real: reals, and integers.
    public var doubleValue: Double? {
        switch self {
        case .integer(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    public var arrayValue: [JSON]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: [String: JSON]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The JSON type's name, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSON {
    /// About how many bytes `JSONCodec.encode` writes for this value, found
    /// without encoding it: exact for most values, low only by the escapes
    /// strings need and the digits of reals. For counting output that waits
    /// to be encoded.
    public var estimatedEncodedCount: Int {
        switch self {
        case .null: return 4
        case .bool(let flag): return flag ? 4 : 5
        case .integer(let number):
            var digits = number < 0 ? 2 : 1
            var rest = number.magnitude
            while rest >= 10 {
                rest /= 10
                digits += 1
            }
            return digits
        case .double: return 8
        case .string(let text): return text.utf8.count + 2
        case .array(let elements):
            var count = 2 + max(elements.count - 1, 0)
            for element in elements { count += element.estimatedEncodedCount }
            return count
        case .object(let members):
            var count = 2 + max(members.count - 1, 0)
            for (key, member) in members { count += key.utf8.count + 3 + member.estimatedEncodedCount }
            return count
        }
    }
}

extension JSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    /// A repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        var members = [String: JSON](minimumCapacity: elements.count)
        for (key, value) in elements { members[key] = value }
        self = .object(members)
    }
}

extension JSON {
    public init(_ value: Int) { self = .integer(Int64(value)) }
    public init(_ value: Double) { self = .double(value) }
    public init(_ value: String?) { self = value.map(JSON.string) ?? .null }
}

extension JSON: CustomStringConvertible {
    public var description: String { String(decoding: JSONCodec.encode(self), as: UTF8.self) }
}
