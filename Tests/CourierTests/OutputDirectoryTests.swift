import Foundation
import Testing

@testable import Courier

/// `courier get`'s directory: names given out once, and files moved to
/// them without replacing anything.
@Suite(.timeLimit(.minutes(1)))
struct OutputDirectoryTests {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("courier-\(UUID())").path

    init() throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    private func write(_ name: String, _ text: String) {
        FileManager.default.createFile(atPath: path + "/" + name, contents: Data(text.utf8))
    }

    private func read(_ name: String) -> String? {
        FileManager.default.contents(atPath: path + "/" + name).map { String(decoding: $0, as: UTF8.self) }
    }

    private var names: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }

    @Test func namesAreNumberedPastFilesAndNamesGivenOut() throws {
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Given a file and a dangling symbolic link in the directory
        write("a.txt", "mine")
        try FileManager.default.createSymbolicLink(atPath: path + "/a-1.txt", withDestinationPath: path + "/nowhere")
        let directory = try OutputDirectory(path: path)
        // When names are asked for
        // Then each is free, on disk and among those given before
        #expect(directory.reserve("a.txt") == "a-2.txt")
        #expect(directory.reserve("a.txt") == "a-3.txt")
        #expect(directory.reserve("b") == "b")
        #expect(directory.reserve("b") == "b-1")
        #expect(directory.reserve(".hidden") == ".hidden")
        #expect(directory.reserve(".hidden") == ".hidden-1")
    }

    @Test func aFileThatTookTheNameMeanwhileIsKeptAndTheBodyTakesTheNextFreeName() throws {
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Given two names given out, and a body staged for the first
        let directory = try OutputDirectory(path: path)
        #expect(directory.reserve("r.bin") == "r.bin")
        #expect(directory.reserve("r.bin") == "r-1.bin")
        write("staged", "body")
        // When a file appears at the first name before the body is placed
        write("r.bin", "someone else's")
        let placed = try directory.place("staged", as: "r.bin", base: "r.bin")
        // Then that file stays, and the body skips the name still given out
        #expect(placed == "r-2.bin")
        #expect(read("r.bin") == "someone else's")
        #expect(read("r-2.bin") == "body")
        #expect(names == ["r-2.bin", "r.bin"])
    }

    @Test func noMoveReplacesAnything() throws {
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DirectoryHandle(opening: path)
        write("source", "new")
        write("file", "old")
        try FileManager.default.createSymbolicLink(atPath: path + "/link", withDestinationPath: path + "/nowhere")
        try FileManager.default.createDirectory(atPath: path + "/dir", withIntermediateDirectories: false)
        for target in ["file", "link", "dir"] {
            #expect(directory.moveWithoutReplacing("source", to: target) == EEXIST)
            // The fallback where renameat2 has no RENAME_NOREPLACE.
            #expect(directory.linkWithoutReplacing("source", to: target) == EEXIST)
        }
        #expect(read("file") == "old")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: path + "/link") == path + "/nowhere")

        #expect(directory.linkWithoutReplacing("source", to: "linked") == nil)
        #expect(directory.moveWithoutReplacing("linked", to: "moved") == nil)
        #expect(names == ["dir", "file", "link", "moved"])
        #expect(read("moved") == "new")
    }
}
