import Dispatch
import Foundation
import JSON
import JSONRPC
import Locking
import Testing

@testable import Courier

/// A memory hit whose `path` file an earlier hit made finishes in the turn
/// of the engine that admits it, its answer and `download/finished` handed
/// on together; hits that need file work or room in the client's output go
/// to the delivery queue, and hits finish in the order they came.
@Suite(.timeLimit(.minutes(1)))
struct DownloaderHitTests {
    static let body = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    static let url = "http://o/doc"
    /// The `cacheKey` under which the body is stored too, for any URL.
    static let sharedKey = "shared"

    /// What the downloader handed on, each message with the turn of the
    /// engine it came in.
    final class Heard: Sendable {
        enum Message {
            case answer(waiter: Int, receipt: ReceiptID)
            case finished(receipt: ReceiptID, outcome: Outcome)
        }

        private let state = Locked((turn: 0, messages: [(turn: Int, message: Message)]()))
        private let arrived = DispatchSemaphore(value: 0)

        func beginTurn() { state.withLock { $0.turn += 1 } }

        func hear(_ message: Message) {
            state.withLock { $0.messages.append(($0.turn, message)) }
            arrived.signal()
        }

        var messages: [(turn: Int, message: Message)] { state.withLock { $0.messages } }

        /// Waits, at most 10 s, until `condition` holds of what was heard.
        func wait(until condition: ([(turn: Int, message: Message)]) -> Bool) -> Bool {
            while !condition(messages) {
                guard arrived.wait(timeout: .now() + 10) == .success else { return condition(messages) }
            }
            return true
        }

        /// The receipt of waiter `waiter`'s answer, and the turn it came in.
        func answer(of waiter: Int) -> (turn: Int, receipt: ReceiptID)? {
            for (turn, message) in messages {
                if case .answer(waiter, let receipt) = message { return (turn, receipt) }
            }
            return nil
        }

        /// Receipt `receipt`'s outcome, the turn it came in and its place
        /// among the `download/finished` heard.
        func finished(_ receipt: ReceiptID) -> (turn: Int, outcome: Outcome, place: Int)? {
            var place = 0
            for (turn, message) in messages {
                guard case .finished(let id, let outcome) = message else { continue }
                if id == receipt { return (turn, outcome, place) }
                place += 1
            }
            return nil
        }
    }

    /// Holds the engine's next turn back until released, so that the
    /// requests sent meanwhile are all taken in that turn.
    final class TurnGate: Sendable {
        private let held = Locked<DispatchSemaphore?>(nil)

        /// Holds the next turn that begins.
        func hold() { held.withLock { $0 = DispatchSemaphore(value: 0) } }

        /// Lets the held turn go on.
        func release() { held.withLock { $0 }?.signal() }

        /// Called as a turn begins: waits while it is held.
        func pass() {
            guard let gate = held.withLock({ $0 }) else { return }
            _ = gate.wait(timeout: .now() + 10)
            held.withLock { $0 = nil }
        }
    }

    private func withDownloader(
        awaitOutputRoom: @escaping @Sendable () -> Void = {}, gate: TurnGate = TurnGate(),
        _ test: (Downloader<Int>, Heard, String) throws -> Void
    ) throws {
        let directory = NSTemporaryDirectory() + "courier-hits-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let configuration = Configuration(cacheDir: directory + "/cache")
        let root = try CacheRoot(testing: configuration.cacheDir)
        let cache = ResponseCache(configuration: configuration, root: root, logger: .init(label: "test"))
        try store(Self.body, in: cache, directory: directory)
        try store(Self.body, in: cache, directory: directory, params: ["cacheKey": .string(Self.sharedKey)])
        let heard = Heard()
        let downloader = try Downloader<Int>(
            settings: configuration, root: root, cache: cache,
            answer: { waiter, answer in
                guard case .download(let reply) = answer else { return }
                heard.hear(.answer(waiter: waiter, receipt: reply.receipt))
            },
            notify: { notice in
                guard case .finished(let receipt, _, let outcome) = notice else { return }
                heard.hear(.finished(receipt: receipt, outcome: outcome))
            },
            batch: { turn in
                gate.pass()
                heard.beginTurn()
                turn()
            },
            awaitOutputRoom: awaitOutputRoom, logger: .init(label: "test"))
        defer { downloader.shutdown() }
        try test(downloader, heard, directory)
    }

