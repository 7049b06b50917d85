// Distribution.swift — what an installed tessera ships besides the binary, made from the option
// tables so that it cannot drift from what the parser takes: the manual page (`tessera man`),
// shell completions for bash, zsh and fish (`tessera completions SHELL`), and the version
// report (`tessera --version [--json]`). scripts/package-deb.sh runs the built binary to write
// them into the package.
import Tessera

/// One command as the manual and the completions describe it.
public struct CommandDescription: Sendable {
    public let name: String
    public let summary: String
    public let synopsis: String
    public let options: [OptionSpec]
}

public enum Distribution {
    /// Every command with the options its parser takes, in the order the manual gives them.
    public static let commands: [CommandDescription] = TopLevel.commands.map(\.description)

    /// The words that may stand first, besides the commands.
    static let otherWords = TopLevel.otherWords

    /// What a value is, for completion: one of fixed words, a folder, a file, or free text.
    enum ValueKind: Equatable {
        case words([String])
        case directory
        case file
        case text
    }

    static func valueKind(_ spec: OptionSpec) -> ValueKind? {
        guard let name = spec.valueName else { return nil }
        let alternatives = name.split(separator: "|").map(String.init)
        if alternatives.count > 1, alternatives.allSatisfy({ $0.allSatisfy { $0.isLowercase || $0.isNumber } }) {
            return .words(alternatives)
        }
        if name == "DIR" { return .directory }
        if name.contains("FILE") || name.contains(".") || name == "PICTURE" { return .file }
        return .text
    }

    // MARK: Version

    public static func versionText(json: Bool) -> String {
        let commit = BuildInfo.commit
        let libraries = BuildInfo.libraries
        if json {
            let fields = ["\"version\":" + jsonStringLiteral(tesseraVersion),
                          "\"commit\":" + (commit.map(jsonStringLiteral) ?? "null"),
                          "\"libraries\":{" + libraries.map { jsonStringLiteral($0.name) + ":" + jsonStringLiteral($0.version) }
                              .joined(separator: ",") + "}"]
            return "{" + fields.joined(separator: ",") + "}"
        }
        return "tessera \(tesseraVersion) (" + (commit.map { "commit \($0)" } ?? "commit unknown: not built by scripts/build-release.sh") + ")\n"
            + libraries.map { "  \($0.name) \($0.version)" }.joined(separator: "\n")
    }

    // MARK: Manual page

    /// roff text: a backslash is `\e`, a minus sign `\-`, and a line may not start with `.` or `'`.
    static func roff(_ text: String) -> String {
        var out = text.replacing("\\", with: "\\e").replacing("-", with: "\\-")
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out
    }

    static func roffFlags(_ spec: OptionSpec) -> String {
        spec.names.map { "\\fB" + roff($0) + "\\fR" }.joined(separator: ", ") + (spec.valueName.map { " \\fI" + roff($0) + "\\fR" } ?? "")
    }

