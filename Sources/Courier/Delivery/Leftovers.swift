import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The files a running courier owns outside the cache entries, and their
/// removal once it has died, so a crash or a kill leaves nothing behind for
/// good.
///
/// Each process holds an exclusive `flock` on its journal,
/// `<cache dir>/journals/<owner>` (`<owner>` is `<pid>-<nonce>`), for as
/// long as it runs; the kernel drops the lock when the process dies, however
/// it dies, and whatever PID namespace it ran in. The journal's lines name
/// the process's `path` directory (`downloads/<pid>/`) and every partial
/// file it creates beside a destination. At start, every journal whose lock
/// can be taken belongs to a process that is gone: its bodies in transit
/// (`tmp/<owner>-*`), its `path` directory and its partial files are
/// removed, then the journal. Partial files are removed only when their name
/// is one courier gives (`.<name>.courier-<pid>-<random>.part`), since the
/// journal, like everything in the cache directory, may have been written
/// by anyone.
final class Leftovers: Sendable {

    /// `<pid>-<nonce>`: names this process's files in `tmp/`.
    let owner: String
    private let journalPath: String
    private let fd: Int32

    /// Takes this process's journal in `journals` (recording
    /// `downloadsDirectory` in it), after removing what dead processes left.
    init(journals: String, temporaryDirectory: String, downloadsDirectory: String) throws(Destination.Failure) {
        Self.sweep(journals: journals, temporaryDirectory: temporaryDirectory)
        owner = "\(getpid())-\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
        journalPath = "\(journals)/\(owner)"
        fd = open(journalPath, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot create \(journalPath): \(Destination.errorText())") }
        flock(fd, LOCK_EX)
        record(directory: downloadsDirectory)
    }

    deinit { Glibc.close(fd) }

    /// Notes a partial file about to be created beside a destination.
    func record(partial path: String) { append("partial " + path) }

    /// Ends the journal at a clean exit: what it named is gone already.
    func finish() {
        unlink(journalPath)
    }

    private func record(directory path: String) { append("downloads " + path) }

    private func append(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    // MARK: - Sweeping

    /// Removes what every process that died left. Names in `journals` and
    /// `tmp/` and the journal's lines are read as bytes and compared byte
    /// for byte.
    static func sweep(journals: String, temporaryDirectory: String) {
        let journalsPath = Array(journals.utf8) + [slash]
        let temporaryPath = Array(temporaryDirectory.utf8) + [slash]
        // Listed only once a dead journal is found.
        var temporaryNames: [[UInt8]]?
        for owner in names(in: journals) {
            let fd = withPath(journalsPath + owner) { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
            guard fd >= 0 else { continue }
            defer { Glibc.close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
            let prefix = owner + [UInt8(ascii: "-")]
            if temporaryNames == nil { temporaryNames = names(in: temporaryDirectory) }
            for other in temporaryNames ?? [] where other.starts(with: prefix) {
                _ = withPath(temporaryPath + other) { unlink($0) }
            }
            let pid = Array(owner.prefix { $0 != UInt8(ascii: "-") })
            for line in readLines(fd) {
                if line.starts(with: downloadsTag), let directory = ownedDirectory(line.dropFirst(downloadsTag.count), pid: pid) {
                    try? FileManager.default.removeItem(atPath: directory)
                } else if line.starts(with: partialTag), isPartialName(line.dropFirst(partialTag.count), pid: pid) {
                    _ = withPath(Array(line.dropFirst(partialTag.count))) { unlink($0) }
                }
            }
            _ = withPath(journalsPath + owner) { unlink($0) }
        }
    }

    private static let slash = UInt8(ascii: "/")

    /// The names in `directory` (`.` and `..` left out), as bytes; none when
    /// it cannot be read. Read with `readdir`, not FileManager, which would
    /// cost its set-up on the way to the first answer.
    static func names(in directory: String) -> [[UInt8]] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            names.append(name)
        }
        return names
    }

    /// Calls `body` with `path` as a C string; a path with a NUL byte is
    /// never passed on (`body` gets an empty path, which names no file).
    private static func withPath<Result>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> Result) -> Result {
        let bytes = path.contains(0) ? [0] : path + [0]
        return bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    private static let downloadsTag = Array("downloads ".utf8)
    private static let partialTag = Array("partial ".utf8)

    /// Whether `path` ends in a partial file name courier gives for `pid`:
    /// `.<name>.courier-<pid>-<random>.part`.
    static func isPartialName(_ path: ArraySlice<UInt8>, pid: [UInt8]) -> Bool {
        guard !pid.isEmpty, !path.contains(0), let name = path.split(separator: UInt8(ascii: "/")).last else { return false }
        let marker = Array(".courier-".utf8) + pid + [UInt8(ascii: "-")]
        return name.first == UInt8(ascii: ".") && name.reversed().starts(with: ".part".utf8.reversed())
            && (0...max(0, name.count - marker.count)).contains { name.dropFirst($0).starts(with: marker) }
    }

    /// `path` when it is a `downloads/<pid>` directory of that process, in
    /// valid UTF-8.
    private static func ownedDirectory(_ path: ArraySlice<UInt8>, pid: [UInt8]) -> String? {
        let parts = path.split(separator: UInt8(ascii: "/"))
        guard !path.contains(0), parts.count >= 2, parts[parts.count - 1].elementsEqual(pid),
            parts[parts.count - 2].elementsEqual("downloads".utf8)
        else { return nil }
        return String(bytes: path, encoding: .utf8)
    }

    private static func readLines(_ fd: Int32) -> [ArraySlice<UInt8>] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count < 64 << 20 {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return bytes.split(separator: UInt8(ascii: "\n"))
    }
}
