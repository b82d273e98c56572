#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `renameat2(2)`, which the Glibc module leaves out (it is declared only
/// under `_GNU_SOURCE`), found once by `dlsym`, with the flags courier uses.
enum Renameat2 {
    typealias Function = @convention(c) (Int32, UnsafePointer<CChar>?, Int32, UnsafePointer<CChar>?, UInt32) -> Int32

    /// `RENAME_NOREPLACE`: fail with `EEXIST` rather than replace the target.
    static let noReplace: UInt32 = 1

    /// The C library's `renameat2`; nil where there is none.
    static let function: Function? = {
        #if os(Linux)
            guard let symbol = dlsym(nil, "renameat2") else { return nil }
            return unsafeBitCast(symbol, to: Function.self)
        #else
            return nil
        #endif
    }()
}

extension DirectoryHandle {
    /// Gives the file `source` in this directory the name `target`, unless
    /// something has that name: with `renameat2(RENAME_NOREPLACE)`, or, where
    /// the file system has no such rename (`EINVAL`) or the kernel or C
    /// library none (`ENOSYS`), with a hard link and an unlink of `source`.
    /// Either way whatever is at `target` (a file, a symbolic link, a
    /// directory) stays as it is and the move fails with `EEXIST`. Nil when
    /// the file has moved, else the `errno` of the step that failed.
    func moveWithoutReplacing(_ source: String, to target: String) -> Int32? {
        if let renameat2 = Renameat2.function {
            if renameat2(fd, source, fd, target, Renameat2.noReplace) == 0 { return nil }
            guard errno == EINVAL || errno == ENOSYS else { return errno }
        }
        return linkWithoutReplacing(source, to: target)
    }

    /// The move `moveWithoutReplacing` makes where `renameat2` cannot: a
    /// hard link, which never replaces its target, then an unlink of the
    /// old name.
    func linkWithoutReplacing(_ source: String, to target: String) -> Int32? {
        guard linkat(fd, source, fd, target, 0) == 0 else { return errno }
        unlinkat(fd, source, 0)
        return nil
    }
}
