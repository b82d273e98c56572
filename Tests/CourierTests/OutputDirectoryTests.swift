import Foundation
import Testing

@testable import Courier

/// `courier get`'s directory: names claimed once per run, and files moved
/// to them without replacing anything unless asked to.
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

    @Test func aNameIsClaimedByOneURLOfARunAndAnyFileCounts() throws {
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Given a file and a dangling symbolic link in the directory
        write("a.txt", "mine")
        try FileManager.default.createSymbolicLink(atPath: path + "/link", withDestinationPath: path + "/nowhere")
        let directory = try OutputDirectory(path: path)
        // Then both names exist, and each name is claimed once
        #expect(directory.exists("a.txt") && directory.exists("link"))
        #expect(!directory.exists("b"))
        #expect(directory.claim("b"))
        #expect(!directory.claim("b"))
        #expect(directory.claim(".hidden"))
    }

    @Test func aFileThatTookTheNameMeanwhileIsReplacedOnlyWhenAskedTo() throws {
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Given a body staged for a name a file took meanwhile
        let directory = try OutputDirectory(path: path)
        write("staged", "body")
        write("r.bin", "someone else's")
        // When it is placed without replacing, then replacing
        #expect(try directory.place("staged", as: "r.bin", existing: .refuse) == .exists)
        #expect(try directory.place("staged", as: "r.bin", existing: .skip) == .exists)
        #expect(read("r.bin") == "someone else's")
        #expect(names == ["r.bin", "staged"])
        #expect(try directory.place("staged", as: "r.bin", existing: .replace) == .placed)
        // Then only the last one replaced it
        #expect(read("r.bin") == "body")
        #expect(names == ["r.bin"])
    }

    @Test func replacingNeverFollowsASymbolicLink() throws {
        defer { try? FileManager.default.removeItem(atPath: path) }
        let outside = path + "-outside"
        FileManager.default.createFile(atPath: outside, contents: Data("kept".utf8))
        defer { try? FileManager.default.removeItem(atPath: outside) }
        try FileManager.default.createSymbolicLink(atPath: path + "/link", withDestinationPath: outside)
        let directory = try OutputDirectory(path: path)
        write("staged", "body")
        #expect(try directory.place("staged", as: "link", existing: .replace) == .placed)
        #expect(read("link") == "body")
        #expect(String(decoding: FileManager.default.contents(atPath: outside)!, as: UTF8.self) == "kept")
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
