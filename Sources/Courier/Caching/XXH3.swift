import CLibxxhash

/// XXH3-64 (seed 0), libxxhash's, on x86-64 with the vector unit the
/// processor has (AVX2 where there is one): the checksum of disk cache
/// entries, taken as bodies stream in and again whenever a stored body is
/// read.
final class XXH3 {
    private let state: OpaquePointer

    init() {
        state = Self.makeState()
        XXH3_64bits_reset(state)
    }

    /// A hash that goes on from where `other` is.
    init(continuing other: XXH3) {
        state = Self.makeState()
        XXH3_copyState(state, other.state)
    }

    private static func makeState() -> OpaquePointer {
        guard let state = XXH3_createState() else { fatalError("out of memory") }
        return state
    }

    deinit { XXH3_freeState(state) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        #if arch(x86_64)
        XXH3_64bits_update_dispatch(state, base, bytes.count)
        #else
        XXH3_64bits_update(state, base, bytes.count)
        #endif
    }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    func finalize() -> UInt64 { XXH3_64bits_digest(state) }

    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        #if arch(x86_64)
        XXH3_64bits_dispatch(bytes.baseAddress, bytes.count)
        #else
        XXH3_64bits(bytes.baseAddress, bytes.count)
        #endif
    }

    static func hash(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// The checksum of no bytes.
    static let empty = hash([])
}
