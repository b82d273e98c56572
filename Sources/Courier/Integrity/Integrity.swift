import FoundationEssentials

/// A download's `integrity`: W3C Subresource Integrity metadata, what the
/// body must hash to.
///
/// Read on bytes as the specification's "parse metadata" reads it: tokens
/// separated by ASCII whitespace, each `<algorithm>-<base64>` with options
/// after a `?` that are ignored (none is defined). Tokens of an algorithm
/// other than sha256, sha384 and sha512 are ignored; of those three the
/// strongest present decides, and the body matches when its digest is any
/// of that algorithm's. Stricter than a browser, where a browser would
/// quietly drop what it cannot read: a byte outside printable ASCII and
/// whitespace, a digest of a known algorithm that is not the canonical
/// base64 (RFC 4648 §4, padded) of exactly its length, or no digest of a
/// known algorithm at all, make the whole value malformed.
struct Integrity: Sendable {
    /// The strongest algorithm named: it alone decides.
    let algorithm: HashAlgorithm
    /// Its digests, in the order given: the body must match one of them.
    let digests: [[UInt8]]

    /// Why an `integrity` cannot be used.
    struct Malformed: Error {
        var message: String
    }

    init(parsing text: String) throws(Malformed) {
        var found: [(algorithm: HashAlgorithm, digest: [UInt8])] = []
        for token in text.utf8.split(whereSeparator: Self.isWhitespace) {
            guard token.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw Malformed(message: "integrity holds a byte that is neither printable ASCII nor whitespace")
            }
            let expression = token.prefix { $0 != UInt8(ascii: "?") }
            let dash = expression.firstIndex(of: UInt8(ascii: "-"))
            guard let algorithm = Self.algorithm(named: expression[..<(dash ?? expression.endIndex)]) else { continue }
            let value = dash.map { expression[expression.index(after: $0)...] } ?? expression[expression.endIndex...]
            guard let digest = BodyDigests.digest(base64: String(decoding: value, as: UTF8.self), of: algorithm) else {
                throw Malformed(
                    message: "the \(algorithm.rawValue) digest in integrity is not the base64 of \(algorithm.digestLength) bytes")
            }
            found.append((algorithm, digest))
        }
        guard let strongest = found.map(\.algorithm).max() else {
            throw Malformed(message: "integrity names no sha256, sha384 or sha512 digest")
        }
        algorithm = strongest
        digests = found.filter { $0.algorithm == strongest }.map(\.digest)
    }

    /// Whether a body whose digest by `algorithm` is `digest` matches.
    func matches(_ digest: [UInt8]) -> Bool { digests.contains(digest) }

    /// What the request gave for the deciding algorithm, in Subresource
    /// Integrity form, separated by spaces.
    var expected: String { digests.map { BodyDigests.text(algorithm, $0) }.joined(separator: " ") }

    /// The failure of a body whose digests are `body`, or nil when it
    /// matches: `integrity_mismatch` with what was expected and what the
    /// body hashed to. A body whose digest by the deciding algorithm was not
    /// taken never matches.
    func mismatch(in body: BodyDigests) -> TransferFailure? {
        let actual = body[algorithm]
        if let actual, matches(actual) { return nil }
        let actualText = actual.map { BodyDigests.text(algorithm, $0) }
        return TransferFailure(
            code: .integrityMismatch,
            message: "the body's \(algorithm.rawValue) digest is \(actualText ?? "unknown"), not \(expected)",
            expected: expected, actual: actualText)
    }

    /// HTML's ASCII whitespace, which separates tokens.
    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0C || byte == 0x0D
    }

    /// The algorithm `name` names, ASCII case ignored as ABNF ignores it.
    private static func algorithm(named name: Substring.UTF8View) -> HashAlgorithm? {
        HashAlgorithm.allCases.first { algorithm in
            name.elementsEqual(algorithm.rawValue.utf8) { ((0x41...0x5A).contains($0) ? $0 | 0x20 : $0) == $1 }
        }
    }
}
