import Foundation
import Testing

import CourierTestSupport
@testable import Courier

/// A destination's directory is opened once for a run of bodies, checked
/// once per turn of the engine, and opened anew once its path names another
/// directory or its mode changed.
struct DestinationParentsTests {
    private func withDirectory(_ body: (String) throws -> Void) throws {
        try withTemporaryDirectory("courier-parents", body)
    }

    @Test func theSameDirectoryIsOpenedOnce() throws {
        try withDirectory { path in
            let parents = DestinationParents()
            let first = try #require(parents.parent(at: path))
            let second = try #require(parents.parent(at: path))
            #expect(first.directory === second.directory)
            #expect(first.isWritable)
            var info = stat()
            #expect(stat(path, &info) == 0 && first.device == info.st_dev)
        }
    }

    @Test func directoriesLetGoAreOpenedAnew() throws {
        try withDirectory { path in
            let parents = DestinationParents()
            let first = try #require(parents.parent(at: path))
            parents.closeAll()
            let second = try #require(parents.parent(at: path))
            #expect(first.directory !== second.directory)
        }
    }

    @Test func aDirectoryReplacedAtItsPathIsOpenedAnew() throws {
        try withDirectory { root in
            let path = root + "/out"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            let parents = DestinationParents()
            let first = try #require(parents.parent(at: path))
            #expect(rename(path, root + "/moved") == 0)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            parents.checkAgain()
            let second = try #require(parents.parent(at: path))
            #expect(first.directory !== second.directory)
            #expect(second.directory.makeUnnamedFile(mode: 0o600).map { close($0) } != nil)
            var info = stat()
            #expect(fstat(second.directory.fd, &info) == 0 && info.st_nlink > 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/moved").isEmpty)
        }
    }

    @Test func aDirectoryWhoseModeChangedIsCheckedAnew() throws {
        try withDirectory { path in
            let parents = DestinationParents()
            let first = try #require(parents.parent(at: path))
            #expect(first.isWritable)
            #expect(chmod(path, 0o500) == 0)
            defer { chmod(path, 0o700) }
            parents.checkAgain()
            let again = try #require(parents.parent(at: path))
            #expect(first.directory !== again.directory)
            // Root may write anywhere: faccessat says so, and so may this.
            #expect(again.isWritable == (faccessat(AT_FDCWD, path, W_OK, 0) == 0))
        }
    }

    @Test func aDirectoryIsCheckedOncePerTurn() throws {
        try withDirectory { root in
            let path = root + "/out"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            let parents = DestinationParents()
            let first = try #require(parents.parent(at: path))
            #expect(rename(path, root + "/moved") == 0)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            // Within the turn, the directory found is used without a look at its path
            let sameTurn = try #require(parents.parent(at: path))
            #expect(sameTurn.directory === first.directory)
            // At the next turn its path is looked at again
            parents.checkAgain()
            let nextTurn = try #require(parents.parent(at: path))
            #expect(nextTurn.directory !== first.directory)
        }
    }

    @Test func aMissingDirectoryIsNone() throws {
        try withDirectory { path in
            let parents = DestinationParents()
            #expect(parents.parent(at: path + "/missing") == nil)
            #expect(parents.parent(at: path) != nil)
            #expect(rmdir(path) == 0)
            parents.checkAgain()
            #expect(parents.parent(at: path) == nil)
        }
    }
}
