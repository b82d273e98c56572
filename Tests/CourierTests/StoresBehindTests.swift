import Foundation
import JSON
import JSONRPC
import Locking
import Testing

@testable import Courier

/// Stores made behind their outcomes are made in order, in transactions of
/// their own, and whatever this process asks of the cache settles them
/// first.
@Suite(.timeLimit(.minutes(1)))
struct StoresBehindTests {
    /// What the stores and transactions of a test did, in order.
    private final class Log: Sendable {
        let events = Locked<[String]>([])
        func append(_ event: String) { events.withLock { $0.append(event) } }
        var all: [String] { events.withLock { $0 } }
    }

    /// Its transactions, one at a time, as the disk tier's write lock makes them.
    private func stores(_ log: Log, writes: Bool = false) -> StoresBehind {
        let transaction = Locked(())
        return StoresBehind(writes: writes) { body in
            transaction.withLock { _ in
                log.append("begin")
                body()
                log.append("commit")
            }
        }
    }

    private func store(_ name: String, keys: [String], _ log: Log) -> StoresBehind.Store {
        StoresBehind.Store(keys: keys) { log.append(name) }
    }

    @Test func settlingAKeyMakesTheWaitingStoresInOrderInOneTransaction() {
        // Given two stores waiting, with no writer
        let log = Log()
        let behind = stores(log)
        #expect(behind.add([store("a", keys: ["k1"], log), store("b", keys: ["k2"], log)]))
        #expect(log.all.isEmpty)
        // When the second one's key is settled
        behind.settle("k2")
        // Then both are made, in the order they came, in one transaction
        #expect(log.all == ["begin", "a", "b", "commit"])
        // And nothing is left to settle
        behind.settle()
        #expect(log.all.count == 4)
    }

    @Test func settlingAKeyNoStoreWritesLeavesTheStoresWaiting() {
        let log = Log()
        let behind = stores(log)
        #expect(behind.add([store("a", keys: ["k1"], log)]))
        behind.settle("other")
        #expect(log.all.isEmpty)
        behind.settle()
        #expect(log.all == ["begin", "a", "commit"])
    }

    @Test func aKeyStaysPendingUntilEveryStoreOfItIsMade() {
        let log = Log()
        let behind = stores(log)
        #expect(behind.add([store("a", keys: ["k"], log)]))
        #expect(behind.add([store("b", keys: ["k", "k2"], log)]))
        behind.settle("k2")
        #expect(log.all == ["begin", "a", "b", "commit"])
        behind.settle("k")
        #expect(log.all.count == 4)
    }

    @Test func pastTheLimitNothingIsQueued() {
        let log = Log()
        let behind = stores(log)
        let full = (0..<StoresBehind.limit).map { store("s\($0)", keys: ["k\($0)"], log) }
        #expect(behind.add(full))
        // When one more comes, it is refused whole, and the caller makes it
        #expect(!behind.add([store("late", keys: ["late"], log)]))
        behind.settle("late")
        #expect(log.all.isEmpty)
        behind.settle()
        #expect(log.all.count == StoresBehind.limit + 2)
        #expect(!log.all.contains("late"))
        // And once they are made there is room again
        #expect(behind.add([store("late", keys: ["late"], log)]))
    }

    @Test func theWriterMakesTheStoresInTransactionsOfAtMostItsBound() {
        // Given a writer and more stores than one of its transactions takes
        let log = Log()
        let behind = stores(log, writes: true)
        let count = StoresBehind.storesPerTransaction * 2 + 1
        let done = DispatchSemaphore(value: 0)
        var all = (0..<count - 1).map { store("s\($0)", keys: ["k\($0)"], log) }
        all.append(StoresBehind.Store(keys: ["last"]) {
            log.append("s\(count - 1)")
            done.signal()
        })
        #expect(behind.add(all))
        // Then the writer makes them all, in order, each transaction holding
        // at most its bound
        #expect(done.wait(timeout: .now() + 30) == .success)
        behind.settle()
        let made = log.all.filter { $0.hasPrefix("s") }
        #expect(made == (0..<count).map { "s\($0)" })
        var inTransaction = 0
        for event in log.all {
            switch event {
            case "begin": inTransaction = 0
            case "commit": #expect(inTransaction <= StoresBehind.storesPerTransaction)
            default: inTransaction += 1
            }
        }
        behind.end()
    }
}

/// The stores a delivery leaves behind its outcomes are seen by this
/// process at once.
@Suite(.timeLimit(.minutes(1)))
struct ResponseCacheStoresBehindTests {
    @Test func aLookupAndTheStatsSeeAStoreMadeBehind() throws {
        let directory = NSTemporaryDirectory() + "courier-behind-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = Configuration(cacheDir: directory + "/cache")
        configuration.diskCapacity = 64 << 20
        let cache = ResponseCache(
            configuration: configuration, root: try CacheRoot(testing: configuration.cacheDir), logger: .init(label: "test"))
        _ = cache.disk
        #expect(cache.storesBehind)
        // Given a body written to an unnamed file, as delivery writes one
        let body = (0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let beside = try DirectoryHandle(opening: directory)
        let held = StoresBehind.OpenFile(owning: try #require(beside.makeUnnamedFile(mode: 0o644)))
        #expect(CacheFileIO.write(held.descriptor, body))
        let url = "http://127.0.0.1:9/behind"
        let request = try DownloadRequest(Params(["url": .string(url)]), defaults: Configuration(cacheDir: directory))
        let head = ResponseHead(status: 200, headers: [("cache-control", "max-age=3600")], finalURL: url)
        let file = CacheBodyFile(
            directory: beside, name: ".dest.partial", length: Int64(body.count), checksum: XXH3.hash(body),
            unnamed: held.descriptor)
        // When its store is queued behind the caller
        cache.storeBehind([
            cache.deferredStore(
                keys: [ResponseCache.key(for: request)], request: request, head: head, requestTime: Date(),
                responseTime: Date(), body: file, holding: held)
        ])
        // Then a lookup of its URL finds it at once
        guard case .hit(let hit) = cache.lookup(request) else {
            Issue.record("no hit")
            return
        }
        #expect(hit.body.length == Int64(body.count))
        // And the disk tier counts it
        #expect(cache.stats.disk.entries == 1)
    }

    @Test func aBodyFileIsReadThroughItsUnnamedDescriptorOnceItsNameIsGone() throws {
        // Given a body written to an unnamed file, described without its
        // bytes and by a name beside its destination that no longer exists
        let directory = NSTemporaryDirectory() + "courier-behind-read-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let beside = try DirectoryHandle(opening: directory)
        let body = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let fd = try #require(beside.makeUnnamedFile(mode: 0o644))
        defer { close(fd) }
        #expect(CacheFileIO.write(fd, body))
        let file = CacheBodyFile(
            directory: beside, name: ".gone.partial", length: Int64(body.count), checksum: XXH3.hash(body), unnamed: fd)
        // Then its bytes are read through the descriptor, whole and checked
        #expect(file.read() == body)
        // And a name planted meanwhile with other bytes is not what is read
        let planted = Data(repeating: 0, count: body.count)
        #expect(FileManager.default.createFile(atPath: directory + "/.gone.partial", contents: planted))
        #expect(file.read() == body)
    }
}
