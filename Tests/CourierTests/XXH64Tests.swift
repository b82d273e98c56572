import Testing

@testable import Courier

/// XXH64 fed in pieces, as a transfer feeds it the chunks curl hands over,
/// gives the digest of the whole input at once.
struct XXH64Tests {
    private func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var sequence = SplitMix(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: sequence.next()) }
    }

    private func streamed(_ data: [UInt8], chunks: [Int]) -> UInt64 {
        var hasher = XXH64()
        var start = 0
        for size in chunks {
            let end = min(data.count, start + size)
            data[start..<end].withUnsafeBytes { hasher.update($0) }
            start = end
        }
        data[start...].withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    @Test func knownDigests() {
        #expect(XXH64().finalize() == 0xEF46_DB37_51D8_E999)
        #expect(XXH64.hash(Array("abc".utf8)) == 0x44BC_2CF5_AD77_0999)
        // 32 bytes and more take the four-lane path
        #expect(XXH64.hash(Array("Nobody inspects the spammish repetition".utf8)) == 0xFBCE_A83C_8A37_8BF1)
    }

    @Test(arguments: [0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 65, 100, 1_000, 16_384, 1 << 20])
    func anyChunkingGivesTheOneShotDigest(length: Int) {
        let data = bytes(length, seed: UInt64(length))
        let whole = XXH64.hash(data)
        // One byte at a time, every size up to a stripe and past it, and empty updates between
        #expect(streamed(data, chunks: Array(repeating: 1, count: min(length, 4_096))) == whole)
        for size in 1...40 {
            #expect(streamed(data, chunks: Array(repeating: size, count: length / size + 1)) == whole, "chunks of \(size)")
        }
        #expect(streamed(data, chunks: [0, 5, 0, 0, 27, 0, 32, 0]) == whole)
        // And random chunkings, small and large
        var sequence = SplitMix(seed: 0xC0FFEE ^ UInt64(length))
        for round in 0..<50 {
            let largest = round % 2 == 0 ? 70 : 20_000
            var chunks: [Int] = []
            var total = 0
            while total < length {
                let size = Int(sequence.next() % UInt64(largest + 1))
                chunks.append(size)
                total += size
            }
            #expect(streamed(data, chunks: chunks) == whole, "round \(round)")
        }
    }

    @Test func finalizingMidwayLeavesTheStateToContinue() {
        let data = bytes(1_000, seed: 9)
        var hasher = XXH64()
        data[..<333].withUnsafeBytes { hasher.update($0) }
        #expect(hasher.finalize() == XXH64.hash(Array(data[..<333])))
        data[333...].withUnsafeBytes { hasher.update($0) }
        #expect(hasher.finalize() == XXH64.hash(data))
    }
}
