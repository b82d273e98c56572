import JSON
import JSONRPC
import Testing

@testable import Courier

/// What a transfer is asked to digest, and how the receipts of one body are
/// each checked against their own `integrity`.
@Suite(.timeLimit(.minutes(1)))
struct IntegrityCheckTests {
    static let body = Array("the body".utf8)
    static let other = Array("another body".utf8)

    private static func request(_ url: String = "http://o/a", integrity: String? = nil) throws -> DownloadRequest {
        var params: [String: JSON] = ["url": .string(url)]
        if let integrity { params["integrity"] = .string(integrity) }
        return try DownloadRequest(Params(.object(params)), defaults: Configuration(cacheDir: "/nonexistent"))
    }

    private static func sri(_ algorithm: HashAlgorithm, _ bytes: [UInt8]) -> String {
        BodyDigests.text(algorithm, DigestHasher.hash(bytes, algorithm))
    }

    @Test func eachReceiptIsCheckedAgainstItsOwnDigestsAndTheMissingOnesAreReadOnce() throws {
        // Given receipts of one body: none, a right sha256, a wrong sha512,
        // a right sha384; the transfer took sha256 only
        let requests = [
            try Self.request(), try Self.request(integrity: Self.sri(.sha256, Self.body)),
            try Self.request(integrity: Self.sri(.sha512, Self.other)), try Self.request(integrity: Self.sri(.sha384, Self.body)),
        ]
        var asked: [Set<HashAlgorithm>] = []

        // When they are checked
        let check = IntegrityCheck(requests, taken: BodyDigests.of(Self.body, [.sha256])) { missing in
            asked.append(missing)
            return BodyDigests.of(Self.body, missing)
        }

        // Then the body was read once, for the algorithms not taken
        #expect(asked == [[.sha384, .sha512]])
        // And only the wrong receipt fails, with what it expected and got
        #expect(check.failures.map { $0 == nil } == [true, true, false, true])
        #expect(check.failures[2]?.code == .integrityMismatch)
        #expect(check.failures[2]?.expected == Self.sri(.sha512, Self.other))
        #expect(check.failures[2]?.actual == Self.sri(.sha512, Self.body))
        #expect(!check.passed)
        // And every digest taken is kept, for the cache to record
        #expect(check.digests == BodyDigests.of(Self.body, [.sha256, .sha384, .sha512]))
    }

    @Test func receiptsWithoutIntegrityReadNothingAndPass() throws {
        let check = IntegrityCheck([try Self.request(), try Self.request()], taken: BodyDigests()) { _ in
            Issue.record("the body was read")
            return nil
        }
        #expect(check.passed)
        #expect(check.digests.isEmpty)

        // And the digests the transfer took are kept, for the cache to record
        let taken = BodyDigests.of(Self.body, [.sha256])
        #expect(IntegrityCheck([try Self.request()], taken: taken) { _ in nil }.digests == taken)
    }

    @Test func aBodyThatCannotBeReadBackFailsTheReceiptsThatNeededIt() throws {
        let requests = [try Self.request(integrity: Self.sri(.sha512, Self.body)), try Self.request()]
        let check = IntegrityCheck(requests, taken: BodyDigests()) { _ in nil }
        #expect(check.failures[0]?.code == .io)
        #expect(check.failures[1] == nil)
    }

    @Test func theTransferTakesTheDigestsOfEveryReceiptPresentWhenItStarts() throws {
        // Given one transfer slot, taken by another task
        var scheduler = DownloadScheduler<Int>(settings: { var s = SchedulerSettings(); s.maxActive = 1; return s }())
        scheduler.download(try Self.request("http://o/first"), waiter: 0, now: 0)
        // And receipts for one URL queued behind it, asking for two algorithms and none
        scheduler.download(try Self.request(integrity: Self.sri(.sha256, Self.body)), waiter: 1, now: 0)
        scheduler.download(try Self.request(integrity: Self.sri(.sha512, Self.body)), waiter: 2, now: 0)
        scheduler.download(try Self.request(), waiter: 3, now: 0)
        let first = scheduler.takeActions().compactMap { action -> TransferOrder? in
            if case .start(let order) = action { return order }
            return nil
        }
        #expect(first.map(\.digestAlgorithms) == [[]])

        // When the first ends and the queued task starts
        let ended = try #require(first.first)
        scheduler.transferEnded(ended.id, TransferResult(response: nil, size: 0, bodyPath: "/b"), now: 1)
        let started = scheduler.takeActions().compactMap { action -> TransferOrder? in
            if case .start(let order) = action { return order }
            return nil
        }

        // Then its transfer is asked for both algorithms
        #expect(started.map(\.request.url) == ["http://o/a"])
        #expect(started.map(\.digestAlgorithms) == [[.sha256, .sha512]])
    }
}
