import Courier
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import JSON
import Locking
import SystemPackage

/// What `courier get` shows as downloads run and end.
///
/// Results go to stdout: a line per file saved, skipped or already complete
/// (`URL -> FILE (SIZE, TIME)`), or with `--json` every outcome as a JSON
/// line. The rest goes to stderr: failures (`URL: error_code: message`),
/// attempts to be retried (`URL: error_code: message; retry 1/3 in 0.5 s`)
/// and, unless quiet, a closing summary. When stderr is a terminal (and not
/// quiet), a live display there shows a line per running download (one
/// waiting to be retried counts down: `retry 1/3 in 0.5 s`) and a total —
/// bytes, rate, ETA, fitted to the terminal's width — redrawn in place at
/// most ten times a second, with each result and message printed above it;
/// it is cleared at the end. Cache hits are shown as such, and their bytes
/// count in no rate.
///
/// Events arrive from the downloads' queue and ticks from a timer: each
/// steps the `Display` under one lock, so what is written never interleaves.
final class ProgressReport: Sendable {
    private let display: Locked<Display>
    private let live: Bool
    /// The terminal's settings before the display changed them.
    private let savedMode: termios?

    /// `quiet` leaves out the display and the summary; `shown` gives a
    /// file's name as the user wrote its directory.
    init(urls: [String], retries: Int, json: Bool, quiet: Bool, shown: @escaping @Sendable (String) -> String) {
        live = !quiet && isatty(STDERR_FILENO) == 1
        savedMode = live ? Self.quietTerminal() : nil
        display = Locked(Display(urls: urls, retries: retries, json: json, live: live, summarizes: !quiet, shown: shown))
    }

    /// Keeps typed keys and `^C` off the display, and keeps the terminal
    /// from discarding output not yet shown when Ctrl-C is pressed (which
    /// would leave the display's line count wrong). Returns the settings
    /// to restore.
    private static func quietTerminal() -> termios? {
        var mode = termios()
        guard tcgetattr(STDERR_FILENO, &mode) == 0 else { return nil }
        let saved = mode
        mode.c_lflag &= ~tcflag_t(ECHO | ECHOCTL)
        mode.c_lflag |= tcflag_t(NOFLSH)
        tcsetattr(STDERR_FILENO, TCSANOW, &mode)
        return saved
    }

    private func restoreTerminal() {
        guard var mode = savedMode else { return }
        tcsetattr(STDERR_FILENO, TCSANOW, &mode)
    }

    /// Failed and cancelled items.
    var failures: Int {
        display.withLock { $0.failures }
    }

    // MARK: - Events

    /// The download of URL `index` has started, into the file `name`.
    func started(_ index: Int, name: String) {
        display.withLock { $0.started(index, name: name) }
    }

    func progress(_ index: Int, _ progress: InProcessDownloads.Progress) {
        display.withLock { $0.progress(index, progress) }
    }

    /// An attempt of URL `index` failed, and the next waits.
    func retrying(_ index: Int, _ retry: InProcessDownloads.Retry) {
        display.withLock { $0.retrying(index, retry) }
    }

    /// The download of URL `index` has ended.
    func finished(_ index: Int, _ completion: InProcessDownloads.Completion) {
        display.withLock { $0.finished(index, completion) }
    }

    /// URL `index` was not fetched: the file `name`, at `path`, exists and
    /// is kept.
    func skipped(_ index: Int, name: String, path: String) {
        display.withLock { $0.skipped(index, name: name, path: path) }
    }

    /// A URL refused before any transfer.
    func refused(_ index: Int, _ error: InProcessDownloads.RequestError) {
        display.withLock { $0.refused(index, error) }
    }

    // MARK: - The live display

