/// Text as a terminal shows it: how many columns it takes, shortened to a
/// number of columns, and made safe to print (no control character reaches
/// the terminal from a URL or a message).
enum TerminalText {
    /// The columns `text` takes: two for wide East Asian characters and
    /// emoji, none for combining marks and zero-width characters, one for
    /// the rest.
    static func width(_ text: some StringProtocol) -> Int {
        text.unicodeScalars.reduce(0) { $0 + width(of: $1) }
    }

    static func width(of scalar: Unicode.Scalar) -> Int {
        let properties = scalar.properties
        switch properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if properties.isEmojiPresentation { return 2 }
        switch scalar.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
            0xA000...0xA4CF, 0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19,
            0xFE30...0xFE6F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    /// `text` in at most `columns` columns: whole when it fits, else its
    /// start and its end around `…`, so an extension stays in view.
    static func shortened(_ text: String, to columns: Int) -> String {
        guard width(text) > columns else { return text }
        guard columns > 1 else { return String(repeating: "…", count: max(0, columns)) }
        let characters = Array(text)
        let tailRoom = (columns - 1) / 2
        let headRoom = columns - 1 - tailRoom
        var head = ""
        var used = 0
        for character in characters {
            let w = width(String(character))
            guard used + w <= headRoom else { break }
            head.append(character)
            used += w
        }
        var tail: [Character] = []
        used = 0
        for character in characters.reversed() {
            let w = width(String(character))
            guard used + w <= tailRoom else { break }
            tail.append(character)
            used += w
        }
        return head + "…" + String(tail.reversed())
    }

    /// `text` padded with spaces to `columns` columns.
    static func padded(_ text: String, to columns: Int) -> String {
        text + String(repeating: " ", count: max(0, columns - width(text)))
    }

    /// `text` with every control character (C0, DEL, C1) written as `?`:
    /// what a URL or a message from elsewhere may hold never moves the
    /// cursor or changes the terminal.
    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var safe = String.UnicodeScalarView()
        for scalar in text.unicodeScalars { safe.append(isControl(scalar) ? "?" : scalar) }
        return String(safe)
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}
