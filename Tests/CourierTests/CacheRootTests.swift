import Foundation
import Testing

@testable import Courier

/// The cache root hands out its directories without following anything
/// planted below it, and what it hands out never reaches outside.
@Suite(.timeLimit(.minutes(1)))
struct CacheRootTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-cache-root-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    private func status(_ path: String) -> stat? {
        var info = stat()
        return lstat(path, &info) == 0 ? info : nil
    }

    private func status(of handle: DirectoryHandle) -> stat? {
        var info = stat()
        return fstat(handle.fd, &info) == 0 ? info : nil
    }

    private func isDirectory(_ path: String) -> Bool { status(path).map { $0.st_mode & S_IFMT == S_IFDIR } ?? false }

    @Test func missingDirectoriesAreMadePrivate() throws {
        try withDirectory { directory in
            let root = try CacheRoot(testing: directory + "/a/cache")
            let downloads = try root.directory("downloads")
            let own = try root.directory("123", in: downloads)
            #expect(own.path == directory + "/a/cache/downloads/123")
            #expect(status(own.path).map { $0.st_mode & 0o777 } == 0o700)
            #expect(status(of: own)?.st_ino == status(own.path)?.st_ino)
        }
    }

    @Test func theCacheDirectoryItselfMayBeALink() throws {
        try withDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/disk/cache", withIntermediateDirectories: true)
            #expect(symlink(directory + "/disk/cache", directory + "/cache") == 0)
            let root = try CacheRoot(testing: directory + "/cache")
            _ = try root.directory("http")
            #expect(isDirectory(directory + "/disk/cache/http"))
        }
    }

    @Test func anythingButADirectoryIsReplacedNeverFollowed() throws {
        try withDirectory { directory in
            // Given a victim directory, and in the cache a link to it, a
            // dangling link, a file, a FIFO and a socket where directories belong
            let victim = directory + "/victim"
            try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: victim + "/keep", contents: Data("keep".utf8))
            let cache = directory + "/cache"
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
            #expect(symlink(victim, cache + "/link") == 0)
            #expect(symlink(directory + "/nowhere", cache + "/dangling") == 0)
            _ = FileManager.default.createFile(atPath: cache + "/file", contents: Data("x".utf8))
            #expect(mkfifo(cache + "/fifo", 0o600) == 0)
            let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let socketPath = cache + "/socket"
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                for (index, byte) in socketPath.utf8.prefix(buffer.count - 1).enumerated() { buffer[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            close(socket)
            let root = try CacheRoot(testing: cache)

            // When the root hands them out
            for name in ["link", "dangling", "file", "fifo"] + (bound == 0 ? ["socket"] : []) {
                let handle = try root.directory(name)
                // Then each is a directory of its own in the cache
                #expect(isDirectory(cache + "/" + name), "\(name)")
                #expect(status(of: handle)?.st_ino == status(cache + "/" + name)?.st_ino, "\(name)")
            }
            // And nothing outside was touched or made
            #expect(try FileManager.default.contentsOfDirectory(atPath: victim) == ["keep"])
            #expect(status(directory + "/nowhere") == nil)
        }
    }

    @Test func namesAreOneComponentOnly() throws {
        try withDirectory { directory in
            _ = FileManager.default.createFile(atPath: directory + "/outside", contents: Data("x".utf8))
            try FileManager.default.createDirectory(atPath: directory + "/inside", withIntermediateDirectories: true)
            let inside = try DirectoryHandle(opening: directory + "/inside")
            for name in ["../outside", "..", ".", "", "a/b"] {
                #expect(!inside.remove(name), "\(name)")
                #expect(inside.status(of: name) == nil, "\(name)")
                #expect(inside.openFile(name) == nil, "\(name)")
            }
            #expect(inside.openFile([0x61, 0, 0x62]) == nil)
            #expect(status(directory + "/outside") != nil)
        }
    }

    @Test func aTreeIsRemovedWithoutFollowingItsLinks() throws {
        try withDirectory { directory in
            // Given a tree holding links to a victim directory and file
            let victim = directory + "/victim"
            try FileManager.default.createDirectory(atPath: victim + "/sub", withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: victim + "/sub/keep", contents: Data("keep".utf8))
            let tree = directory + "/parent/tree"
            try FileManager.default.createDirectory(atPath: tree + "/a/b", withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: tree + "/a/b/file", contents: Data("x".utf8))
            #expect(symlink(victim, tree + "/a/to-victim") == 0)
            #expect(symlink(victim + "/sub/keep", tree + "/to-file") == 0)
            #expect(mkfifo(tree + "/fifo", 0o600) == 0)

            // When it is removed through its parent's handle
            try DirectoryHandle(opening: directory + "/parent").removeTree("tree")

            // Then it is gone and the victim is whole
            #expect(status(tree) == nil)
            #expect(FileManager.default.contents(atPath: victim + "/sub/keep") == Data("keep".utf8))
        }
    }

    @Test func aLinkAtTheTreesNameIsRemovedItself() throws {
        try withDirectory { directory in
            let victim = directory + "/victim"
            try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: victim + "/keep", contents: Data("keep".utf8))
            try FileManager.default.createDirectory(atPath: directory + "/parent", withIntermediateDirectories: true)
            #expect(symlink(victim, directory + "/parent/123") == 0)
            try DirectoryHandle(opening: directory + "/parent").removeTree("123")
            #expect(status(directory + "/parent/123") == nil)
            #expect(FileManager.default.contents(atPath: victim + "/keep") == Data("keep".utf8))
        }
    }
}
