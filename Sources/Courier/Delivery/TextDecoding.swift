import FoundationEssentials
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

    static func decode(_ bytes: [UInt8], charset: String?) -> String {
        guard let charset, !isUTF8(charset) else {
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let converter = open(charset) else { return String(decoding: bytes, as: UTF8.self) }
        defer { iconv_close(converter) }

        var output: [UInt8] = []
        output.reserveCapacity(bytes.count * 2)
        var scratch = [UInt8](repeating: 0, count: 16 << 10)
        var input = bytes
        input.withUnsafeMutableBufferPointer { inputBuffer in
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
                output.append(contentsOf: scratch[..<produced])
                if result == -1 {
                    if failure == E2BIG { continue }
                    // An invalid or incomplete sequence: replace one byte.
                    output.append(contentsOf: [0xEF, 0xBF, 0xBD])
                    inPointer = inPointer.map { $0 + 1 }
                    inLeft -= 1
                    iconv(converter, nil, nil, nil, nil)
                }
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func isUTF8(_ charset: String) -> Bool {
        let name = charset.lowercased()
        return name == "utf-8" || name == "utf8"
    }
}
