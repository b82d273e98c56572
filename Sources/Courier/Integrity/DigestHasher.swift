import CLibcrypto

/// One SHA-2 digest taken as bytes arrive, by libcrypto (whose SHA-256 uses
/// the processor's SHA extensions where it has them).
final class DigestHasher {
    let algorithm: HashAlgorithm
    private let context: OpaquePointer

    init(_ algorithm: HashAlgorithm) {
        self.algorithm = algorithm
        guard let context = EVP_MD_CTX_new() else { fatalError("out of memory") }
        self.context = context
        guard EVP_DigestInit_ex(context, algorithm.implementation, nil) == 1 else {
            fatalError("libcrypto cannot start a \(algorithm.rawValue) digest")
        }
    }

    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// `update` for a hasher a lock guards: a span cannot be kept, so the
    /// compiler knows the hasher keeps nothing of what it is given.
    func update(_ bytes: RawSpan) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of every byte given; the hasher takes no more after it.
    func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: algorithm.digestLength)
        EVP_DigestFinal_ex(context, &digest, nil)
        return digest
    }

    /// The digest of `bytes`.
    static func hash(_ bytes: UnsafeRawBufferPointer, _ algorithm: HashAlgorithm) -> [UInt8] {
        let hasher = DigestHasher(algorithm)
        hasher.update(bytes)
        return hasher.finalize()
    }

    static func hash(_ bytes: [UInt8], _ algorithm: HashAlgorithm) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0, algorithm) }
    }
}
