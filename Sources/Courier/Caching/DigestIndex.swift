/// The keys of stored entries by their bodies' digests, for content
/// addressing: a download with `integrity` is answered from any stored body
/// with that digest, whatever URL it was stored under.
///
/// A hint, never a proof: it says where a body with a digest was recorded,
/// and whoever follows it reads the entry's own record and hashes the body
/// before serving it. A key stays under the digests it was last recorded
/// with until it is recorded again or removed; a key whose entry has gone
/// or changed since only costs the lookup that finds out.
struct DigestIndex: Sendable {
    private struct Digest: Hashable, Sendable {
        var algorithm: HashAlgorithm
        var bytes: [UInt8]
    }

    /// Keys by digest, the most recently recorded last.
    private var keysByDigest: [Digest: [String]] = [:]
    /// What each key was recorded with, so recording it again or removing
    /// it leaves no key under a digest its entry no longer has.
    private var digestsByKey: [ExactString: BodyDigests] = [:]

    /// Entries indexed.
    var count: Int { digestsByKey.count }

    /// `key`'s entry now holds a body with `digests` (none: it is no longer
    /// indexed).
    mutating func record(key: String, digests: BodyDigests) {
        let exact = ExactString(key)
        if let old = digestsByKey[exact] {
            if old == digests { return }
            unlist(key, old)
        }
        guard !digests.isEmpty else {
            digestsByKey[exact] = nil
            return
        }
        digestsByKey[exact] = digests
        for algorithm in digests.algorithms {
            keysByDigest[Digest(algorithm: algorithm, bytes: digests[algorithm]!), default: []].append(key)
        }
    }

    mutating func remove(key: String) {
        guard let old = digestsByKey.removeValue(forKey: ExactString(key)) else { return }
        unlist(key, old)
    }

    mutating func removeAll() {
        keysByDigest = [:]
        digestsByKey = [:]
    }

    /// The keys whose body was recorded with `digest` by `algorithm`, the
    /// most recently recorded first.
    func keys(_ algorithm: HashAlgorithm, _ digest: [UInt8]) -> [String] {
        (keysByDigest[Digest(algorithm: algorithm, bytes: digest)] ?? []).reversed()
    }

    private mutating func unlist(_ key: String, _ digests: BodyDigests) {
        for algorithm in digests.algorithms {
            let digest = Digest(algorithm: algorithm, bytes: digests[algorithm]!)
            keysByDigest[digest]?.removeAll { $0.isExactly(key) }
            if keysByDigest[digest]?.isEmpty == true { keysByDigest[digest] = nil }
        }
    }
}
