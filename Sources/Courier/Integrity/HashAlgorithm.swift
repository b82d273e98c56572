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

    /// libcrypto's implementation: its built-in method table, which is
    /// constant and which any thread may use. OpenSSL 3 looks the provider's
    /// implementation up for it as each digest starts (about half a
    /// microsecond, under a read lock), which only downloads and cache hits
    /// that check an `integrity` pay.
    var implementation: OpaquePointer? {
        switch self {
        case .sha256: EVP_sha256()
        case .sha384: EVP_sha384()
        case .sha512: EVP_sha512()
        }
    }

    static func < (lhs: HashAlgorithm, rhs: HashAlgorithm) -> Bool { lhs.digestLength < rhs.digestLength }
}
