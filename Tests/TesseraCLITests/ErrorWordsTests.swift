// ErrorWordsTests.swift — the library's errors carry values and no flag names; the command line
// words them with the flags that fix them (ErrorWords.swift).
import Testing
import Tessera
@testable import TesseraCLI

@Suite struct ErrorWordsTests {
    @Test func aPhotoTooLargeNamesTheBudgetThatDrawsIt() {
        let error = TesseraError.photoNeedsMemory(path: "big.heic", reason: "decoding this 4000 x 3000 HEIF takes about 76.4 MiB",
                                                  budgetToDrawBytes: 161 << 20)
        #expect(!error.description.contains("--"))
        #expect(error.description.contains("a memory budget of 161.0 MiB or more would draw it"), "\(error.description)")
        #expect(error.commandLineDescription.hasSuffix("; give --max-memory 161.0 MiB or more to draw it"), "\(error.commandLineDescription)")
        #expect(ExitCode(error) == .insufficientResources)  // a mosaic's target: the budget is short
        let skipped = SkippedPhoto(path: "big.heic", error: error)
        #expect(skipped.budgetToDrawBytes == 161 << 20 && !skipped.reason.contains("--"))
        #expect(skipped.commandLineReason.hasSuffix("give --max-memory 161.0 MiB or more to draw it"))
        #expect(SkippedPhoto(path: "a.jpg", reason: "corrupt").commandLineReason == "corrupt")
    }

    /// The budget named is never rounded below what is needed, and one a memory cgroup cannot
    /// hold says so.
    @Test func theBudgetAdviceRoundsUpAndKnowsTheCgroup() {
        #expect(memoryAdvice(161 << 20, limitBytes: nil) == "give --max-memory 161.0 MiB or more to draw it")
        // 4.02 GiB: "4.0 GiB" would be refused again.
        let needed = Int64(4.02 * Double(1 << 30))
        #expect(memoryAdvice(needed, limitBytes: nil) == "give --max-memory 4.1 GiB or more to draw it")
        #expect(memoryAdvice(4 << 30, limitBytes: nil) == "give --max-memory 4.0 GiB or more to draw it")
        #expect(memoryAdvice(99 << 20, limitBytes: 64 << 20).hasSuffix("(more than this memory cgroup's limit of 64.0 MiB: not here)"))
        #expect(!memoryAdvice(48 << 20, limitBytes: 64 << 20).contains("cgroup"))
        // More than the machine has (a hostile file's claim): out of reach, whichever is smaller said.
        #expect(memoryAdvice(4_400 << 30, limitBytes: nil, machineBytes: 24 << 30)
                == "give --max-memory 4400.0 GiB or more to draw it (more than this machine's 24.0 GiB of memory: not here)")
        #expect(memoryAdvice(30 << 30, limitBytes: 8 << 30, machineBytes: 24 << 30).hasSuffix("(more than this memory cgroup's limit of 8.0 GiB: not here)"))
        #expect(!memoryAdvice(20 << 30, limitBytes: nil, machineBytes: 24 << 30).contains("not here"))
    }

    @Test func everyValueCaseIsWordedWithItsFlag() {
        let cases: [(TesseraError, String, ExitCode)] = [
            (.shardedSerialEncoder, "leave out --encoder serial", .usage),
            (.joinOutputs(.noJPEGInParts), "give --dzi alone", .usage),
            (.joinOutputs(.noPyramidInParts), "give -o alone", .usage),
            (.joinOutputs(.jpegNotGiven), "give -o PATH as well (or no paths", .usage),
            (.joinOutputs(.pyramidNotGiven), "give --dzi PATH (or --szi, --iiif) as well (or no paths", .usage),
            (.joinOutputs(.noTIFFInParts), "--tiff: the parts hold no TIFF", .usage),
            (.joinOutputs(.tiffNotGiven), "give --tiff PATH as well", .usage),
            (.joinOutputs(.manifestNotGiven), "give --manifest PATH as well", .usage),
            (.joinOutputs(.noManifestInParts), "--manifest: the parts hold no manifest", .usage),
            (.joinPathFromParts(path: "x.jpeg2", output: .jpeg, file: "the JPEG", problem: .notJPEGName), "give -o PATH to join", .usage),
            (.joinPathFromParts(path: "z.dzi", output: .pyramid, file: "the Deep Zoom tiles", problem: .exists), "(--dzi PATH)", .usage),
            (.noParts(directory: "parts"), "run the shards with --shard K/N --shard-dir parts first", .badInput),
            (.tooManyPartsOpen(directory: "parts", part: "p", openFiles: 30),
             "may open at most 30 files. Raise the limit on open files above the number of parts (ulimit -n, up to its hard limit, "
                + "ulimit -Hn; LimitNOFILE= for a service) and join again, or join with --wait SECONDS", .badInput),
            (.partIndexTooLarge(directory: "parts", reason: "p has an index", neededBytes: (70 << 20) - 5),
             "parts: p has an index: give --max-memory 70.0 MiB or more to join it", .insufficientResources),
            (.budgetTooSmall(budgetBytes: 60 << 20, neededBytes: 74 << 20),
             "this render needs at least 74.0 MiB; give --max-memory 74.0 MiB or more to render it", .insufficientResources),
            (.budgetTooSmall(budgetBytes: 60 << 20, neededBytes: 74 << 20), "or ask for less: smaller cells (--tile-size)", .insufficientResources),
        ]
        for (error, words, code) in cases {
            #expect(!error.description.contains(" --") && !error.description.contains(" -o"), "\(error.description)")
            #expect(error.commandLineDescription.contains(words), "\(error.commandLineDescription)")
            #expect(ExitCode(error) == code, "\(error)")
        }
        // A collage has no --tile-size: its cells come from --row-height or --columns.
        let collage = TesseraError.budgetTooSmall(budgetBytes: 60 << 20, neededBytes: 74 << 20).commandLineDescription(collage: true)
        #expect(collage.contains("lower rows (--row-height; with --layout columns, more --columns), a narrower picture (--width)") && !collage.contains("--tile-size"),
                "\(collage)")
    }
}
