import Foundation
import Testing

@testable import Courier

/// A stored body held open is handed on to another file as a link only when
/// that costs no one anything, else as a copy of what was checked, and only
/// when it still matches its checksum.
@Suite(.timeLimit(.minutes(1)))
struct StoredBodyFileTests {
    private func withDirectory(_ body: (String, DirectoryHandle) throws -> Void) throws {
        let directory = NSTemporaryDirectory() + "courier-stored-body-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory, try DirectoryHandle(opening: directory))
    }

    private func inode(_ path: String) -> ino_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_ino : nil
    }

    /// The file `name` holding `body`, held open as a checked stored body.
    private func stored(_ directory: DirectoryHandle, _ name: String, _ body: [UInt8]) throws -> StoredBodyFile {
        let path = directory.path(of: name)
        _ = FileManager.default.createFile(atPath: path, contents: Data(body))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        return StoredBodyFile(fd: fd, directory: directory, name: name, length: Int64(body.count), checksum: XXH3.hash(body))
    }

    private let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    @Test func aFileWithOneNameIsLinked() throws {
        try withDirectory { path, directory in
            let file = try stored(directory, "stored", body)
            #expect(file.place(in: directory, as: "placed"))
            #expect(inode(path + "/placed") == inode(path + "/stored"))
        }
    }

    @Test func aFileWithAnotherNameAlreadyIsCopied() throws {
        try withDirectory { path, directory in
            // Given a body file that is also a client's file
            let file = try stored(directory, "stored", body)
            #expect(link(path + "/stored", path + "/clients") == 0)
            // Then a second client's file is a copy of its own
            #expect(file.place(in: directory, as: "placed"))
            #expect(inode(path + "/placed") != inode(path + "/stored"))
            #expect(FileManager.default.contents(atPath: path + "/placed") == Data(body))
        }
    }

    @Test func anotherUsersFileIsCopied() throws {
        guard geteuid() == 0 else { return }
        try withDirectory { path, directory in
            let file = try stored(directory, "stored", body)
            #expect(chown(path + "/stored", 65534, 65534) == 0)
            #expect(file.place(in: directory, as: "placed"))
            #expect(inode(path + "/placed") != inode(path + "/stored"))
            var info = stat()
            #expect(stat(path + "/placed", &info) == 0 && info.st_uid == 0)
        }
    }

    @Test func aFileChangedInPlaceIsNeitherLinkedNorCopiedNorRead() throws {
        try withDirectory { path, directory in
            let file = try stored(directory, "stored", body)
            let fd = open(path + "/stored", O_WRONLY)
            #expect(pwrite(fd, "X", 1, 1001) == 1)
            close(fd)
            #expect(!file.place(in: directory, as: "placed"))
            #expect(inode(path + "/placed") == nil)
            #expect(link(path + "/stored", path + "/second") == 0)
            #expect(!file.place(in: directory, as: "placed"))
            #expect(inode(path + "/placed") == nil)
            #expect(file.read() == nil)
        }
    }

    @Test func whatWasCheckedIsPlacedWhateverHappensToItsName() throws {
        try withDirectory { path, directory in
            // Given a stored body whose name another process removed, then
            // gave to another file, then to a symbolic link
            for replacement in ["removed", "other file", "link"] {
                let file = try stored(directory, "stored", body)
                #expect(unlink(path + "/stored") == 0)
                if replacement == "other file" { _ = FileManager.default.createFile(atPath: path + "/stored", contents: Data(repeating: 1, count: body.count)) }
                if replacement == "link" { #expect(symlink("/dev/zero", path + "/stored") == 0) }

                // Then the file placed holds the body checked, and it still reads
                #expect(file.place(in: directory, as: "placed"), "\(replacement)")
                #expect(FileManager.default.contents(atPath: path + "/placed") == Data(body), "\(replacement)")
                #expect(file.read() == body, "\(replacement)")
                #expect(unlink(path + "/placed") == 0)
                unlink(path + "/stored")
            }
        }
    }

    @Test func aPrefixReadsNoMoreThanAskedFor() throws {
        try withDirectory { _, directory in
            let file = try stored(directory, "stored", body)
            #expect(file.prefix(16) == Array(body.prefix(16)))
            #expect(file.prefix(1 << 30).count == body.count)
        }
    }
}
