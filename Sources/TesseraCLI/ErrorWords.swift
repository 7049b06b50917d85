// ErrorWords.swift — the library's errors in the command line's words. The library carries
// values (the budget that would draw a photo, which output a join lacks); the flags that set
// them are named here, and nowhere in Sources/Tessera.
import Glibc
import Tessera

extension TesseraError {
    /// The error as the command line reports it: `description`, with the flag that would fix it.
    public var commandLineDescription: String { commandLineDescription(collage: false) }

    /// The same, for `tessera collage` when `collage` (whose cells come from --width and
    /// --row-height or --columns: it has no --tile-size).
    public func commandLineDescription(collage: Bool) -> String {
        switch self {
        case let .photoNeedsMemory(path, reason, budget):
            return "cannot read photo \(path): \(reason); " + memoryAdvice(budget)
        case let .budgetTooSmall(_, needed):
            // Said with the flag that gives it (a new user's trial: the figure alone named none).
            return description + "; " + memoryAdvice(Int64(needed), what: "to render it") + ", or ask for less: "
                + (collage ? "lower rows (--row-height; with --layout columns, more --columns), a narrower picture (--width)"
                           : "smaller cells (--tile-size), a smaller picture") + " or fewer --workers"
        case let .minUsesImpossible(conflict):
            return conflict.commandLineDescription
        case .shardedSerialEncoder:
            return description + ": leave out --encoder serial"
        case let .joinOutputs(mismatch):
            switch mismatch {
            case .noJPEGInParts: return "-o: \(mismatch); give --dzi alone"
            case .noPyramidInParts: return "--dzi, --szi, --iiif: \(mismatch); give -o alone"
            case .jpegNotGiven: return "the parts hold a JPEG too: give -o PATH as well (or no paths, to use the paths the shards named)"
            case .pyramidNotGiven: return "the parts hold a pyramid too: give --dzi PATH (or --szi, --iiif) as well (or no paths, to use the paths the shards named)"
            case .noTIFFInParts: return "--tiff: \(mismatch); give only the outputs the parts hold"
            case .tiffNotGiven: return "the parts hold a TIFF too: give --tiff PATH as well (or no paths, to use the paths the shards named)"
            case .noManifestInParts: return "--manifest: \(mismatch); give only the outputs the parts hold"
            case .manifestNotGiven: return "the parts hold a manifest too: give --manifest PATH as well (or no paths, to use the paths the shards named)"
            }
        case let .joinPathFromParts(path, output, file, problem):
            let flag = output == .jpeg ? "-o" : output == .tiff ? "--tiff" : output == .manifest ? "--manifest" : "--dzi"
            switch problem {
            case .notJPEGName: return "\(path): \(problem.description(file: file)): give -o PATH to join"
            case .exists: return "\(path): \(problem.description(file: file)) (\(flag) PATH)"
            }
        case let .partIndexTooLarge(directory, reason, needed):
            let shown = formatBytes(((Int64(needed) + (1 << 20) - 1) >> 20) << 20)
            return "cannot join the parts in \(directory): \(reason): give --max-memory \(shown) or more to join it, "
                + "or, if its render did not make that many tiles, the part is damaged"
        case .tooManyPartsOpen:
            // A join that waits holds one part open at a time (40 parts under `ulimit -n 20`).
            return description + ", or join with --wait SECONDS, which opens one part at a time"
        case let .noParts(directory):
            return "cannot join the parts in \(directory): it holds no part files (*\(ShardSpec.partExtension)): "
                + "run the shards with --shard K/N --shard-dir \(directory) first"
        default:
            return description
        }
    }
}

extension MinUsesConflict {
    /// The conflict in the flags' words, with the values that would be met.
    public var commandLineDescription: String {
        switch self {
        case let .tooFewCells(pictures, cells, minUses):
            let flag = minUses == 1 ? "--use-all" : "--min-uses \(minUses)"
            let each = minUses == 1 ? "" : " (\(minUses) each)"
            let fewer = largestMinUses > 0 ? "--min-uses \(largestMinUses)" : "leave out \(flag) (fewer cells than pictures)"
            return "\(flag) needs at least \(formatCount(fewestCells)) cells for \(formatCount(pictures)) picture\(pictures == 1 ? "" : "s")\(each); "
                + "this mosaic has \(formatCount(cells)): ask for \(formatCount(fewestCells)) cells or more (--cells, or a larger --columns or --grid), "
                + "or \(fewer)"
        case let .aboveMaxUses(minUses, maxUses):
            return "--min-uses \(minUses) is more than --max-uses \(maxUses): give --max-uses \(minUses) or more, or --min-uses \(maxUses)"
        case let .minDistance(minUses, minDistance, columns, rows, mostUses, largestDistance):
            let flag = minUses == 1 ? "--use-all" : "--min-uses \(minUses)"
            return "\(flag) cannot be met with --min-distance \(minDistance): a \(columns) x \(rows) grid holds one picture at most "
                + "\(mostUses) times \(minDistance + 1) cells apart; give --min-distance \(largestDistance) or less, or --min-uses \(mostUses)"
        }
    }
}

extension SkippedPhoto {
    /// The reason, with the --max-memory that would draw the photo when memory is what it lacked.
    public var commandLineReason: String {
        guard let budget = budgetToDrawBytes else { return reason }
        return reason + "; " + memoryAdvice(budget)
    }
}

/// This process's memory cgroup limit, read once.
let cgroupMemoryLimitBytes: Int64? = MemoryBudget.cgroupLimitBytes()

/// This machine's memory (sysconf: physical pages times their size).
let physicalMemoryBytes: Int64? = {
    let pages = sysconf(Int32(_SC_PHYS_PAGES)), size = sysconf(Int32(_SC_PAGESIZE))
    return pages > 0 && size > 0 ? Int64(pages) * Int64(size) : nil
}()

/// "give --max-memory X or more to draw it", X rounded up (4.02 GiB is not "4.0 GiB"), and
/// said to be out of reach when it is more than the memory cgroup allows (`limitBytes`) or
/// this machine has (`machineBytes`: a hostile TIFF's tags were met with "give --max-memory
/// 4.4 TiB").
func memoryAdvice(_ budget: Int64, what: String = "to draw it", limitBytes: Int64? = cgroupMemoryLimitBytes,
                  machineBytes: Int64? = physicalMemoryBytes) -> String {
    let shown: String
    if budget < 1 << 30 {
        shown = formatBytes(((budget + (1 << 20) - 1) >> 20) << 20)
    } else {
        let tenths = (budget * 10 + (1 << 30) - 1) / (1 << 30)
        shown = "\(tenths / 10).\(tenths % 10) GiB"
    }
    let advice = "give --max-memory \(shown) or more \(what)"
    if let machine = machineBytes, budget > machine, machine <= limitBytes ?? machine {
        return advice + " (more than this machine's \(formatBytes(machine)) of memory: not here)"
    }
    guard let limit = limitBytes, budget > limit else { return advice }
    return advice + " (more than this memory cgroup's limit of \(formatBytes(limit)): not here)"
}
