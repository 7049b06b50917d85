// MemoryBudget.swift — the memory budget chosen for the machine a render runs on, when the
// caller does not name one.
//
// The rule (docs/guarantees.md says it for users):
// - In a memory cgroup with a limit (v2's memory.max, v1's memory.limit_in_bytes, the smallest
//   along the cgroup's path: a container's or a job's), the limit less a sixteenth of it (at
//   least 4 MiB): the headroom is the kernel's page cache and what the estimates do not count.
//   (An eighth, at least 8 MiB, until the process's allowance grew from 12 to 16 MiB to what
//   it measures, RenderPlan.processAllowanceBytes: the room a plan has inside a 48 or 64 MiB
//   cgroup is what it was.)
// - Otherwise, half of the machine's available memory (MemAvailable): other programs live there.
// - Never more than `capBytes`, and never more than half of what the machine has available.
// - Nothing readable (no /proc): 64 MiB, the budget Tessera always had.
//
// A large budget is room, not a target: the render plans its steady state (stripes, cell
// cache, decode pool) for at most `steadyStateBytes` (RenderSettings.steadyStateBytes), and the
// rest is there for the one photo at a time that must be decoded whole.
import Glibc

public struct MemoryBudget: Equatable, Sendable {
    /// Where the figure came from.
    public enum Rule: Equatable, Sendable {
        /// The caller named it.
        case given
        /// A memory cgroup's limit (`version` 1 or 2).
        case cgroup(version: Int, limitBytes: Int64)
        /// The machine's available memory (no cgroup limit).
        case machine(availableBytes: Int64)
        /// Nothing could be read: the fixed default.
        case fallback
    }

    public var bytes: Int
    public var rule: Rule
    /// Whether `capBytes` (or half the machine's available memory, under a larger cgroup
    /// limit) cut the figure.
    public var capped = false

    public init(bytes: Int, rule: Rule, capped: Bool = false) {
        self.bytes = bytes
        self.rule = rule
        self.capped = capped
    }

    /// The most an automatic budget is: beyond it a decode is a photo no camera makes.
    public static let capBytes = 2 << 30
    /// What a render's steady state is planned for under an automatic budget, and the budget
    /// when nothing can be read: the 1.2-gigapixel grid needs no more.
    public static let steadyStateBytes = 64 << 20
    /// The least headroom below a cgroup's limit.
    public static let leastHeadroomBytes = 4 << 20

    /// The budget for this process, from its cgroup and the machine. `root` prefixes every
    /// file read (tests give a folder laid out like /proc and /sys).
    public static func automatic(root: String = "") -> MemoryBudget {
        let available = meminfoAvailableBytes(root: root)
        let limit = cgroupLimit(root: root)
        return choose(cgroupLimit: limit, availableBytes: available)
    }

    /// This process's memory cgroup limit in bytes, nil when there is none.
    public static func cgroupLimitBytes(root: String = "") -> Int64? { cgroupLimit(root: root)?.bytes }

    /// The rule itself, on figures already read.
    public static func choose(cgroupLimit: (version: Int, bytes: Int64)?, availableBytes: Int64?) -> MemoryBudget {
        let halfAvailable = availableBytes.map { $0 / 2 }
        if let limit = cgroupLimit {
            let room = limit.bytes - max(Int64(leastHeadroomBytes), limit.bytes / 16)
            let ceiling = min(Int64(capBytes), halfAvailable ?? Int64.max)
            return MemoryBudget(bytes: Int(max(1 << 20, min(room, ceiling))), rule: .cgroup(version: limit.version, limitBytes: limit.bytes),
                                capped: room > ceiling)
        }
        if let available = availableBytes, let half = halfAvailable {
            return MemoryBudget(bytes: Int(max(1 << 20, min(half, Int64(capBytes)))), rule: .machine(availableBytes: available),
                                capped: half > Int64(capBytes))
        }
        return MemoryBudget(bytes: steadyStateBytes, rule: .fallback)
    }

    /// MemAvailable from /proc/meminfo, in bytes.
    static func meminfoAvailableBytes(root: String) -> Int64? {
        guard let text = readSmallFile(root + "/proc/meminfo") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("MemAvailable:") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, let kilobytes = Int64(fields[1]), kilobytes > 0, kilobytes < Int64.max / 1024 else { return nil }
            return kilobytes * 1024
        }
        return nil
    }

    /// The smallest memory limit along this process's cgroup path (v2 first, then v1's memory
    /// controller), nil when there is none. A limit at or past 2^62 is v1's "unlimited".
    static func cgroupLimit(root: String) -> (version: Int, bytes: Int64)? {
        guard let text = readSmallFile(root + "/proc/self/cgroup") else { return nil }
        var v2Path: String?, v1Path: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[0] == "0" && fields[1].isEmpty { v2Path = String(fields[2]) }
            if fields[1].split(separator: ",").contains("memory") { v1Path = String(fields[2]) }
        }
        if let path = v2Path, let bytes = smallestLimit(mount: root + "/sys/fs/cgroup", path: path, file: "memory.max") {
            return (2, bytes)
        }
        if let path = v1Path, let bytes = smallestLimit(mount: root + "/sys/fs/cgroup/memory", path: path, file: "memory.limit_in_bytes") {
            return (1, bytes)
        }
        return nil
    }

    /// The smallest limit in `file` from the cgroup's folder up to the mount's root. Inside a
    /// container the path may name folders the container cannot see: then the mount's root is
    /// the container's own cgroup.
    private static func smallestLimit(mount: String, path: String, file: String) -> Int64? {
        var smallest: Int64?
        var components = path.split(separator: "/").map(String.init)
        while true {
            let folder = mount + (components.isEmpty ? "" : "/" + components.joined(separator: "/"))
            if let text = readSmallFile(folder + "/" + file) {
                let value = text.trimmingSpaces
                if value != "max", let bytes = Int64(value), bytes > 0, bytes < 1 << 62 {
                    smallest = min(smallest ?? bytes, bytes)
                }
            }
            if components.isEmpty { break }
            components.removeLast()
        }
        return smallest
    }

    /// A small text file's contents (at most 64 KiB), nil when it cannot be read.
    private static func readSmallFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 65_536)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + count, $0.count - count) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            count += got
        }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and newlines.
    fileprivate var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }
        return String(drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
