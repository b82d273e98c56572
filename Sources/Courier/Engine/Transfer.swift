import Curl
import FoundationEssentials
import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Receives a transfer's events on the engine's thread.
protocol TransferObserver: AnyObject {
    /// The final response's headers are in (after any redirects), their
    /// `announcedLength` read as the transfer's; return false to stop the
    /// transfer.
    func transferDidReceiveResponse(_ transfer: Transfer, _ response: ResponseHead) -> Bool
    /// Bytes of the body have arrived: `received` so far (a body larger
    /// than `BodyWriter.directLimit` reaches its file a little later), which
    /// take at least `textLength` bytes as a JSON string read as UTF-8 when
    /// the transfer counts it (`countsText`). Called for the first bytes,
    /// then after each turn of the engine in which some arrived and every
    /// `Transfer.reportStride` bytes within a turn, not per piece libcurl
    /// hands over; return false to stop the transfer.
    func transferDidReceiveData(_ transfer: Transfer, received: Int64, textLength: Int64?, expected: Int64?) -> Bool
    /// `result` moves into the observer, which hands it on.
    func transferDidComplete(_ transfer: Transfer, _ result: consuming TransferResult)
}

/// How a transfer ended.
struct TransferResult: Sendable {
    var response: ResponseHead?
    var size: Int64
    /// When the first request was sent, for the stored response's age.
    var requestDate = Date()
    /// The file holding the body, when the transfer succeeded.
    var bodyPath: String?
    /// Where that file is, when the transfer succeeded.
    var body: BodyTarget? = nil
    /// No file was made: the body is `bytes` alone, and `body` says where
    /// its file would have been.
    var bodyIsInMemoryOnly = false
    /// The body's first bytes (up to `ImageInfo.sniffLength`), kept while
    /// they streamed by so nobody reads the file again to recognise an image.
    var head: [UInt8] = []
    /// XXH3-64 of the `size` bytes written to the body file, taken as they
    /// were written, so the cache stores the body without reading it back.
    var checksum = XXH3.empty
    /// The body's digests by the algorithms the transfer was asked for,
    /// taken as they were written.
    var digests = BodyDigests()
    /// The whole body, when it stayed within the transfer's copy limit.
    var bytes: [UInt8]? = nil
    /// The redirect responses followed on the way, oldest first.
    var redirects: [ResponseHead] = []
    var failure: TransferFailure?
    /// The byte the body went on from, when the transfer continued a kept
    /// body.
    var resumedFrom: Int64? = nil
}

/// Why a transfer failed.
struct TransferFailure: Error, Sendable {
    var code: OutcomeErrorCode
    var message: String
    var curlCode: Int32?
    /// For `integrity_mismatch`: the digests the request gave for the
    /// deciding algorithm, and the body's, in Subresource Integrity form.
    var expected: String? = nil
    var actual: String? = nil
}

/// Where a transfer's body streams: a file created exclusively (never
/// through a symlink, never over an existing file) in a directory opened
/// beforehand.
struct BodyTarget: Sendable {
    let directory: DirectoryHandle
    let name: String
    /// 0600 for files in courier's own directories; 0666 (less the umask)
    /// for one that becomes the client's destination.
    let mode: mode_t
    /// Set when the body is for a destination and streams beside it (or in
    /// the partial store, on its file system): that destination as the
    /// client gave it, and its name in `directory` (or
    /// `destinationDirectory`).
    var destination: DestinationFile? = nil
    /// The destination's directory, when the body streams in the partial
    /// store instead.
    var destinationDirectory: DirectoryHandle? = nil
    /// The partial store's file the body streams into: held (locked) until
    /// the body is placed.
    var partial: PartialFile? = nil
    /// For a body beside a destination that is held in memory until it is
    /// placed: its file, made ahead.
    var prepared: PreparedFile? = nil
    /// Where a file of this name beside a destination is noted before it
    /// is made, so that what a dead courier left there is removed.
    var leftovers: Leftovers? = nil

    /// A destination as the client gave it, and its name in its directory:
    /// a struct, not a tuple, as each copy of a target (a few per download)
    /// copied a tuple through its type's metadata at run time.
    struct DestinationFile: Sendable {
        let path: String
        let name: String
    }

