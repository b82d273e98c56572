/// The length of the JSON string `JSONCodec.encode` writes for a text,
/// without its quotes, counted from the text's UTF-8 bytes as they arrive,
/// in pieces of any size: what a body delivered as text costs as JSON before
/// it is decoded or encoded.
///
/// `"` and `\` take two bytes, as do the controls with a short escape
/// (`\b`, `\t`, `\n`, `\f`, `\r`); every other control takes six (`\u0001`);
/// every other character is copied (jansson escapes nothing else). Bytes
/// that are not UTF-8 count as the U+FFFD, three bytes, that replaces each
/// maximal ill-formed subsequence when they are decoded
/// (`String(decoding:as:)`), so the length is exact for the text courier
/// would send.
public struct JSONStringLength: Sendable {
    /// The bytes of the complete characters counted so far.
    private var complete: Int64 = 0
    /// Bytes of a multi-byte sequence still to come, and the bytes of it seen.
    private var needed = 0
    private var seen = 0
    /// The range the next byte of that sequence must fall in.
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    public init() {}

    /// The length of `utf8`'s text, all of it.
    public init(of utf8: some Sequence<UInt8>) {
        let counted: Void? = utf8.withContiguousStorageIfAvailable { add(UnsafeRawBufferPointer($0)) }
        if counted == nil {
            for byte in utf8 { add(byte) }
        }
    }

    /// The length of the bytes counted so far, taken as the whole text: a
    /// sequence cut short at the end counts as one U+FFFD.
    public var count: Int64 { complete + (needed > 0 ? 3 : 0) }

    /// The length of the complete characters counted so far: what the text
    /// takes at least, however it goes on.
    public var completeCount: Int64 { complete }

    public mutating func add(_ bytes: UnsafeRawBufferPointer) {
        let bytes = bytes.assumingMemoryBound(to: UInt8.self)
        Self.asciiLengths.withUnsafeBufferPointer { lengths in
            var index = bytes.startIndex
            while index < bytes.endIndex {
                if needed == 0 {
                    // A run of ASCII, the common case, in a loop of its own.
                    var run: Int64 = 0
                    while index < bytes.endIndex, bytes[index] < 0x80 {
                        run += Int64(lengths[Int(bytes[index])])
                        index += 1
                    }
                    complete += run
                    guard index < bytes.endIndex else { return }
                }
                add(bytes[index])
                index += 1
            }
        }
    }

    @inline(__always)
    private mutating func add(_ byte: UInt8) {
        if needed > 0 {
            if byte >= lower, byte <= upper {
                seen += 1
                needed -= 1
                (lower, upper) = (0x80, 0xBF)
                if needed == 0 {
                    complete += Int64(seen)
                    seen = 0
                }
                return
            }
            // The sequence so far is a maximal ill-formed subsequence; this
            // byte starts anew.
            complete += 3
            (needed, seen, lower, upper) = (0, 0, 0x80, 0xBF)
        }
        switch byte {
        case 0x00..<0x80:
            complete += Int64(Self.asciiLengths[Int(byte)])
        case 0xC2...0xDF:
            start(needing: 1)
        case 0xE0:
            start(needing: 2, lower: 0xA0)
        case 0xE1...0xEC, 0xEE...0xEF:
            start(needing: 2)
        case 0xED:
            start(needing: 2, upper: 0x9F)
        case 0xF0:
            start(needing: 3, lower: 0x90)
        case 0xF1...0xF3:
            start(needing: 3)
        case 0xF4:
            start(needing: 3, upper: 0x8F)
        default:
            // A continuation byte without a start, or a byte UTF-8 never uses.
            complete += 3
        }
    }

    private mutating func start(needing count: Int, lower: UInt8 = 0x80, upper: UInt8 = 0xBF) {
        (needed, seen, self.lower, self.upper) = (count, 1, lower, upper)
    }

    /// What each ASCII byte takes in a JSON string as jansson writes it.
    private static let asciiLengths: [UInt8] = (0..<128).map { byte in
        switch byte {
        case 0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x22, 0x5C: 2
        case 0..<0x20: 6
        default: 1
        }
    }
}
