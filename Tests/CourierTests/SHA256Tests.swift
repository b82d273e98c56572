import Testing

@testable import Courier

/// Entry file names are SHA-256 digests of keys, which other processes and
/// tools compute too: the digest is FIPS 180-4's at every padding boundary.
@Suite(.timeLimit(.minutes(1)))
struct SHA256Tests {
    /// Digests (Python's hashlib) of the bytes `(i * 7 + 3) % 256` for i
    /// below each length: one, two and many blocks, and the lengths where
    /// the padding needs a block of its own.
    static let digests: [(length: Int, hex: String)] = [
        (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (3, "6ab0dba1f4f1dfbb37b4f9eeb092c09fca4900ad32bdcd147d8dde35d6c87c35"),
        (55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"),
        (56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"),
        (63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"),
        (64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"),
        (65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"),
        (119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"),
        (120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"),
        (1000, "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"),
    ]

    @Test func digestsMatchAtEveryPaddingBoundary() {
        for (length, hex) in Self.digests {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
            let digest = SHA256.hash(bytes).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            #expect(digest == hex, "length \(length)")
        }
    }

    @Test func hexNamesTheDigestOfTheTextsUTF8() {
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }
}
