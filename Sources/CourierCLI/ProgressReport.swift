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

/// What `courier get` shows as downloads run and end. On a terminal: a line
/// per running download and a total (bytes, rate, ETA), redrawn in place at
/// most ten times a second, with each finished download's line printed above
/// them, and cleared at the end. Otherwise one line per finished download,
/// or with `--json` its outcome as a JSON line. Failures always go to stderr
/// as `URL: error_code: message`.
///
/// Events arrive from the downloads' queue and ticks from a timer: every
/// method takes `lock`, so what is written never interleaves.
final class ProgressReport: @unchecked Sendable {
    enum Style {
        case terminal
        case lines
        case json
    }

    private struct Item {
        var url: String
        /// The file's name as shown: the one it started with, then the one
        /// it finished under.
        var name = ""
        var received: Int64 = 0
        var expected: Int64?
        /// Some progress came, so the transfer runs.
        var running = false
        var done = false
        var meter = RateMeter()
    }

    private let lock = Locked(())
    private let style: Style
    private var items: [Item]
    private var total = RateMeter()
    /// Lines of the live display now on the screen, above the cursor.
    private var drawnLines = 0
    private var finishedCount = 0
    private var failureCount = 0
    private var timer: (any DispatchSourceTimer)?
    /// The terminal's settings before the display changed them.
    private let savedMode: termios?

    init(style: Style, urls: [String]) {
        self.style = style
        items = urls.map { Item(url: $0) }
        savedMode = style == .terminal ? Self.quietTerminal() : nil
    }

    /// Keeps typed keys and `^C` off the display, and keeps the terminal
    /// from discarding output not yet shown when Ctrl-C is pressed (which
    /// would leave the display's line count wrong). Returns the settings
    /// to restore.
    private static func quietTerminal() -> termios? {
        var mode = termios()
        guard tcgetattr(STDOUT_FILENO, &mode) == 0 else { return nil }
        let saved = mode
        mode.c_lflag &= ~tcflag_t(ECHO | ECHOCTL)
        mode.c_lflag |= tcflag_t(NOFLSH)
        tcsetattr(STDOUT_FILENO, TCSANOW, &mode)
        return saved
    }

    private func restoreTerminal() {
        guard var mode = savedMode else { return }
        tcsetattr(STDOUT_FILENO, TCSANOW, &mode)
    }

    var failures: Int { lock.withLock { _ in failureCount } }

    // MARK: - Events

    /// The download of URL `index` has started, into the file `name`.
    func started(_ index: Int, name: String) {
        lock.withLock { _ in
            guard items.indices.contains(index), !items[index].done else { return }
            items[index].name = name
        }
    }

    func progress(_ index: Int, _ progress: InProcessDownloads.Progress) {
        lock.withLock { _ in
            guard items.indices.contains(index), !items[index].done else { return }
            items[index].received = max(items[index].received, progress.received)
            items[index].expected = progress.expected ?? items[index].expected
            items[index].running = true
        }
    }

    /// The download of URL `index` has ended; `name` is the file it made.
    func finished(_ index: Int, _ completion: InProcessDownloads.Completion, name: String?) {
        lock.withLock { _ in
            guard items.indices.contains(index) else { return }
            items[index].done = true
            if let name { items[index].name = name }
            finishedCount += 1
            if completion.ok {
                items[index].received = completion.size
                items[index].expected = completion.size
            } else {
                failureCount += 1
            }
            let item = items[index]
            switch style {
            case .json:
                Self.write(STDOUT_FILENO, completion.json.description + "\n")
            case .lines, .terminal:
                if completion.ok { Self.write(STDOUT_FILENO, clearing() + Self.summary(item, completion) + "\n") }
            }
            if let code = completion.errorCode {
                if style == .terminal { Self.write(STDOUT_FILENO, clearing()) }
                Self.write(STDERR_FILENO, "\(item.url): \(code): \(completion.errorMessage ?? "")\n")
            }
            if style == .terminal { draw(now: Self.now()) }
        }
    }

    /// A URL the downloader refused before any transfer.
    func refused(_ index: Int, _ error: InProcessDownloads.RequestError) {
        lock.withLock { _ in
            guard items.indices.contains(index) else { return }
            items[index].done = true
            finishedCount += 1
            failureCount += 1
            let url = items[index].url
            if style == .json {
                let line: JSON = [
                    "ok": false, "url": .string(url),
                    "error": ["code": .string(error.code), "message": .string(error.message)],
                ]
                Self.write(STDOUT_FILENO, line.description + "\n")
            }
            Self.write(STDERR_FILENO, "\(url): \(error.code): \(error.message)\n")
        }
    }

    // MARK: - The live display