    var path: String { directory.path + "/" + name }

    func create() throws(Destination.Failure) -> Int32 {
        leftovers?.record(partial: name, in: directory)
        return try directory.createFile(name, mode: mode)
    }

    func remove() { directory.remove(name) }
}

/// What a transfer may do with the partial store: keep its body there,
/// under `key`, when the attempt ends without all of it, and continue
/// `resume`, the body kept before.
struct PartialPlan: Sendable {
    let store: PartialStore
    /// The request, whose headers forbid keeping a response a cache may
    /// not store, and which makes the key.
    let request: DownloadRequest
    /// The URL this attempt asks.
    let url: String
    /// Something other than the entity tag proves the body (an integrity
    /// digest), so a body kept from another URL may continue here.
    var proven = false
    /// The kept body this attempt asks the rest of.
    var resume: ResumePoint?

    /// The request's key in the store: made when a body is looked for or
    /// kept, not for each transfer (most bodies are never kept).
    var key: [UInt8] { PartialStore.key(for: request) }

    /// A body kept from another URL continues only with the strong entity
    /// tag it was kept under, unless something else proves it.
    var sameEntityTagRequired: Bool { resume.map { !$0.url.isExactly(url) && !proven } ?? false }
}

/// One HTTP transfer: an easy handle, its response, and the temporary file its
/// body streams into. It follows redirects itself, hop by hop, so each hop
/// is checked against `RedirectPolicy` before anything is sent to it.
///
/// With a `PartialPlan`, a body that may be resumed (see `keepable`)
/// streams in a file of the partial store, kept there when the attempt
/// ends short; a kept body is asked the rest of (`Range` and `If-Range`,
/// without `Accept-Encoding`), and `ResumeDecision` says whether the
/// response continues it, starts it anew in the same file, or fails.
/// Made, driven and let go on the engine's thread alone: other threads
/// hear of it through values split off it (`TransferResult`, a
/// `BodyWriter.Stream`), and reach it through the engine's inbox.
final class Transfer: EasyHandleDelegate {
    let id: TransferID
    /// When the first request was sent, for the stored response's age.
    let requestDate = Date()
    /// The whole transfer's timeout, over every hop of its redirects.
    private let timeoutMilliseconds: Int?
    /// Bodies larger than this fail.
    private let maxFileSize: Int64?
    let redirectPolicy: RedirectPolicy
    /// Where the body streams unless it streams in the partial store.
    let body: BodyTarget
    /// The largest body kept in memory as well as in its file.
    let copyLimit: Int
    private let observer: any TransferObserver
    /// What the body takes as a JSON string, read as UTF-8, counted as it
    /// arrives when a receipt asks for it as text. Like the other parts
    /// every piece of the body changes (`pending`, `firstBytes`, `streamingHash`,
    /// `copy`), not checked for exclusive access at run time: they change
    /// on this thread alone, and nothing their changes call reaches them.
    @exclusivity(unchecked) private var textLength: JSONStringLength?
    /// `begin` has run: the transfer runs, or has ended.
    private(set) var hasBegun = false