    /// tessera(1): every command's synopsis and options, the exit codes, examples.
    public static let manPage: String = {
        var lines = [
            ".TH TESSERA 1 \"\(tesseraReleaseDate)\" \"tessera \(tesseraVersion)\" \"User Commands\"",
            ".SH NAME",
            "tessera \\- giant photo grids and mosaics as one JPEG or a Deep Zoom pyramid, in flat memory",
            ".SH SYNOPSIS",
        ]
        for command in commands {
            lines += [".B tessera \(command.name)", roff(command.synopsis), ".br"]
        }
        lines += [".B tessera help", "[\\fICOMMAND\\fR]", ".br", ".B tessera man", ".br",
                  ".B tessera completions", "\\fBbash\\fR|\\fBzsh\\fR|\\fBfish\\fR", ".br", ".B tessera \\-\\-version", "[\\fB\\-\\-json\\fR]"]
        lines += [".SH DESCRIPTION",
                  roff("tessera renders photo grids and photo mosaics of a billion pixels and more into one baseline JPEG and/or a Deep Zoom pyramid with a viewer. The canvas is never held in memory: it is rendered in horizontal stripes of a temporary file, filled and JPEG-compressed by all cores, and joined in order with restart markers. Photos may be JPEG, PNG, WebP, HEIF/HEIC, AVIF, GIF, TIFF or the preview in a camera RAW file, recognised by content; each is decoded at the size it is drawn, turned upright from its EXIF orientation and converted to sRGB from its colour profile."),
                  ".SH COMMANDS"]
        for command in commands {
            lines += [".TP", "\\fBtessera \(command.name)\\fR", roff(command.summary)]
        }
        lines += [".TP", "\\fBtessera help\\fR [\\fICOMMAND\\fR]", roff("every option of a command, with examples"),
                  ".TP", "\\fBtessera man\\fR", roff("this page, as roff"),
                  ".TP", "\\fBtessera completions\\fR \\fISHELL\\fR", roff("the completion script for bash, zsh or fish"),
                  ".TP", "\\fBtessera \\-\\-version\\fR [\\fB\\-\\-json\\fR]", roff("the version, the commit it was built from and the image libraries' versions")]
        for command in commands {
            lines.append(".SH \"\(command.name.uppercased()) OPTIONS\"")
            for spec in command.options {
                lines += [".TP", roffFlags(spec), roff(spec.help)]
            }
        }
        lines.append(".SH \"EXIT STATUS\"")
        for row in ExitCode.documented {
            lines += [".TP", "\\fB" + roff(row.code) + "\\fR", roff(row.meaning)]
        }
        lines += [".SH EXAMPLES", ".nf",
                  roff("tessera grid ~/Pictures -o wall.jpg --grid 200x267 --tile-size 150"),
                  roff("tessera mosaic --target portrait.jpg ~/Pictures -o mosaic.jpg --size 60x90cm"),
                  roff("tessera grid ~/Pictures -o wall.jpg --dzi wall.dzi --grid 200x267 --tile-size 150"),
                  ".fi",
                  ".SH \"SEE ALSO\"",
                  roff("djpeg(1), vips(1). The README (/usr/share/doc/tessera/README.md.gz where installed) says how it works and what it was measured at."),
        ]
        return lines.joined(separator: "\n") + "\n"
    }()

    // MARK: Completions

    /// A short description for a completion menu: the help's first sentence, at most 80 characters.
    static func short(_ help: String) -> String {
        var text = help
        if let end = text.firstRange(of: ". ") { text = String(text[..<end.lowerBound]) }
        if text.hasSuffix(".") { text.removeLast() }
        if text.count > 80 { text = String(text.prefix(77)) + "..." }
        return text
    }

    static func shellQuoted(_ text: String) -> String { "'" + text.replacing("'", with: "'\\''") + "'" }

    public static func completion(shell: String) -> String? {
        switch shell {
        case "bash": return bashCompletion
        case "zsh": return zshCompletion
        case "fish": return fishCompletion
        default: return nil
        }
    }

    static var bashCompletion: String {
        var text = """
        # bash completion for tessera (made by `tessera completions bash` from its option tables)
        _tessera() {
            local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} command=${COMP_WORDS[1]}
            if [ "$COMP_CWORD" -eq 1 ]; then
                COMPREPLY=($(compgen -W \(shellQuoted((commands.map(\.name) + otherWords).joined(separator: " "))) -- "$cur"))
                return
            fi
            case "$command" in
                help) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W \(shellQuoted(commands.map(\.name).joined(separator: " "))) -- "$cur")); return ;;
                completions) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur")); return ;;
                --version) COMPREPLY=($(compgen -W '--json' -- "$cur")); return ;;
            esac
            local options=""
            case "$command:$prev" in

        """
        for command in commands {
            for spec in command.options {
                guard let kind = valueKind(spec) else { continue }
                let pattern = spec.names.map { "\(command.name):\($0)" }.joined(separator: "|")
                switch kind {
                case .words(let words): text += "        \(pattern)) COMPREPLY=($(compgen -W \(shellQuoted(words.joined(separator: " "))) -- \"$cur\")); return ;;\n"
                case .directory: text += "        \(pattern)) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n"
                case .file: text += "        \(pattern)) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
                case .text: text += "        \(pattern)) return ;;\n"
                }
            }
        }
        text += "    esac\n    case \"$command\" in\n"
        for command in commands {
            text += "        \(command.name)) options=\(shellQuoted(command.options.flatMap(\.names).joined(separator: " "))) ;;\n"
        }
        text += """
            esac
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$options" -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
        }
        complete -o filenames -F _tessera tessera

        """
        return text
    }