    /// Redraws ten times a second from now on, on a terminal.
    func startTicking() {
        guard style == .terminal else { return }
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "courier.get.display"))
        timer.schedule(deadline: .now(), repeating: .milliseconds(100))
        timer.setEventHandler { [self] in
            lock.withLock { _ in
                let now = Self.now()
                for index in items.indices where items[index].running && !items[index].done {
                    items[index].meter.add(items[index].received, at: now)
                }
                total.add(items.reduce(0) { $0 + $1.received }, at: now)
                Self.write(STDOUT_FILENO, clearing())
                draw(now: now)
            }
        }
        lock.withLock { _ in self.timer = timer }
        timer.resume()
    }

    /// Stops the display and clears it; the finished lines stay.
    func end() {
        let timer = lock.withLock { _ in self.timer }
        timer?.cancel()
        lock.withLock { _ in
            self.timer = nil
            if style == .terminal { Self.write(STDOUT_FILENO, clearing() + Self.showCursor) }
            restoreTerminal()
        }
    }

    /// The first Ctrl-C: what is left is being cancelled.
    func interrupted() {
        guard style == .terminal else { return }
        lock.withLock { _ in
            Self.write(STDOUT_FILENO, clearing())
            Self.write(STDERR_FILENO, "interrupted: cancelling (Ctrl-C again exits at once)\n")
            draw(now: Self.now())
        }
    }

    /// The second Ctrl-C: the process ends now, without waiting for the
    /// lock; the cursor must not stay hidden.
    func abandon() {
        if style == .terminal { Self.write(STDOUT_FILENO, "\n" + Self.showCursor) }
        restoreTerminal()
    }

    /// The escapes that erase the live display, leaving the cursor where
    /// its first line was: up a line and erase it, once per line. (Erasing
    /// to the end of the screen instead would, from the top left corner,
    /// push the whole screen into tmux's history.)
    private func clearing() -> String {
        guard style == .terminal, drawnLines > 0 else { return "" }
        defer { drawnLines = 0 }
        return "\r" + String(repeating: "\u{1B}[1A\u{1B}[2K", count: drawnLines)
    }

    private static let hideCursor = "\u{1B}[?25l"
    private static let showCursor = "\u{1B}[?25h"

    /// Draws the live display below the cursor; nothing once all is done.
    private func draw(now: Double) {
        guard style == .terminal, finishedCount < items.count, drawnLines == 0 else { return }
        let (columns, rows) = Self.terminalSize()
        let running = items.filter { $0.running && !$0.done }
        let room = max(1, rows - 3)
        let nameWidth = min(24, running.map(\.name.count).max() ?? 0)
        var lines = running.prefix(room).map { Self.line(for: $0, nameWidth: nameWidth, now: now) }
        if running.count > room { lines.append("  ... and \(running.count - room) more running") }
        lines.append(totalLine(now: now))
        let text = lines.map { String($0.prefix(max(1, columns - 1))) + "\n" }.joined()
        drawnLines = lines.count
        Self.write(STDOUT_FILENO, Self.hideCursor + text)
    }

    private static func line(for item: Item, nameWidth: Int, now: Double) -> String {
        let name = item.name.count > nameWidth ? String(item.name.prefix(nameWidth - 1)) + "~" : item.name
        var parts = [name + String(repeating: " ", count: max(0, nameWidth - name.count))]
        let rate = item.meter.rate(now: now)
        if let expected = item.expected, expected > 0 {
            let fraction = min(1, Double(item.received) / Double(expected))
            let filled = Int(fraction * 20)
            parts.append("[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled) + "]")
            parts.append(Units.format("%3d%%", Int(fraction * 100)))
            parts.append("\(Units.bytes(item.received)) / \(Units.bytes(expected))")
            parts.append(Units.rate(rate))
            parts.append("ETA " + Units.eta(remaining: expected - item.received, rate: rate))
        } else {
            parts.append(Units.bytes(item.received))
            parts.append(Units.rate(rate))
        }
        return "  " + parts.joined(separator: "  ")
    }

    private func totalLine(now: Double) -> String {
        let received = items.reduce(0) { $0 + $1.received }
        let known = items.allSatisfy { $0.done || $0.expected != nil }
        let expected = items.reduce(Int64(0)) { $0 + ($1.done ? $1.received : $1.expected ?? 0) }
        let rate = total.rate(now: now)
        var parts = ["total", "\(finishedCount) of \(items.count) done"]
        if known {
            parts.append("\(Units.bytes(received)) / \(Units.bytes(expected))")
            parts.append(Units.rate(rate))
            parts.append("ETA " + Units.eta(remaining: expected - received, rate: rate))
        } else {
            parts.append(Units.bytes(received))
            parts.append(Units.rate(rate))
            parts.append("ETA --:--")
        }
        return "  " + parts.joined(separator: "  ")
    }

    // MARK: - Lines

    /// `URL -> PATH (SIZE, TIME)` for a finished download.
    private static func summary(_ item: Item, _ completion: InProcessDownloads.Completion) -> String {
        let how: String
        switch completion.source {
        case "memory", "disk": how = "from cache"
        case "revalidated": how = "revalidated"
        default: how = Units.format("%.1f s", completion.durationMs / 1000)
        }
        return "\(item.url) -> \(item.name) (\(Units.bytes(completion.size)), \(how))"
    }

    private static func now() -> Double { ProcessInfo.processInfo.systemUptime }

    private static func terminalSize() -> (columns: Int, rows: Int) {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 else { return (80, 24) }
        return (Int(size.ws_col), Int(size.ws_row))
    }

    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            bytes = bytes.dropFirst(count)
        }
    }
}
