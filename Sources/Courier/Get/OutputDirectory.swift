#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking

/// A directory `courier get` saves files into, and the names its URLs have
/// claimed there. A body is delivered under a hidden name of its own, then
/// moved to its name: with `moveWithoutReplacing` unless the user asked to
/// replace files (`ExistingFile.replace`), so a file that took the name
/// meanwhile (made by someone else, or by another run into the same
/// directory) is never replaced without that.
public final class OutputDirectory: Sendable {
    /// The directory's absolute path, as the downloads' destinations name it.
    public let path: String
    private let directory: DirectoryHandle
    /// Every name claimed by a URL of this run.
    private let claimed = Locked(Set<String>())

    /// Why the directory could not be opened, as a sentence naming it.
    public struct OpenFailure: Error, CustomStringConvertible {
        public let description: String
    }

    /// How a placement ended.
    enum Placement: Equatable {
        case placed
        /// Something has the name, and it was left as it is.
        case exists
    }

    /// Opens the directory at `path` (an absolute path, symbolic links
    /// resolved).
    public init(path: String) throws(OpenFailure) {
        self.path = path
        do throws(Destination.Failure) {
            directory = try DirectoryHandle(opening: path)
        } catch {
            throw OpenFailure(description: error.transferFailure.message)
        }
    }

    /// Claims `name` for one URL of this run: false when another URL has it.
    func claim(_ name: String) -> Bool {
        claimed.withLock { $0.insert(name).inserted }
    }

    /// Whether anything has the name `name` (a dangling symbolic link too).
    func exists(_ name: String) -> Bool {
        directory.status(of: name) != nil
    }

    /// A hidden name, unique to this process, for a body on its way to
    /// `name`.
    static func stagingName(for name: String) -> String {
        Destination.temporaryName(for: name)
    }

    /// Moves the file `staged` to `name`: over whatever has that name when
    /// `existing` is `.replace`, else only where nothing has it.
    func place(_ staged: String, as name: String, existing: ExistingFile) throws(Destination.Failure) -> Placement {
        let failure: Int32?
        if existing == .replace {
            failure = renameat(directory.fd, staged, directory.fd, name) == 0 ? nil : errno
        } else {
            failure = directory.moveWithoutReplacing(staged, to: name)
        }
        guard let failure else { return .placed }
        if failure == EEXIST, existing != .replace { return .exists }
        throw .io("cannot move \(path)/\(staged) to \(path)/\(name): \(String(cString: strerror(failure)))")
    }

    /// Whether the regular files `name` and `other` hold the same bytes: one
    /// file under two names, or two of one size read through side by side
    /// (never through a symbolic link).
    func sameContents(_ name: String, _ other: String) -> Bool {
        guard let first = directory.openFile(name) else { return false }
        defer { close(first.fd) }
        guard let second = directory.openFile(other) else { return false }
        defer { close(second.fd) }
        if first.info.st_dev == second.info.st_dev, first.info.st_ino == second.info.st_ino { return true }
        guard first.info.st_size == second.info.st_size else { return false }
        let chunk = 1 << 16
        var one = [UInt8](repeating: 0, count: chunk)
        var two = [UInt8](repeating: 0, count: chunk)
        var offset: off_t = 0
        while true {
            let count = one.withUnsafeMutableBytes { pread(first.fd, $0.baseAddress, chunk, offset) }
            guard count >= 0 else { return false }
            let otherCount = two.withUnsafeMutableBytes { pread(second.fd, $0.baseAddress, count, offset) }
            guard otherCount == count, one[..<count] == two[..<count] else { return false }
            if count == 0 { return true }
            offset += off_t(count)
        }
    }

    /// Removes the file `name`.
    func remove(_ name: String) {
        directory.remove(name)
    }
}
