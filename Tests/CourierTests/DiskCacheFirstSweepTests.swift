import Foundation
import Locking
import Testing

@testable import Courier

/// The sweep that counts the directory at start runs on a queue of its own:
/// the cache works before it ends, and what reports counts waits for it.
@Suite(.timeLimit(.minutes(1)))
struct DiskCacheFirstSweepTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-first-sweep-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func response(_ url: String) -> CachedResponse {
        CachedResponse(
            status: 200, headers: [("content-type", "application/octet-stream")], url: url,
            requestTime: Date(timeIntervalSince1970: 1_714_564_800), responseTime: Date(timeIntervalSince1970: 1_714_564_801),
            varyValues: [:])
    }

    private func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
    }

    private func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// A directory holding `kept` and `corrupt` (its entry file cut short)
    /// and an abandoned temporary file of a process that no longer runs.
    private func prepare(_ directory: String) throws -> (corrupt: String, abandoned: String) {
        let writer = try DiskCache(cacheDirectory: directory, capacity: 1 << 20)
        #expect(writer.store(key: "kept", response: response("http://o/kept"), body: bytes(2_000, seed: 1)))
        #expect(writer.store(key: "corrupt", response: response("http://o/corrupt"), body: bytes(2_000, seed: 2)))
        writer.waitForFirstSweep()
        let corrupt = writer.filePath(for: "corrupt")
        let handle = try #require(FileHandle(forUpdatingAtPath: corrupt))
        try handle.truncate(atOffset: 20)
        try handle.close()
        let abandoned = writer.path + "/.tmp-2000000000-1"
        #expect(FileManager.default.createFile(atPath: abandoned, contents: Data([1, 2, 3])))
        return (corrupt, abandoned)
    }

    @Test func theCacheServesBeforeTheFirstSweepEnds() throws {
        try withDirectory { directory in
            let (corrupt, abandoned) = try prepare(directory)

            // Given a cache whose first sweep cannot run yet
            let held = DispatchQueue(label: "held first sweep")
            held.suspend()
            let cache = try DiskCache(cacheDirectory: directory, capacity: 1 << 20, firstSweepQueue: held)

            // When it is read before the sweep, and written meanwhile
            let read = cache.read(key: "kept")
            let corruptRead = cache.read(key: "corrupt")
            let stored = Locked<Bool?>(nil)
            let storing = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                stored.withLock { $0 = cache.store(key: "new", response: response("http://o/new"), body: bytes(1_000, seed: 3)) }
                storing.signal()
            }

            // Then the intact entry is served, the corrupt one is a miss and
            // goes, and the sweep has not run
            #expect(read?.body == bytes(2_000, seed: 1))
            #expect(corruptRead == nil)
            #expect(!exists(corrupt))
            #expect(exists(abandoned))

            // And once it runs, the write lands after it, and the counts take in both entries
            held.resume()
            #expect(storing.wait(timeout: .now() + 10) == .success)
            #expect(stored.withLock { $0 } == true)
            #expect(cache.lookup(key: "new") != nil)
            #expect(cache.count == 2)
            #expect(!exists(abandoned))
            let files = try FileManager.default.contentsOfDirectory(atPath: cache.path)
            let onDisk = try files.reduce(Int64(0)) { total, name in
                let size = try FileManager.default.attributesOfItem(atPath: cache.path + "/" + name)[.size] as? Int64
                return total + (size ?? 0)
            }
            #expect(cache.usage == onDisk)
        }
    }
}
