/// XXH64 (seed 0), computed incrementally: the checksum of disk cache
/// entries. Fast enough to verify every body on every read.
struct XXH64 {
    private static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    private var v1: UInt64 = p1 &+ p2
    private var v2: UInt64 = p2
    private var v3: UInt64 = 0
    private var v4: UInt64 = 0 &- p1
    /// Bytes not yet folded into a 32-byte stripe.
    private var buffer = [UInt8](repeating: 0, count: 32)
    private var buffered = 0
    private var total: UInt64 = 0

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var base = bytes.baseAddress, !bytes.isEmpty else { return }
        var count = bytes.count
        total &+= UInt64(count)
        if buffered > 0 {
            let take = min(32 - buffered, count)
            buffer.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: buffered).copyMemory(from: base, byteCount: take) }
            buffered += take
            base += take
            count -= take
            guard buffered == 32 else { return }
            buffer.withUnsafeBytes { stripe($0.baseAddress!) }
            buffered = 0
        }
        while count >= 32 {
            stripe(base)
            base += 32
            count -= 32
        }
        if count > 0 {
            buffer.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: base, byteCount: count) }
            buffered = count
        }
    }

    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    func finalize() -> UInt64 {
        var h: UInt64
        if total >= 32 {
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            for v in [v1, v2, v3, v4] {
                h ^= Self.round(0, v)
                h = h &* Self.p1 &+ Self.p4
            }
        } else {
            h = Self.p5
        }
        h &+= total
        var index = 0
        while index + 8 <= buffered {
            h ^= Self.round(0, load64(index))
            h = rotl(h, 27) &* Self.p1 &+ Self.p4
            index += 8
        }
        if index + 4 <= buffered {
            h ^= UInt64(load32(index)) &* Self.p1
            h = rotl(h, 23) &* Self.p2 &+ Self.p3
            index += 4
        }
        while index < buffered {
            h ^= UInt64(buffer[index]) &* Self.p5
            h = rotl(h, 11) &* Self.p1
            index += 1
        }
        h ^= h >> 33
        h = h &* Self.p2
        h ^= h >> 29
        h = h &* Self.p3
        h ^= h >> 32
        return h
    }

    static func hash(_ bytes: [UInt8]) -> UInt64 {
        var hasher = XXH64()
        hasher.update(bytes)
        return hasher.finalize()
    }

    private mutating func stripe(_ base: UnsafeRawPointer) {
        v1 = Self.round(v1, UInt64(littleEndian: base.loadUnaligned(as: UInt64.self)))
        v2 = Self.round(v2, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        v3 = Self.round(v3, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
        v4 = Self.round(v4, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
    }

    private static func round(_ accumulator: UInt64, _ input: UInt64) -> UInt64 {
        let mixed = accumulator &+ input &* p2
        return (mixed << 31 | mixed >> 33) &* p1
    }

    private func load64(_ offset: Int) -> UInt64 {
        buffer.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }

    private func load32(_ offset: Int) -> UInt32 {
        buffer.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    }

    private func rotl(_ x: UInt64, _ n: UInt64) -> UInt64 { x << n | x >> (64 - n) }
}