    private func request(_ params: [String: JSON] = [:]) throws -> DownloadRequest {
        var params = params
        if params["url"] == nil { params["url"] = .string(Self.url) }
        return try DownloadRequest(Params(.object(params)), defaults: Configuration(cacheDir: "/nonexistent"))
    }

    /// Stores `body` fresh for an hour under the key of the request
    /// `params` make, as a finished transfer would.
    private func store(_ body: [UInt8], in cache: ResponseCache, directory: String, params: [String: JSON] = [:]) throws {
        let file = directory + "/downloaded-\(params.count)"
        try Data(body).write(to: URL(fileURLWithPath: file))
        let now = Date()
        _ = cache.store(
            keys: [ResponseCache.key(for: try request(params))], request: try request(params),
            head: ResponseHead(status: 200, headers: [("cache-control", "max-age=3600")], finalURL: Self.url), requestTime: now,
            responseTime: now,
            body: CacheBodyFile(
                directory: nil, name: file, length: Int64(body.count), checksum: XXH3.hash(body), bytes: body,
                digests: BodyDigests()))
    }

    /// Sends a `download` for waiter `waiter` and waits for its outcome.
    private func download(
        _ params: [String: JSON] = [:], waiter: Int, with downloader: Downloader<Int>, heard: Heard
    ) throws -> (answerTurn: Int, finishedTurn: Int, outcome: Outcome) {
        downloader.download(try request(params), waiter: waiter)
        var found: (answerTurn: Int, finishedTurn: Int, outcome: Outcome)?
        _ = heard.wait { _ in
            guard let answer = heard.answer(of: waiter), let finished = heard.finished(answer.receipt) else { return false }
            found = (answer.turn, finished.turn, finished.outcome)
            return true
        }
        return try #require(found)
    }

    @Test func aHitWhosePathFileIsMadeFinishesInTheTurnThatAdmitsIt() throws {
        try withDownloader { downloader, heard, _ in
            // Given a memory hit that made the `path` file its stored response's hits share
            let first = try download(waiter: 1, with: downloader, heard: heard)
            #expect(first.outcome.ok && first.outcome.source == .memory)
            let path = try #require(first.outcome.path)
            #expect(FileManager.default.contents(atPath: path) == Data(Self.body))

            // When the same URL is asked for again
            let second = try download(waiter: 2, with: downloader, heard: heard)

            // Then it is answered and finished in one turn, with the same file
            #expect(second.outcome.ok && second.outcome.source == .memory)
            #expect(second.outcome.path == path)
            #expect(second.answerTurn == second.finishedTurn)
        }
    }

    @Test func aHitThatNeedsItsPathFileMadeGoesToTheDeliveryQueue() throws {
        try withDownloader { downloader, heard, _ in
            // Given a memory hit whose `path` file is made
            let first = try download(waiter: 1, with: downloader, heard: heard)
            let path = try #require(first.outcome.path)
            // And then removed by the client
            try FileManager.default.removeItem(atPath: path)

            // When the same URL is asked for again
            let second = try download(waiter: 2, with: downloader, heard: heard)

            // Then the file is made anew, on the delivery queue: its outcome comes in a later turn
            #expect(second.outcome.ok && second.outcome.path == path)
            #expect(FileManager.default.contents(atPath: path) == Data(Self.body))
            #expect(second.finishedTurn > second.answerTurn)
        }
    }

    @Test func aPathFileRemovedAfterAHitServedAtOnceIsMadeAgainForTheNextHit() throws {
        try withDownloader { downloader, heard, _ in
            // Given a hit that made the `path` file, and one served at once with it
            let first = try download(waiter: 1, with: downloader, heard: heard)
            let path = try #require(first.outcome.path)
            let second = try download(waiter: 2, with: downloader, heard: heard)
            #expect(second.answerTurn == second.finishedTurn && second.outcome.path == path)
            // And the file then removed by the client
            try FileManager.default.removeItem(atPath: path)

            // When the same URL is asked for again
            let third = try download(waiter: 3, with: downloader, heard: heard)

            // Then the file is looked at anew, and made again on the delivery queue
            #expect(third.outcome.ok && third.outcome.path == path)
            #expect(FileManager.default.contents(atPath: path) == Data(Self.body))
            #expect(third.finishedTurn > third.answerTurn)
        }
    }

