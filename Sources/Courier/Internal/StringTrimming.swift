extension StringProtocol {
    /// Without leading and trailing spaces and tabs: the optional white space
    /// of HTTP fields. Cheaper than Foundation's `trimmingCharacters(in:)`,
    /// which the header and cache paths would otherwise call per field.
    var trimmingBlanks: String {
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        let bytes = Array(utf8)
        guard let first = bytes.firstIndex(where: { !isBlank($0) }) else { return "" }
        let last = bytes.lastIndex(where: { !isBlank($0) })!
        if first == 0, last == bytes.count - 1 { return String(self) }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}

extension StringProtocol {
    /// Without leading and trailing horizontal white space (spaces of every
    /// width and tabs, not line breaks), as `trimmingCharacters(in:
    /// .whitespaces)` trims.
    var trimmingHorizontalSpace: String {
        let isSpace = { (character: Character) in
            character.unicodeScalars.allSatisfy { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator }
        }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}

/// The parts of a file path, as `NSString`'s path methods split it: trailing
/// slashes do not count, and the root's directory is the root.
enum PathName {
    /// `/a/b/c` → `/a/b`; `/a` → `/`; `/` → `/`; `c` → ``.
    static func directory(of path: String) -> String {
        let bytes = withoutTrailingSlashes(path)
        if bytes.isEmpty { return path.isEmpty ? "" : "/" }
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        let head = withoutTrailingSlashes(bytes[..<slash])
        return head.isEmpty ? "/" : String(decoding: head, as: UTF8.self)
    }

    /// `/a/b/c` → `c`; `/a/b/` → `b`; `/` → `/`.
    static func lastComponent(of path: String) -> String {
        let bytes = withoutTrailingSlashes(path.utf8[...])
        if bytes.isEmpty { return path.isEmpty ? "" : "/" }
        let start = bytes.lastIndex(of: UInt8(ascii: "/")).map { bytes.index(after: $0) } ?? bytes.startIndex
        return String(decoding: bytes[start...], as: UTF8.self)
    }

    private static func withoutTrailingSlashes(_ path: String) -> Substring.UTF8View {
        withoutTrailingSlashes(path.utf8[...])
    }

    private static func withoutTrailingSlashes(_ bytes: Substring.UTF8View) -> Substring.UTF8View {
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[bytes.index(before: end)] == UInt8(ascii: "/") {
            end = bytes.index(before: end)
        }
        return bytes[..<end]
    }
}
