import Testing

@testable import Courier

/// The digests libcrypto takes for courier: entry file names (SHA-256 of
/// keys, which other processes and tools compute too) and `integrity`
/// (SHA-256, SHA-384, SHA-512), against FIPS 180's known answers.
@Suite(.timeLimit(.minutes(1)))
struct DigestHasherTests {
    /// Digests (Python's hashlib) of the bytes `(i * 7 + 3) % 256` for i
    /// below each length: one, two and many blocks, and the lengths where
    /// the padding needs a block of its own.
    static let sha256Digests: [(length: Int, hex: String)] = [
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

    /// FIPS 180-2's examples: "abc", and a million "a".
    static let fipsDigests: [(algorithm: HashAlgorithm, abc: String, millionA: String)] = [
        (
            .sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        ),
        (
            .sha384,
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
            "9d0e1809716474cb086e834e310a4a1ced149e9c00f248527972cec5704c2a5b07b8b3dc38ecc4ebae97ddd87f3d8985"
        ),
        (
            .sha512,
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973ebde0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b"
        ),
    ]

    private static func hex(_ digest: [UInt8]) -> String {
        digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    @Test func sha256MatchesAtEveryPaddingBoundary() {
        for (length, hex) in Self.sha256Digests {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
            #expect(Self.hex(DigestHasher.hash(bytes, .sha256)) == hex, "length \(length)")
        }
    }

    @Test(arguments: fipsDigests.indices)
    func eachAlgorithmGivesFIPSKnownAnswers(_ index: Int) {
        let (algorithm, abc, millionA) = Self.fipsDigests[index]
        #expect(Self.hex(DigestHasher.hash(Array("abc".utf8), algorithm)) == abc)
        #expect(DigestHasher.hash(Array("abc".utf8), algorithm).count == algorithm.digestLength)
        // Fed in uneven pieces, across block boundaries, the same digest.
        let hasher = DigestHasher(algorithm)
        let piece = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        var fed = 0
        var size = 1
        while fed < 1_000_000 {
            let count = min(size, piece.count, 1_000_000 - fed)
            piece.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            fed += count
            size = size % 997 + 13
        }
        #expect(Self.hex(hasher.finalize()) == millionA)
    }

    @Test func bodyHasherTakesEachAlgorithmAskedForAndNoOther() throws {
        // Given a hasher for two algorithms fed "abc" in two pieces
        let hasher = try #require(BodyHasher([.sha512, .sha256]))
        hasher.update(Array("a".utf8))
        hasher.update(Array("bc".utf8))
        // Then it gives both digests, and none of the third
        let digests = hasher.finalize()
        #expect(digests.algorithms == [.sha256, .sha512])
        #expect(digests[.sha256].map(Self.hex) == Self.fipsDigests[0].abc)
        #expect(digests[.sha512].map(Self.hex) == Self.fipsDigests[2].abc)
        #expect(digests == BodyDigests.of(Array("abc".utf8), [.sha256, .sha512]))
        // And no algorithm makes no hasher at all
        #expect(BodyHasher([]) == nil)
    }
}
