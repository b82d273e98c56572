import CLibcrypto

/// The hash functions of W3C Subresource Integrity, weakest first: SHA-256,
/// SHA-384 and SHA-512 (FIPS 180-4), computed by OpenSSL's libcrypto.
enum HashAlgorithm: String, CaseIterable, Comparable, Sendable {
    case sha256
    case sha384
    case sha512

    /// Bytes in a digest.
    var digestLength: Int {
        switch self {
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// libcrypto's implementation, fetched once: OpenSSL 3 otherwise looks
    /// the algorithm up in its providers, under a lock, on every digest it
    /// starts, and a disk cache lookup starts one for its key.
    var implementation: OpaquePointer {
        switch self {
        case .sha256: Self.sha256Implementation
        case .sha384: Self.sha384Implementation
        case .sha512: Self.sha512Implementation
        }
    }

    // An EVP_MD is immutable once fetched and may be shared by every thread
    // (OpenSSL's "Multi-threading" notes); these are never freed.
    nonisolated(unsafe) private static let sha256Implementation = fetch("SHA2-256", else: EVP_sha256())
    nonisolated(unsafe) private static let sha384Implementation = fetch("SHA2-384", else: EVP_sha384())
    nonisolated(unsafe) private static let sha512Implementation = fetch("SHA2-512", else: EVP_sha512())

    private static func fetch(_ name: String, else builtIn: OpaquePointer?) -> OpaquePointer {
        guard let implementation = EVP_MD_fetch(nil, name, nil) ?? builtIn else {
            fatalError("libcrypto has no \(name)")
        }
        return implementation
    }

    static func < (lhs: HashAlgorithm, rhs: HashAlgorithm) -> Bool { lhs.digestLength < rhs.digestLength }
}
