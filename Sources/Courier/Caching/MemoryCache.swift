import JSON
import Locking

/// The memory tier, with AFAutoPurgingImageCache's rules: when an insert
/// takes usage above `capacity`, the least recently accessed entries go
/// until usage is at most `afterPurge`. Reads refresh recency; replacing an
/// entry adjusts usage; an entry costing more than `capacity` is not stored.
/// The entry just inserted is never purged by its own insert, so usage can
/// stay above `afterPurge` (never above `capacity`) when that entry alone
/// costs more.
///
/// A dictionary from key to a node of a doubly linked list kept in an array
/// (most recent at the head), so every operation is O(1). Thread-safe.
final class MemoryCache: Sendable {
    struct Entry: Sendable, Equatable {
        var response: CachedResponse
        /// The body, when it is held; empty while it is `stored`.
        var body: [UInt8]
        /// Set instead of `body` for a body the disk tier stored as it
        /// streamed in: read (and checked) on its first hit rather than when
        /// it is stored, since most large bodies are never asked for again.
        var stored: StoredBody?
        /// The members the outcome of every hit writes alike, the
        /// response's headers among them, as text
        /// (`Outcome.sharedText(response:size:)`): made by the first `get`,
        /// and shared by the outcomes after it.
        var sharedHeaders: SharedJSON?
        /// `response.pathFileName` under the entry's key: found by the
        /// first `get`, for every hit after it.
        var pathFileName: String?

        init(response: CachedResponse, body: [UInt8]) {
            self.response = response
            self.body = body
            stored = nil
        }

        init(response: CachedResponse, stored: StoredBody) {
            self.response = response
            body = []
            self.stored = stored
        }

        /// The body's length, whether it is held or stored.
        var bodyLength: Int { stored?.length ?? body.count }

        /// `sharedHeaders` and `pathFileName` are made from `response`: they
        /// tell nothing more.
        static func == (lhs: Entry, rhs: Entry) -> Bool {
            lhs.response == rhs.response && lhs.body == rhs.body && lhs.stored == rhs.stored
        }
    }

    /// A body file of the disk tier that an entry stands for: its name in
    /// the tier's directory, and the length and XXH3-64 the body had when it
    /// was stored.
    struct StoredBody: Sendable, Equatable {
        var name: String
        var length: Int
        var checksum: UInt64
    }

    /// What an entry costs besides its body and the bytes of its key, URL,
    /// header names and values and Vary values.
    static let entryOverhead = 512

    /// Also the text of its hits' outcomes that they copy (the headers, the
    /// URL it came from), from the first hit on.
    static func cost(of entry: Entry, key: String) -> Int {
        var cost = entryOverhead + entry.bodyLength + key.utf8.count + entry.response.url.utf8.count
        for (name, value) in entry.response.headers { cost += name.utf8.count + value.utf8.count }
        for (name, value) in entry.response.varyValues { cost += name.utf8.count + value.utf8.count }
        return cost + (entry.sharedHeaders?.byteCount ?? 0)
    }

    private let state: Locked<State>

    init(capacity: Int, afterPurge: Int) {
        precondition(capacity >= 0 && afterPurge >= 0 && afterPurge <= capacity, "need 0 ≤ afterPurge ≤ capacity")
        state = Locked(State(capacity: capacity, afterPurge: afterPurge))
    }

    var capacity: Int { state.withLock { $0.capacity } }
    var afterPurge: Int { state.withLock { $0.afterPurge } }
    /// The summed cost of the entries.
    var usage: Int { state.withLock { $0.usage } }
    var count: Int { state.withLock { $0.index.count } }

    /// The entry for `key`, now the most recently accessed, with its
    /// `sharedHeaders`, `pathFileName` and its response's headers joined
    /// (`CachedResponse.keepHeaderObject()`). The first hit makes them, and
    /// the outcomes' text then counts in the entry's cost: usage above the
    /// capacity purges other entries, as an insert would.
    func get(_ key: String) -> Entry? {
        state.withLock { state in
            // Every node the index names holds an entry.
            guard let node = state.index[key] else { return nil }
            state.touch(node, key: key)
            return state.nodes[node].entry
        }
    }

