import CFuzzDriver
import Foundation
@testable import Courier
import SQLite

/// A libFuzzer harness for what courier reads from its cache directory,
/// which anyone may have written; the first byte picks one. It works in a
/// sandbox of its own, `courier-fuzz-cache/` under the temporary directory
/// (one run at a time: a second waits on `courier-fuzz-cache.lock`):
/// a cache directory, and beside it a victim directory and a symbolic link
/// to it from inside the cache. Properties besides not crashing, not
/// hanging (a FIFO is never opened blocking) and not allocating past
/// libFuzzer's limit:
/// - journal lines: a partial record courier takes names an absolute
///   directory and a partial file name of the journal's pid, and writes back
///   as the same line; an owner name it takes has a pid within `Int32`;
/// - a disk tier row written from the input, its body inline or its body
///   file as long as the row claims (sparse), one byte longer, a FIFO, a
///   link, a directory or missing: a body is handed out only when it has the length claimed,
///   within the capacity's share, and is held in memory only within the
///   bound the caller gives;
/// - a journal written from the input, swept: the dead owner's bodies in
///   transit and downloads directory go, and nothing in the victim
///   directory does (unless the input names the victim directory's own
///   device and inode).
@main
enum FuzzCacheDirectory {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            guard let data else { return 0 }
            return fuzzCacheDirectory(data, size)
        })
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheDirectory(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch data[0] % 3 {
    case 0: journalLines(bytes)
    case 1: entry(bytes)
    default: sweep(bytes)
    }
    return 0
}

/// The pid of the journal the harness writes, `4242-a`.
private let pid = Array("4242".utf8)
private let owner = "4242-a"

private func journalLines(_ bytes: [UInt8]) {
    for line in bytes.split(separator: 0x0A) {
        if let owner = Leftovers.processID(ofOwner: Array(line)) {
            guard let value = Int64(String(decoding: owner, as: UTF8.self)), (1...Int64(Int32.max)).contains(value),
                Array(String(value).utf8) == owner
            else { fatalError("owner \(Array(line)) gave pid \(owner)") }
        }
        guard let record = Leftovers.Partial(line: line, pid: pid) else { continue }
        guard record.directory.first == UInt8(ascii: "/"), !record.directory.contains(0),
            Leftovers.Partial.isPartialName(record.name[...], pid: pid)
        else { fatalError("partial record \(Array(line)) names \(record)") }
        guard Leftovers.Partial(line: record.line[...], pid: pid) == record else {
            fatalError("partial record \(Array(line)) wrote back as \(record.line)")
        }
    }
}

/// The sandbox, made once per process.
private struct Sandbox: @unchecked Sendable {
    let path: String
    let victim: String
    let victimIdentity: (device: UInt64, inode: UInt64)
    let victimFiles: [String]
    let root: CacheRoot
    let disk: DiskCache
    let journals: DirectoryHandle
    let temporary: DirectoryHandle
    let downloads: DirectoryHandle

