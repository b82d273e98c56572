import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SystemPackage

/// Where a download's `destination` may go, and how its body gets there.
///
/// Under `--download-root` the path is walked from the root one component
/// at a time with `openat(O_NOFOLLOW | O_DIRECTORY)`: no symlink below the
/// root is followed (whether it leads inside or out), `..` may not climb
/// above the root, and missing directories are made with `mkdirat` in the
/// directory already opened, so nothing is created, truncated or deleted
/// outside the root whatever the tree holds or becomes meanwhile. Without a
/// root the client is trusted with any absolute path. Either way the body is
/// written to a file created exclusively beside the destination and renamed
/// over it, so the destination never holds a partial body and a planted
/// symlink cannot redirect the write.
struct Destination: Sendable {
    enum Failure: Error, Sendable, CustomStringConvertible {
        case notAllowed(String)
        case io(String)

        /// The message alone, as logs and the command line show it.
        var description: String {
            switch self {
            case .notAllowed(let message), .io(let message): message
            }
        }

        var transferFailure: TransferFailure {
            switch self {
            case .notAllowed(let message): TransferFailure(code: .destinationNotAllowed, message: message)
            case .io(let message): TransferFailure(code: .io, message: message)
            }
        }
    }

    let path: String
    let root: String?

    init(_ path: String, root: String?) {
        self.path = path
        self.root = root
    }

    /// The final component of `path`.
    var fileName: String { String(decoding: Self.components(of: Array(path.utf8)).last ?? [], as: UTF8.self) }

    /// Checks the path without changing anything. Under a download root the
    /// directories that exist are walked as `openParent` would walk them;
    /// without one the client is trusted with the path, so only its form is
    /// checked here and the file system answers when the body is placed.
    func check() throws(Failure) {
        guard root != nil else {
            // Read where the path holds its bytes (a native string always
            // does): every download with a destination is checked so.
            let form = path.utf8.withContiguousStorageIfAvailable { bytes -> (hasNUL: Bool, namesFile: Bool)? in
                guard let base = bytes.baseAddress else { return nil }
                let leafStart = bytes.lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? 0
                return (memchr(base, 0, bytes.count) != nil, Self.namesFile(UnsafeBufferPointer(rebasing: bytes[leafStart...])))
            } ?? nil
            if let form, !form.hasNUL, form.namesFile { return }
            guard !path.utf8.contains(0) else { throw .notAllowed("the destination contains a NUL byte") }
            try Self.checkLeaf(Array(path.utf8[Self.leafStart(of: path)...]), path: path)
            return
        }
        _ = try openParent(create: false)
    }

    /// The directory that holds the destination, opened safely, and the
    /// destination's name in it. Missing directories are created when
    /// `create`; otherwise a missing one ends the walk with nil.
    func openParent(create: Bool) throws(Failure) -> (directory: DirectoryHandle, name: String)? {
        let bytes = Array(path.utf8)
        guard !bytes.contains(0) else { throw .notAllowed("the destination contains a NUL byte") }
        let start: String
        let relative: [[UInt8]]
        if let root {
            guard let rest = Self.relativeComponents(of: bytes, under: root) ?? Self.realRoot(root).flatMap({
                Self.relativeComponents(of: bytes, under: $0)
            }) else {
                throw .notAllowed("the destination lies outside the download root")
            }
            (start, relative) = (root, rest)
        } else {
            (start, relative) = ("/", Self.components(of: bytes))
        }
        try checkLeaf(relative.last)
        let leaf = relative.last!
        if root == nil, !create, let parent = Self.parentPath(of: bytes), let directory = Self.openWhole(parent) {
            return (directory, String(decoding: leaf, as: UTF8.self))
        }
        var stack = [try DirectoryHandle(opening: start)]
        var shown = start
        for component in relative.dropLast() {
            let name = String(decoding: component, as: UTF8.self)
            switch name {
            case ".":
                continue
            case "..":
                if root != nil {
                    guard stack.count > 1 else { throw .notAllowed("the destination climbs above the download root") }
                    stack.removeLast()
                } else if let parent = try openDirectory(name, in: stack.last!, shown: shown, create: false, followSymlinks: true) {
                    stack.append(parent)
                }
            default:
                guard let next = try openDirectory(name, in: stack.last!, shown: shown, create: create, followSymlinks: root == nil)
                else { return nil }
                stack.append(next)
            }
            shown += shown.endsWithSlash ? name : "/" + name
        }
        let directory = stack.last!
        let name = String(decoding: leaf, as: UTF8.self)
        if root != nil {
            var info = stat()
            if fstatat(directory.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFLNK {
                throw .notAllowed("the destination is a symbolic link")
            }
        }
        return (directory, name)
    }

    /// Puts the file at `source` (a file courier owns) at the destination:
    /// renamed when `move` and on the same file system, else copied into an
    /// exclusively created file beside it and renamed into place.
    /// `recordingPartial` hears of the partial file (its directory and
    /// name) before it is made.
    func place(
        from source: String, move: Bool, recordingPartial: ((DirectoryHandle, String) -> Void)? = nil
    ) throws(Failure) {
        guard let (directory, name) = try openParent(create: true) else {
            throw .io("cannot create the directories of \(path)")
        }
        if move, renameat(AT_FDCWD, source, directory.fd, name) == 0 {
            fchmodat(directory.fd, name, Self.fileMode, 0)
            return
        }
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw .io("cannot read \(source): \(Self.errorText())") }
        defer { close(input) }
        let partial = Self.temporaryName(for: name)
        recordingPartial?(directory, partial)
        let output = try directory.createFile(partial, mode: 0o666)
        let copied = Self.copy(from: input, to: output)
        let closed = close(output) == 0
        guard copied, closed, renameat(directory.fd, partial, directory.fd, name) == 0 else {
            let reason = Self.errorText()
            directory.remove(partial)
            throw .io("cannot write \(path): \(reason)")
        }
    }

