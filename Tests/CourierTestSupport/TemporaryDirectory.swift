import Foundation

/// Runs `body` with the path of a new empty directory under the system's
/// temporary directory, named `prefix` and a unique part, and removes the
/// directory and what it holds afterwards.
public func withTemporaryDirectory<Result>(
    _ prefix: String, _ body: (String) throws -> Result
) throws -> Result {
    let path = NSTemporaryDirectory() + "\(prefix)-\(getpid())-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}
