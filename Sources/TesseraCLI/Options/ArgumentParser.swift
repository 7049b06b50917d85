// ArgumentParser.swift — every command's options as typed values, and the one loop that parses
// them (swift-driver's `SwiftOptions` is the model). An `Option<State>` carries its spellings,
// its value's name, its help and what it does to the command's parse state, so the parser, the
// `--help` text, the README's tables, the manual page and the shell completions all read one
// table: an option cannot be documented without being parsed, or parsed without being documented.

/// What an option is, for people: its spellings (the long one last), the value's name (nil for a
/// flag) and its help. The help text, the manual page and the completions are made from these.
public struct OptionSpec: Sendable, Equatable {
    public let names: [String]
    public let valueName: String?
    public let help: String

    public init(names: [String], valueName: String?, help: String) {
        self.names = names
        self.valueName = valueName
        self.help = help
    }

    /// The long spelling: the option's key in messages that name it whatever the user typed.
    public var longName: String { names.last! }
}

/// One option as the command line gave it, handed to the option's `apply`.
public struct GivenOption: Sendable {
    /// As spelled (`-q` or `--quiet`).
    public let name: String
    /// The value ("" for a flag).
    public let value: String
    /// Where the option is on the command line (1-based, as in CommandLine.arguments), and where
    /// its value is (the same position for `--name=value`).
    public let position: Int
    public let valuePosition: Int
    /// The long names of the options given before this one.
    public let earlier: Set<String>
}

/// An option of a command whose parse state is `State`: what it is (`spec`) and what it does.
public struct Option<State>: Sendable {
    public let spec: OptionSpec
    /// Parsed but left out of the help, the manual and the completions: an option another command
    /// has, refused here with a reason (a mosaic's `--order`).
    public let isHidden: Bool
    let apply: @Sendable (inout State, GivenOption) throws(CommandLineError) -> Void

    /// An option that takes a value (`value` names it in the help).
    public init(_ names: String..., value: String, help: String,
                apply: @escaping @Sendable (inout State, GivenOption) throws(CommandLineError) -> Void) {
        self.init(spec: OptionSpec(names: names, valueName: value, help: help), isHidden: false, apply: apply)
    }

    /// A flag: an option without a value.
    public init(flag names: String..., help: String, apply: @escaping @Sendable (inout State, GivenOption) throws(CommandLineError) -> Void) {
        self.init(spec: OptionSpec(names: names, valueName: nil, help: help), isHidden: false, apply: apply)
    }

    init(spec: OptionSpec, isHidden: Bool, apply: @escaping @Sendable (inout State, GivenOption) throws(CommandLineError) -> Void) {
        self.spec = spec
        self.isHidden = isHidden
        self.apply = apply
    }

    /// The same option with another help text (a command that means it in its own words).
    public func withHelp(_ help: String) -> Option {
        Option(spec: OptionSpec(names: spec.names, valueName: spec.valueName, help: help), isHidden: isHidden, apply: apply)
    }

    /// The same spelling, hidden from the documentation, refused with `reason` wherever it is given.
    public func refused(_ reason: String) -> Option {
        Option(spec: spec, isHidden: true) { _, given throws(CommandLineError) in
            throw CommandLineError(reason, argumentIndex: given.position)
        }
    }

    /// This option for a command whose state holds this option's state at `part`: how a group
    /// of options is declared once and shared by several commands.
    public func lifted<Whole>(_ part: WritableKeyPath<Whole, State> & Sendable) -> Option<Whole> {
        let apply = self.apply
        return Option<Whole>(spec: spec, isHidden: isHidden) { whole, given throws(CommandLineError) in
            try apply(&whole[keyPath: part], given)
        }
    }
}

extension Array {
    /// The documented options of a table, in its order.
    public func specs<State>() -> [OptionSpec] where Element == Option<State> {
        filter { !$0.isHidden }.map(\.spec)
    }
}

/// The generic parser: positional arguments (everything after `--` too) go to `positional`,
/// `--name value`, `--name=value` and flags to their option's `apply`, in the order given.
/// Refused: an unknown option (with the nearest spelling the table has), a missing or unexpected
/// value, and an option with a value given twice (only `--exclude` and `--photos-from` may
/// repeat: a second value would silently replace the first).
/// - Parameters:
///   - firstIndex: the position of `arguments[0]` on the whole command line, for error positions.
///   - command: the command's name, for the message of an unknown option.
func parseArguments<State>(_ arguments: [String], firstIndex: Int, command: String, table: [Option<State>],
                           into state: inout State,
                           positional: (inout State, String) -> Void) throws(CommandLineError) {
    var index = 0
    var onlyPositional = false
    var seen = Set<String>()
    while index < arguments.count {
        let argument = arguments[index]
        let position = firstIndex + index
        if onlyPositional || !argument.hasPrefix("-") || argument == "-" {
            positional(&state, argument)
            index += 1
            continue
        }
        if argument == "--" {
            onlyPositional = true
            index += 1
            continue
        }
        var name = argument
        var inlineValue: String?
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            name = String(argument[..<equals])
            inlineValue = String(argument[argument.index(after: equals)...])
        }
        guard let option = table.first(where: { $0.spec.names.contains(name) }) else {
            let known = table.filter { !$0.isHidden }.flatMap(\.spec.names)
            throw CommandLineError("unknown option \(name) (see 'tessera \(command) --help')", argumentIndex: position,
                                   suggestion: nearestSpelling(to: name, among: known))
        }
        let spec = option.spec
        var value = ""
        if let valueName = spec.valueName {
            if let inlineValue {
                value = inlineValue
            } else {
                guard index + 1 < arguments.count else {
                    throw CommandLineError("\(name) needs a value: \(name) \(valueName)", argumentIndex: position)
                }
                index += 1
                value = arguments[index]
            }
        } else if inlineValue != nil {
            throw CommandLineError("\(name) takes no value", argumentIndex: position)
        }
        if spec.valueName != nil && !repeatableOptions.contains(spec.longName) && seen.contains(spec.longName) {
            throw CommandLineError("\(name) is given twice; give it once", argumentIndex: position)
        }
        try option.apply(&state, GivenOption(name: name, value: value, position: position,
                                             valuePosition: inlineValue == nil ? firstIndex + index : position, earlier: seen))
        seen.insert(spec.longName)
        index += 1
    }
}

/// The options with a value that may be given more than once: each value adds to the others.
let repeatableOptions: Set<String> = ["--exclude", "--photos-from"]

/// Help text for an option table: each option's spellings, then its explanation indented.
func describe(_ specs: [OptionSpec]) -> String {
    var text = ""
    for spec in specs {
        let left = spec.names.joined(separator: ", ") + (spec.valueName.map { " " + $0 } ?? "")
        text += "  " + left + "\n"
        text += wrap(spec.help, indent: 6, width: 92) + "\n"
    }
    return text
}
