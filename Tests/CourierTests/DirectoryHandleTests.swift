import Foundation
import Testing

@testable import Courier

/// Names are reached in a directory one at a time: only a name that is one
/// name (not empty, not `.` or `..`, without a slash or a NUL byte) is used.
@Suite(.timeLimit(.minutes(1)))
struct DirectoryHandleTests {
    private func withDirectory(_ body: (String, DirectoryHandle) throws -> Void) throws {
        let directory = NSTemporaryDirectory() + "courier-directory-handle-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory, try DirectoryHandle(opening: directory))
    }

    @Test func namesThatAreOneNameAreUsedWhateverTheirLength() throws {
        try withDirectory { path, directory in
            // Given files whose names have dots, and one longer than a buffer on the stack holds
            let names = [".a", "...", "a.", "é", String(repeating: "n", count: 255)]
            for name in names {
                #expect(FileManager.default.createFile(atPath: path + "/" + name, contents: Data([1, 2, 3])))
            }

            // Then each is found, as text and as bytes, and removed
            for name in names {
                #expect(directory.status(of: name)?.st_size == 3)
                #expect(directory.status(of: Array(name.utf8))?.st_size == 3)
                #expect(directory.remove(name))
                #expect(directory.status(of: name) == nil)
            }
        }
    }

    @Test func namesThatAreNotOneNameAreRefused() throws {
        try withDirectory { path, directory in
            // Given a file in a subdirectory
            try FileManager.default.createDirectory(atPath: path + "/sub", withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: path + "/sub/f", contents: Data([1])))

            // Then names that are empty, `.`, `..`, or hold a slash or a NUL byte reach nothing
            for name: [UInt8] in [[], Array(".".utf8), Array("..".utf8), Array("sub/f".utf8), Array("sub\0".utf8), [0]] {
                #expect(directory.status(of: name) == nil)
                #expect(directory.openFile(name) == nil)
                #expect(!directory.remove(name))
            }
            #expect(directory.status(of: "sub/f") == nil)
            #expect(((directory.status(of: "sub")?.st_mode ?? 0) & S_IFMT) == S_IFDIR)
            #expect(FileManager.default.fileExists(atPath: path + "/sub/f"))
        }
    }

    @Test func aDirectoryOnTmpfsIsInMemoryAndOneOnProcIsNot() throws {
        // /dev/shm is tmpfs where the mount table says so; /proc never is.
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        let shmIsTmpfs = mounts.split(separator: "\n").contains { line in
            Array(line.split(separator: " ").dropFirst().prefix(2)) == ["/dev/shm", "tmpfs"]
        }
        if shmIsTmpfs {
            #expect(try DirectoryHandle(opening: "/dev/shm").isInMemory)
        }
        let proc = try DirectoryHandle(opening: "/proc")
        #expect(!proc.isInMemory)
        // Asked once, the answer stays.
        #expect(!proc.isInMemory)
    }

    @Test func aPathJoinsTheDirectorysPathAndTheName() {
        #expect(DirectoryHandle(fd: -1, path: "/a/b").path(of: "c") == "/a/b/c")
        #expect(DirectoryHandle(fd: -1, path: "/a/b/").path(of: "c") == "/a/b/c")
        #expect(DirectoryHandle(fd: -1, path: "/").path(of: "é") == "/é")
        let long = String(repeating: "d", count: 100)
        #expect(DirectoryHandle(fd: -1, path: "/" + long).path(of: long) == "/" + long + "/" + long)
    }
}