    /// Redraws ten times a second from now on, on a terminal.
    func startTicking() {
        guard live else { return }
        display.withLock { [display] state in
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "courier.get.display"))
            timer.schedule(deadline: .now(), repeating: .milliseconds(100))
            timer.setEventHandler { display.withLock { $0.tick() } }
            timer.resume()
            state.timer = timer
        }
    }

    /// Stops the display and clears it, then prints the summary.
    func end() {
        display.withLock { state in
            state.timer?.cancel()
            state.close()
        }
        restoreTerminal()
    }

    /// The first Ctrl-C: what is left is being cancelled.
    func interrupted() {
        display.withLock { $0.interrupted() }
    }

    /// The second Ctrl-C: the process ends now, without waiting for the
    /// lock; the cursor must not stay hidden.
    func abandon() {
        if live { Display.write(STDERR_FILENO, "\n" + Display.showCursor) }
        restoreTerminal()
    }
}

/// The items of a `courier get` run and what of them is on the terminal:
/// what `ProgressReport` guards with its lock.
private struct Display {
    /// How an item ended.
    private enum End {
        case saved(fromCache: Bool)
        case skipped
        /// The file there holds the body the cache has for the URL.
        case complete
        case failed
        case cancelled
    }

    private struct Item {
        var url: String
        /// The file's name as shown: the one it started with, then the one
        /// it finished under.
        var name = ""
        /// Bytes from the network so far.
        var received: Int64 = 0
        var expected: Int64?
        /// Some progress came, so the transfer runs.
        var running = false
        var end: End?
        var meter = RateMeter()
        /// The wait before the next attempt, while there is one.
        var retry: RetryWait?
        /// Requests to origins the download took, once it ended.
        var attempts = 0
    }

    /// A download between a failed attempt and the next.
    private struct RetryWait {
        /// The number of the attempt to come: 2 for the first retry.
        var attempt: Int
        /// When it starts, on `now()`'s clock.
        var until: Double
    }

    /// `--retries`: how many more attempts a download may get.
    private let retries: Int
    /// A file's name as the user wrote its directory.
    private let shown: @Sendable (String) -> String
    private let json: Bool
    private let live: Bool
    private let summarizes: Bool
    private var items: [Item]
    private var total = RateMeter()
    /// Bytes the cache tiers served.
    private var cachedBytes: Int64 = 0
    private let started = Display.now()
    private var wasInterrupted = false
    /// Lines of the live display now on the screen, above the cursor.
    private var drawnLines = 0
    /// Redraws the live display while it ticks.
    var timer: (any DispatchSourceTimer)?

    init(urls: [String], retries: Int, json: Bool, live: Bool, summarizes: Bool, shown: @escaping @Sendable (String) -> String) {
        self.retries = retries
        self.shown = shown
        self.json = json
        self.live = live
        self.summarizes = summarizes
        items = urls.map { Item(url: $0) }
    }

    /// Failed and cancelled items.
    var failures: Int {
        items.count { item in
            switch item.end {
            case .failed, .cancelled: true
            default: false
            }
        }
    }

    // MARK: - Events

    mutating func started(_ index: Int, name: String) {
        guard items.indices.contains(index), items[index].end == nil else { return }
        items[index].name = name
    }

    mutating func progress(_ index: Int, _ progress: InProcessDownloads.Progress) {
        guard items.indices.contains(index), items[index].end == nil else { return }
        // After a retry the count starts again from the bytes kept.
        let kept = items[index].retry == nil ? items[index].received : 0
        items[index].retry = nil
        items[index].received = max(kept, progress.received)
        items[index].expected = progress.expected ?? items[index].expected
        items[index].running = true
    }

    mutating func retrying(_ index: Int, _ retry: InProcessDownloads.Retry) {
        guard items.indices.contains(index), items[index].end == nil else { return }
        let now = Self.now()
        items[index].retry = RetryWait(attempt: retry.attempt, until: now + retry.delay)
        items[index].running = true
        guard summarizes else { return }
        let reason = failure(code: retry.errorCode, message: retry.errorMessage, conflict: nil)
        let wait = Self.retryText(retry.attempt, of: retries, in: retry.delay)
        let message = "\(items[index].url): \(reason); \(wait)"
        Self.write(STDERR_FILENO, clearing() + TerminalText.printable(message) + "\n")
        draw(now: now)
    }

    /// `retry 1/3 in 0.5 s`: the attempt to come as a retry, of how many
    /// there may be, and the wait before it (while there is one).
    private static func retryText(_ attempt: Int, of retries: Int, in seconds: Double) -> String {
        let count = "retry \(attempt - 1)/\(max(retries, attempt - 1))"
        return seconds > 0.05 ? count + Units.format(" in %.1f s", seconds) : count
    }

