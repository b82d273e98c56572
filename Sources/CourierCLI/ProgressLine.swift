/// One line of `courier get`'s live display (a running download, or the
/// total), fitted to the terminal's width: a label, a bar when the fraction
/// is known, then numbers, each shown whole or not at all.
///
/// When the line is too wide, room is found in this order: the bar narrows
/// from 20 cells to 5, then goes; the label stops being padded to the
/// other lines' labels, then is shortened in the middle (down to 8
/// columns); the gaps become one space; then the numbers that may go
/// (`optional`, the last first: the ETA, then the rate) go.
struct ProgressLine {
    var label: String
    /// The column width the labels of the display's lines share.
    var labelWidth: Int
    /// Done so far, 0 to 1; nil draws no bar.
    var fraction: Double?
    /// Most needed first; the last `optional` of them may be left out.
    var numbers: [String]
    var optional = 0

    static let widestBar = 20
    static let narrowestBar = 5
    static let shortestLabel = 8

    /// The line in fewer than `columns` columns (the last column stays
    /// free, so no terminal wraps it) whenever the numbers that must stay
    /// fit at all.
    func rendered(columns: Int) -> String {
        let limit = max(1, columns - 1)
        var numbers = self.numbers
        var optional = self.optional
        while true {
            for gap in [2, 1] {
                let gapText = String(repeating: " ", count: gap)
                let numbersText = numbers.joined(separator: gapText)
                let fixed = 2 + gap + TerminalText.width(numbersText)
                let ownWidth = TerminalText.width(label)
                for padTo in gap == 2 ? [max(labelWidth, ownWidth), ownWidth] : [ownWidth] {
                    let room = limit - fixed - padTo
                    if let fraction, room >= Self.narrowestBar + 3 {
                        let cells = min(Self.widestBar, room - 3)
                        return "  " + TerminalText.padded(label, to: padTo) + gapText + Self.bar(fraction, cells: cells) + " "
                            + numbersText
                    }
                    if room >= 0 { return "  " + TerminalText.padded(label, to: padTo) + gapText + numbersText }
                }
                let labelRoom = limit - fixed
                if labelRoom >= min(ownWidth, Self.shortestLabel) {
                    return "  " + TerminalText.shortened(label, to: labelRoom) + gapText + numbersText
                }
            }
            guard optional > 0 else { break }
            numbers.removeLast()
            optional -= 1
        }
        let text = "  " + TerminalText.shortened(label, to: Self.shortestLabel) + " " + numbers.joined(separator: " ")
        return TerminalText.shortened(text, to: limit)
    }

    /// `[#####.....]` with `cells` cells between the brackets.
    static func bar(_ fraction: Double, cells: Int) -> String {
        let filled = Int((min(1, max(0, fraction)) * Double(cells)).rounded(.down))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: cells - filled) + "]"
    }
}
