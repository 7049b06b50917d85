// DiskPreflight.swift — is there room on disk for the output and the temporaries?
import Glibc

/// Space a render needs on one filesystem, and what is free there.
public struct DiskRequirement: Equatable, Sendable {
    public let directory: String
    public let neededBytes: Int64
    public let freeBytes: Int64
    public var fits: Bool { neededBytes <= freeBytes }
}

public enum DiskPreflight {
    /// What `plan` needs in the output's directory and in its temporary directory (one entry
    /// when both are on the same filesystem, with the needs added up), against statvfs free space.
    /// `freeSpace` is statvfs by default; tests pass their own.
    public static func requirements(plan: RenderPlan, outputPath: String,
                                    freeSpace: (String) throws(TesseraError) -> Int64 = freeDiskBytes) throws(TesseraError) -> [DiskRequirement] {
        let outputDirectory = parentDirectory(of: outputPath)
        let temporaryDirectory = plan.temporaryDirectory
        let outputDevice = try deviceID(outputDirectory)
        let temporaryDevice = try deviceID(temporaryDirectory)
        if outputDevice == temporaryDevice {
            return [DiskRequirement(directory: outputDirectory,
                                    neededBytes: plan.estimatedOutputBytes + plan.temporaryDiskBytes,
                                    freeBytes: try freeSpace(outputDirectory))]
        }
        return [
            DiskRequirement(directory: outputDirectory, neededBytes: plan.estimatedOutputBytes,
                            freeBytes: try freeSpace(outputDirectory)),
            DiskRequirement(directory: temporaryDirectory, neededBytes: plan.temporaryDiskBytes,
                            freeBytes: try freeSpace(temporaryDirectory)),
        ]
    }

    /// Throws `insufficientDiskSpace` for the first filesystem that lacks room.
    public static func check(plan: RenderPlan, outputPath: String,
                             freeSpace: (String) throws(TesseraError) -> Int64 = freeDiskBytes) throws(TesseraError) {
        for requirement in try requirements(plan: plan, outputPath: outputPath, freeSpace: freeSpace) where !requirement.fits {
            throw .insufficientDiskSpace(directory: requirement.directory, neededBytes: requirement.neededBytes,
                                         freeBytes: requirement.freeBytes)
        }
    }

    private static func deviceID(_ directory: String) throws(TesseraError) -> UInt64 {
        switch fileStatus(directory) {
        case .success(let info):
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw TesseraError.system(operation: "stat", errno: ENOTDIR, path: directory)
            }
            return UInt64(info.st_dev)
        case .failure(let code):
            throw TesseraError.system(operation: "stat", errno: code.rawValue, path: directory)
        }
    }
}
