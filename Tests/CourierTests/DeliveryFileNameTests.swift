import Testing

@testable import Courier

/// The name a body gets when its receipt names no destination comes from
/// its URL's last path component, whatever bytes the URL holds.
@Suite(.timeLimit(.minutes(1)))
struct DeliveryFileNameTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var url: String
        var name: String
        var testDescription: String { url.debugDescription }
    }

    static let cases: [Case] = [
        Case(url: "http://o/dir/picture.png", name: "picture.png"),
        Case(url: "http://o/dir/picture.png?size=2#top", name: "picture.png"),
        Case(url: "http://o/a/b/", name: "b"),
        Case(url: "http://o/a/b//", name: "b"),
        Case(url: "http://o/", name: "body"),
        Case(url: "http://o", name: "body"),
        Case(url: "http://o/...", name: "body"),
        Case(url: "http://o/a/b/..", name: "a"),
        Case(url: "http://o/.hidden", name: ".hidden"),
        Case(url: "http://o/A-Z_0.9", name: "A-Z_0.9"),
        Case(url: "http://o/a%20b.txt", name: "a_20b.txt"),
        Case(url: "http://o/%E2%9C%93", name: "_E2_9C_93"),
        Case(url: "http://o/a:b;c=d,e~f!g$h&i'j(k)l*m+n@o", name: "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o"),
        Case(url: "http://o/" + String(repeating: "x", count: 100), name: String(repeating: "x", count: 80)),
        Case(url: "http://o/" + String(repeating: "é", count: 100), name: String(repeating: "é", count: 80)),
        Case(url: "http://o/caf\u{e9}.txt", name: "café.txt"),
        Case(url: "http://o/e\u{301}t\u{e9}", name: "e\u{301}t\u{e9}"),
        Case(url: "http://o/\u{1F600}.png", name: "_.png"),
        Case(url: "not a url", name: "body"),
        // Read from the text, and through libcurl where the text could
        // say otherwise than its parse.
        Case(url: "https://o:8443/w1/17", name: "17"),
        Case(url: "http://o?q=/x.txt", name: "body"),
        Case(url: "http://o#/x.txt", name: "body"),
        Case(url: "http://o/a?q=/x.txt", name: "a"),
        Case(url: "http://o/a/./b.txt", name: "b.txt"),
        Case(url: "http://o/a/b/.", name: "b"),
        Case(url: "http://user:pw@o/a/b.txt", name: "b.txt"),
        Case(url: "HTTP://o/a/B.txt", name: "B.txt"),
        Case(url: "ftp://o/a/b.txt", name: "b.txt"),
    ]

    @Test(arguments: cases) func nameComesFromTheLastPathComponent(_ example: Case) {
        #expect(Delivery.fileName(for: example.url) == example.name)
    }
}
