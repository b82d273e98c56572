import CJanssonShim
import CLibjansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An object, or runs of an object's members, encoded once, for what many
/// messages repeat word for word (a stored response's headers, and the
/// members of an outcome that are the same for every hit of it): a message
/// made with it (`JSONMessage(estimate:sharing:object:)`) copies its text
/// (`JSONObjectWriter.set(_:shared:or:)`, `set(_:sharedMembers:or:)`)
/// instead of building and encoding them anew.
///
/// The text is jansson's, made as `JSONCodec.encode` makes it, so a message
/// that copies it is byte for byte the one that encodes the same members.
public final class SharedJSON: Sendable {
    /// The object's text; or each run's, the text that follows its first
    /// key.
    let texts: [[UInt8]]
    /// Each run's first key; empty for an object.
    let keys: [[UInt8]]

    /// The bytes the text takes: what holding it costs.
    public var byteCount: Int { texts.reduce(keys.reduce(0) { $0 + $1.count }) { $0 + $1.count } }

    /// An object of string members, whatever order `members` has.
    public init(strings members: [String: String]) {
        var text: [UInt8] = []
        let size = members.reduce(2) { $0 + $1.key.utf8.count + $1.value.utf8.count + 6 }
        JSONCodec.dump(JSONObjectWriter.stringObject(members), precision: 1, into: &text, sizeHint: size)
        texts = [text]
        keys = [[]]
    }

    /// A run of members that messages write word for word: those `members`
    /// writes, keys in byte order from the first, `key`, on. A message
    /// writes them all with `JSONObjectWriter.set(_:sharedMembers:or:)`,
    /// between its own members that sort before `key` and after the run's.
    ///
    /// Nil when `members` writes a real: jansson writes every real of a
    /// message with the digits the message's reals need together, which
    /// text made apart cannot know. Nil too when `members` does not start
    /// with `key`.
    public convenience init?(membersFrom key: StaticString, sizeHint: Int, _ members: @escaping (JSONObjectWriter) -> Void) {
        self.init(runs: [(key, members)], sizeHint: sizeHint)
    }

    /// Runs of members (`init(membersFrom:sizeHint:_:)`), which a message
    /// may copy in one object or in several; nil when any is not made.
    public convenience init?(runs: [(key: StaticString, members: (JSONObjectWriter) -> Void)], sizeHint: Int) {
        var texts: [[UInt8]] = []
        var keys: [[UInt8]] = []
        for run in runs {
            guard let made = Self.run(from: run.key, sizeHint: sizeHint, run.members) else { return nil }
            texts.append(made.text)
            keys.append(made.key)
        }
        guard !texts.isEmpty, texts.count <= Self.maximumTexts else { return nil }
        self.init(texts: texts, keys: keys)
    }

    private init(texts: [[UInt8]], keys: [[UInt8]]) {
        self.texts = texts
        self.keys = keys
    }

    /// The text of the members `members` writes after its first key, `key`,
    /// and the key's bytes.
    private static func run(
        from key: StaticString, sizeHint: Int, _ members: (JSONObjectWriter) -> Void
    ) -> (key: [UInt8], text: [UInt8])? {
        let key = key.withUTF8Buffer { Array($0) }
        var precision = 0
        let root = json_object()!
        withUnsafeMutablePointer(to: &precision) { precision in
            members(JSONObjectWriter(object: root, precision: precision))
        }
        var object: [UInt8] = []
        JSONCodec.dump(root, precision: 1, into: &object, sizeHint: sizeHint)
        // `{"key":` before the first value, `}` after the last.
        let opening = [UInt8(ascii: "{"), UInt8(ascii: "\"")] + key + [UInt8(ascii: "\""), UInt8(ascii: ":")]
        guard !key.isEmpty, precision == 0, object.count > opening.count, object.starts(with: opening),
            object.last == UInt8(ascii: "}")
        else { return nil }
        return (key, Array(object[opening.count..<(object.count - 1)]))
    }

    /// Which text is the run starting with `key`.
    func run(startingWith key: StaticString) -> Int? {
        key.withUTF8Buffer { key in keys.firstIndex { $0.elementsEqual(key) } }
    }

    /// The string a message writes where a shared object's text goes:
    /// 16 hex digits, so jansson writes it as it is, short, as jansson
    /// checks and escapes it byte by byte in every message, and random for
    /// each process, so no client or origin can be expected to send it
    /// (one that does makes the message be written again, never wrong).
    static let placeholder: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        let digits = String(generator.next() as UInt64, radix: 16)
        return Array((String(repeating: "0", count: 16 - digits.utf8.count) + digits).utf8)
    }()

    /// The string a message writes where the text at `index` goes: the
    /// placeholder, and for a later text `-` and its index.
    static let placeholders: [[UInt8]] = (0..<maximumTexts).map { index in
        index == 0 ? placeholder : placeholder + Array("-\(index)".utf8)
    }

    /// At most this many texts, so an index is one digit.
    private static let maximumTexts = 10

    /// A placeholder as a member's value in compact JSON, up to what tells
    /// one from another: after the colon that ends its key, an opening
    /// quote and the placeholder; then `"`, or `-`, a digit and `"`. Only a
    /// string value starting with the placeholder is written so: an escaped
    /// quote (`\"`) follows a backslash, not a colon, and a key is followed
    /// by its colon.
    private static let placeholderValue: [UInt8] = Array(#":""#.utf8) + placeholder

    /// Puts the texts in the place of each placeholder value in `text`
    /// from `start` on, when there are exactly `count` of them, each a
    /// placeholder of one of the texts (the ones the message wrote); false,
    /// and `text` unchanged, when there are not.
    func replace(_ count: Int, in text: inout [UInt8], from start: Int) -> Bool {
        let needle = Self.placeholderValue
        let quote = UInt8(ascii: "\"")
        var found: [(position: Int, end: Int, index: Int)] = []
        found.reserveCapacity(count)
        let valid = text.withUnsafeBytes { bytes in
            needle.withUnsafeBytes { needle in
                // From colon to colon: a message has a few dozen.
                var offset = start
                while offset < bytes.count, found.count <= count,
                    let colon = memchr(bytes.baseAddress! + offset, Int32(UInt8(ascii: ":")), bytes.count - offset)
                {
                    let position = bytes.baseAddress!.distance(to: UnsafeRawPointer(colon))
                    let after = position + needle.count
                    guard bytes.count - position >= needle.count,
                        memcmp(bytes.baseAddress! + position, needle.baseAddress!, needle.count) == 0
                    else {
                        offset = position + 1
                        continue
                    }
                    // `"`, or `-`, a digit naming a text and `"`: any other
                    // string starting with the placeholder is a message's
                    // own, and the count no longer tells.
                    if after < bytes.count, bytes[after] == quote {
                        found.append((position, after + 1, 0))
                    } else if bytes.count - after >= 3, bytes[after] == UInt8(ascii: "-"), bytes[after + 2] == quote,
                        case let digit = Int(bytes[after + 1]) - Int(UInt8(ascii: "0")), digit > 0, digit < texts.count
                    {
                        found.append((position, after + 3, digit))
                    } else {
                        return false
                    }
                    offset = found[found.count - 1].end
                }
                return true
            }
        }
        guard valid, found.count == count else { return false }
        // From the last, so the positions before stay where they were; the
        // colon stays.
        for placeholder in found.reversed() {
            text.replaceSubrange((placeholder.position + 1)..<placeholder.end, with: texts[placeholder.index])
        }
        return true
    }
}