    mutating func finished(_ index: Int, _ completion: InProcessDownloads.Completion) {
        guard items.indices.contains(index) else { return }
        if let name = completion.name { items[index].name = shown(name) }
        items[index].retry = nil
        items[index].attempts = completion.attempts
        let item = items[index]
        if completion.alreadyComplete {
            end(index, .complete, result: "\(item.url) -> \(item.name) (already complete)", json: completion.json)
        } else if completion.skipped {
            end(index, .skipped, result: "\(item.url) -> \(item.name) (exists, skipped)", json: completion.json)
        } else if completion.ok {
            // A revalidated body comes from the cache too: the origin
            // only confirmed it.
            if completion.fromCache || completion.source == "revalidated" {
                cachedBytes += completion.size
            } else {
                items[index].received = completion.size
            }
            items[index].expected = completion.size
            end(
                index, .saved(fromCache: completion.fromCache),
                result: "\(item.url) -> \(item.name) (\(Units.bytes(completion.size)), \(Self.how(completion))"
                    + "\(Self.tries(completion)))",
                json: completion.json)
        } else {
            let code = completion.errorCode ?? "failed"
            var message = failure(code: code, message: completion.errorMessage, conflict: completion.conflict)
            if let expected = completion.expected {
                message = "\(code): expected \(expected), got \(completion.actual ?? "no digest")"
            }
            if let seconds = completion.retryAfter {
                message += "; Retry-After asked for \(seconds) s, past --retry-max-delay or --retry-max-time"
            }
            message += completion.attempts > 1 ? " (after \(completion.attempts) attempts)" : ""
            end(index, code == "cancelled" ? .cancelled : .failed, failure: "\(item.url): \(message)", json: completion.json)
        }
    }

    mutating func skipped(_ index: Int, name: String, path: String) {
        guard items.indices.contains(index) else { return }
        items[index].name = shown(name)
        let url = items[index].url
        let line: JSON = ["ok": true, "url": .string(url), "path": .string(path), "skipped": true]
        end(index, .skipped, result: "\(url) -> \(shown(name)) (exists, skipped)", json: line)
    }

    mutating func refused(_ index: Int, _ error: InProcessDownloads.RequestError) {
        guard items.indices.contains(index) else { return }
        let url = items[index].url
        let message = failure(code: error.code, message: error.message, conflict: error.conflict)
        let line: JSON = [
            "ok": false, "url": .string(url),
            "error": ["code": .string(error.code), "message": .string(error.message)],
        ]
        end(index, .failed, failure: "\(url): \(message)", json: line)
    }

    /// Records how item `index` ended and prints its result (stdout) or
    /// failure (stderr); called with the lock held.
    private mutating func end(_ index: Int, _ end: End, result: String? = nil, failure: String? = nil, json line: JSON) {
        items[index].end = end
        var out = ""
        if json {
            out = line.description + "\n"
        } else if let result {
            out = TerminalText.printable(result) + "\n"
        }
        let err = failure.map { TerminalText.printable($0) + "\n" } ?? ""
        let clear = clearing()
        if !clear.isEmpty { Self.write(STDERR_FILENO, clear) }
        if !out.isEmpty { Self.write(STDOUT_FILENO, out) }
        if !err.isEmpty { Self.write(STDERR_FILENO, err) }
        draw(now: Self.now())
    }

    /// `code: message`, or the code alone when the message adds nothing
    /// (`cancelled`); a taken name says where it is and what to do.
    private func failure(code: String, message: String?, conflict: InProcessDownloads.NameConflict?) -> String {
        switch conflict {
        case .exists(let name):
            return "\(code): \(shown(name)) exists (--no-clobber skips it, --overwrite replaces it)"
        case .claimed(let name):
            return "\(code): another URL of this run is saved as \(shown(name))"
        case nil:
            guard let message, !message.isEmpty, message != code else { return code }
            return "\(code): \(message)"
        }
    }