    /// Its handle, while in the multi handle; the handle holds this
    /// transfer as its delegate unretained (see `deinit`).
    private var easy: EasyHandle?
    /// The body file, while this thread writes it.
    private var fd: Int32 = -1
    /// Takes the body's writes once it is known to pass
    /// `BodyWriter.directLimit`; then `stream` is the file's, and `pending`
    /// the piece being filled.
    private var writer: BodyWriter?
    private var stream: BodyWriter.Stream?
    @exclusivity(unchecked) private var pending: [UInt8] = []
    /// Not checked for exclusive access: every header line changes it, on
    /// this thread alone.
    @exclusivity(unchecked) private var head = ResponseHead(status: 0, headers: [])
    private var announced = false
    /// The final response's `announcedLength`, read once it is announced.
    private(set) var announcedLength: Int64?
    private var received: Int64 = 0
    /// Bytes have arrived since the observer last heard of them.
    private var unreported = false
    /// `received` when the observer last heard of it.
    private var reported: Int64 = 0
    /// Within one turn the observer still hears of the first bytes at once
    /// and then of every this many: its byte limits stop a transfer at
    /// most this far past them, whatever one read of libcurl brings.
    static let reportStride: Int64 = 256 << 10
    /// The body's first bytes (up to `ImageInfo.sniffLength`) while `copy`
    /// is not kept: while it is, it holds them (see `sniffed`).
    @exclusivity(unchecked) private var firstBytes: [UInt8] = []
    /// Of the bytes this thread wrote to the body file (a continued body's
    /// kept bytes first); the body writer goes on from it. Made when first
    /// needed (`hasher`): a body held whole in `copy` is hashed in one pass
    /// at its end (`checksum`), with no hash state made for it.
    @exclusivity(unchecked) private var streamingHash: XXH3?
    /// Every byte received so far is in `copy`, and none in
    /// `streamingHash`: they are hashed from `copy` when the checksum is
    /// taken, or before `copy` is let go or the hash handed on
    /// (`caughtUpHasher`).
    private var hashesCopyLater = true
    /// The partial store, the request's key there, and the kept body this
    /// attempt asks the rest of. Not checked for exclusive access at run
    /// time: it changes on this thread alone, and nothing its changes call
    /// reaches it.
    @exclusivity(unchecked) private var partials: PartialPlan?
    /// The client's own headers ask for a range: a 206 is its answer.
    private let clientAsksRange: Bool
    /// Where the body streams: `body`, or a file of the partial store.
    private var target: BodyTarget
    /// The partial store's file the body streams into, when it does.
    private var partialFile: PartialFile?
    /// The body in `partialFile` is kept when the attempt ends short.
    private var keeping = false
    /// The byte a continued body went on from.
    private var resumedFrom: Int64?
    /// For a continued body: where the range the origin sent ends
    /// (exclusive), and the length the whole body has.
    private var rangeEnd: Int64?
    private var completeLength: Int64?
    /// The stream the body writer is closing, for how much of it it wrote.
    private var closing: BodyWriter.Stream?
    /// The digests the receipts' `integrity` needs, of the bytes this thread
    /// wrote; the body writer takes them over with the file. None for a
    /// continued body, whose kept bytes were never digested: its digests are
    /// read from the whole file once it is complete.
    private var digests: BodyHasher?
    /// The bytes written to the body file, until they pass `copyLimit`.
    @exclusivity(unchecked) private var copy: [UInt8]?
    /// The body is held in `copy` alone, with no file made for it: a body
    /// announced within `copyLimit`, which whoever delivers it writes where
    /// it goes, so this thread creates no file for it (on most file
    /// systems the costliest step of a small download). Should more
    /// arrive, the file is made then.
    private var heldInMemory = false
    private var stopReason: TransferFailure?
    /// How the transfer ended, while the body writer closes its file.
    private var ending: TransferFailure?
    /// The options of the hop under way. Not checked for exclusive access
    /// at run time: they change on this thread alone, and nothing their
    /// changes call reaches them.
    @exclusivity(unchecked) private var hopOptions: EasyOptions
    /// The current response is a redirect that will be followed: its body
    /// is skipped.
    private var redirecting = false
    private var redirects: [ResponseHead] = []
    private var deadline = Double.infinity
    /// Suspended by the client: a redirect's next hop starts paused too.
    private var paused = false
    /// The engine's rate limits, which every piece of body passes.
    private var throttle: Throttle?
    /// Bytes per second it may take, nil for no rate of its own. Set when
    /// it is made, then changed on the engine's thread, begun or not.
    var maxRate: Int64?

    /// A handle still in its multi handle never calls back into a freed
    /// transfer: every path out takes it out first (`release(on:)`), and
    /// should one not, the handle is left without a delegate, so its
    /// callbacks refuse the data and its completion is skipped.
    deinit {
        easy?.delegate = nil
    }

