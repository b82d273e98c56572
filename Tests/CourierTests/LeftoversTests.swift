import Foundation
import Testing

@testable import Courier

/// `Leftovers.sweep` reads the journal and `tmp/` names as bytes.
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

    @Test func namesAreTheBytesOnDisk() throws {
        try withDirectory { directory in
            let names: [[UInt8]] = [Array("plain".utf8), [0x61, 0xFF, 0x62], Array("caf\u{E9}".utf8), Array("cafe\u{301}".utf8)]
            for name in names { create(directory, name) }
            #expect(Set(Leftovers.names(in: directory)) == Set(names))
            #expect(Leftovers.names(in: directory + "/missing").isEmpty)
        }
    }

    @Test func aDeadJournalTakesItsOwnTemporaryFilesOnly() throws {
        try withDirectory { directory in
            // Given a journal no process holds, under a name that is not
            // UTF-8, its bodies in transit, and another owner's
            let journals = directory + "/journals"
            let temporary = directory + "/tmp"
            for path in [journals, temporary] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
            let owner: [UInt8] = Array("999998-a".utf8) + [0xFF]
            create(journals, owner)
            create(temporary, owner + Array("-1.part".utf8))
            let otherOwner = Array("999998-a".utf8) + [0xFE] + Array("-1.part".utf8)
            create(temporary, otherOwner)

            // When the leftovers are swept
            Leftovers.sweep(journals: journals, temporaryDirectory: temporary)

            // Then the journal and its own file are gone, and the file of
            // the owner whose name differs in one byte stays
            #expect(Leftovers.names(in: journals).isEmpty)
            #expect(Leftovers.names(in: temporary) == [otherOwner])
        }
    }
}