    static var zshCompletion: String {
        func escaped(_ text: String) -> String {
            text.replacing("\\", with: "\\\\").replacing("[", with: "\\[").replacing("]", with: "\\]")
                .replacing(":", with: " -").replacing("'", with: "'\\''")
        }
        var text = """
        #compdef tessera
        # zsh completion for tessera (made by `tessera completions zsh` from its option tables)
        _tessera() {
            local -a commands
            commands=(

        """
        for command in commands { text += "        '\(command.name):\(escaped(command.summary))'\n" }
        text += """
                'help:every option of a command, with examples'
                'man:the manual page as roff'
                'completions:a shell completion script'
            )
            if (( CURRENT == 2 )); then
                _describe -t commands 'tessera command' commands
                _arguments '--help[show the help]' '--version[the version and libraries]'
                return
            fi
            local command=$words[2]
            shift words
            (( CURRENT-- ))
            case $command in

        """
        for command in commands {
            text += "        \(command.name))\n            _arguments -s \\\n"
            for spec in command.options {
                let description = "[" + escaped(short(spec.help)) + "]"
                let value: String
                switch valueKind(spec) {
                case nil: value = ""
                case .words(let words)?: value = ":\(escaped(spec.valueName!)):(\(words.joined(separator: " ")))"
                case .directory?: value = ":\(escaped(spec.valueName!)):_files -/"
                case .file?: value = ":\(escaped(spec.valueName!)):_files"
                case .text?: value = ":\(escaped(spec.valueName!)): "
                }
                if spec.names.count > 1 {
                    let group = "(" + spec.names.joined(separator: " ") + ")"
                    text += "                '\(group)'{\(spec.names.joined(separator: ","))}'\(description)\(value)' \\\n"
                } else {
                    text += "                '\(spec.names[0])\(description)\(value)' \\\n"
                }
            }
            text += "                '*:photo or folder:_files'\n            ;;\n"
        }
        text += """
                help) _describe -t commands 'command' commands ;;
                completions) _values 'shell' bash zsh fish ;;
            esac
        }
        _tessera "$@"

        """
        return text
    }

    static var fishCompletion: String {
        var text = """
        # fish completion for tessera (made by `tessera completions fish` from its option tables)
        complete -c tessera -f
        complete -c tessera -n __fish_use_subcommand -l help -d 'show the help'
        complete -c tessera -n __fish_use_subcommand -l version -d 'the version and libraries'

        """
        for command in commands {
            text += "complete -c tessera -n __fish_use_subcommand -a \(command.name) -d \(shellQuoted(command.summary))\n"
        }
        text += "complete -c tessera -n __fish_use_subcommand -a help -d 'every option of a command, with examples'\n"
        text += "complete -c tessera -n __fish_use_subcommand -a man -d 'the manual page as roff'\n"
        text += "complete -c tessera -n __fish_use_subcommand -a completions -d 'a shell completion script'\n"
        text += "complete -c tessera -n '__fish_seen_subcommand_from completions' -a 'bash zsh fish'\n"
        text += "complete -c tessera -n '__fish_seen_subcommand_from help' -a \(shellQuoted(commands.map(\.name).joined(separator: " ")))\n"
        for command in commands {
            let condition = "-n '__fish_seen_subcommand_from \(command.name)'"
            text += "complete -c tessera \(condition) -F\n"
            for spec in command.options {
                var words = ["complete -c tessera", condition]
                for name in spec.names {
                    words.append(name.hasPrefix("--") ? "-l " + name.dropFirst(2) : "-s " + name.dropFirst(1))
                }
                switch valueKind(spec) {
                case nil: break
                case .words(let values)?: words.append("-x -a " + shellQuoted(values.joined(separator: " ")))
                case .directory?: words.append("-x -a '(__fish_complete_directories)'")
                case .file?: words.append("-r -F")
                case .text?: words.append("-x")
                }
                words.append("-d " + shellQuoted(short(spec.help)))
                text += words.joined(separator: " ") + "\n"
            }
        }
        return text
    }
}