    /// Takes `options` over as its first hop's: the transfer keeps no
    /// other copy of them.
    init(
        id: TransferID, options: consuming EasyOptions, redirectPolicy: RedirectPolicy = RedirectPolicy(), body: BodyTarget,
        copyLimit: Int = 0, countsText: Bool = false, partials: PartialPlan? = nil, digesting: Set<HashAlgorithm> = [],
        maxRate: Int64? = nil, observer: any TransferObserver
    ) {
        self.id = id
        timeoutMilliseconds = options.timeoutMilliseconds
        maxFileSize = options.maxFileSize
        self.redirectPolicy = redirectPolicy
        self.body = body
        self.target = body
        self.copyLimit = copyLimit
        self.textLength = countsText ? JSONStringLength() : nil
        self.partials = partials
        // Not asked of a hasher that would fail for no algorithm: a class's
        // failed init allocates the instance before letting it go.
        digests = digesting.isEmpty ? nil : BodyHasher(digesting)
        self.maxRate = maxRate
        self.observer = observer
        clientAsksRange = options.headers.contains { $0.name.lowercased() == "range" }
        hopOptions = consume options
        hopOptions.followRedirects = false
    }

    /// Asks for the rest of `resume` (the kept body the partial store
    /// found), before the transfer begins.
    func prepare(resume: ResumePoint?) {
        guard let resume, partials != nil else { return }
        partials?.resume = resume
        hopOptions.headers += resume.kept.rangeHeaders
        hopOptions.acceptsEncodings = false
    }

    func begin(on multi: MultiHandle, writer: BodyWriter? = nil, throttle: Throttle? = nil) {
        hasBegun = true
        self.writer = writer
        self.throttle = throttle
        if let timeout = timeoutMilliseconds { deadline = MonotonicClock.now() + Double(timeout) / 1000 }
        start(hopOptions, on: multi)
    }

    private func start(_ options: EasyOptions, on multi: MultiHandle) {
        let easy = multi.makeEasyHandle()
        easy.delegate = self
        easy.configure(options)
        self.easy = easy
        multi.add(easy)
        if paused { easy.pause() }
    }

    /// Takes the redirect the current response names, if it is allowed:
    /// true when the next hop has started.
    private func followRedirect(on multi: MultiHandle) throws(TransferFailure) -> Bool {
        guard let location = easy?.redirectURL.flatMap(CurlURL.redirectTarget), let target = CurlURL(location) else {
            return false
        }
        let current = CurlURL(hopOptions.url)
        if let refusal = redirectPolicy.refusal(from: current, to: target, hop: redirects.count + 1) { throw refusal }
        var next = hopOptions
        next.url = location
        next.headers = RedirectPolicy.headers(hopOptions.headers, from: current, to: target)
        if let timeoutMilliseconds {
            let remaining = Int(((deadline - MonotonicClock.now()) * 1000).rounded(.up))
            guard remaining > 0 else {
                throw TransferFailure(code: .timeout, message: "Operation timed out after \(timeoutMilliseconds) milliseconds")
            }
            next.timeoutMilliseconds = remaining
        }
        redirects.append(head)
        if let easy { multi.recycle(easy) }
        easy = nil
        hopOptions = next
        head = ResponseHead(status: 0, headers: [])
        redirecting = false
        start(next, on: multi)
        return true
    }

    /// Whether the client has suspended it.
    var isSuspended: Bool { paused }

    func pause() {
        paused = true
        easy?.pause()
    }

    func resume() {
        paused = false
        easy?.unpause()
    }

    /// The rate limiter has credit for the transfer again: it goes on,
    /// unless the client has suspended it.
    func unthrottle() {
        if !paused { easy?.unpause() }
    }

    /// Stops the transfer without reporting it, and removes its file, or
    /// keeps it in the partial store when it may be.
    func abandon(on multi: MultiHandle) {
        release(on: multi)
        if let stream, let writer {
            if keeping { writer.write(pending, to: stream) }
            pending = []
            self.stream = nil
            let (file, keeping, firstBytes) = (partialFile, keeping, sniffed)
            writer.close(stream) { _, _ in
                guard let file else { return }
                let (written, hashState) = stream.snapshot()
                Self.settle(file, completed: false, keeping: keeping, written: written, hashState: hashState, firstBytes: firstBytes)
            }
        } else if let partialFile, closing == nil {
            // (A transfer whose stream is closing is settled by `finish`,
            // or, when the engine stops first, left at its last checkpoint.)
            Self.settle(
                partialFile, completed: false, keeping: keeping, written: received, hashState: caughtUpHasher.state, firstBytes: sniffed)
        }
        partialFile = nil
        partials = nil
        target = body
        body.remove()
    }

