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
    /// The object members go in; nil when they are recorded instead.
    private let object: UnsafeMutablePointer<json_t>?
    /// The significant digits the reals written so far need.
    private let precision: UnsafeMutablePointer<Int>?
    /// The `SharedJSON` whose text the message copies, and how many
    /// placeholders for it were written so far.
    private let shared: (owner: ObjectIdentifier, placeholders: UnsafeMutablePointer<Int>)?
    /// Where members go when they are not put in a tree: the message's
    /// shape and values, which a template of the shape writes
    /// (`JSONCodec.encodeObject`).
    private let recording: JSONRecording?

    init(
        object: UnsafeMutablePointer<json_t>, precision: UnsafeMutablePointer<Int>,
        shared: (owner: ObjectIdentifier, placeholders: UnsafeMutablePointer<Int>)? = nil
    ) {
        self.object = object
        self.precision = precision
        self.shared = shared
        recording = nil
    }

    init(recording: JSONRecording) {
        object = nil
        precision = nil
        shared = nil
        self.recording = recording
    }

    public func set(_ key: StaticString, _ value: String) {
        if let recording { return recording.value(key, .string(value)) }
        put(key, string(value))
    }

    /// `null` when `value` is nil.
    public func set(_ key: StaticString, _ value: String?) {
        if let recording { return recording.value(key, value.map { .string($0) } ?? .null) }
        put(key, value.map(string) ?? json_null())
    }

    public func set(_ key: StaticString, _ value: Int64) {
        if let recording { return recording.value(key, .integer(value)) }
        put(key, json_integer(value))
    }

    public func set(_ key: StaticString, _ value: Int) {
        set(key, Int64(value))
    }

    /// `null` when `value` is nil.
    public func set(_ key: StaticString, _ value: Int64?) {
        guard let value else { return set(key, nil as String?) }
        set(key, value)
    }

    public func set(_ key: StaticString, _ value: Double) {
        if let recording { return recording.real(key, value) }
        put(key, real(value))
    }

    /// `null` when `value` is nil.
    public func set(_ key: StaticString, _ value: Double?) {
        guard let value else { return set(key, nil as String?) }
        set(key, value)
    }

    public func set(_ key: StaticString, _ value: Bool) {
        if let recording { return recording.value(key, .bool(value)) }
        put(key, value ? json_true() : json_false())
    }

    public func set(_ key: StaticString, _ value: JSON) {
        if let recording {
            // A scalar (a request's id) as the setter of its type records
            // it, so that it is written as one without a tree.
            switch value {
            case .null: return recording.value(key, .null)
            case .bool(let flag): return recording.value(key, .bool(flag))
            case .integer(let number): return recording.value(key, .integer(number))
            case .double(let number): return recording.real(key, number)
            case .string(let text): return recording.value(key, .string(text))
            case .array, .object:
                return recording.value(key, .tree(JSONCodec.makeJSONT(value, precision: &recording.precision)))
            }
        }
        put(key, JSONCodec.makeJSONT(value, precision: &precision!.pointee))
    }

    /// An object whose members `members` writes, keys in byte order.
    public func set(_ key: StaticString, object members: (JSONObjectWriter) -> Void) {
        if let recording {
            recording.begin(key)
            members(self)
            return recording.end()
        }
        let child = json_object()!
        members(JSONObjectWriter(object: child, precision: precision!, shared: shared))
        put(key, child)
    }

    /// An array of strings.
    public func set(_ key: StaticString, strings: [String]) {
        if let recording { return recording.value(key, .stringArray(strings)) }
        let array = json_array()!
        for element in strings { json_array_append_new(array, string(element)) }
        put(key, array)
    }

    /// An array of strings, from any sequence of them: made into an array
    /// here, where the sequence's type is not known, so a caller that
    /// writes many passes an array.
    public func set(_ key: StaticString, strings: some Sequence<String>) {
        set(key, strings: Array(strings))
    }

    /// An object of string members, whatever order `members` has.
    public func set(_ key: StaticString, strings members: [String: String]) {
        if let recording { return recording.value(key, .strings(members)) }
        put(key, Self.stringObject(members))
    }

    /// The text of `shared` when the message copies it (see
    /// `JSONMessage(estimate:sharing:object:)`), copied where the member
    /// goes (through the template of the message's shape, or, for a
    /// message written as one tree, in place of a placeholder once jansson
    /// has written it); else the object of string members `members`, the
    /// same members.
    public func set(_ key: StaticString, shared: SharedJSON?, or members: [String: String]) {
        if let recording {
            guard let shared, recording.owner == ObjectIdentifier(shared), shared.keys[0].isEmpty else {
                return set(key, strings: members)
            }
            return recording.value(key, .text(shared, index: 0))
        }
        guard let sharing = self.shared, let shared, sharing.owner == ObjectIdentifier(shared), shared.keys[0].isEmpty
        else {
            return set(key, strings: members)
        }
        sharing.placeholders.pointee += 1
        put(key, Self.placeholder(0))
    }

    /// The run of members `shared` holds that starts with `key`
    /// (`SharedJSON(membersFrom:sizeHint:_:)`), when the message copies its
    /// text: copied where `key` goes, as `set(_:shared:or:)` copies an
    /// object's; else the members `members` writes, the same ones. Either
    /// way the members that follow come after the run's.
    public func set(_ key: StaticString, sharedMembers shared: SharedJSON?, or members: (JSONObjectWriter) -> Void) {
        if let recording {
            guard let shared, recording.owner == ObjectIdentifier(shared), let run = shared.run(startingWith: key) else {
                return members(self)
            }
            return recording.value(key, .text(shared, index: run))
        }
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
                _ = json_object_setn_new_nocheck(object!, chars, key.count, value)
            }
        }
    }

    private func string(_ text: String) -> UnsafeMutablePointer<json_t>? {
        JSONCodec.withChars(text) { chars, count in json_stringn_nocheck(chars, count) }
    }

    private func real(_ number: Double) -> UnsafeMutablePointer<json_t>? {
        guard number.isFinite, let real = json_real(number) else { return json_null() }
        precision!.pointee = max(precision!.pointee, JSONCodec.significantDigits(number))
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
