import CJanssonShim
import CLibjansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An object encoded once, for members that many messages repeat word for
/// word (a stored response's headers in the outcome of each of its hits): a
/// message made with it (`JSONMessage(estimate:sharing:object:)`) copies
/// its text (`JSONObjectWriter.set(_:shared:or:)`) instead of building and
/// encoding the object anew.
///
/// The text is jansson's, made as `JSONCodec.encode` makes it, so a message
/// that copies it is byte for byte the one that encodes the same members.
public final class SharedJSON: Sendable {
    /// The object's text.
    let text: [UInt8]

    /// The bytes the text takes: what holding it costs.
    public var byteCount: Int { text.count }

    /// An object of string members, whatever order `members` has.
    public init(strings members: [String: String]) {
        var text: [UInt8] = []
        let size = members.reduce(2) { $0 + $1.key.utf8.count + $1.value.utf8.count + 6 }
        JSONCodec.dump(JSONObjectWriter.stringObject(members), precision: 1, into: &text, sizeHint: size)
        self.text = text
    }

    /// The string a message writes where a shared object's text goes:
    /// letters and digits, so jansson writes it as it is, random for each
    /// process, so no client or origin can be expected to send it.
    static let placeholder: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        let digits = (0..<2).map { _ in String(generator.next() as UInt64, radix: 16) }
        return Array("courier-shared-\(digits[0])-\(digits[1])".utf8)
    }()

    /// The placeholder as a member's value in compact JSON: after the
    /// colon that ends its key, in quotes. Only a string value equal to the
    /// placeholder is written so: an escaped quote (`\"`) follows a
    /// backslash, not a colon, and a key is followed by its colon.
    private static let placeholderValue: [UInt8] = Array(#":""#.utf8) + placeholder + [UInt8(ascii: "\"")]

    /// Puts the text in the place of each placeholder value in `text` from
    /// `start` on, when there are exactly `count` of them (the ones the
    /// message wrote); false, and `text` unchanged, when there are not.
    func replace(_ count: Int, in text: inout [UInt8], from start: Int) -> Bool {
        let needle = Self.placeholderValue
        var found: [Int] = []
        found.reserveCapacity(count)
        text.withUnsafeBytes { bytes in
            needle.withUnsafeBytes { needle in
                // From colon to colon: a message has a few dozen.
                var offset = start
                while offset < bytes.count, found.count <= count,
                    let colon = memchr(bytes.baseAddress! + offset, Int32(UInt8(ascii: ":")), bytes.count - offset)
                {
                    let position = bytes.baseAddress!.distance(to: UnsafeRawPointer(colon))
                    if bytes.count - position >= needle.count,
                        memcmp(bytes.baseAddress! + position, needle.baseAddress!, needle.count) == 0
                    {
                        found.append(position)
                        offset = position + needle.count
                    } else {
                        offset = position + 1
                    }
                }
            }
        }
        guard found.count == count else { return false }
        // From the last, so the positions before stay where they were; the
        // colon stays.
        for position in found.reversed() {
            text.replaceSubrange((position + 1)..<(position + needle.count), with: self.text)
        }
        return true
    }
}