    /// How `complete` left the transfer.
    enum Completion {
        /// The next hop of a redirect has started.
        case redirected
        /// The observer has heard how it ended.
        case ended
        /// The body writer may still have bytes of it to write: close the
        /// stream through the writer, then call
        /// `finish(writeFailure:checksum:)` with what it reports.
        case flushing(BodyWriter.Stream)
    }

    /// Tells the observer of the bytes that arrived since it last heard;
    /// the engine calls it after each turn of libcurl, so a burst of
    /// 16 KiB pieces from one read costs one report. When the observer says
    /// stop, the next piece aborts the transfer, or its completion fails.
    func reportData() {
        guard unreported else { return }
        unreported = false
        reported = received
        if !observer.transferDidReceiveData(
            self, received: received, textLength: textLength?.completeCount, expected: announcedLength)
        {
            stopReason = stopReason ?? TransferFailure(code: .cancelled, message: "stopped")
        }
    }

    /// The transfer's easy handle has finished: reports the outcome, or
    /// starts the next hop of a redirect, or hands the outcome's last step
    /// to the body writer.
    func complete(code: Int32, on multi: MultiHandle) -> Completion {
        reportData()
        if redirecting, code == 0, stopReason == nil {
            do throws(TransferFailure) {
                if try followRedirect(on: multi) { return .redirected }
            } catch {
                stopReason = error
            }
        }
        var failure = stopReason
        if failure == nil, code != 0 {
            var kind = CurlFailure(code: code)
            // An http(s) URL was allowed before it was sent, and redirects are
            // checked hop by hop: curl's "unsupported protocol" then means a
            // response it could not read as HTTP.
            if kind == .schemeNotAllowed, RedirectPolicy.schemes.contains(CurlURL(hopOptions.url)?.scheme ?? "") {
                kind = .network
            }
            let message = easy?.errorMessage(code: code) ?? "transfer failed"
            failure = TransferFailure(code: OutcomeErrorCode(kind), message: message, curlCode: code)
        } else if failure != nil, code != 0 {
            failure?.curlCode = code
        }
        if !announced, failure == nil {
            failure = announce(finalURL: easy?.effectiveURL)
            if failure == nil, resumedFrom == nil, copyLimit > 0 { copy = [] }
        }
        if head.finalURL == nil { head.finalURL = easy?.effectiveURL }
        if failure == nil, let completeLength, received != completeLength {
            failure = TransferFailure(
                code: .network, message: "the origin's range ended at byte \(received) of the \(completeLength) of the body")
        }
        release(on: multi)
        if let stream, let writer {
            if failure == nil || keeping { writer.write(pending, to: stream) }
            pending = []
            self.stream = nil
            closing = stream
            ending = failure
            return .flushing(stream)
        }
        finish(failure, checksum: checksum, digests: digests?.finalize())
        return .ended
    }

    /// The body writer has written and closed the body file: reports the
    /// outcome `complete` found, or the writer's failure.
    func finish(writeFailure: TransferFailure?, checksum: UInt64) {
        finish(ending ?? writeFailure, checksum: checksum, digests: closing?.finalizeDigests())
    }

