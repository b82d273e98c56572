import FoundationEssentials
import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decodes bodies to text with iconv, which knows every IANA charset name.
/// Invalid sequences become U+FFFD; decoding never fails.
enum TextDecoding {
    static func isSupported(_ charset: String) -> Bool {
        if isUTF8(charset) { return true }
        guard let converter = open(charset) else { return false }
        iconv_close(converter)
        return true
    }

    /// Names in common use that iconv spells otherwise.
    private static let aliases = ["latin-1": "LATIN1", "x-sjis": "SHIFT_JIS", "x-euc-jp": "EUC-JP", "unicode-1-1-utf-8": "UTF-8"]

    private static func open(_ charset: String) -> iconv_t? {
        for name in [charset, aliases[charset.lowercased()]].compactMap({ $0 }) {
            let converter = iconv_open("UTF-8", name)
            if converter != iconv_t(bitPattern: -1) { return converter }
        }
        return nil
    }

    /// The `charset` parameter of a Content-Type value.
    static func charset(ofContentType contentType: String?) -> String? {
        guard let contentType else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingBlanks.lowercased() == "charset" else { continue }
            let value = pair[1].trimmingBlanks
            let isQuote = { (character: Character) in character == "\"" || character == "'" }
            guard let first = value.firstIndex(where: { !isQuote($0) }) else { return "" }
            return String(value[first...value.lastIndex(where: { !isQuote($0) })!])
        }
        return nil
    }

    /// `bytes` as text, or nil when its JSON string would take more than
    /// `jsonLimit` bytes (`JSONStringLength`): measured before anything is
    /// made for UTF-8, and as iconv's output grows for other charsets, so
    /// no text beyond the limit is ever held.
    static func decode(_ bytes: [UInt8], charset: String?, jsonLimit: Int64) -> String? {
        guard let charset, !isUTF8(charset), let converter = open(charset) else {
            guard JSONStringLength(of: bytes).count <= jsonLimit else { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
        defer { iconv_close(converter) }

        var output: [UInt8] = []
        output.reserveCapacity(Int(min(Int64(bytes.count) * 2, jsonLimit)))
        var length = JSONStringLength()
        var scratch = [UInt8](repeating: 0, count: 16 << 10)
        var input = bytes
        let fits = input.withUnsafeMutableBufferPointer { inputBuffer in
            var inPointer: UnsafeMutablePointer<CChar>? = UnsafeMutableRawPointer(inputBuffer.baseAddress)?
                .assumingMemoryBound(to: CChar.self)
            var inLeft = inputBuffer.count
            while inLeft > 0 {
                let (result, produced, failure) = scratch.withUnsafeMutableBytes { outBuffer in
                    var outPointer: UnsafeMutablePointer<CChar>? = outBuffer.baseAddress?.assumingMemoryBound(to: CChar.self)
                    var outLeft = outBuffer.count
                    let result = iconv(converter, &inPointer, &inLeft, &outPointer, &outLeft)
                    return (result, outBuffer.count - outLeft, errno)
                }
                var made = scratch[..<produced]
                if result == -1, failure != E2BIG {
                    // An invalid or incomplete sequence: replace one byte.
                    made += [0xEF, 0xBF, 0xBD]
                    inPointer = inPointer.map { $0 + 1 }
                    inLeft -= 1
                    iconv(converter, nil, nil, nil, nil)
                }
                made.withUnsafeBytes { length.add($0) }
                if length.completeCount > jsonLimit { return false }
                output.append(contentsOf: made)
            }
            return length.count <= jsonLimit
        }
        return fits ? String(decoding: output, as: UTF8.self) : nil
    }

    /// Whether a text in `charset` is decoded as UTF-8: named so, or none named.
    static func isUTF8(_ charset: String?) -> Bool {
        guard let name = charset?.lowercased() else { return true }
        return name == "utf-8" || name == "utf8"
    }
}
