import Testing

@testable import Courier

/// The names `courier get` gives files: from a URL's last path segment or a
/// `Content-Disposition`, percent-decoded and made one safe name.
@Suite(.timeLimit(.minutes(1)))
struct RemoteFileNameTests {
    @Test(arguments: [
        ("http://h/my%20file.txt", "my file.txt"),
        ("http://h/caf%C3%A9.txt", "café.txt"),
        ("http://h/caf%c3%a9.txt", "café.txt"),
        ("http://h/caf%E9.txt", "caf%E9.txt"),
        ("http://h/%F0%9F%98%80.png", "😀.png"),
        ("http://h/%ED%A0%80", "%ED%A0%80"),
        ("http://h/%C0%AF", "%C0%AF"),
        ("http://h/%F4%90%80%80", "%F4%90%80%80"),
        ("http://h/100%", "100%"),
        ("http://h/a%2", "a%2"),
        ("http://h/a%2Fb", "a_b"),
        ("http://h/a%00b", "a_b"),
        ("http://h/tab%09and%0Anewline", "tab_and_newline"),
        ("http://h/%C2%9Bc1", "_c1"),
        ("http://h/%E2%80%AEgnp.exe", "_gnp.exe"),
        ("http://h/%2e%2e", "index.html"),
        ("http://h/.", "index.html"),
        ("http://h/..x", "..x"),
        ("http://h", "index.html"),
        ("http://h/", "index.html"),
        ("http://h/dir/", "index.html"),
        ("http://h/?q=1", "index.html"),
        ("http://h/file.php?name=../x.txt#frag", "file.php"),
        ("http://user:pw@h:8080/a/b/c.tar.gz", "c.tar.gz"),
    ])
    func namesFromURLs(url: String, name: String) {
        #expect(RemoteFileName.forURL(url) == name)
    }

    @Test func longNamesAreCutOnACharacterKeepingTheirExtension() {
        let long = RemoteFileName.forURL("http://h/" + String(repeating: "n", count: 300) + ".tar.gz")
        #expect(long == String(repeating: "n", count: 193) + ".tar.gz")
        let accents = RemoteFileName.forURL("http://h/" + String(repeating: "%C3%A9", count: 150))
        #expect(accents == String(repeating: "é", count: 100))
        let noExtension = RemoteFileName.forURL("http://h/" + String(repeating: "x", count: 250) + "." + String(repeating: "y", count: 20))
        #expect(noExtension.utf8.count == RemoteFileName.maxBytes && noExtension.allSatisfy { $0 == "x" })
    }

    @Test(arguments: [
        ("attachment; filename=\"report.pdf\"", "report.pdf"),
        ("attachment; filename=report.pdf", "report.pdf"),
        ("attachment;filename=\"a \\\"quoted\\\" name\"", "a \"quoted\" name"),
        ("attachment; filename*=UTF-8''caf%C3%A9.txt; filename=\"cafe.txt\"", "café.txt"),
        ("attachment; filename=\"cafe.txt\"; filename*=utf-8''caf%C3%A9.txt", "café.txt"),
        ("attachment; filename*=iso-8859-1'en'caf%E9.txt", "café.txt"),
        ("attachment; filename*=koi8-r''x.txt; filename=fallback.txt", "fallback.txt"),
        ("attachment; filename=\"../../etc/passwd\"", "passwd"),
        ("attachment; filename=\"C:\\\\dir\\\\x.bat\"", "x.bat"),
        ("attachment; filename=\"bell\u{07}.txt\"", "bell_.txt"),
        ("ATTACHMENT; FILENAME=\"Upper.TXT\"", "Upper.TXT"),
    ])
    func namesFromContentDisposition(value: String, name: String) {
        #expect(RemoteFileName.forContentDisposition(value) == name)
    }

    @Test(arguments: ["inline", "attachment", "attachment; filename=\"\"", "attachment; filename=\"..\"",
                      "attachment; filename=\"dir/\"", "attachment; filename"])
    func noUsableNameInContentDisposition(value: String) {
        #expect(RemoteFileName.forContentDisposition(value) == nil)
    }
}
