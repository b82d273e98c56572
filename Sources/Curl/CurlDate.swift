import CLibcurl

/// Dates as libcurl's `curl_getdate` reads them: the three HTTP date forms
/// (IMF-fixdate, RFC 850, asctime) and the looser variants servers send.
///
/// What libcurl 7.88 answers, measured (64-bit `time_t`):
/// - a year beyond `Int32.max` (999999999999, 2^63 and up) fails;
/// - a year up to `Int32.max` succeeds, up to about 6.8e16 seconds, which
///   is far beyond what `Date` formats: callers bound the result;
/// - a year before 1583 fails; a one- or two-digit year (also "0001") is
///   read as 1971...2070;
/// - a sign is read as a separator, so "-1994" is 1994 and "-5" is 2005,
///   unless it starts a four-digit zone offset ("+0100");
/// - only the first six words count: anything after them is ignored;
/// - 1969-12-31T23:59:59Z comes back as 0, since -1 means failure.
public enum CurlDate {
    /// Seconds since 1970 for the date `text` names, or nil when libcurl
    /// does not read it as a date. Text holding NUL is refused, since C
    /// would see only what precedes it.
    public static func parse(_ text: String) -> Int64? {
        guard !text.utf8.contains(0) else { return nil }
        let seconds = curl_getdate(text, nil)
        return seconds == -1 ? nil : Int64(seconds)
    }
}