    /// What a transfer took beyond one attempt: `, 3 attempts`, `, resumed
    /// at 1.0 MiB`, or nothing.
    private static func tries(_ completion: InProcessDownloads.Completion) -> String {
        var text = completion.attempts > 1 ? ", \(completion.attempts) attempts" : ""
        if let offset = completion.resumedFrom { text += ", resumed at \(Units.bytes(offset))" }
        return text
    }

    /// How a saved file came: its transfer's time, or the cache.
    private static func how(_ completion: InProcessDownloads.Completion) -> String {
        if completion.fromCache { return "from cache" }
        if completion.source == "revalidated" { return "revalidated" }
        return Units.format("%.1f s", completion.durationMs / 1000)
    }

    // MARK: - The live display

    /// Counts the rates on and redraws: a tick of the live display.
    mutating func tick() {
        let now = Self.now()
        for index in items.indices where items[index].running && items[index].end == nil {
            items[index].meter.add(items[index].received, at: now)
        }
        total.add(networkBytes, at: now)
        Self.write(STDERR_FILENO, clearing())
        draw(now: now)
    }

    /// Clears the live display and prints the summary.
    mutating func close() {
        timer = nil
        if live { Self.write(STDERR_FILENO, clearing() + Self.showCursor) }
        if summarizes { Self.write(STDERR_FILENO, summary(now: Self.now()).map { $0 + "\n" }.joined()) }
    }

    mutating func interrupted() {
        wasInterrupted = true
        guard live else { return }
        Self.write(STDERR_FILENO, clearing() + "interrupted: cancelling (Ctrl-C again exits at once)\n")
        draw(now: Self.now())
    }

    /// The escapes that erase the live display, leaving the cursor where
    /// its first line was: up a line and erase it, once per line. (Erasing
    /// to the end of the screen instead would, from the top left corner,
    /// push the whole screen into tmux's history.)
    private mutating func clearing() -> String {
        guard live, drawnLines > 0 else { return "" }
        defer { drawnLines = 0 }
        return "\r" + String(repeating: "\u{1B}[1A\u{1B}[2K", count: drawnLines)
    }

    private static let hideCursor = "\u{1B}[?25l"
    static let showCursor = "\u{1B}[?25h"

    /// Draws the live display below the cursor; nothing once all is done.
    private mutating func draw(now: Double) {
        guard live, drawnLines == 0, items.contains(where: { $0.end == nil }) else { return }
        let (columns, rows) = Self.terminalSize()
        let running = items.filter { $0.running && $0.end == nil }
        let room = max(1, rows - 3)
        let labelWidth = min(24, running.map { TerminalText.width($0.name) }.max() ?? 0)
        var lines = running.prefix(room).map { line(for: $0, labelWidth: labelWidth, now: now) }
        if running.count > room {
            lines.append(ProgressLine(label: "…", labelWidth: 0, numbers: ["\(running.count - room) more running"]))
        }
        lines.append(totalLine(now: now))
        let text = lines.map { $0.rendered(columns: columns) + "\n" }.joined()
        drawnLines = lines.count
        Self.write(STDERR_FILENO, Self.hideCursor + text)
    }

    private func line(for item: Item, labelWidth: Int, now: Double) -> ProgressLine {
        let fraction = item.expected.flatMap { $0 > 0 ? min(1, Double(item.received) / Double($0)) : nil }
        if let retry = item.retry {
            let sizes = item.expected.map { Units.bytes(item.received, of: $0) } ?? Units.bytes(item.received)
            return ProgressLine(
                label: item.name, labelWidth: labelWidth, fraction: fraction,
                numbers: [Self.retryText(retry.attempt, of: retries, in: retry.until - now), sizes], optional: 1)
        }
        let rate = item.meter.rate(now: now)
        guard let expected = item.expected, let fraction else {
            return ProgressLine(
                label: item.name, labelWidth: labelWidth, numbers: [Units.bytes(item.received), Units.rate(rate)],
                optional: 1)
        }
        return ProgressLine(
            label: item.name, labelWidth: labelWidth, fraction: fraction,
            numbers: [
                Units.format("%3d%%", Int(fraction * 100)), Units.bytes(item.received, of: expected), Units.rate(rate),
                "ETA " + Units.eta(remaining: expected - item.received, rate: rate),
            ],
            optional: 2)
    }