    private func finish(_ failure: TransferFailure?, checksum: UInt64, digests: BodyDigests?) {
        if let partialFile {
            let (written, hashState) = closing.map { $0.snapshot() } ?? (written: received, hashState: caughtUpHasher.state)
            Self.settle(
                partialFile, completed: failure == nil, keeping: keeping, written: written, hashState: hashState, firstBytes: sniffed)
        } else if failure != nil {
            body.remove()
        }
        // The head moves into the result: the transfer reads it no more.
        var response = ResponseHead(status: 0, headers: [])
        swap(&response, &head)
        let result = TransferResult(
            response: response.status == 0 && failure != nil ? nil : response, size: received, requestDate: requestDate,
            bodyPath: failure == nil && !heldInMemory ? target.path : nil, body: failure == nil ? target : nil,
            bodyIsInMemoryOnly: heldInMemory, head: sniffed, checksum: checksum, digests: digests ?? BodyDigests(),
            bytes: failure == nil ? copy : nil, redirects: redirects, failure: failure, resumedFrom: resumedFrom)
        copy = nil
        closing = nil
        partialFile = nil
        partials = nil
        if failure != nil { target = body }
        observer.transferDidComplete(self, result)
    }

    /// What becomes of the partial store's file when the attempt ends: a
    /// complete body is a downloaded one (its row goes, the file is
    /// delivered); the `written` bytes of one that ended short are kept
    /// when it may be; else the file goes.
    private static func settle(
        _ file: PartialFile, completed: Bool, keeping: Bool, written: Int64, hashState: XXH3.State, firstBytes: [UInt8]
    ) {
        if completed {
            file.completed()
        } else if keeping, written > 0 {
            file.keep(length: written, hashState: hashState, firstBytes: firstBytes)
        } else {
            file.drop()
        }
    }

    /// The final response's head is in (with its first bytes, or its end):
    /// decides what becomes of a kept body, tells the observer, and opens
    /// the file the body streams into. The failure that ends the transfer,
    /// if any.
    private func announce(finalURL: String?) -> TransferFailure? {
        announced = true
        head.finalURL = finalURL
        // Without a kept body the status decides, and the head is not
        // copied to be read.
        let decision =
            if let kept = partials?.resume?.kept {
                ResumeDecision.decide(
                    kept: kept, clientAskedRange: clientAsksRange,
                    sameEntityTagRequired: partials?.sameEntityTagRequired ?? false, response: head)
            } else {
                ResumeDecision.withoutKeptBody(status: head.status, clientAskedRange: clientAsksRange)
            }
        switch decision {
        case .reject(let reason):
            partials?.resume?.file.drop()
            partials?.resume = nil
            return TransferFailure(code: .network, message: reason)
        case .errorStatus(let dropsKept):
            if dropsKept { partials?.resume?.file.drop() }
            partials?.resume = nil
        case .resume(_, let end, let length):
            head = head.whole(length: length)
            rangeEnd = end
            completeLength = length
        case .startAnew:
            break
        }
        // The head is moved out while it is read and handed to the observer,
        // then put back: passed from where the transfer holds it, it would
        // be copied, every string of it retained and released again.
        var response = ResponseHead(status: 0, headers: [])
        swap(&response, &head)
        announcedLength = response.announcedLength
        let goesOn = observer.transferDidReceiveResponse(self, response)
        swap(&response, &head)
        guard goesOn else {
            return stopReason ?? TransferFailure(code: .cancelled, message: "stopped")
        }
        do throws(Destination.Failure) {
            try openBody(decision)
        } catch {
            return error.transferFailure
        }
        return nil
    }

    /// Opens the file the body streams into: the kept body's, continued at
    /// its end or emptied to start anew; a new one of the partial store
    /// when the body may be kept; else `body`'s.
    private func openBody(_ decision: ResumeDecision) throws(Destination.Failure) {
        let resume = partials?.resume
        partials?.resume = nil
        let keptAs = keepable()
        if let resume {
            let offset: Int64
            if case .resume(let from, _, _) = decision { offset = from } else { offset = 0 }
            if offset == 0, ftruncate(resume.file.fd, 0) != 0 {
                resume.file.drop()
            } else if let opened = Self.duplicate(resume.file, at: offset) {
                fd = opened
                use(resume.file)
                if offset > 0 {
                    received = offset
                    streamingHash = XXH3(continuing: resume.hashState)
                    hashesCopyLater = false
                    firstBytes = resume.firstBytes
                    textLength = nil
                    resumedFrom = offset
                    digests = nil
                    keeping = !CacheControl(head.headers).noStore
                    if !keeping { resume.file.forget() }
                } else if let (validator, length) = keptAs, let plan = partials {
                    resume.file.describe(key: plan.key, url: plan.url, validator: validator, completeLength: length)
                    keeping = true
                } else {
                    resume.file.forget()
                }
                return
            } else {
                resume.file.drop()
            }
        }
        if let (validator, length) = keptAs, let plan = partials, let file = plan.store.makeFile(),
            let opened = Self.duplicate(file, at: 0)
        {
            file.describe(key: plan.key, url: plan.url, validator: validator, completeLength: length)
            fd = opened
            use(file)
            keeping = true
            return
        }
        if copyLimit > 0, let length = announcedLength, length <= Int64(copyLimit) {
            heldInMemory = true
            return
        }
        fd = try body.create()
    }

