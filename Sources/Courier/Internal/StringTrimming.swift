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
