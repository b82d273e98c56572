import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SystemPackage

/// Whole-buffer reads and writes on file descriptors (swift-system's, which
/// retry interrupted calls), read on through short counts, and copies, checksums and digests of files in chunks of
/// `chunkSize`, so a file of any length costs one chunk of memory.
enum CacheFileIO {
    static let chunkSize = 256 * 1024

    /// `count` bytes at `offset`, or nil on an error or end of file first.
    static func read(_ fd: Int32, count: Int, at offset: Int64) -> [UInt8]? {
        var complete = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            complete = read(fd, into: UnsafeMutableRawBufferPointer(buffer), at: offset)
            initialized = complete ? count : 0
        }
        return complete ? bytes : nil
    }

    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Bool {
        let file = FileDescriptor(rawValue: fd)
        var done = 0
        while done < buffer.count {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
            guard let n = try? file.read(fromAbsoluteOffset: offset + Int64(done), into: rest), n > 0 else { return false }
            done += n
        }
        return true
    }

    static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        (try? FileDescriptor(rawValue: fd).writeAll(bytes)) != nil
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { write(fd, $0) }
    }

    /// Copies `length` bytes of `source` from `offset` to `destination`'s
    /// current position; their XXH3-64, or nil on an I/O error or a source
    /// shorter than `length`.
    static func copy(from source: Int32, offset: Int64, length: Int64, to destination: Int32) -> UInt64? {
        let hasher = XXH3()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var done: Int64 = 0
        while done < length {
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(min(Int64(chunkSize), length - done))])
            guard read(source, into: chunk, at: offset + done) else { return nil }
            hasher.update(UnsafeRawBufferPointer(chunk))
            guard write(destination, UnsafeRawBufferPointer(chunk)) else { return nil }
            done += Int64(chunk.count)
        }
        return hasher.finalize()
    }

    /// The XXH3-64 of `length` bytes of `source` from its start, or nil on an
    /// I/O error or a source shorter than `length`; `digesting` takes the
    /// same bytes in the same pass.
    static func hash(_ source: Int32, length: Int64, digesting digests: BodyHasher? = nil) -> UInt64? {
        let hasher = XXH3()
        let read = forEachChunk(of: source, length: length) { chunk in
            hasher.update(chunk)
            digests?.update(chunk)
        }
        return read ? hasher.finalize() : nil
    }

    /// The digests of `length` bytes of `source` from its start by each of
    /// `algorithms`, or nil on an I/O error or a source shorter than
    /// `length`.
    static func digests(_ source: Int32, length: Int64, _ algorithms: Set<HashAlgorithm>) -> BodyDigests? {
        guard let hasher = BodyHasher(algorithms) else { return BodyDigests() }
        return forEachChunk(of: source, length: length) { hasher.update($0) } ? hasher.finalize() : nil
    }

    /// Calls `body` with `length` bytes of `source` from its start, a chunk
    /// at a time; false on an I/O error or a source shorter than `length`.
    static func forEachChunk(of source: Int32, length: Int64, _ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var done: Int64 = 0
        while done < length {
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(min(Int64(chunkSize), length - done))])
            guard read(source, into: chunk, at: done) else { return false }
            body(UnsafeRawBufferPointer(chunk))
            done += Int64(chunk.count)
        }
        return true
    }

    /// Nanoseconds since 1970 of a file's last modification.
    static func modified(_ info: stat) -> Int64 {
        #if os(Linux)
            Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        #else
            Int64(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(info.st_mtimespec.tv_nsec)
        #endif
    }
}