    /// Makes the body file of a body held in memory, once more of it came
    /// than fits there, and writes what was held.
    private func writeHeldBody() -> TransferFailure? {
        heldInMemory = false
        do throws(Destination.Failure) {
            fd = try body.create()
        } catch {
            return error.transferFailure
        }
        return (copy ?? []).withUnsafeBytes { BodyWriter.writeAll($0, to: fd, path: target.path) }
    }

    /// Streams the body into `file` of the partial store, from where it is
    /// placed as `body` would have been.
    private func use(_ file: PartialFile) {
        partialFile = file
        target = BodyTarget(
            directory: file.store.directory, name: file.name, mode: 0o600, destination: body.destination,
            destinationDirectory: body.destination != nil ? body.directory : nil, partial: file)
    }

    /// A descriptor of its own for `file`'s open file, positioned at
    /// `offset` (the lock stays with the file's).
    private static func duplicate(_ file: PartialFile, at offset: Int64) -> Int32? {
        let fd = fcntl(file.fd, F_DUPFD_CLOEXEC, 0)
        guard fd >= 0 else { return nil }
        guard lseek(fd, off_t(offset), SEEK_SET) == off_t(offset) else {
            close(fd)
            return nil
        }
        return fd
    }

    /// The validator and complete length under which the body of the
    /// response (`head`) may be kept for a later attempt, when it may be: a 200 of
    /// known length (over `PartialStore.minimumLength`) in its identity
    /// form, with a strong entity tag or a Last-Modified, that a cache
    /// could store for the request (no `no-store`, no credentials: the plan
    /// is only made for requests the cache applies to).
    /// The head is read where the transfer holds it, and copied only for a
    /// response that passes the cheap checks.
    private func keepable() -> (ResumeValidator, Int64)? {
        guard let plan = partials, head.status == 200, let length = announcedLength,
            length > PartialStore.minimumLength, head.header("content-encoding") == nil
        else { return nil }
        let response = head
        guard let validator = ResumeValidator(of: response),
            HTTPCachePolicy.isStorable(status: 200, requestHeaders: plan.request.headers, responseHeaders: response.headers)
        else { return nil }
        return (validator, length)
    }

    /// The hash of the bytes this thread wrote, made at its first use.
    private var hasher: XXH3 {
        if let streamingHash { return streamingHash }
        let made = XXH3()
        streamingHash = made
        return made
    }

    /// `hasher` holding every byte received so far: those held back in
    /// `copy` are hashed first.
    private var caughtUpHasher: XXH3 {
        let hasher = self.hasher
        if hashesCopyLater {
            hashesCopyLater = false
            if let copy { hasher.update(copy) }
        }
        return hasher
    }

    /// XXH3-64 of every byte received so far: of `copy`, in one pass, when
    /// it holds them all.
    private var checksum: UInt64 {
        guard !hashesCopyLater else { return copy.map { XXH3.hash($0) } ?? XXH3.empty }
        return hasher.finalize()
    }

    /// The body's first bytes, up to `ImageInfo.sniffLength`: while `copy`
    /// holds every byte so far, its storage is shared rather than copied.
    private var sniffed: [UInt8] {
        guard let copy else { return firstBytes }
        return copy.count <= ImageInfo.sniffLength ? copy : Array(copy.prefix(ImageInfo.sniffLength))
    }