    /// What a lookup reads of an entry.
    enum Found {
        /// The hit of a body that is held: made by the first `find` or `get`
        /// that sees it held, and the same for every lookup after that while
        /// the entry is as it is.
        case held(ResponseCache.Hit)
        /// An entry whose body is `stored`.
        case entry(Entry)
    }

    /// What `get` gives for `key`, with the same effects; for a body that is
    /// held, only the hit kept with it: no copy of the entry is made.
    func find(_ key: String) -> Found? {
        state.withLock { state in
            guard let node = state.index[key] else { return nil }
            state.touch(node, key: key)
            if let hit = state.nodes[node].hit { return .held(hit) }
            return state.nodes[node].entry.map(Found.entry)
        }
    }

    /// The entry for `key`, its recency unchanged.
    func peek(_ key: String) -> Entry? {
        state.withLock { state in state.index[key].flatMap { state.nodes[$0].entry } }
    }

    /// Stores `entry` under `key`, replacing any entry there, and purges if
    /// usage is now above the capacity. False when the entry costs more than
    /// the capacity: it is not stored, and an older entry for `key` is removed.
    @discardableResult
    func set(_ entry: Entry, for key: String) -> Bool {
        let cost = Self.cost(of: entry, key: key)
        return state.withLock { state in
            guard cost <= state.capacity else {
                if let node = state.index[key] { state.remove(node) }
                return false
            }
            let node = state.insert(key: key, entry: entry, cost: cost)
            if state.usage > state.capacity { state.purge(keeping: node) }
            return true
        }
    }

    /// Puts the body read for a `stored` entry in its place, if `key` still
    /// has that entry; its cost and recency stay as they are.
    func hold(_ body: [UInt8], for key: String, readFrom stored: StoredBody) {
        state.withLock { state in
            guard let node = state.index[key], let entry = state.nodes[node].entry, entry.stored == stored,
                body.count == stored.length
            else { return }
            var held = Entry(response: entry.response, body: body)
            held.sharedHeaders = entry.sharedHeaders
            held.pathFileName = entry.pathFileName
            state.nodes[node].entry = held
            state.nodes[node].isShared = false
            state.nodes[node].hit = nil
        }
    }

    /// Removes `key`'s entry if it is still `entry`.
    func remove(_ key: String, ifStill entry: Entry) {
        state.withLock { state in
            guard let node = state.index[key], state.nodes[node].entry == entry else { return }
            state.remove(node)
        }
    }

    /// Removes the entries whose bodies are `stored` on disk; how many.
    @discardableResult
    func removeStored() -> Int {
        state.withLock { state in
            let nodes = state.index.values.filter { state.nodes[$0].entry?.stored != nil }
            for node in nodes { state.remove(node) }
            return nodes.count
        }
    }

    @discardableResult
    func remove(_ key: String) -> Entry? {
        state.withLock { state in
            guard let node = state.index[key] else { return nil }
            let entry = state.nodes[node].entry
            state.remove(node)
            return entry
        }
    }

    func removeAll() {
        state.withLock { state in state = State(capacity: state.capacity, afterPurge: state.afterPurge) }
    }

    /// New limits; purges at once when usage is above the new capacity.
    func configure(capacity: Int, afterPurge: Int) {
        precondition(capacity >= 0 && afterPurge >= 0 && afterPurge <= capacity, "need 0 ≤ afterPurge ≤ capacity")
        state.withLock { state in
            state.capacity = capacity
            state.afterPurge = afterPurge
            if state.usage > capacity { state.purge(keeping: nil) }
        }
    }

