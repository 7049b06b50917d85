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
        #expect(ExitCode(error) == .badInput)
        let skipped = SkippedPhoto(path: "big.heic", error: error)
        #expect(skipped.budgetToDrawBytes == 161 << 20 && !skipped.reason.contains("--"))
        #expect(skipped.commandLineReason.hasSuffix("give --max-memory 161.0 MiB or more to draw it"))
        #expect(SkippedPhoto(path: "a.jpg", reason: "corrupt").commandLineReason == "corrupt")
    }

    @Test func everyValueCaseIsWordedWithItsFlag() {
        let cases: [(TesseraError, String, ExitCode)] = [
            (.shardedSerialEncoder, "leave out --encoder serial", .usage),
            (.joinOutputs(.noJPEGInParts), "give --dzi alone", .usage),
            (.joinOutputs(.noPyramidInParts), "give -o alone", .usage),
            (.joinOutputs(.jpegNotGiven), "give -o PATH as well as --dzi", .usage),
            (.joinOutputs(.pyramidNotGiven), "give --dzi PATH as well as -o", .usage),
            (.joinPathFromParts(path: "x.jpeg2", output: .jpeg, file: "the JPEG", problem: .notJPEGName), "give -o PATH to join", .usage),
            (.joinPathFromParts(path: "z.dzi", output: .pyramid, file: "the Deep Zoom tiles", problem: .exists), "(--dzi PATH)", .usage),
            (.noParts(directory: "parts"), "run the shards with --shard K/N --shard-dir parts first", .badInput),
        ]
        for (error, words, code) in cases {
            #expect(!error.description.contains(" --") && !error.description.contains(" -o"), "\(error.description)")
            #expect(error.commandLineDescription.contains(words), "\(error.commandLineDescription)")
            #expect(ExitCode(error) == code, "\(error)")
        }
    }
}