    /// From here on the body writer writes the body file, when there is one.
    private func handOverFile() {
        guard let writer else { return }
        var checkpoint: (@Sendable (Int64, UInt64) -> Void)?
        if keeping, let file = partialFile {
            checkpoint = { length, checksum in file.checkpoint(length: length, checksum: checksum) }
        }
        stream = BodyWriter.Stream(
            fd: fd, path: target.path, hashed: caughtUpHasher.state, digesting: digests, written: received,
            checkpointInterval: PartialStore.checkpointInterval, checkpoint: checkpoint)
        digests = nil
        fd = -1
        pending = writer.buffer()
    }

    /// Ends the transfer at the next callback with `failure` as its reason.
    private func stop(_ failure: TransferFailure) -> WriteDecision {
        stopReason = stopReason ?? failure
        return .abort
    }

    private func release(on multi: MultiHandle) {
        if let easy {
            multi.recycle(easy)
            self.easy = nil
        }
        if fd >= 0 {
            close(fd)
            fd = -1
        }
    }

    // MARK: - EasyHandleDelegate

    override func easyHandle(_ handle: EasyHandle, didReceiveHeaderLine line: UnsafeRawBufferPointer) {
        guard head.read(HeaderLine(line)) else { return }
        // Every redirect status is within 301–308: any other is told apart
        // without hashing it.
        redirecting = (301...308).contains(head.status) && RedirectPolicy.statuses.contains(head.status)
            && head.header("location") != nil
    }

    override func easyHandle(_ handle: EasyHandle, didReceive data: UnsafeRawBufferPointer) -> WriteDecision {
        if paused { return .pause }
        if redirecting { return .accept }
        if stopReason != nil { return .abort }
        if !announced {
            if let failure = announce(finalURL: handle.effectiveURL) { return stop(failure) }
            let length = announcedLength ?? 0
            if copyLimit > 0, resumedFrom == nil, length <= Int64(copyLimit) {
                copy = []
                copy?.reserveCapacity(Int(length))
            }
            if length > BodyWriter.directLimit { handOverFile() }
        }
        if let rangeEnd, received + Int64(data.count) > rangeEnd {
            keeping = false
            return stop(TransferFailure(
                code: .network, message: "the origin sent more than the bytes \(resumedFrom ?? 0)-\(rangeEnd - 1) its Content-Range announced"))
        }
        if let throttle, !throttle.admit(self, bytes: data.count) { return .pause }
        if heldInMemory, received + Int64(data.count) > Int64(copyLimit), let failure = writeHeldBody() { return stop(failure) }
        if stream == nil, received + Int64(data.count) > BodyWriter.directLimit { handOverFile() }
        if let stream, let writer {
            if let failure = stream.failure { return stop(failure) }
            if pending.count + data.count > pending.capacity {
                writer.write(pending, to: stream)
                pending = writer.buffer()
            }
            if data.count > pending.capacity {
                writer.write(Array(data), to: stream)
            } else {
                pending.append(contentsOf: data)
            }
        } else if !heldInMemory, let failure = BodyWriter.writeAll(data, to: fd, path: target.path) {
            return stop(failure)
        }
        received += Int64(data.count)
        textLength?.add(data)
        let intoCopy = copy != nil && received <= Int64(copyLimit)
        // Bytes kept in `copy` while it holds them all are hashed at the end.
        if stream == nil, !(hashesCopyLater && intoCopy) { caughtUpHasher.update(data) }
        if stream == nil { digests?.update(data) }
        if intoCopy {
            copy?.append(contentsOf: data)
        } else {
            if copy != nil {
                firstBytes = sniffed
                copy = nil
            }
            if firstBytes.count < ImageInfo.sniffLength {
                firstBytes.append(contentsOf: data.prefix(ImageInfo.sniffLength - firstBytes.count))
            }
        }
        if let limit = maxFileSize, received > limit {
            return stop(TransferFailure(code: .tooLarge, message: "the body exceeds \(limit) bytes"))
        }
        unreported = true
        if reported == 0 || received - reported >= Self.reportStride {
            reportData()
            if stopReason != nil { return .abort }
        }
        return .accept
    }
}

@available(*, unavailable) extension Transfer: Sendable {}
