/// Bytes per second over the last few seconds, from samples of a growing
/// byte count: a stalled transfer's rate falls to zero within the window.
struct RateMeter {
    static let window = 3.0

    private var samples: [(time: Double, bytes: Int64)] = []

    mutating func add(_ bytes: Int64, at time: Double) {
        samples.append((time, bytes))
        if let cut = samples.firstIndex(where: { time - $0.time <= Self.window }), cut > 0 {
            samples.removeFirst(cut)
        }
    }

    /// Nil until the samples span a few tenths of a second.
    func rate(now: Double) -> Double? {
        guard let first = samples.first, let last = samples.last, now - first.time >= 0.3 else { return nil }
        return Double(last.bytes - first.bytes) / (now - first.time)
    }
}
