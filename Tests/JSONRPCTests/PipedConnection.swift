import Foundation
import JSONRPC
import Logging

/// Runs `body` with a connection reading from one pipe and writing to
/// another (64 KiB), and the pipe its output goes to; both are closed after.
func withPipedConnection<Result>(
    mode: FramingMode = .ndjson, label: String, _ body: (Connection, Pipe) -> Result
) -> Result {
    signal(SIGPIPE, SIG_IGN)
    let (input, output) = (Pipe(), Pipe(capacity: 64 << 10))
    defer {
        input.close()
        output.close()
    }
    let connection = Connection(
        input: input.readEnd, output: output.writeEnd, mode: mode, maxMessageBytes: 1 << 20,
        logger: Logger(label: label))
    return body(connection, output)
}
