import Foundation
import Testing

@testable import Courier

/// `Configuration.absolutePath` gives the path Foundation's
/// `URL(fileURLWithPath:).standardizedFileURL.path` gives, which is what the
/// command line's directories went through before.
@Suite(.timeLimit(.minutes(1)))
struct AbsolutePathTests {
    static let paths = [
        "c", "./c", "c/", "", ".", "..", "a/b/../../..", "a/../../x",
        "/", "//", "/tmp//c", "/tmp/c//", "/tmp/./c/.", "/tmp/c/..", "/tmp/a/../b", "/..", "/../x",
        "/tmp/c/...", "/tmp/.c/..c", "/tmp/ü/c", "/tmp/c%20d", "/tmp/c;x?y#z",
        "~", "~/x", "~root/x", "~nosuchuser-courier/x", "a/~/b", "~x",
    ]

    @Test(arguments: paths)
    func matchesFoundation(_ path: String) {
        // Given a path as a user may type it, relative ones read against the
        // working directory
        let expected = URL(fileURLWithPath: path).standardizedFileURL.path

        // When it is made absolute
        let absolute = Configuration.absolutePath(path)

        // Then it is the path Foundation's URL standardizes it to
        #expect(absolute == expected)
    }
}