    /// Without a download root, the path of the destination's directory,
    /// which `openParent` opens in one call (symbolic links followed, `..`
    /// after them), and the destination's name in it; nil under a root, or
    /// when the path names no file. Read in the path's own storage, with no
    /// copy but the two strings it makes.
    var trustedParent: (directory: String, name: String)? {
        guard root == nil else { return nil }
        var path = path
        return path.withUTF8 { bytes in
            guard !bytes.contains(0), let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return nil }
            let leaf = UnsafeBufferPointer(rebasing: bytes[(slash + 1)...])
            guard Self.namesFile(leaf) else { return nil }
            let parent = slash == 0 ? "/" : String(decoding: UnsafeBufferPointer(rebasing: bytes[..<slash]), as: UTF8.self)
            return (parent, String(decoding: leaf, as: UTF8.self))
        }
    }

    /// Where the last component of `path` starts: after its last slash
    /// (the end, when the path ends with one).
    private static func leafStart(of path: String) -> String.Index {
        path.utf8.lastIndex(of: UInt8(ascii: "/")).map { path.utf8.index(after: $0) } ?? path.utf8.startIndex
    }

    /// Everything of `path` before its last slash: "/" for a file at the root.
    private static func parentPath(of path: [UInt8]) -> String? {
        guard let slash = path.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        return slash == 0 ? "/" : String(decoding: path[..<slash], as: UTF8.self)
    }

    /// The destination's directory opened by its whole path in one call,
    /// as the walk without a root would find it (following symbolic links,
    /// `..` after them); nil when that fails, so the walk says why.
    private static func openWhole(_ parent: String) -> DirectoryHandle? {
        let fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        return fd >= 0 ? DirectoryHandle(fd: fd, path: parent) : nil
    }

    private func checkLeaf(_ leaf: [UInt8]?) throws(Failure) {
        try Self.checkLeaf(leaf, path: path)
    }

    private static func checkLeaf(_ leaf: [UInt8]?, path: String) throws(Failure) {
        guard let leaf, namesFile(leaf) else { throw .io("the destination \(path) names no file") }
    }

    /// A last component names a file: it is neither empty, `.` nor `..`.
    private static func namesFile(_ leaf: some Collection<UInt8>) -> Bool {
        !leaf.isEmpty && !leaf.elementsEqual(".".utf8) && !leaf.elementsEqual("..".utf8)
    }

    /// The mode a new file of the client's gets: 0666 less the umask, as
    /// curl's `-o` gives (courier's own files, which may be moved into
    /// place, are 0600).
    static let fileMode: mode_t = {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
        let mask = line.flatMap { mode_t($0.dropFirst(6).trimmingBlanks, radix: 8) } ?? 0o022
        return 0o666 & ~mask
    }()

    /// What every temporary name of this process holds after the name it
    /// is beside.
    private static let processMark = Array(".courier-\(getpid())-".utf8)

    /// A name for a file beside `name` that no other writer uses:
    /// `.NAME.courier-PID-SUFFIX.part`, `NAME` cut to 100 characters and
    /// `SUFFIX` in base 36. Written straight into the string's own storage,
    /// the suffix's digits too, once per download.
    static func temporaryName(for name: String) -> String {
        // A name of 100 bytes at most has 100 characters at most: taken
        // whole, without walking its characters.
        let kept = name.utf8.count <= 100 ? name[...] : name.prefix(100)
        let keptCount = kept.utf8.count
        let mark = processMark
        var suffix = NameSuffix.next()
        var digits = 1
        var rest = suffix / 36
        while rest > 0 {
            digits += 1
            rest /= 36
        }
        let part = ".part".utf8
        return String(unsafeUninitializedCapacity: 1 + keptCount + mark.count + digits + part.count) { buffer in
            buffer[0] = UInt8(ascii: ".")
            _ = UnsafeMutableBufferPointer(rebasing: buffer[1...]).initialize(from: kept.utf8)
            var end = 1 + keptCount
            _ = UnsafeMutableBufferPointer(rebasing: buffer[end...]).initialize(from: mark)
            end += mark.count + digits
            for position in stride(from: end - 1, through: end - digits, by: -1) {
                let digit = UInt8(suffix % 36)
                buffer[position] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                suffix /= 36
            }
            _ = UnsafeMutableBufferPointer(rebasing: buffer[end...]).initialize(from: part)
            return end + part.count
        }
    }

    static func errorText() -> String { String(cString: strerror(errno)) }

    // MARK: - Internals

    /// Opens directory `name` inside `parent`, making it first when missing
    /// and `create`; nil when missing and not `create`.
    private func openDirectory(
        _ name: String, in parent: DirectoryHandle, shown: String, create: Bool, followSymlinks: Bool
    ) throws(Failure) -> DirectoryHandle? {
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (followSymlinks ? 0 : O_NOFOLLOW)
        let full = shown.endsWithSlash ? shown + name : shown + "/" + name
        for _ in 0..<2 {
            let fd = openat(parent.fd, name, flags)
            if fd >= 0 { return DirectoryHandle(fd: fd, path: full) }
            switch errno {
            case ENOENT where create:
                if mkdirat(parent.fd, name, 0o777) != 0, errno != EEXIST {
                    throw .io("cannot create \(full): \(Self.errorText())")
                }
            case ENOENT:
                return nil
            case ELOOP where !followSymlinks, ENOTDIR where !followSymlinks:
                throw .notAllowed("\(full) is a symbolic link or not a directory")
            default:
                throw .io("cannot open \(full): \(Self.errorText())")
            }
        }
        throw .io("cannot create \(full)")
    }

    /// Components of `path` below `root` (compared as bytes), or nil when
    /// `path` does not start with `root` and a slash.
    private static func relativeComponents(of path: [UInt8], under root: String) -> [[UInt8]]? {
        var prefix = Array(root.utf8)
        while prefix.count > 1, prefix.last == UInt8(ascii: "/") { prefix.removeLast() }
        if prefix != [UInt8(ascii: "/")] { prefix.append(UInt8(ascii: "/")) }
        guard path.count > prefix.count, path.starts(with: prefix) else { return nil }
        return components(of: Array(path[prefix.count...]))
    }

    private static func components(of path: [UInt8]) -> [[UInt8]] {
        var parts = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        if path.last == UInt8(ascii: "/") { parts.append([]) }
        return parts
    }

    /// The root with its symlinks resolved, when that differs.
    private static func realRoot(_ root: String) -> String? {
        guard let resolved = realpath(root, nil) else { return nil }
        defer { free(resolved) }
        let real = String(cString: resolved)
        return real == root ? nil : real
    }

    /// False when a read or a write failed, with `errno` saying why.
    private static func copy(from input: Int32, to output: Int32) -> Bool {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        let (source, destination) = (FileDescriptor(rawValue: input), FileDescriptor(rawValue: output))
        do {
            while true {
                let count = try source.read(into: buffer)
                if count == 0 { return true }
                try destination.writeAll(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
        } catch {
            return false
        }
    }
}
