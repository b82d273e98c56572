@testable import Courier

extension CacheRoot {
    /// The cache directory at `path`, for a test.
    convenience init(testing path: String) throws {
        try self.init(opening: path, logger: .init(label: "test"))
    }
}
