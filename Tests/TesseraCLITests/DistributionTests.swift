// DistributionTests.swift — what the package ships besides the binary is made from the option
// tables (issue 32): the manual page and the bash, zsh and fish completions name every flag of
// every command and nothing else; the completions are valid scripts that complete; the version
// report names the libraries; CHANGELOG.md's newest entry is this version.
import Glibc
import Testing
import Tessera
@testable import TesseraCLI

/// Runs `script` with `shell` (stdin /dev/null), returning its exit status and standard output.
func runShell(_ shell: String, _ script: String) -> (status: Int32, output: String) {
    let base = "\(testRoot)/shell-\(UInt32.random(in: 0...UInt32.max))"
    defer { unlink(base + ".sh"); unlink(base + ".out") }
    let fd = open(base + ".sh", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = script.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
    close(fd)
    let status = system("\(shell) '\(base).sh' >'\(base).out' 2>&1 </dev/null")
    return ((status >> 8) & 0xFF, String(decoding: readFile(base + ".out"), as: UTF8.self))
}

/// Writes `text` to a file in the test root and returns its path.
func writeScratch(_ name: String, _ text: String) -> String {
    let path = "\(testRoot)/\(name)"
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
    close(fd)
    return path
}

@Suite struct DistributionTests {
    /// The flags of each command's options section of the manual page: `\fB\-\-flag\fR` after `.TP`.
    static func manFlags() -> [String: Set<String>] {
        var sections: [String: Set<String>] = [:]
        var current: String?
        var afterTP = false
        for line in Distribution.manPage.split(separator: "\n") {
            if line.hasPrefix(".SH ") {
                let title = line.dropFirst(4).replacing("\"", with: "")
                current = title.hasSuffix(" OPTIONS") ? String(title.dropLast(8)).lowercased() : nil
                continue
            }
            if line == ".TP" { afterTP = true; continue }
            if afterTP, let command = current {
                var rest = line[...]
                while let start = rest.firstRange(of: "\\fB") {
                    let after = rest[start.upperBound...]
                    guard let end = after.firstRange(of: "\\fR") else { break }
                    sections[command, default: []].insert(String(after[..<end.lowerBound]).replacing("\\-", with: "-"))
                    rest = after[end.upperBound...]
                }
            }
            afterTP = false
        }
        return sections
    }

    @Test func manualPageNamesEveryFlagOfEveryCommand() {
        let sections = Self.manFlags()
        #expect(Set(sections.keys) == Set(Distribution.commands.map(\.name)))
        for command in Distribution.commands {
            #expect(sections[command.name] == Set(command.options.flatMap(\.names)), "man page, \(command.name)")
        }
        // The commands' tables are the parsers': each flag in the manual parses.
        #expect(Distribution.commands.first { $0.name == "mosaic" }.map { Set($0.options.flatMap(\.names)) }
                == Set((MosaicCommand.options + GridCommand.options).flatMap(\.names)).subtracting(["--order"]))
        for row in ExitCode.documented { #expect(Distribution.manPage.contains(Distribution.roff(row.meaning))) }
        // No line of running text starts with a roff control character.
        for line in Distribution.manPage.split(separator: "\n") where !line.hasPrefix(".") {
            #expect(!line.hasPrefix("'"), "\(line)")
        }
    }

    @Test func completionsNameEveryFlagAndNothingElse() throws {
        let bash = try #require(Distribution.completion(shell: "bash"))
        let zsh = try #require(Distribution.completion(shell: "zsh"))
        let fish = try #require(Distribution.completion(shell: "fish"))
        #expect(Distribution.completion(shell: "tcsh") == nil)
        for command in Distribution.commands {
            let flags = Set(command.options.flatMap(\.names))
            // bash: the command's word list.
            let line = try #require(bash.split(separator: "\n").first { $0.hasPrefix("        \(command.name)) options='") })
            let words = Set(line.split(separator: "'")[1].split(separator: " ").map(String.init))
            #expect(words == flags, "bash, \(command.name)")
            // fish: -l and -s of the command's lines.
            var fishFlags = Set<String>()
            for entry in fish.split(separator: "\n") where entry.contains("'__fish_seen_subcommand_from \(command.name)'") {
                let parts = entry.split(separator: " ")
                for (index, part) in parts.enumerated() where index + 1 < parts.count {
                    if part == "-l" { fishFlags.insert("--" + parts[index + 1]) }
                    if part == "-s" { fishFlags.insert("-" + parts[index + 1]) }
                }
            }
            #expect(fishFlags == flags, "fish, \(command.name)")
            // zsh: the specs between "command)" and ";;".
            let start = try #require(zsh.firstRange(of: "\n        \(command.name))\n"))
            let body = zsh[start.upperBound...].prefix { _ in true }
            let section = String(body[..<(body.firstRange(of: ";;")?.lowerBound ?? body.endIndex)])
            var zshFlags = Set<String>()
            for token in section.split(whereSeparator: { " {},'()\n\\[".contains($0) }) where token.hasPrefix("-") {
                zshFlags.insert(String(token))
            }
            #expect(zshFlags.isSuperset(of: flags), "zsh, \(command.name): lacks \(flags.subtracting(zshFlags).sorted())")
            #expect(zshFlags.subtracting(flags).allSatisfy { !$0.hasPrefix("--") || $0.contains(" ") }, "zsh, \(command.name): more than the table: \(zshFlags.subtracting(flags).sorted())")
        }
    }

    /// The scripts through the shells themselves: bash completes, zsh and fish parse them.
    @Test func completionsRunInTheirShells() throws {
        let bash = writeScratch("tessera.bash", Distribution.completion(shell: "bash")!)
        let run = runShell("bash", """
            source '\(bash)'
            COMP_WORDS=(tessera mosaic --tar); COMP_CWORD=2; _tessera; echo "1:${COMPREPLY[*]}"
            COMP_WORDS=(tessera grid --encoder ''); COMP_CWORD=3; _tessera; echo "2:${COMPREPLY[*]}"
            COMP_WORDS=(tessera j); COMP_CWORD=1; _tessera; echo "3:${COMPREPLY[*]}"
            COMP_WORDS=(tessera join --wa); COMP_CWORD=2; _tessera; echo "4:${COMPREPLY[*]}"
            COMP_WORDS=(tessera grid --order); COMP_CWORD=2; _tessera; echo "5:${COMPREPLY[*]}"
            """)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("1:--target\n") && run.output.contains("2:serial parallel\n")
                && run.output.contains("3:join\n") && run.output.contains("4:--wait\n") && run.output.contains("5:--order\n"), "\(run.output)")
        // Debian's zsh and fish (CI installs both): a syntax error is a failure, not a skip.
        let zsh = writeScratch("_tessera", Distribution.completion(shell: "zsh")!)
        let zshCheck = runShell("sh", "zsh -n '\(zsh)'")
        #expect(zshCheck.status == 0, "zsh -n: \(zshCheck.output)")
        let fish = writeScratch("tessera.fish", Distribution.completion(shell: "fish")!)
        let fishRun = runShell("sh", "fish -c \"source '\(fish)'; complete -C 'tessera grid --progress '\"")
        #expect(fishRun.status == 0 && fishRun.output.contains("json"), "fish: \(fishRun.output)")
    }

    @Test func versionNamesTheLibrariesAndTheChangelogThisVersion() throws {
        let run = runTesseraSplit(["--version", "--json"])
        #expect(run.status == 0)
        for name in ["libjpeg-turbo", "libheif", "libwebp", "libspng", "lcms2"] {
            #expect(run.standardOutput.contains("\"\(name)\":\"") , "\(name) missing: \(run.standardOutput)")
        }
        #expect(run.standardOutput.hasPrefix("{\"version\":\"\(tesseraVersion)\",\"commit\":"), "\(run.standardOutput)")
        let text = runTesseraSplit(["--version"])
        #expect(text.status == 0 && text.standardOutput.hasPrefix("tessera \(tesseraVersion) ("), "\(text.standardOutput)")
        #expect(runTessera(["--version", "--yaml"]).status == 2)
        #expect(runTessera(["completions", "tcsh"]).status == 2)
        let man = runTesseraSplit(["man"])
        #expect(man.status == 0 && man.standardOutput == Distribution.manPage)
        // The newest heading of CHANGELOG.md is this version.
        let changelog = String(decoding: readFile(repositoryRoot + "/CHANGELOG.md"), as: UTF8.self)
        let newest = try #require(changelog.split(separator: "\n").first { $0.hasPrefix("## ") })
        #expect(newest.hasPrefix("## \(tesseraVersion) "), "CHANGELOG.md's newest entry is \(newest), the code says \(tesseraVersion)")
    }
}
