// CommandLineError.swift — what can be wrong with a command line.

/// A usage error: the message, and the position of the offending argument (1-based, as in
/// CommandLine.arguments) when one is to blame.
public struct CommandLineError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public let argumentIndex: Int?

    public init(_ message: String, argumentIndex: Int? = nil) {
        self.message = message
        self.argumentIndex = argumentIndex
    }

    public var description: String { message }
}
