import FoundationEssentials
import Locking

/// SHA-2 digests of one body, by algorithm: those some request's
/// `integrity` named, taken as the body streamed in or read.
struct BodyDigests: Sendable, Equatable {
    private var values: [HashAlgorithm: [UInt8]] = [:]

    init() {}

    subscript(algorithm: HashAlgorithm) -> [UInt8]? {
        get { values[algorithm] }
        set { values[algorithm] = newValue }
    }

    var algorithms: Set<HashAlgorithm> { Set(values.keys) }

    var isEmpty: Bool { values.isEmpty }

    /// These digests and those of `other` that these lack.
    func merging(_ other: BodyDigests) -> BodyDigests {
        var merged = self
        merged.values.merge(other.values) { own, _ in own }
        return merged
    }

    /// The digests of `bytes` for each of `algorithms`.
    static func of(_ bytes: [UInt8], _ algorithms: Set<HashAlgorithm>) -> BodyDigests {
        var digests = BodyDigests()
        for algorithm in algorithms { digests[algorithm] = DigestHasher.hash(bytes, algorithm) }
        return digests
    }

    /// `digest` in Subresource Integrity form: `sha256-<base64>`.
    static func text(_ algorithm: HashAlgorithm, _ digest: [UInt8]) -> String {
        algorithm.rawValue + "-" + base64(digest)
    }

    /// `digest` in padded base64 (RFC 4648 §4).
    static func base64(_ digest: [UInt8]) -> String { Data(digest).base64EncodedString() }

    /// The digest `text` encodes, when it is the canonical padded base64 of
    /// exactly one `algorithm` digest: no other alphabet, no missing or
    /// extra padding, no bits set past the last byte.
    static func digest(base64 text: String, of algorithm: HashAlgorithm) -> [UInt8]? {
        guard let data = Data(base64Encoded: text), data.count == algorithm.digestLength,
            data.base64EncodedString().utf8.elementsEqual(text.utf8)
        else { return nil }
        return Array(data)
    }
}

/// Takes the digests of a body for a set of algorithms as its bytes go by.
///
/// A transfer hands it to the body writer part-way through a large body, so
/// it is `Sendable`: its hashers (libcrypto contexts, each for one thread
/// at a time) are reached only under its lock, which one thread at a time
/// takes, and which lets the compiler check that nothing else reaches them.
final class BodyHasher: Sendable {
    private let hashers: Locked<[DigestHasher]>

    /// Nil for no algorithm: nothing to take, nothing to pay.
    init?(_ algorithms: Set<HashAlgorithm>) {
        guard !algorithms.isEmpty else { return nil }
        hashers = Locked(algorithms.sorted().map(DigestHasher.init))
    }

    func update(_ bytes: RawSpan) {
        hashers.withLock { hashers in
            for hasher in hashers { hasher.update(bytes) }
        }
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        update(bytes.bytes)
    }

    func update(_ bytes: [UInt8]) {
        update(bytes.span.bytes)
    }

    /// The digests of every byte given; the hasher takes no more after it.
    func finalize() -> BodyDigests {
        hashers.withLock { hashers in
            var digests = BodyDigests()
            for hasher in hashers { digests[hasher.algorithm] = hasher.finalize() }
            return digests
        }
    }
}
