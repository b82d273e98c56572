#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Locking

/// A directory `courier get` saves files into, and the names it has given
/// out there. No file in it is ever replaced: a body is delivered under a
/// hidden name of its own, then moved to its name with
/// `moveWithoutReplacing`; when a file has taken that name meanwhile (one
/// made by someone else, or by another run into the same directory), the
/// body takes the next free name, as it would have had the file been there
/// from the start.
public final class OutputDirectory: Sendable {
    /// The directory's absolute path, as the downloads' destinations name it.
    public let path: String
    private let directory: DirectoryHandle
    /// Every name given out by `reserve`: files placed, and files still
    /// downloading.
    private let given = Locked(Set<String>())

    /// Why the directory could not be opened, as a sentence naming it.
    public struct OpenFailure: Error, CustomStringConvertible {
        public let description: String
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

    /// The first of `name`, `name-1.ext`, `name-2.ext`, … that nothing in
    /// the directory has (a dangling symbolic link counts) and that this
    /// directory has not given out before; it is given out now.
    func reserve(_ name: String) -> String {
        given.withLock { given in
            var candidate = name
            var number = 0
            while given.contains(candidate) || exists(candidate) {
                number += 1
                candidate = Self.numbered(name, number)
            }
            given.insert(candidate)
            return candidate
        }
    }

    /// `report-2.pdf` for `report.pdf`, `data-2` for `data`.
    private static func numbered(_ name: String, _ number: Int) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "\(name)-\(number)" }
        return "\(name[..<dot])-\(number)\(name[dot...])"
    }

    /// A hidden name, unique to this process, for a body on its way to
    /// `name`.
    static func stagingName(for name: String) -> String {
        Destination.temporaryName(for: name)
    }

    /// Moves the file `staged` to `name`, which `reserve(base)` gave out, or,
    /// when something has taken `name` since, to the next name `reserve(base)`
    /// gives; never over anything. Returns the name the file took.
    func place(_ staged: String, as name: String, base: String) throws(Destination.Failure) -> String {
        var target = name
        while let failure = directory.moveWithoutReplacing(staged, to: target) {
            guard failure == EEXIST else {
                throw .io("cannot move \(path)/\(staged) to \(path)/\(target): \(String(cString: strerror(failure)))")
            }
            target = reserve(base)
        }
        return target
    }

    /// Removes the file `name`.
    func remove(_ name: String) {
        directory.remove(name)
    }

    private func exists(_ name: String) -> Bool {
        var info = stat()
        return fstatat(directory.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0
    }
}
