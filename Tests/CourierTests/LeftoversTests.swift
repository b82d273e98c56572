import Foundation
import Testing

@testable import Courier

/// `Leftovers.sweep` takes nothing a journal says as a path into the cache
/// directory, and removes a partial file beside a destination only when the
/// journal's record proves courier made it there.
@Suite(.timeLimit(.minutes(1)))
struct LeftoversTests {
    private func withDirectory(_ body: (String) throws -> Void) rethrows {
        let directory = NSTemporaryDirectory() + "courier-leftovers-\(getpid())-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    /// Creates the file `directory/name`, `name` given as bytes.
    private func create(_ directory: String, _ name: [UInt8], contents: [UInt8] = []) {
        let path = Array(directory.utf8) + [UInt8(ascii: "/")] + name + [0]
        let fd = path.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o600) }
        }
        #expect(fd >= 0)
        _ = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    private func names(_ directory: String) -> Set<[UInt8]> {
        var names: Set<[UInt8]> = []
        (try? DirectoryHandle(opening: directory))?.forEachName { names.insert($0) }
        return names
    }

    private func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The cache directory's three directories, made and opened.
    private func cacheDirectories(_ directory: String) throws -> (journals: DirectoryHandle, temporary: DirectoryHandle, downloads: DirectoryHandle) {
        let root = try CacheRoot(testing: directory)
        return (try root.directory("journals"), try root.directory("tmp"), try root.directory("downloads"))
    }

    private func sweep(_ directories: (journals: DirectoryHandle, temporary: DirectoryHandle, downloads: DirectoryHandle)) {
        Leftovers.sweep(journals: directories.journals, temporary: directories.temporary, downloads: directories.downloads)
    }

    @Test func namesAreTheBytesOnDisk() {
        withDirectory { directory in
            let names: [[UInt8]] = [Array("plain".utf8), [0x61, 0xFF, 0x62], Array("caf\u{E9}".utf8), Array("cafe\u{301}".utf8)]
            for name in names { create(directory, name) }
            #expect(self.names(directory) == Set(names))
        }
    }

    @Test func aDeadJournalTakesItsOwnTemporaryFilesOnly() throws {
        try withDirectory { directory in
            // Given a journal no process holds, its bodies in transit, and
            // another owner's whose name differs in one byte
            let directories = try cacheDirectories(directory)
            create(directory + "/journals", Array("999998-a".utf8))
            create(directory + "/tmp", Array("999998-a-1-x.part".utf8))
            let otherOwner = Array("999998-b-1-x.part".utf8)
            create(directory + "/tmp", otherOwner)
            let unlike = Array("999998-a".utf8) + [0xFF] + Array("-1.part".utf8)
            create(directory + "/tmp", unlike)

            // When the leftovers are swept
            sweep(directories)

            // Then the journal and its own file are gone, and the others stay
            #expect(names(directory + "/journals").isEmpty)
            #expect(names(directory + "/tmp") == [otherOwner, unlike])
        }
    }

    @Test func ownerNamesAreTheOnesCourierWrites() {
        for name in ["1-a", "4194304-2kq3n7bxs0h4x", "2147483647-z"] {
            #expect(Leftovers.processID(ofOwner: Array(name.utf8)) != nil, "\(name)")
        }
        for name in ["report", "-a", "0-a", "01-a", "12", "12-", "12-A", "12-a-b", "2147483648-a", "99999999999-a", "12-abcdefghijklmn"] {
            #expect(Leftovers.processID(ofOwner: Array(name.utf8)) == nil, "\(name)")
        }
    }

    @Test func aDeadProcessesDownloadsDirectoryIsItsPidsOnly() throws {
        try withDirectory { directory in
            // Given dead journals, one whose pid a running process shares,
            // and a journal that names a directory of its own choosing
            let directories = try cacheDirectories(directory)
            let victim = directory + "/victim"
            try FileManager.default.createDirectory(atPath: victim + "/downloads/999997", withIntermediateDirectories: true)
            create(victim + "/downloads/999997", Array("kept".utf8))
            create(directory + "/journals", Array("999997-a".utf8), contents: Array("downloads \(victim)/downloads/999997\n".utf8))
            create(directory + "/journals", Array("999996-a".utf8))
            create(directory + "/journals", Array("999996-b".utf8))
            for pid in ["999997", "999996"] {
                try FileManager.default.createDirectory(atPath: "\(directory)/downloads/\(pid)/inner", withIntermediateDirectories: true)
                create("\(directory)/downloads/\(pid)", Array("path-file".utf8))
                try FileManager.default.createSymbolicLink(atPath: "\(directory)/downloads/\(pid)/inner/link", withDestinationPath: victim)
            }
            let running = open(directory + "/journals/999996-b", O_RDONLY)
            defer { close(running) }
            #expect(flock(running, LOCK_EX) == 0)

            // When the leftovers are swept
            sweep(directories)

            // Then the dead pid's directory is gone, links and all, the
            // shared pid's stays, and the journal's own path was not taken
            #expect(!exists(directory + "/downloads/999997"))
            #expect(exists(directory + "/downloads/999996/path-file"))
            #expect(exists(victim + "/downloads/999997/kept"))
            #expect(names(directory + "/journals") == [Array("999996-b".utf8)])
        }
    }

    @Test func aJournalThatIsNotAFileIsRemovedWithoutBlocking() throws {
        try withDirectory { directory in
            let directories = try cacheDirectories(directory)
            #expect(mkfifo(directory + "/journals/999995-a", 0o600) == 0)
            #expect(symlink(directory + "/elsewhere", directory + "/journals/999995-b") == 0)
            sweep(directories)
            #expect(names(directory + "/journals").isEmpty)
        }
    }

    @Test func partialRecordsAreTheLinesCourierWrites() throws {
        let pid = Array("4242".utf8)
        let name = ".report.pdf.courier-4242-1x2y.part"
        let record = try #require(Leftovers.Partial(line: Array("partial 2049 1234 /home/u/Documents/\(name)".utf8)[...], pid: pid))
        #expect(record == Leftovers.Partial(device: 2049, inode: 1234, directory: Array("/home/u/Documents".utf8), name: Array(name.utf8)))
        #expect(record.line == Array("partial 2049 1234 /home/u/Documents/\(name)".utf8))
        let spaced = try #require(Leftovers.Partial(line: Array("partial 1 2 /a b/.c d.courier-4242-z.part".utf8)[...], pid: pid))
        #expect(spaced.directory == Array("/a b".utf8) && spaced.name == Array(".c d.courier-4242-z.part".utf8))
        for line in ["partial 1 2 /a//.c.courier-4242-z.part", "partial 1 2 /.c.courier-4242-z.part"] {
            let record = try #require(Leftovers.Partial(line: Array(line.utf8)[...], pid: pid))
            #expect(record.line == Array(line.utf8))
        }
        let refused = [
            "partial /home/u/\(name)",  // without the directory's identity
            "partial 1 2 home/u/\(name)",  // relative
            "partial 1 2 /home/u/.report.pdf.courier-4243-1x2y.part",  // another pid
            "partial 1 2 /home/u/report.pdf",  // not a partial name
            "partial 1 2 /home/u/.courier-4242-1x2y.part",  // no name before the marker
            "partial 1 2 /home/u/.r.courier-4242-.part",  // no random part
            "partial 1 2 /home/u/.r.courier-4242-ABC.part",  // not base 36
            "partial 1 2 /home/u/.r.courier-4242-1x2y.part/",  // a directory
            "partial 18446744073709551616 2 /home/u/\(name)",  // past 64 bits
            "partial -1 2 /home/u/\(name)",
            "downloads 1 2 /home/u/\(name)",
        ]
        for line in refused {
            #expect(Leftovers.Partial(line: Array(line.utf8)[...], pid: pid) == nil, "\(line)")
        }
        #expect(Leftovers.Partial(line: Array("partial 1 2 /a/.r.courier-4242-z".utf8)[...] + [0] + Array(".part".utf8), pid: pid) == nil)
    }

    @Test func aPartialFileGoesOnlyFromTheDirectoryItsRecordProves() throws {
        try withDirectory { directory in
            // Given partial files in a destination directory, and a symlink
            // to it, and records naming them with and without the
            // directory's true identity
            let directories = try cacheDirectories(directory)
            let destination = directory + "/destination"
            try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: destination)
            var info = stat()
            #expect(stat(destination, &info) == 0)
            let (device, inode) = (UInt64(info.st_dev), UInt64(info.st_ino))
            let names = [".a.courier-999994-1.part", ".b.courier-999994-2.part", ".c.courier-999994-3.part", ".d.courier-999994-4.part"]
            for name in names { create(destination, Array(name.utf8)) }
            #expect(symlink(destination + "/" + names[0], destination + "/.e.courier-999994-5.part") == 0)
            let lines = [
                "partial \(device) \(inode) \(destination)/\(names[0])",  // proven
                "partial \(device) \(inode) \(directory)/link/\(names[1])",  // the same directory, reached by a link
                "partial \(device) \(inode + 1) \(destination)/\(names[2])",  // another directory's identity
                "partial \(destination)/\(names[3])",  // none
                "partial \(device) \(inode) \(destination)/.e.courier-999994-5.part",  // a symbolic link there
            ]
            create(directory + "/journals", Array("999994-a".utf8), contents: Array(lines.map { $0 + "\n" }.joined().utf8))

            // When the leftovers are swept
            sweep(directories)

            // Then only the files whose records carry the directory's identity went
            #expect(self.names(destination) == Set([names[2], names[3], ".e.courier-999994-5.part"].map { Array($0.utf8) }))
        }
    }

    @Test func anotherUsersJournalRemovesNothingOutside() throws {
        guard geteuid() == 0 else { return }
        try withDirectory { directory in
            let directories = try cacheDirectories(directory)
            var info = stat()
            #expect(stat(directory, &info) == 0)
            let name = ".a.courier-999993-1.part"
            create(directory, Array(name.utf8))
            create(directory + "/journals", Array("999993-a".utf8), contents: Array("partial \(info.st_dev) \(info.st_ino) \(directory)/\(name)\n".utf8))
            #expect(chown(directory + "/journals/999993-a", 65534, 65534) == 0)
            sweep(directories)
            #expect(exists(directory + "/" + name))
            #expect(names(directory + "/journals").isEmpty)
        }
    }

    @Test func whatCourierRecordsItRemovesAfterACrash() throws {
        try withDirectory { directory in
            // Given this process's journal, recording a partial file beside a
            // destination, as a process that then died would leave it
            let root = try CacheRoot(testing: directory + "/cache")
            let destination = try DirectoryHandle(opening: directory)
            let partial = Destination.temporaryName(for: "file.bin")
            let journal: String
            do {
                let leftovers = try Leftovers(root: root)
                leftovers.record(partial: partial, in: destination)
                create(directory, Array(partial.utf8))
                create(leftovers.downloads.path, Array("r1-file.bin".utf8))
                journal = leftovers.owner
            }
            #expect(exists(directory + "/cache/journals/" + journal))

            // When courier starts again (its descriptor closed: the lock is free)
            let again = try Leftovers(root: root)

            // Then the partial file and the journal are gone; the dead
            // journal's downloads directory stays, since a running process
            // (this one) has its pid, until that process finishes
            #expect(!exists(directory + "/" + partial))
            #expect(!exists(directory + "/cache/journals/" + journal))
            #expect(exists(again.downloads.path + "/r1-file.bin"))
            again.finish()
            #expect(!exists(again.downloads.path))
            #expect(names(directory + "/cache/journals").isEmpty)
        }
    }

    @Test func aDirectorysIdentityIsTheOneItsDescriptorNames() throws {
        try withDirectory { directory in
            // Given a directory opened, its identity asked for once
            let opened = directory + "/opened"
            #expect(mkdir(opened, 0o700) == 0)
            let handle = try DirectoryHandle(opening: opened)
            var info = stat()
            #expect(stat(opened, &info) == 0)
            let first = handle.identity
            #expect(first == DirectoryHandle.Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))

            // When another directory takes its path
            #expect(rename(opened, directory + "/moved") == 0)
            #expect(mkdir(opened, 0o700) == 0)
            var other = stat()
            #expect(stat(opened, &other) == 0)

            // Then the handle still names the one it opened
            #expect(other.st_ino != info.st_ino)
            #expect(handle.identity == first)
        }
    }

    @Test func longAndOverlongLinesAreReadInPieces() {
        withDirectory { directory in
            let long = [UInt8](repeating: UInt8(ascii: "x"), count: Leftovers.lineLimit)
            let overlong = [UInt8](repeating: UInt8(ascii: "y"), count: Leftovers.lineLimit + 1)
            let contents = long + [10] + overlong + [10, 10] + Array("last\n".utf8) + Array("torn".utf8)
            create(directory, Array("journal".utf8), contents: contents)
            let fd = open(directory + "/journal", O_RDONLY)
            defer { close(fd) }
            var lines: [[UInt8]] = []
            Leftovers.forEachLine(fd) { lines.append(Array($0)) }
            #expect(lines == [long, Array("last".utf8)])
        }
    }
}
