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
