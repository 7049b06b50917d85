// CommandLineError.swift — what can be wrong with a command line (one problem, or all of them at once).

/// A usage error: the message, and the position of the offending argument (1-based, as in
/// CommandLine.arguments) when one is to blame; for an unknown option or command, the spelling
/// it was probably meant to be.
public struct CommandLineError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public let argumentIndex: Int?
    /// The known option or command nearest to the unknown one given ("did you mean"), or nil.
    public let suggestion: String?

    public init(_ message: String, argumentIndex: Int? = nil, suggestion: String? = nil) {
        self.message = message
        self.argumentIndex = argumentIndex
        self.suggestion = suggestion
    }

    /// Every problem of a command line in one error, so a person fixes them in one go rather
    /// than meeting them one run at a time: one problem is its own message; several are listed,
    /// one a line, under a line that counts them.
    public static func combining(_ problems: [String]) -> CommandLineError {
        guard problems.count > 1 else { return CommandLineError(problems.first ?? "the command line is not complete") }
        return CommandLineError("\(problems.count) problems with this command line:" + problems.map { "\n  " + $0 }.joined())
    }

    /// The line the tool prints: the message, then the suggestion when there is one.
    public var description: String {
        guard let suggestion else { return message }
        // Options are named bare in messages (--tile), commands quoted ('mosaik').
        return message + "; did you mean " + (suggestion.hasPrefix("-") ? suggestion : "'\(suggestion)'") + "?"
    }

    /// Two errors are the same when they say the same thing about the same argument: the
    /// suggestion is advice beside the error, not part of what is wrong.
    public static func == (a: CommandLineError, b: CommandLineError) -> Bool {
        a.message == b.message && a.argumentIndex == b.argumentIndex
    }
}