    /// Bytes from the network so far, cache hits left out.
    private var networkBytes: Int64 { items.reduce(0) { $0 + $1.received } }

    private func totalLine(now: Double) -> ProgressLine {
        let received = networkBytes
        let finished = items.count { $0.end != nil }
        var counts = ["\(finished)/\(items.count)"]
        let failed = items.count { if case .failed = $0.end { true } else { false } }
        if failed > 0 { counts.append("\(failed) failed") }
        let fromCache = items.count { if case .saved(fromCache: true) = $0.end { true } else { false } }
        if fromCache > 0 { counts.append("\(fromCache) from cache") }
        let rate = total.rate(now: now)
        let known = items.allSatisfy { $0.end != nil || $0.expected != nil }
        let expected = items.reduce(Int64(0)) { sum, item in
            if case .saved(fromCache: true) = item.end { return sum }
            return sum + (item.end != nil ? item.received : item.expected ?? 0)
        }
        var numbers = counts
        if known, expected > 0 {
            numbers += [Units.bytes(received, of: expected), Units.rate(rate), "ETA " + Units.eta(remaining: expected - received, rate: rate)]
            return ProgressLine(label: "total", labelWidth: 0, numbers: numbers, optional: 2)
        }
        numbers += [Units.bytes(received), Units.rate(rate)]
        return ProgressLine(label: "total", labelWidth: 0, numbers: numbers, optional: 1)
    }

    // MARK: - The summary

    /// `3 files: 2 ok (1 from cache), 1 failed; 2.0 MiB downloaded in
    /// 1.0 s (2.0 MiB/s)`, on one line, or split where the terminal would
    /// wrap it.
    private func summary(now: Double) -> [String] {
        var ok = 0
        var fromCache = 0
        var skipped = 0
        var complete = 0
        var retried = 0
        var failed = 0
        var cancelled = 0
        for item in items {
            switch item.end {
            case .saved(let cached):
                ok += 1
                if cached { fromCache += 1 }
                if item.attempts > 1 { retried += 1 }
            case .skipped: skipped += 1
            case .complete: complete += 1
            case .failed: failed += 1
            case .cancelled, nil: cancelled += 1
            }
        }
        let notes = [fromCache > 0 ? "\(fromCache) from cache" : nil, retried > 0 ? "\(retried) retried" : nil]
            .compactMap { $0 }
        var counts = ["\(ok) ok" + (notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))")]
        if complete > 0 { counts.append("\(complete) already complete") }
        if skipped > 0 { counts.append("\(skipped) skipped") }
        if failed > 0 { counts.append("\(failed) failed") }
        if cancelled > 0 { counts.append("\(cancelled) cancelled") }
        let seconds = max(0, now - started)
        var bytes = "\(Units.bytes(networkBytes)) downloaded in " + Units.format("%.1f s", seconds)
        if networkBytes > 0, seconds > 0 { bytes += " (\(Units.rate(Double(networkBytes) / seconds)))" }
        if cachedBytes > 0 { bytes += ", \(Units.bytes(cachedBytes)) from cache" }
        let title = (wasInterrupted ? "interrupted, " : "") + (items.count == 1 ? "1 file" : "\(items.count) files")
        let whole = "\(title): \(counts.joined(separator: ", ")); \(bytes)"
        let columns = live ? Self.terminalSize().columns - 1 : Int.max
        guard TerminalText.width(whole) > columns else { return [whole] }
        return ["\(title): \(counts.joined(separator: ", "))", bytes]
    }

    // MARK: - Writing

    private static func now() -> Double { ProcessInfo.processInfo.systemUptime }

    private static func terminalSize() -> (columns: Int, rows: Int) {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 else { return (80, 24) }
        return (Int(size.ws_col), Int(size.ws_row))
    }

    /// Writes all of `text`, or as much as `fd` takes before an error,
    /// which a progress display has nobody to tell.
    static func write(_ fd: Int32, _ text: String) {
        _ = try? FileDescriptor(rawValue: fd).writeAll(text.utf8)
    }
}
