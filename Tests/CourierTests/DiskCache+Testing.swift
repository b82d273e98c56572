import Dispatch
import Foundation

@testable import Courier

extension DiskCache {
    /// A disk tier in `<cacheDirectory>/http`, for a test.
    convenience init(cacheDirectory: String, capacity: Int64) throws {
        try self.init(root: CacheRoot(testing: cacheDirectory), capacity: capacity)
    }

    /// The entry for `key` and its verified body, read whole; now the most
    /// recently used.
    func read(key: String) -> (entry: DiskCacheEntry, body: [UInt8])? {
        let found = withEntry(key: key) { entry, load -> (DiskCacheEntry, [UInt8])? in
            guard case .bytes(let body)? = load(.max) else { return nil }
            return (entry, body)
        }
        return found ?? nil
    }

    /// The entry for `key`'s body file, checked in bounded chunks and left
    /// on disk; now the most recently used.
    func bodyFile(key: String) -> StoredBodyFile? {
        let found = withEntry(key: key) { _, load -> StoredBodyFile? in
            guard case .file(let file)? = load(-1) else { return nil }
            return file
        }
        return found ?? nil
    }
}

extension CachedBody {
    /// The bytes, held or read from the file.
    var bytes: [UInt8]? {
        switch self {
        case .bytes(let bytes): bytes
        case .file(let file): file.read()
        }
    }
}
