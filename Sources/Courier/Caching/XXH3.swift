import CLibxxhash

/// XXH3-64 (seed 0), libxxhash's, on x86-64 with the vector unit the
/// processor has (AVX2 where there is one): the checksum of disk cache
/// entries, taken as bodies stream in and again whenever a stored body is
/// read.
///
/// A hash is used on one thread, and the compiler holds it to that: it is
/// not `Sendable`. What goes from one thread to another (a kept body's hash
/// from the partial store to the transfer that continues it, and back when
/// that transfer ends short) is its `state`, a value.
final class XXH3 {
    private let context: OpaquePointer

    init() {
        context = Self.makeContext()
        XXH3_64bits_reset(context)
    }

    /// A hash that goes on from `state`.
    init(continuing state: State) {
        context = Self.makeContext()
        state.bytes.withUnsafeBytes { bytes in
            UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(context), count: State.size).copyMemory(from: bytes)
        }
    }

    private static func makeContext() -> OpaquePointer {
        guard let context = XXH3_createState() else { fatalError("out of memory") }
        return context
    }

    deinit { XXH3_freeState(context) }

    /// The hash state of the bytes given so far.
    var state: State {
        State(bytes: Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(context), count: State.size)))
    }

    /// The state of an XXH3-64 hash, as a value any thread may hold:
    /// libxxhash's state copied byte for byte, as `XXH3_copyState` copies
    /// it. It holds the address of libxxhash's default secret, so it means
    /// something only in this process, and is never written anywhere.
    struct State: Sendable {
        fileprivate static let size = courier_xxh3_state_size()
        fileprivate let bytes: [UInt8]
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        #if arch(x86_64)
        XXH3_64bits_update_dispatch(context, base, bytes.count)
        #else
        XXH3_64bits_update(context, base, bytes.count)
        #endif
    }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// `update` for a hash a lock guards: a span cannot be kept, so the
    /// compiler knows the hash keeps nothing of what it is given.
    func update(_ bytes: RawSpan) {
        bytes.withUnsafeBytes { update($0) }
    }

    func finalize() -> UInt64 { XXH3_64bits_digest(context) }

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

@available(*, unavailable)
extension XXH3: Sendable {}
