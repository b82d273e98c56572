import Testing

@testable import Courier

@Suite struct WireIDTests {
    @Test func anIdIsWrittenAsItsLetterAndNumber() {
        #expect(TaskID(9).description == "t9" && TaskID(10).description == "t10")
        #expect(ReceiptID(9).description == "r9" && ReceiptID(10).description == "r10")
    }

    @Test(arguments: [0, 1, 9, 10, 99, 100, 12_345, 1_000_000_000_000_000_000, Int.max, -1, -10, Int.min])
    func anIdIsWrittenAsInterpolationWouldWriteIt(number: Int) {
        #expect(ReceiptID(number).description == "r\(number)")
        #expect(TaskID(number).description == "t\(number)")
    }

    @Test func theTextOfEveryNumberUpToAMillionIsItsDecimal() {
        for number in 0...1_000_000 where ReceiptID(number).description != "r\(number)" {
            Issue.record("r\(number)")
            return
        }
    }

    @Test(arguments: [1, 9, 10, 42, Int.max])
    func everyIdCourierWritesReadsBack(number: Int) {
        #expect(TaskID(wire: TaskID(number).description) == TaskID(number))
        #expect(ReceiptID(wire: ReceiptID(number).description) == ReceiptID(number))
    }

    /// Another spelling of the same number, another letter, or bytes around
    /// it name nothing courier issued.
    @Test(arguments: [
        "t042", "t+42", "T42", "r42", " t42", "t42 ", "t42\n", "t", "", "t0", "t-1", "t4\u{301}2", "t\u{0664}\u{0662}",
        "t9223372036854775808", "t42.0", "tt42",
    ])
    func anythingElseIsNoTask(wire: String) {
        #expect(TaskID(wire: wire) == nil)
    }

    @Test(arguments: ["r042", "r+42", "R42", "t42", "r42 ", "r", "", "r0", "r-1", "r99999999999999999999"])
    func anythingElseIsNoReceipt(wire: String) {
        #expect(ReceiptID(wire: wire) == nil)
    }
}
