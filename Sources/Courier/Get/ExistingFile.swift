/// What `courier get` does with a file already at a download's name.
public enum ExistingFile: Sendable {
    /// Leave it, and fail the download (`file_exists`): the default.
    case refuse
    /// Leave it, and skip the download (`--no-clobber`).
    case skip
    /// Replace it with the download once complete (`--overwrite`).
    case replace
}
