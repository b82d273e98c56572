import Synchronization

/// Suffixes for the names of temporary files, distinct within the
/// process and not guessable from outside it before one is seen:
/// SplitMix64's output function over a counter that starts at a seed drawn
/// once from the system's generator. A name costs no system call, where
/// `UInt64.random` asks the kernel (`getrandom`) every time. Files by these
/// names are made with `O_EXCL`, so a name guessed and taken first makes a
/// write fail, never go astray.
enum NameSuffix {
    private static let seed = UInt64.random(in: 0...UInt64.max)
    private static let counter = Atomic<UInt64>(0)

    /// The next suffix: a bijection of the counter, so never one given
    /// before in this process.
    static func next() -> UInt64 {
        var z = seed &+ counter.add(1, ordering: .relaxed).newValue &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
