import Testing

@testable import Courier

/// XXH3-64 fed in pieces, as a transfer feeds it the chunks curl hands
/// over, gives the digest of the whole input at once.
struct XXH3Tests {
    private func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var sequence = SplitMix(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: sequence.next()) }
    }

    private func streamed(_ data: [UInt8], chunks: [Int]) -> UInt64 {
        let hasher = XXH3()
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
        #expect(XXH3.empty == 0x2D06_8005_38D3_94C2)
        #expect(XXH3.hash(Array("abc".utf8)) == 0x78AF_5F94_892F_3950)
        #expect(XXH3.hash(Array("Nobody inspects the spammish repetition".utf8)) == 0x6CB0_0603_B5CC_47E9)
    }

    @Test(arguments: [0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1_000, 1_024, 16_384, 1 << 20])
    func anyChunkingGivesTheOneShotDigest(length: Int) {
        let data = bytes(length, seed: UInt64(length))
        let whole = XXH3.hash(data)
        // One byte at a time, every size up to past a stripe, and empty updates between
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
        let hasher = XXH3()
        data[..<333].withUnsafeBytes { hasher.update($0) }
        #expect(hasher.finalize() == XXH3.hash(Array(data[..<333])))
        data[333...].withUnsafeBytes { hasher.update($0) }
        #expect(hasher.finalize() == XXH3.hash(data))
    }

    @Test func aHashGoesOnFromItsStateOnAnotherThreadWhileTheFirstGoesItsOwnWay() async {
        // Given a hash fed past its internal buffer, and its state taken
        let data = bytes(3_000, seed: 11)
        let hasher = XXH3()
        hasher.update(Array(data[..<1_100]))
        let state = hasher.state
        // When another thread goes on from the state with the rest of the bytes
        let continued = await Task.detached {
            let other = XXH3(continuing: state)
            other.update(Array(data[1_100...]))
            return other.finalize()
        }.value
        // And the first hash goes on with other bytes
        hasher.update([1, 2, 3])
        // Then each has the digest of its own bytes
        #expect(continued == XXH3.hash(data))
        #expect(hasher.finalize() == XXH3.hash(Array(data[..<1_100]) + [1, 2, 3]))
    }
}
