import CFuzzDriver
import Foundation
import JSON

/// A libFuzzer harness. Properties: whatever decodes re-encodes to a text that
/// decodes to the same value, and encoding is stable (encode ∘ decode ∘
/// encode = encode); a value built from the bytes (reals from raw bit
/// patterns, strings with any code point, nesting) survives encode/decode;
/// and a message copying a shared object's text, or a shared run of members
/// holding it (string members built from the bytes), is byte for byte the
/// one that encodes the same members; and messages of one shape written
/// one after another are each the text of their members as one tree.
@main
enum FuzzCodec {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            guard let data else { return 0 }
            return fuzzCodec(data, size)
        })
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCodec(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    if let value = try? JSONCodec.decode(bytes) {
        roundTrip(value, source: Array(bytes))
    }
    var reader = ByteReader(bytes: Array(bytes))
    roundTrip(reader.value(depth: 0), source: Array(bytes))
    var strings = ByteReader(bytes: Array(bytes))
    copiesSharedText(strings.stringMembers())
    var shaped = ByteReader(bytes: Array(bytes))
    writesOneShapeAsTreesDo(&shaped)
    return 0
}

/// Messages of one shape, written one after another through
/// `JSONObjectWriter` (jansson's text of the shape copied around jansson's
/// text of each value, a value equal to the one in its place in the last
/// message copying that text), are each the text their members encode to
/// as one tree. Values are drawn from the bytes, each kept from the message
/// before or made anew, so both copies and fresh values meet every place.
private func writesOneShapeAsTreesDo(_ reader: inout ByteReader) {
    var text = reader.string(keySafe: false)
    var integer = Int64(bitPattern: reader.word())
    var real = Double(bitPattern: reader.word())
    var flag = false
    var other = reader.string(keySafe: false)
    for _ in 0..<4 {
        let choice = reader.byte() ?? 0
        if choice & 1 != 0 { text = reader.string(keySafe: false) }
        if choice & 2 != 0 { integer = Int64(bitPattern: reader.word()) }
        if choice & 4 != 0 { real = Double(bitPattern: reader.word()) }
        if choice & 8 != 0 { flag.toggle() }
        if choice & 16 != 0 { other = reader.string(keySafe: false) }
        let (text, integer, real, flag, other) = (text, integer, real, flag, other)
        var written: [UInt8] = []
        JSONCodec.encodeObject(into: &written) { object in
            object.set("a", text)
            object.set("b", integer)
            object.set("c", object: { inner in
                inner.set("d", real)
                inner.set("e", flag)
            })
            object.set("f", other)
        }
        let tree = JSONCodec.encode(.object([
            "a": .string(text), "b": .integer(integer),
            "c": .object(["d": real.isFinite ? .double(real) : .null, "e": .bool(flag)]), "f": .string(other),
        ]))
        guard written == tree else {
            fatalError("a written message differs from its tree: \(String(decoding: written, as: UTF8.self)) against \(String(decoding: tree, as: UTF8.self))")
        }
    }
}

/// The message copying the text is given no members of its own, so only
/// the copied text can write them.
private func copiesSharedText(_ members: [String: String]) {
    let shared = SharedJSON(strings: members)
    func message(or given: [String: String]) -> @Sendable (JSONObjectWriter) -> Void {
        { object in
            object.set("a", 0.5)
            object.set("b", object: { inner in
                inner.set("h", shared: shared, or: given)
                inner.set("n", members.count)
            })
            object.set("h", shared: shared, or: given)
        }
    }
    let copied = JSONMessage(estimate: 64, sharing: shared, object: message(or: [:])).encoded
    var plain: [UInt8] = []
    JSONCodec.encodeObject(into: &plain, message(or: members))
    guard copied == plain, (try? JSONCodec.decode(copied)) != nil else {
        fatalError("a message copying shared text differs: \(String(decoding: copied, as: UTF8.self)) against \(String(decoding: plain, as: UTF8.self))")
    }
    copiesSharedRun(members, headers: shared)
}