    /// Keys from most to least recently accessed.
    var keysByRecency: [String] {
        state.withLock { state in
            var keys: [String] = []
            var node = state.head
            while node != State.none {
                keys.append(state.nodes[node].key)
                node = state.nodes[node].next
            }
            return keys
        }
    }

    private struct Node {
        var key: String
        var entry: Entry?
        var cost: Int
        var previous: Int
        var next: Int
        /// Whether what the entry's hits share is made (`touch`).
        var isShared = false
        /// The hit of the entry's body when it is held, made with the rest.
        var hit: ResponseCache.Hit?
    }

    private struct State {
        static let none = -1
        var capacity: Int
        var afterPurge: Int
        var usage = 0
        var index: [String: Int] = [:]
        var nodes: [Node] = []
        var free: [Int] = []
        var head = State.none
        var tail = State.none

        init(capacity: Int, afterPurge: Int) {
            self.capacity = capacity
            self.afterPurge = afterPurge
        }

        /// Puts `entry` at the head under `key`, in place of the entry
        /// `key` had: the key is hashed once for both.
        mutating func insert(key: String, entry: Entry, cost: Int) -> Int {
            // Each node made where it goes, not copied there.
            let slot: Int
            if let reused = free.popLast() {
                nodes[reused] = Node(key: key, entry: entry, cost: cost, previous: State.none, next: State.none)
                slot = reused
            } else {
                nodes.append(Node(key: key, entry: entry, cost: cost, previous: State.none, next: State.none))
                slot = nodes.count - 1
            }
            if let replaced = index.updateValue(slot, forKey: key) { release(replaced) }
            usage += cost
            linkAtHead(slot)
            return slot
        }

        mutating func remove(_ node: Int) {
            index[nodes[node].key] = nil
            release(node)
        }

        /// Frees `node`, which the index no longer names.
        private mutating func release(_ node: Int) {
            unlink(node)
            usage -= nodes[node].cost
            nodes[node] = Node(key: "", entry: nil, cost: 0, previous: State.none, next: State.none)
            free.append(node)
        }

        /// Removes least recently accessed entries, never `kept`, until usage
        /// is at most `afterPurge`.
        mutating func purge(keeping kept: Int?) {
            while usage > afterPurge, tail != State.none, tail != kept {
                remove(tail)
            }
        }

        /// Makes `node` the most recently accessed and, on its first hit
        /// (or the first after its body is held), what its hits share.
        mutating func touch(_ node: Int, key: String) {
            unlink(node)
            linkAtHead(node)
            guard !nodes[node].isShared, var entry = nodes[node].entry else { return }
            nodes[node].isShared = true
            if entry.sharedHeaders == nil {
                entry.response.keepHeaderObject()
                entry.sharedHeaders =
                    Outcome.sharedText(response: entry.response, size: Int64(entry.bodyLength))
                    ?? SharedJSON(strings: entry.response.headerObject)
                entry.pathFileName = entry.response.pathFileName(key: key)
            }
            if entry.stored == nil {
                nodes[node].hit = ResponseCache.Hit(
                    key: key, response: entry.response, body: .bytes(entry.body), tier: .memory,
                    sharedHeaders: entry.sharedHeaders, knownFileName: entry.pathFileName)
            }
            nodes[node].entry = entry
            let cost = MemoryCache.cost(of: entry, key: key)
            usage += cost - nodes[node].cost
            nodes[node].cost = cost
            if usage > capacity { purge(keeping: node) }
        }

        mutating func linkAtHead(_ node: Int) {
            nodes[node].previous = State.none
            nodes[node].next = head
            if head != State.none { nodes[head].previous = node }
            head = node
            if tail == State.none { tail = node }
        }

        mutating func unlink(_ node: Int) {
            let previous = nodes[node].previous
            let next = nodes[node].next
            if previous != State.none { nodes[previous].next = next } else { head = next }
            if next != State.none { nodes[next].previous = previous } else { tail = previous }
            nodes[node].previous = State.none
            nodes[node].next = State.none
        }
    }
}
