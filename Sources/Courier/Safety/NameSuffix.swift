import Synchronization

/// Suffixes for the names of temporary files, not guessable from outside
/// the process even after others have been seen: a keyed hash (the standard
/// library's SipHash, whose key each process draws at start) of a secret
/// seed and a counter. A name costs no system call,
/// where `UInt64.random` asks the kernel (`getrandom`) every time. Files by
/// these names are made with `O_EXCL`, so a name taken first makes a write
/// fail, never go astray.
enum NameSuffix {
    private static let seed = UInt64.random(in: 0...UInt64.max)
    private static let counter = Atomic<UInt64>(0)

    static func next() -> UInt64 {
        var hasher = Hasher()
        hasher.combine(seed)
        hasher.combine(counter.add(1, ordering: .relaxed).newValue)
        return UInt64(UInt(bitPattern: hasher.finalize()))
    }
}