/// A run of members holding the strings and the shared object, copied by a
/// message with reals of its own, is the text encoding writes.
private func copiesSharedRun(_ members: [String: String], headers: SharedJSON) {
    let sorted = members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    let run: @Sendable (JSONObjectWriter) -> Void = { object in
        object.set("m", sorted.first?.value ?? "")
        object.set("n", shared: headers, or: members)
        object.set("o", strings: sorted.map(\.key))
        object.set("p", sorted.last?.key ?? "")
    }
    guard let shared = SharedJSON(membersFrom: "m", sizeHint: 64, run) else {
        fatalError("no run made of string members \(members)")
    }
    func message(_ copying: SharedJSON?) -> @Sendable (JSONObjectWriter) -> Void {
        { object in
            object.set("a", 0.1)
            object.set("b", object: { $0.set("c", 1e300); $0.set("m", sharedMembers: copying, or: run) })
        }
    }
    let copied = JSONMessage(estimate: 64, sharing: shared, object: message(shared)).encoded
    var plain: [UInt8] = []
    JSONCodec.encodeObject(into: &plain, message(nil))
    guard copied == plain, (try? JSONCodec.decode(copied)) != nil else {
        fatalError("a message copying a shared run differs: \(String(decoding: copied, as: UTF8.self)) against \(String(decoding: plain, as: UTF8.self))")
    }
}

private func roundTrip(_ value: JSON, source: [UInt8]) {
    let text = JSONCodec.encode(value)
    let again: JSON
    do {
        again = try JSONCodec.decode(text)
    } catch {
        fatalError("encode wrote a text decode refuses (\(error)): \(text) from \(source)")
    }
    guard again == value else {
        fatalError("decode(encode(x)) != x: \(value) became \(again) through \(String(decoding: text, as: UTF8.self))")
    }
    guard JSONCodec.encode(again) == text else {
        fatalError("encoding is not stable for \(value)")
    }
}

/// Builds a JSON value from fuzz bytes.
private struct ByteReader {
    var bytes: [UInt8]
    var offset = 0

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func word() -> UInt64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(byte() ?? 0) }
        return value
    }

    mutating func string(keySafe: Bool) -> String {
        let count = Int(byte() ?? 0) % 12
        var scalars = String.UnicodeScalarView()
        for _ in 0..<count {
            let raw = UInt32(byte() ?? 0) << (UInt32(byte() ?? 0) % 14)
            guard var scalar = Unicode.Scalar(raw) else { continue }
            // jansson refuses NUL in object keys.
            if keySafe, scalar == "\0" { scalar = "0" }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    /// Up to 8 members of strings, as an origin's headers might be.
    mutating func stringMembers() -> [String: String] {
        var members: [String: String] = [:]
        for _ in 0..<Int(byte() ?? 0) % 9 { members[string(keySafe: true)] = string(keySafe: false) }
        return members
    }

    mutating func value(depth: Int) -> JSON {
        guard let kind = byte() else { return .null }
        switch kind % 8 {
        case 0: return .null
        case 1: return .bool(kind & 0x80 != 0)
        case 2: return .integer(Int64(bitPattern: word()))
        case 3:
            let real = Double(bitPattern: word())
            return real.isFinite ? .double(real) : .double(Double(kind))
        case 4: return .string(string(keySafe: false))
        case 5 where depth < 8:
            return .array((0..<Int(byte() ?? 0) % 5).map { _ in value(depth: depth + 1) })
        case 6 where depth < 8:
            var members: [String: JSON] = [:]
            for _ in 0..<Int(byte() ?? 0) % 5 { members[string(keySafe: true)] = value(depth: depth + 1) }
            return .object(members)
        default:
            return .double(Double(Int64(bitPattern: word()) >> (kind % 64)) / 1024)
        }
    }
}
