import Dispatch
import Foundation
import Testing

import CourierTestSupport
@testable import Courier

/// A file made ahead for a body held in memory: taken once, waited for
/// while it is being made, never left open when nobody takes it.
struct PreparedFileTests {
    private func withDirectory(_ body: (DirectoryHandle) throws -> Void) throws {
        try withTemporaryDirectory("courier-prepared") { try body(DirectoryHandle(opening: $0)) }
    }

    @Test func aFileAskedForIsWaitedForAndHasNoName() throws {
        try withDirectory { directory in
            let prepared = PreparedFile()
            let queue = DispatchQueue(label: "files")
            let gate = DispatchSemaphore(value: 0)
            queue.async { gate.wait() }
            prepared.make(in: directory, mode: 0o644, on: queue)
            gate.signal()
            let fd = try #require(prepared.take())
            defer { close(fd) }
            var info = stat()
            #expect(fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_nlink == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
            #expect(prepared.take() == nil)
        }
    }

    @Test func filesAskedForWhileTheirQueueIsBusyAreAllMade() throws {
        try withDirectory { directory in
            // Given files asked for on two queues while both are busy
            let queues = [DispatchQueue(label: "files-a"), DispatchQueue(label: "files-b")]
            let gate = DispatchSemaphore(value: 0)
            for queue in queues { queue.async { gate.wait() } }
            let files = (0..<6).map { _ in PreparedFile() }
            for (index, file) in files.enumerated() { file.make(in: directory, mode: 0o600, on: queues[index % 2]) }

            // When the queues are free
            for _ in queues { gate.signal() }

            // Then each file is made, on its own queue, and taken once
            for file in files {
                let fd = try #require(file.take())
                close(fd)
                #expect(file.take() == nil)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        }
    }

    @Test func theLimitLeavesMostDescriptorsToOthers() {
        var limits = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limits) == 0)
        let soft = Int(clamping: limits.rlim_cur)
        #expect(PreparedFile.limit >= 64 && PreparedFile.limit <= 1024)
        #expect(PreparedFile.limit <= max(64, soft / 8))
    }

    @Test func aFileNobodyAskedForIsMadeByItsTaker() throws {
        try withDirectory { directory in
            let prepared = PreparedFile()
            let fd = try #require(prepared.take(makingIn: directory, mode: 0o644))
            defer { close(fd) }
            var info = stat()
            #expect(fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_nlink == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
            #expect(prepared.take(makingIn: directory, mode: 0o644) == nil)
        }
    }

    @Test func aFileAskedForIsTakenAsMadeNotMadeAgain() throws {
        try withDirectory { directory in
            let prepared = PreparedFile()
            let queue = DispatchQueue(label: "files")
            prepared.make(in: directory, mode: 0o644, on: queue)
            queue.sync {}
            let fd = try #require(prepared.take(makingIn: directory, mode: 0o644))
            close(fd)
            #expect(prepared.take() == nil)
        }
    }

    @Test func aBodyHeldInMemoryWhoseFileNobodyMadeAheadIsLinkedAtItsDestination() throws {
        try withDirectory { directory in
            // Given a body held in memory alone, its file asked of nobody (a file system in memory)
            let body: [UInt8] = Array("a body held in memory".utf8)
            let destination = directory.path + "/out.bin"
            let target = BodyTarget(
                directory: directory, name: ".out.bin.part", mode: 0o644, destination: .init(path: destination, name: "out.bin"),
                prepared: PreparedFile())
            let file = BodyFile(target: target, length: Int64(body.count), bytes: body, written: false)

            // When it is placed at its destination
            let fd = try #require(file.unnamedFile()).descriptor
            var info = stat()
            #expect(fstat(fd, &info) == 0 && info.st_nlink == 0)
            #expect(file.moveBeside(to: destination, root: nil))

            // Then the file made for it has its bytes there, and nothing else is left
            #expect(FileManager.default.contents(atPath: destination) == Data(body))
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["out.bin"])
        }
    }

    @Test func aFileNobodyAskedForIsNotWaitedFor() {
        #expect(PreparedFile().take() == nil)
    }

    @Test func aFileAskedForAfterItWasTakenIsNeverMade() throws {
        try withDirectory { directory in
            let prepared = PreparedFile()
            #expect(prepared.take() == nil)
            let queue = DispatchQueue(label: "files")
            prepared.make(in: directory, mode: 0o644, on: queue)
            queue.sync {}
            #expect(prepared.take() == nil)
        }
    }
}