    static let shared: Sandbox = {
        let path = NSTemporaryDirectory() + "courier-fuzz-cache"
        // The seeds name this path, so two runs at once (from two clones)
        // share it: the second waits for the first to end rather than
        // remove the sandbox under it. The lock goes with the process.
        let lock = open(path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0, flock(lock, LOCK_EX) == 0 else {
            fatalError("cannot lock \(path).lock: \(String(cString: strerror(errno)))")
        }
        try? FileManager.default.removeItem(atPath: path)
        let victim = path + "/victim"
        let victimFiles = [".x.courier-4242-a.part", "4242-a-1.part", "4242-a", "notes", "4242/kept"]
        do {
            try FileManager.default.createDirectory(atPath: victim + "/4242", withIntermediateDirectories: true)
            for name in victimFiles { try Data(name.utf8).write(to: URL(fileURLWithPath: victim + "/" + name)) }
            let root = try CacheRoot(opening: path + "/cache", logger: .init(label: "fuzz"))
            try FileManager.default.createSymbolicLink(atPath: path + "/cache/link", withDestinationPath: victim)
            var info = stat()
            stat(victim, &info)
            // A share of 1 MiB bounds what an entry may claim and be read.
            return Sandbox(
                path: path, victim: victim, victimIdentity: (UInt64(info.st_dev), UInt64(info.st_ino)),
                victimFiles: victimFiles, root: root, disk: try DiskCache(root: root, capacity: 8 << 20),
                journals: try root.directory("journals"), temporary: try root.directory("tmp"),
                downloads: try root.directory("downloads"))
        } catch {
            fatalError("cannot make the sandbox in \(path): \(error)")
        }
    }()
}

/// `[flags][body length, 8 bytes little-endian][memory bound exponent][head]`:
/// a row of `responses` for the key `k` with that head and claimed length,
/// its body inline or in a body file the flags choose.
private func entry(_ bytes: [UInt8]) {
    guard bytes.count >= 10 else { return }
    let sandbox = Sandbox.shared
    let flags = bytes[0]
    let claimed = bytes[1..<9].withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
    let limit = Int64(1) << (Int64(bytes[9]) % 24)
    let head = Array(bytes[10...])
    let zeros = claimed <= 1 << 20 ? [UInt8](repeating: 0, count: Int(claimed)) : []
    let checksum = flags & 2 == 0 ? XXH3.hash(zeros) : UInt64(flags)
    let inline: SQLiteValue = flags & 1 == 0 ? .null : .blob(zeros)
    let file: SQLiteValue = flags & 1 == 0 ? .integer(7) : .null
    let bodyName = ResponseStore.fileName(7)
    let http = sandbox.disk.directory
    defer {
        sandbox.disk.remove(key: "k")
        http.removeTree(bodyName)
    }
    let inserted = sandbox.root.database.use { database throws(SQLiteError) in
        try database.run(
            """
            INSERT OR REPLACE INTO responses (key, used, size, body_length, body_checksum, body_file, head, head_checksum, body)
            VALUES (x'6b', 1, 1, ?, ?, ?, ?, ?, ?)
            """,
            [
                .integer(Int64(bitPattern: claimed)), .integer(Int64(bitPattern: checksum)), file, .blob(head),
                .integer(Int64(bitPattern: XXH3.hash(head))), inline,
            ])
    }
    guard inserted != nil else { fatalError("cannot write the sandbox's database") }
    let body = http.path(of: bodyName)
    switch (flags >> 2) % 6 {
    case 0: _ = truncate(body, length: claimed)
    case 1: _ = truncate(body, length: claimed &+ 1)
    case 2: mkfifo(body, 0o600)
    case 3: symlink("/dev/zero", body)
    case 4: mkdir(body, 0o700)
    default: break
    }
    let found = sandbox.disk.withEntry(key: "k") { entry, load in (entry.bodyLength, load(limit)) }
    guard let (length, loaded) = found else { return }
    guard length >= 0, length <= sandbox.disk.maximumBodyLength, UInt64(length) == claimed else {
        fatalError("an entry claiming \(claimed) bytes was taken as \(length)")
    }
    switch loaded {
    case .bytes(let held)?:
        guard Int64(held.count) == length, length <= limit, held.allSatisfy({ $0 == 0 }) else {
            fatalError("\(held.count) bytes held for a body of \(length) within \(limit)")
        }
    case .file(let file)?:
        guard file.length == length, length > limit else { fatalError("a file of \(file.length) for \(length) past \(limit)") }
    case nil:
        break
    }
}

/// A journal of the dead owner `4242-a` holding the input, swept beside
/// that owner's body in transit and downloads directory.
private func sweep(_ bytes: [UInt8]) {
    let sandbox = Sandbox.shared
    guard write(bytes, to: sandbox.journals.path(of: owner)),
        write([1], to: sandbox.temporary.path(of: owner + "-1-x.part")),
        (try? sandbox.root.directory("4242", in: sandbox.downloads)) != nil,
        write([2], to: sandbox.downloads.path + "/4242/r1-body")
    else { fatalError("cannot write the sandbox") }
    Leftovers.sweep(journals: sandbox.journals, temporary: sandbox.temporary, downloads: sandbox.downloads)
    guard sandbox.journals.status(of: owner) == nil, sandbox.temporary.status(of: owner + "-1-x.part") == nil,
        sandbox.downloads.status(of: "4242") == nil
    else { fatalError("a dead journal's leftovers stayed") }
    let namesVictim = bytes.split(separator: 0x0A).contains { line in
        guard let record = Leftovers.Partial(line: line, pid: pid) else { return false }
        return (record.device, record.inode) == sandbox.victimIdentity
    }
    for name in sandbox.victimFiles where !namesVictim && !FileManager.default.fileExists(atPath: sandbox.victim + "/" + name) {
        fatalError("\(name) was removed from the victim directory by the journal \(bytes)")
    }
}

private func write(_ bytes: [UInt8], to path: String) -> Bool {
    unlink(path)
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return CacheFileIO.write(fd, bytes)
}

private func truncate(_ path: String, length: UInt64) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return length <= UInt64(Int64.max) && ftruncate(fd, off_t(length)) == 0
}
