/// The format and size of a PNG, JPEG, GIF or WebP body, read from its first
/// bytes.
struct ImageInfo: Sendable, Equatable {
    var format: String
    var width: Int
    var height: Int

    /// Bytes enough to find the size of any of the four formats in practice.
    static let sniffLength = 64 << 10

    /// The image `bytes` start with, or nil. The bytes come from the
    /// origin: every read is bounds-checked and every size is computed from
    /// at most four bytes, so no header traps or overflows. Made for every
    /// body, most of them no image: a body that is none is told apart
    /// without allocating.
    static func sniff(_ bytes: [UInt8]) -> ImageInfo? {
        png(bytes) ?? gif(bytes) ?? webp(bytes) ?? jpeg(bytes)
    }

    private static func png(_ b: [UInt8]) -> ImageInfo? {
        guard b.count >= 24, b.starts(with: pngSignature),
            b[12..<16].elementsEqual("IHDR".utf8)
        else { return nil }
        // PNG sizes are 1...2^31 - 1; others are a corrupt header.
        let (width, height) = (be32(b, 16), be32(b, 20))
        guard (1...Int(Int32.max)).contains(width), (1...Int(Int32.max)).contains(height) else { return nil }
        return ImageInfo(format: "png", width: width, height: height)
    }

    private static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    private static func gif(_ b: [UInt8]) -> ImageInfo? {
        guard b.count >= 10, b.starts(with: "GIF87a".utf8) || b.starts(with: "GIF89a".utf8) else { return nil }
        return ImageInfo(format: "gif", width: Int(b[6]) | Int(b[7]) << 8, height: Int(b[8]) | Int(b[9]) << 8)
    }

    private static func webp(_ b: [UInt8]) -> ImageInfo? {
        guard b.count >= 30, b.starts(with: "RIFF".utf8), b[8..<12].elementsEqual("WEBP".utf8) else { return nil }
        let chunk = b[12..<16]
        if chunk.elementsEqual("VP8 ".utf8) {
            guard b[23] == 0x9D, b[24] == 0x01, b[25] == 0x2A else { return nil }
            return ImageInfo(format: "webp", width: (Int(b[26]) | Int(b[27]) << 8) & 0x3FFF, height: (Int(b[28]) | Int(b[29]) << 8) & 0x3FFF)
        }
        if chunk.elementsEqual("VP8L".utf8) {
            guard b[20] == 0x2F else { return nil }
            let bits = Int(b[21]) | Int(b[22]) << 8 | Int(b[23]) << 16 | Int(b[24]) << 24
            return ImageInfo(format: "webp", width: (bits & 0x3FFF) + 1, height: ((bits >> 14) & 0x3FFF) + 1)
        }
        if chunk.elementsEqual("VP8X".utf8) {
            let width = (Int(b[24]) | Int(b[25]) << 8 | Int(b[26]) << 16) + 1
            let height = (Int(b[27]) | Int(b[28]) << 8 | Int(b[29]) << 16) + 1
            return ImageInfo(format: "webp", width: width, height: height)
        }
        return nil
    }

    private static func jpeg(_ b: [UInt8]) -> ImageInfo? {
        guard b.count >= 4, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var i = 2
        while i + 9 < b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF { i += 1; continue }
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { i += 2; continue }
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            if (0xC0...0xCF).contains(marker), marker != 0xC4, marker != 0xC8, marker != 0xCC {
                return ImageInfo(format: "jpeg", width: Int(b[i + 7]) << 8 | Int(b[i + 8]), height: Int(b[i + 5]) << 8 | Int(b[i + 6]))
            }
            i += 2 + length
        }
        return nil
    }

    private static func be32(_ b: [UInt8], _ at: Int) -> Int {
        Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3])
    }
}