    @Test func aHitServedAtOnceFinishesAfterAnEarlierHitOnTheDeliveryQueue() throws {
        let release = DispatchSemaphore(value: 0)
        try withDownloader(awaitOutputRoom: { _ = release.wait(timeout: .now() + 10) }) { downloader, heard, _ in
            // Given a hit whose `path` file is made
            _ = try download(waiter: 1, with: downloader, heard: heard)

            // When a hit asking for base64, which waits for room in the client's output, is admitted
            downloader.download(try request(["body": "base64"]), waiter: 2)
            #expect(heard.wait { _ in heard.answer(of: 2) != nil })
            // And, in a later turn, one that could be served at once, while the first still waits
            downloader.download(try request(), waiter: 3)
            #expect(heard.wait { _ in heard.answer(of: 3) != nil })
            release.signal()
            #expect(heard.wait { _ in heard.messages.count == 6 })

            // Then they finish in the order they came, the first with its body
            let base64 = try #require(heard.answer(of: 2).flatMap { heard.finished($0.receipt) })
            let plain = try #require(heard.answer(of: 3).flatMap { heard.finished($0.receipt) })
            #expect(base64.outcome.base64 == Data(Self.body).base64EncodedString())
            #expect(plain.outcome.ok && plain.outcome.path != nil)
            #expect(base64.place < plain.place)
        }
    }

    @Test func hitsOfOneTurnGetTheOutcomesOfTheirOwnURLsAndLimits() throws {
        let gate = TurnGate()
        try withDownloader(gate: gate) { downloader, heard, _ in
            // Given a hit of a response stored under a `cacheKey`, whose `path` file is made
            let shared: [String: JSON] = ["cacheKey": .string(Self.sharedKey)]
            let first = try download(shared, waiter: 1, with: downloader, heard: heard)
            let path = try #require(first.outcome.path)

            // When hits of it are taken in one turn: one as the first, one
            // refusing its size, one as the first again, and one naming
            // another URL
            let other = "http://o/other?copy=1"
            gate.hold()
            downloader.download(try request(shared), waiter: 2)
            downloader.download(try request(shared.merging(["maxBytes": 100]) { $1 }), waiter: 3)
            downloader.download(try request(shared), waiter: 4)
            downloader.download(try request(shared.merging(["url": .string(other)]) { $1 }), waiter: 5)
            gate.release()
            #expect(heard.wait { _ in (2...5).allSatisfy { heard.answer(of: $0).flatMap { heard.finished($0.receipt) } != nil } })

            // Then each is served at once in that turn, with its own URL and its own limit
            let served = try (2...5).map { waiter in
                let answer = try #require(heard.answer(of: waiter))
                let finished = try #require(heard.finished(answer.receipt))
                #expect(finished.turn == answer.turn)
                return finished
            }
            #expect(Set(served.map(\.turn)).count == 1)
            let (same, tooLarge, again, otherURL) = (served[0].outcome, served[1].outcome, served[2].outcome, served[3].outcome)
            #expect(same.ok && same.url == Self.url && same.path == path && same.source == .memory)
            #expect(!tooLarge.ok && tooLarge.error?.code == .tooLarge && tooLarge.path == nil && tooLarge.url == Self.url)
            #expect(again.ok && again.url == Self.url && again.path == path)
            #expect(otherURL.ok && otherURL.url == other && otherURL.path == path && otherURL.size == Int64(Self.body.count))
        }
    }

    @Test func aHitWithADestinationIsPlacedOnTheDeliveryQueue() throws {
        try withDownloader { downloader, heard, directory in
            // Given a hit whose `path` file is made
            _ = try download(waiter: 1, with: downloader, heard: heard)

            // When a hit names a destination
            let destination = directory + "/placed"
            let placed = try download(["destination": .string(destination)], waiter: 2, with: downloader, heard: heard)

            // Then the body is placed there, its outcome made on the delivery queue
            #expect(placed.outcome.ok && placed.outcome.path == destination)
            #expect(FileManager.default.contents(atPath: destination) == Data(Self.body))
            #expect(placed.finishedTurn > placed.answerTurn)
        }
    }
}
