import Testing

@testable import Courier

/// `integrity` read as W3C Subresource Integrity metadata, and the check of
/// a body's digests against it.
@Suite(.timeLimit(.minutes(1)))
struct IntegrityTests {
    /// The specification's own example: the digests of
    /// `alert('Hello, world.');`.
    static let body = Array("alert('Hello, world.');".utf8)
    static let sha256 = "sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng="
    static let sha384 = "sha384-H8BRh8j48O9oYatfu5AZzq6A9RINhZO5H16dQZngK7T62em8MUt1FLm52t+eX6xO"
    static let sha512 = "sha512-Q2bFTOhEALkN8hOms2FKTDLy7eugP2zFZ1T8LCvX42Fp3WoNr3bjZSAHeOsHrbV1Fu9/A0EzCinRE7Af1ofPrw=="
    /// Well-formed digests of other bytes.
    static let otherSHA256 = "sha256-" + BodyDigests.base64(DigestHasher.hash([1], .sha256))
    static let otherSHA512 = "sha512-" + BodyDigests.base64(DigestHasher.hash([1], .sha512))

    private static func digests(of bytes: [UInt8] = body) -> BodyDigests {
        BodyDigests.of(bytes, Set(HashAlgorithm.allCases))
    }

    @Test(arguments: [sha256, sha384, sha512])
    func eachAlgorithmsDigestOfTheBodyMatches(_ text: String) throws {
        let integrity = try Integrity(parsing: text)
        #expect(integrity.expected == text)
        #expect(integrity.mismatch(in: Self.digests()) == nil)
        #expect(integrity.mismatch(in: Self.digests(of: [1])) != nil)
    }

    @Test func theStrongestAlgorithmDecidesAndAnyOfItsDigestsMatches() throws {
        // Given a right sha256, a wrong sha512 and a right sha512, in any order
        let integrity = try Integrity(parsing: "\(Self.otherSHA512)\t\(Self.sha256)\n \(Self.sha512) ")
        // Then sha512 decides, with both its digests
        #expect(integrity.algorithm == .sha512)
        #expect(integrity.digests.count == 2)
        #expect(integrity.expected == "\(Self.otherSHA512) \(Self.sha512)")
        #expect(integrity.mismatch(in: Self.digests()) == nil)
        // And a right sha256 does not save a body whose sha512 is wrong
        let wrong = try Integrity(parsing: "\(Self.sha256) \(Self.otherSHA512)")
        let failure = try #require(wrong.mismatch(in: Self.digests()))
        #expect(failure.code == .integrityMismatch)
        #expect(failure.expected == Self.otherSHA512)
        #expect(failure.actual == Self.sha512)
    }

    @Test func unknownAlgorithmsAndOptionsAreIgnored() throws {
        // SRI: tokens of algorithms the agent does not know are skipped, as
        // are options after `?` (none is defined), however they are spelt.
        let integrity = try Integrity(parsing: "md5-xyz sha1 sha3-256-@@ \(Self.sha384)?ct=application/javascript?x sha999-")
        #expect(integrity.algorithm == .sha384)
        #expect(integrity.expected == Self.sha384)
        #expect(integrity.mismatch(in: Self.digests()) == nil)
        // Algorithm names are ASCII case-insensitive, as ABNF strings are.
        #expect(try Integrity(parsing: "SHA256-" + Self.sha256.dropFirst(7)).algorithm == .sha256)
    }

    @Test func aDigestNotTakenNeverMatches() throws {
        let integrity = try Integrity(parsing: Self.sha384)
        let failure = try #require(integrity.mismatch(in: BodyDigests.of(Self.body, [.sha256])))
        #expect(failure.code == .integrityMismatch)
        #expect(failure.actual == nil)
    }

    /// Every way an `integrity` is refused: -32602 for the request.
    static let malformed: [(text: String, message: String)] = [
        ("", "names no sha256, sha384 or sha512"),
        (" \t\n", "names no sha256, sha384 or sha512"),
        ("md5-AAAA sha1-AAAA", "names no sha256, sha384 or sha512"),
        ("sha256", "not the base64 of 32 bytes"),
        ("sha256-", "not the base64 of 32 bytes"),
        ("sha256-?opt", "not the base64 of 32 bytes"),
        // Not base64: other alphabets, stray characters, the SRI separator
        (String(sha256.dropLast(2)) + "_=", "not the base64 of 32 bytes"),
        (String(sha256.map { $0 == "+" ? "-" : $0 }), "not the base64 of 32 bytes"),
        (String(sha256.dropLast()) + ".", "not the base64 of 32 bytes"),
        (String(sha256.dropLast()) + "==", "not the base64 of 32 bytes"),
        // Padding missing, or bits past the last byte set
        (String(sha256.dropLast()), "not the base64 of 32 bytes"),
        (String(sha256.dropLast(2)) + "h=", "not the base64 of 32 bytes"),
        (String(sha512.dropLast(2)), "not the base64 of 64 bytes"),
        // The wrong length for the algorithm named
        ("sha256-" + sha384.dropFirst(7), "not the base64 of 32 bytes"),
        ("sha512-" + sha256.dropFirst(7), "not the base64 of 64 bytes"),
        ("sha384-", "not the base64 of 48 bytes"),
        // A malformed digest of a known algorithm beside a good one
        ("\(sha512) sha256-AAAA", "not the base64 of 32 bytes"),
        // Bytes outside printable ASCII and whitespace, even in options
        ("\(sha256)\u{0}", "neither printable ASCII nor whitespace"),
        ("\(sha256)?\u{7F}", "neither printable ASCII nor whitespace"),
        ("\(sha256)\u{0B}", "neither printable ASCII nor whitespace"),
        ("\(sha256)\u{A0}", "neither printable ASCII nor whitespace"),
        ("sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng\u{FF1D}", "neither printable ASCII nor whitespace"),
    ]

    @Test(arguments: malformed.indices)
    func malformedIntegrityIsRefused(_ index: Int) {
        let (text, message) = Self.malformed[index]
        #expect(throws: Integrity.Malformed.self, "\(text.debugDescription)") { try Integrity(parsing: text) }
        do {
            _ = try Integrity(parsing: text)
        } catch {
            #expect(error.message.contains(message), "\(text.debugDescription): \(error.message)")
        }
    }

    @Test func digestsReadBackOnlyFromCanonicalBase64OfTheirLength() {
        let digest = DigestHasher.hash(Self.body, .sha256)
        #expect(BodyDigests.digest(base64: BodyDigests.base64(digest), of: .sha256) == digest)
        #expect(BodyDigests.digest(base64: BodyDigests.base64(digest), of: .sha384) == nil)
        #expect(BodyDigests.digest(base64: String(BodyDigests.base64(digest).dropLast()), of: .sha256) == nil)
        #expect(BodyDigests.digest(base64: " " + BodyDigests.base64(digest), of: .sha256) == nil)
    }
}
