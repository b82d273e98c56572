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
    /// `RENAME_EXCHANGE`: swap the source and the target in one step.
    static let exchange: UInt32 = 2

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
