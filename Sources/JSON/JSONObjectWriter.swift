import CJanssonShim
import CLibjansson

/// Writes the members of a JSON object straight into jansson's tree, from
/// the values the caller holds: no `JSON` value, no dictionary to hash and
/// sort on the way. `JSONCodec.encodeObject(into:_:)` hands one to its
/// closure; it is valid only inside it.
///
/// Keys go in byte order, one call each: jansson keeps the order they were
/// set in, and the text has its keys sorted as `JSONCodec.encode` sorts
/// them. Strings may hold NUL; non-finite reals are written `null`.
public struct JSONObjectWriter {
    private let object: UnsafeMutablePointer<json_t>
    /// The significant digits the reals written so far need.
    private let precision: UnsafeMutablePointer<Int>
    /// The `SharedJSON` whose text the message copies, and how many
    /// placeholders for it were written so far.
    private let shared: (owner: ObjectIdentifier, placeholders: UnsafeMutablePointer<Int>)?

    init(
        object: UnsafeMutablePointer<json_t>, precision: UnsafeMutablePointer<Int>,
        shared: (owner: ObjectIdentifier, placeholders: UnsafeMutablePointer<Int>)? = nil
    ) {
        self.object = object
        self.precision = precision
        self.shared = shared
    }

    public func set(_ key: StaticString, _ value: String) {
        put(key, string(value))
    }

    /// `null` when `value` is nil.
    public func set(_ key: StaticString, _ value: String?) {
        put(key, value.map(string) ?? json_null())
    }

    public func set(_ key: StaticString, _ value: Int64) {
        put(key, json_integer(value))
    }

    public func set(_ key: StaticString, _ value: Int) {
        put(key, json_integer(Int64(value)))
    }

    /// `null` when `value` is nil.
    public func set(_ key: StaticString, _ value: Int64?) {
        put(key, value.map(json_integer) ?? json_null())
    }

    public func set(_ key: StaticString, _ value: Double) {
        put(key, real(value))
    }

    /// `null` when `value` is nil.
    public func set(_ key: StaticString, _ value: Double?) {
        put(key, value.map(real) ?? json_null())
    }

    public func set(_ key: StaticString, _ value: Bool) {
        put(key, value ? json_true() : json_false())
    }

    public func set(_ key: StaticString, _ value: JSON) {
        put(key, JSONCodec.makeJSONT(value, precision: &precision.pointee))
    }

    /// An object whose members `members` writes, keys in byte order.
    public func set(_ key: StaticString, object members: (JSONObjectWriter) -> Void) {
        let child = json_object()!
        members(JSONObjectWriter(object: child, precision: precision, shared: shared))
        put(key, child)
    }

    /// An array of strings.
    public func set(_ key: StaticString, strings: some Sequence<String>) {
        let array = json_array()!
        for element in strings { json_array_append_new(array, string(element)) }
        put(key, array)
    }

    /// An object of string members, whatever order `members` has.
    public func set(_ key: StaticString, strings members: [String: String]) {
        put(key, Self.stringObject(members))
    }

    /// The text of `shared` when the message copies it (see
    /// `JSONMessage(estimate:sharing:object:)`): its placeholder, which
    /// the text replaces once jansson has written the message; else the
    /// object of string members `members`, the same members.
    public func set(_ key: StaticString, shared: SharedJSON?, or members: [String: String]) {
        guard let sharing = self.shared, let shared, sharing.owner == ObjectIdentifier(shared), shared.keys[0].isEmpty
        else {
            return set(key, strings: members)
        }
        sharing.placeholders.pointee += 1
        put(key, Self.placeholder(0))
    }

    /// The run of members `shared` holds that starts with `key`
    /// (`SharedJSON(membersFrom:sizeHint:_:)`), when the message copies its
    /// text: a placeholder for `key`, which the text replaces once jansson
    /// has written the message; else the members `members` writes, the
    /// same ones. Either way the members that follow come after the run's.
    public func set(_ key: StaticString, sharedMembers shared: SharedJSON?, or members: (JSONObjectWriter) -> Void) {
        guard let sharing = self.shared, let shared, sharing.owner == ObjectIdentifier(shared),
            let run = shared.run(startingWith: key)
        else {
            return members(self)
        }
        sharing.placeholders.pointee += 1
        put(key, Self.placeholder(run))
    }

    /// The string the text at `index` of a shared text replaces.
    private static func placeholder(_ index: Int) -> UnsafeMutablePointer<json_t>? {
        SharedJSON.placeholders[index].withUnsafeBufferPointer { placeholder in
            placeholder.withMemoryRebound(to: CChar.self) { json_stringn_nocheck($0.baseAddress, $0.count) }
        }
    }

    /// A new object of string members, keys in byte order.
    static func stringObject(_ members: [String: String]) -> UnsafeMutablePointer<json_t> {
        let object = json_object()!
        for (name, value) in members.sorted(by: { JSONCodec.precedes($0.key, $1.key) }) {
            let member = JSONCodec.withChars(value) { chars, count in json_stringn_nocheck(chars, count) }
            JSONCodec.withChars(name) { chars, count in _ = json_object_setn_new_nocheck(object, chars, count, member) }
        }
        return object
    }

    /// Sets `key` to `value`, whose reference the object takes; a value
    /// jansson could not allocate (nil) is left out, as jansson does.
    private func put(_ key: StaticString, _ value: UnsafeMutablePointer<json_t>?) {
        key.withUTF8Buffer { key in
            key.baseAddress!.withMemoryRebound(to: CChar.self, capacity: key.count) { chars in
                _ = json_object_setn_new_nocheck(object, chars, key.count, value)
            }
        }
    }

    private func string(_ text: String) -> UnsafeMutablePointer<json_t>? {
        JSONCodec.withChars(text) { chars, count in json_stringn_nocheck(chars, count) }
    }

    private func real(_ number: Double) -> UnsafeMutablePointer<json_t>? {
        guard number.isFinite, let real = json_real(number) else { return json_null() }
        precision.pointee = max(precision.pointee, JSONCodec.significantDigits(number))
        return real
    }
}

@available(*, unavailable) extension JSONObjectWriter: Sendable {}

extension JSON {
    /// The object `members` writes, as a value.
    public init(object members: (JSONObjectWriter) -> Void) {
        var precision = 1
        let root = json_object()!
        defer { courier_json_decref(root) }
        withUnsafeMutablePointer(to: &precision) { precision in
            members(JSONObjectWriter(object: root, precision: precision))
        }
        self.init(borrowing: root)
    }
}
