import JSON
import Testing

/// What `encode` writes for the text `bytes` decode to, without the quotes.
private func encodedLength(_ bytes: [UInt8]) -> Int64 {
    Int64(JSONCodec.encode(.string(String(decoding: bytes, as: UTF8.self))).count - 2)
}

@Suite struct JSONStringLengthTests {
    @Test func everyByteAloneCountsAsEncodeWritesIt() {
        for byte in UInt8.min...UInt8.max {
            #expect(JSONStringLength(of: [byte]).count == encodedLength([byte]), "byte \(byte)")
        }
    }

    @Test func escapesCountTheirWholeLength() {
        #expect(JSONStringLength(of: Array("a\"b\\c\n\u{1}".utf8)).count == 15)
        #expect(JSONStringLength(of: [UInt8](repeating: 1, count: 1000)).count == 6000)
        #expect(JSONStringLength(of: Array("héllo ✓ 😀".utf8)).count == Int64("héllo ✓ 😀".utf8.count))
    }

    @Test func illFormedSequencesCountAsTheirReplacement() {
        let cases: [[UInt8]] = [
            [0xC3], [0xE2, 0x9C], [0xF0, 0x9F, 0x98], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80],
            [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xE2, 0x28, 0xA1],
            [0x80, 0xBF, 0x41], [0xF0, 0x9F, 0x22], [0xC3, 0x01],
        ]
        for bytes in cases {
            #expect(JSONStringLength(of: bytes).count == encodedLength(bytes), "\(bytes)")
        }
    }

    @Test func randomBytesCountAsTheirDecodedTextEncodes() {
        var generator = SystemRandomNumberGenerator()
        // Bytes drawn mostly from where UTF-8 has its edges.
        let alphabet: [UInt8] = [0x00, 0x01, 0x0A, 0x22, 0x41, 0x5C, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF]
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 0...24, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            #expect(JSONStringLength(of: bytes).count == encodedLength(bytes), "\(bytes)")
        }
    }

    @Test func piecesCountAsTheWhole() {
        let bytes: [UInt8] = Array("a✓\u{1}😀\"".utf8) + [0xE2, 0x9C, 0x41, 0xF0, 0x9F, 0x98]
        let whole = JSONStringLength(of: bytes).count
        for cut in 0...bytes.count {
            var length = JSONStringLength()
            bytes[..<cut].withUnsafeBytes { length.add($0) }
            bytes[cut...].withUnsafeBytes { length.add($0) }
            #expect(length.count == whole, "cut at \(cut)")
        }
    }
}
